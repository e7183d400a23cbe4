"""Replaying the authors' recorded Agent4Rec decisions through our page loop.

Constructed records (three agents, built here) check the mechanism and each kind of finding;
the authors' two runs from the pinned release (read through the fetcher from the mirror named
by ``$RECAGENTS_RELEASES_MIRROR`` or the cache, skipped when neither holds them) check that
every agent replays exactly and that the totals are each run's own ``metrics.txt``.
"""

from __future__ import annotations

import math
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from recagents.data.releases import URL_ENV, ReleaseError
from recagents.papers.agent4rec import recorded as R
from recagents.papers.agent4rec import replay as P

TITLES = {i: f"Film {i} (199{i % 10})" for i in range(1, 21)}
ROOT = Path(__file__).resolve().parents[2]


def _page(page: int, shown: list[int], align: list[int], watch: dict[int, int], truth: list[int],
          feelings: dict[int, str] | None = None) -> dict:  # fmt: skip
    feelings = feelings or {}
    return {
        "page": page,
        "ground_truth": truth,
        "recommended_id": shown,
        "recommended": [TITLES[i] for i in shown],
        "align_id": align,
        "like_id": [i for i, r in watch.items() if r == 5],
        "watch_id": list(watch),
        "watched": [TITLES[i] for i in watch],
        "rating_id": list(watch),
        "rating": list(watch.values()),
        "feeling": [feelings.get(i, f"I felt fine about film {i}.") for i in watch],
    }


def _records(interview_two: object = (" 7", " good picks")) -> dict[str, Any]:
    """Three agents as the authors' pickles store them: one leaves on page 2, one sees all
    5 pages, one leaves on page 1."""
    long_feeling = "x" * 250
    return {
        "0": {1: _page(1, [1, 2, 3, 4], [1, 2], {1: 4, 2: 5}, [2]),
              2: _page(2, [5, 6, 7, 8], [], {6: 3}, [6, 7], {6: long_feeling}),
              "interview": [" 4", " so-so"]},
        "1": {**{p: _page(p, [4 * p - 3, 4 * p - 2, 4 * p - 1, 4 * p], [4 * p], {4 * p: 4},
                          [4 * p]) for p in range(1, 6)},
              "interview": list(interview_two) if isinstance(interview_two, tuple)
              else interview_two},
        "2": {1: _page(1, [9, 10, 11, 12], [], {}, []),
              "interview": " 2; REASON: nothing for me"},
    }  # fmt: skip


def _run(interview_two: object = (" 7", " good picks"), metrics: dict | None = None):
    """An OfficialRun of the three constructed agents."""
    records = {u: R.check_record(r, f"{u}.pkl") for u, r in _records(interview_two).items()}
    traits = pd.DataFrame(
        {"user_id": ["0", "1", "2", "3"], "activity": [1, 2, 3, 1], "conformity": [2, 2, 1, 1],
         "diversity": [3, 2, 1, 1]}
    )  # fmt: skip
    items = pd.DataFrame(
        {"item_id": [str(i) for i in TITLES], "title": list(TITLES.values()),
         "genres": [("Drama", "Comedy")] * len(TITLES), "mean_rating": 3.5,
         "summary": "A film.", "popularity": 1}
    )  # fmt: skip
    return R.build_official_run("lightgcn", "LightGCN", records, traits, items, metrics)


def test_replay_gives_back_every_recorded_decision() -> None:
    result = P.replay_run(_run())
    assert result.agreement["agrees"].all(), result.disagreements
    assert result.agreement_rate == 1.0
    assert result.disagreements.empty
    sessions = result.sessions.set_index("user_id")
    assert sessions.loc["0", "exit_page"] == 2 and sessions.loc["0", "exited"]
    assert sessions.loc["1", "exit_page"] == 5 and not sessions.loc["1", "exited"]
    assert sessions.loc["2", "exit_page"] == 1 and sessions.loc["2", "satisfaction"] == 2.0
    assert result.truncated_feelings == 1
    assert result.log.problems == {} or not any(result.log.problems.values())
    # The calls: pages 2 + 5 + 1, as many exit decisions, three interviews, no reflection.
    kinds = result.log.calls_frame().groupby("kind").size().to_dict()
    assert kinds["page"] == 8 and kinds["exit"] == 8 and kinds["interview"] == 3
    assert "reflection" not in kinds


def test_official_metrics_follow_the_released_definitions() -> None:
    result = P.replay_run(_run())
    m = result.metrics.set_index("metric")
    # Click rate over 20 slots: (3 + 5 + 0) watched / 20 per agent, averaged.
    assert m.loc["click_rate", "from_replay"] == pytest.approx((3 / 20 + 5 / 20 + 0) / 3)
    # Likes as metrics.txt counts them: watched items per page, averaged per agent:
    # (2 + 1) / 2, 1, 0; precision and recall of those against the page's ground truth,
    # summed over an agent's pages: agent 0 watched {1, 2, 6} of truth {2, 6, 7}: 2/3, 2/3.
    assert m.loc["n_likes", "from_replay"] == pytest.approx((1.5 + 1 + 0) / 3)
    assert m.loc["precision", "from_replay"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert m.loc["recall", "from_replay"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    # The released arena.py's definition (aligned items): agent 0 aligned {1, 2}, hit {2}.
    aligned = "(aligned, as arena.py)"
    assert m.loc[f"n_likes {aligned}", "from_replay"] == pytest.approx((1 + 1 + 0) / 3)
    assert m.loc[f"precision {aligned}", "from_replay"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert m.loc[f"recall {aligned}", "from_replay"] == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert m.loc["exit_page", "from_replay"] == pytest.approx(8 / 3)
    assert (m["from_replay"] == m["from_records"]).all()
    assert m["metrics_txt"].isna().all()  # the constructed run has no metrics.txt: n/a
    # With a metrics.txt over these three agents its totals stand beside ours; over more
    # agents (a sample was replayed) they do not.
    totals = {**dict.fromkeys(R.METRICS_TXT_KEYS.values(), 0.5), "n_agents": 3.0}
    whole = P.replay_run(_run(metrics=totals)).metrics.set_index("metric")["metrics_txt"]
    assert whole.dropna().to_dict() == dict.fromkeys(R.METRICS_TXT_KEYS.values(), 0.5)
    sample = P.replay_run(_run(metrics=totals), n_agents=2).metrics["metrics_txt"]
    assert sample.isna().all()


def test_an_unreadable_interview_is_a_counted_finding() -> None:
    """A score our interview schema cannot take is unusable, and listed with its cause."""
    result = P.replay_run(_run(interview_two=[" 7.5", " fine"]))
    row = result.disagreements.set_index("field").loc["satisfaction"]
    assert row["user_id"] == "1" and row["recorded"] == 7.5 and math.isnan(row["replayed"])
    assert "integer" in row["cause"]
    assert result.log.problems.get("interview_unusable") == 1
    assert result.agreement.set_index("user_id")["agrees"].to_dict() == {
        "0": True, "1": False, "2": True,
    }  # fmt: skip


def test_a_sample_is_the_first_agents_by_id() -> None:
    visits = P.recorded_visits(_run(), n_agents=2)
    assert list(visits) == ["0", "1"]
    assert visits["0"].reason == "so-so" and visits["0"].satisfaction == 4.0


def test_the_recorded_client_refuses_what_the_records_do_not_hold() -> None:
    from recagents.llm.client import ChatRequest

    client = P.recorded_client(P.recorded_visits(_run()))
    assert client.model == f"scripted:{P.RECORDED_NAME}"
    reflection = ChatRequest(
        messages=[{"role": "user", "content": "reflect"}],
        schema={"type": "object", "required": ["sentence"]},
        tag="0",
    )
    with pytest.raises(KeyError, match="no recorded reply"):
        client.map([reflection], progress=False)


def test_metrics_txt_is_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text("n_avatars: 3\nAverage recall: 0.5\nAverage presion: 0.4\n"
                    "Overall click rate: 0.3\n")  # fmt: skip
    with pytest.raises(ValueError, match="lacks"):
        R.read_metrics_txt(path)
    path.write_text(path.read_text() + "Average number of likes: x\nAverage exit page: 3\n")
    with pytest.raises(ValueError, match="not a number"):
        R.read_metrics_txt(path)
    path.write_text(path.read_text().replace(": x", ": 2"))
    assert R.read_metrics_txt(path) == {
        "n_agents": 3.0,
        "recall": 0.5,
        "precision": 0.4,
        "click_rate": 0.3,
        "n_likes": 2.0,
        "exit_page": 3.0,
    }


# --------------------------------------------------------------------------- the records


_GOOD = _page(1, [1, 2, 3, 4], [1], {1: 4}, [1])
_MALFORMED = {
    "not a dict": ([1, 2], "the record is list, not a dict"),
    "a key of another kind": ({1: _GOOD, "x": 1}, "key 'x' is neither a page number"),
    "pages with a gap": ({1: _GOOD, 3: _GOOD}, "the page keys are [1, 3], not 1..2"),
    "page not a dict": ({1: 3}, "page 1 is int, not a dict"),
    "no recommended_id": ({1: {"page": 1}}, "page 1.recommended_id is missing"),
    "id of another type": (
        {1: {"recommended_id": [1, [2]]}}, "page 1.recommended_id[1] is [2], not an id"
    ),
    "rating not a number": (
        {1: {"recommended_id": [1], "rating_id": [1], "rating": ["x"]}},
        "page 1.rating[0] is 'x', not a finite number",
    ),
    "rating NaN": (
        {1: {"recommended_id": [1], "rating_id": [1], "rating": [math.nan]}},
        "page 1.rating[0] is nan, not a finite number",
    ),
    "ratings not one per rated item": (
        {1: {"recommended_id": [1], "rating_id": [1], "rating": []}},
        "page 1.rating has 0 entries but rating_id has 1",
    ),
    "page number a string": (
        {1: {"recommended_id": [1], "page": "2"}}, "page 1.page is '2', not a page number"
    ),
}  # fmt: skip


@pytest.mark.parametrize("record, fragment", _MALFORMED.values(), ids=_MALFORMED.keys())
def test_a_malformed_record_names_file_and_field(record: Any, fragment: str) -> None:
    with pytest.raises(R.RecordedRunError) as caught:
        R.check_record(record, "behavior/7.pkl")
    message = str(caught.value)
    assert message.startswith("behavior/7.pkl: ") and fragment in message, message
    assert isinstance(caught.value, ValueError) and len(message) < 300


def test_a_pickled_record_with_numpy_values_reads_back_checked(tmp_path: Path) -> None:
    """The authors' pickles hold numpy arrays and scalars; the record comes back plain."""
    page = {**_GOOD, "recommended_id": np.array([1, 2, 3, 4]), "rating": [np.int64(4)],
            "watch_id": None}  # fmt: skip
    path = tmp_path / "0.pkl"
    path.write_bytes(pickle.dumps({1: page, "interview": [" 6", " fine"]}))
    record = R.check_record(R.load_official_pickle(path, plain=True), str(path))
    assert record["pages"][0]["recommended_id"] == ["1", "2", "3", "4"]
    assert record["pages"][0]["watch_id"] == [] and record["pages"][0]["rating"] == [4]
    assert record["interview"] == [" 6", " fine"]
    run = R.build_official_run("x", "X", {"0": record}, _run().traits, _run().items)
    assert run.exposures["watched"].tolist() == [False] * 4
    assert run.sessions["satisfaction"].tolist() == [6.0]


def test_an_unknown_run_is_refused() -> None:
    with pytest.raises(ValueError, match="run must be one of"):
        R.load_official_run("sasrec")  # type: ignore[arg-type]


def test_nothing_reads_the_old_export_variable() -> None:
    """The recorded runs come from the release only: no code, notebook, test or CI script
    names the environment variable of the old hand-made export, nor its file."""
    pattern = re.compile("RECAGENTS_AGENT4REC" + "_RECORDED|run_lightgcn" + r"_1000\.jsonl")
    places = [ROOT / "recagents", ROOT / "notebooks", ROOT / "tests", ROOT / ".ci"]
    files = [f for place in places if place.exists() for f in place.rglob("*") if f.is_file()]
    files += [ROOT / "README.md", ROOT / "Makefile"]
    found = [
        str(f.relative_to(ROOT))
        for f in files
        if f.suffix in {"", ".py", ".ipynb", ".md", ".json", ".toml", ".sh", ".yml", ".txt"}
        and f.is_file()
        and pattern.search(f.read_text(encoding="utf-8", errors="replace"))
    ]
    assert len(files) > 100 and found == []


# --------------------------------------------------------------------------- the release


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """No network: the release comes from the mirror or the cache, or the test skips."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        yield


def _load(run: R.RunName, agents: int | None = None) -> R.OfficialRun:
    try:
        return R.load_official_run(run, agents=agents)
    except ReleaseError as error:
        pytest.skip(f"the Agent4Rec release is neither mirrored nor cached ({error})"[:200])


def test_a_sample_of_the_authors_agents_replays_exactly(offline: None) -> None:
    result = P.replay_run(_load("lightgcn", agents=60))
    assert len(result.agreement) == 60
    assert result.agreement_rate == 1.0, result.disagreements.head(10)
    m = result.metrics.set_index("metric")
    assert (m["from_replay"] - m["from_records"]).abs().max() < 1e-12
    assert m["metrics_txt"].isna().all()  # a sample has no total to match


#: The MF run's metrics.txt, rounded (recall, precision, click rate, likes, exit page).
MF_TOTALS = {"recall": 0.50146, "precision": 0.36997, "click_rate": 0.3175,
             "n_likes": 1.95383, "exit_page": 3.17}  # fmt: skip


def test_the_whole_mf_run_matches_its_metrics_txt(offline: None) -> None:
    """All 100 agents of the MF run: every record back, and its metrics.txt to the last digit."""
    official = _load("mf")
    assert official.recommender == "MF" and len(official.sessions) == 100
    assert len(official.traits) == 100 and official.metrics_txt["n_agents"] == 100
    assert {k: round(official.metrics_txt[k], 5) for k in MF_TOTALS} == MF_TOTALS
    result = P.replay_run(official)
    assert result.agreement_rate == 1.0 and result.disagreements.empty
    m = result.metrics.set_index("metric").dropna(subset=["metrics_txt"])
    assert sorted(m.index) == sorted(MF_TOTALS)
    assert (m["from_records"] - m["metrics_txt"]).abs().max() < 1e-9
    assert (m["from_replay"] - m["metrics_txt"]).abs().max() < 1e-9
    assert (result.exposures["recommender"] == "MF").all()


@pytest.mark.slow
def test_the_whole_lightgcn_run_matches_metrics_txt(offline: None) -> None:
    """All 1,000 agents: every record back, and metrics.txt to the last digit."""
    result = P.replay_run(_load("lightgcn"))
    assert result.agreement_rate == 1.0, result.disagreements.head(10)
    m = result.metrics.set_index("metric").dropna(subset=["metrics_txt"])
    assert len(m) == 5
    assert (m["from_records"] - m["metrics_txt"]).abs().max() < 1e-9
    assert (m["from_replay"] - m["metrics_txt"]).abs().max() < 1e-9
