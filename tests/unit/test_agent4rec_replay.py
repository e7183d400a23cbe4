"""Replaying the authors' recorded Agent4Rec decisions through our page loop.

A constructed export (three agents, written here) checks the mechanism and each kind of
finding; the authors' run itself (skipped when ``$RECAGENTS_AGENT4REC_RECORDED`` is not set)
checks that a sample of agents replays exactly and that the totals follow ``metrics.txt``'s
definitions.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from recagents.papers.agent4rec import recorded as R
from recagents.papers.agent4rec import replay as P

TITLES = {i: f"Film {i} (199{i % 10})" for i in range(1, 21)}


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


def _export(folder: Path, interview_two: object = [" 7", " good picks"]) -> Path:
    """Three agents: one leaves on page 2, one sees all 5 pages, one leaves on page 1."""
    long_feeling = "x" * 250
    agents = [
        {"agent_id": 0, "pages": [
            _page(1, [1, 2, 3, 4], [1, 2], {1: 4, 2: 5}, [2]),
            _page(2, [5, 6, 7, 8], [], {6: 3}, [6, 7], {6: long_feeling}),
        ], "interview": [" 4", " so-so"]},
        {"agent_id": 1, "pages": [
            _page(p, [4 * p - 3, 4 * p - 2, 4 * p - 1, 4 * p], [4 * p], {4 * p: 4}, [4 * p])
            for p in range(1, 6)
        ], "interview": interview_two},
        {"agent_id": 2, "pages": [_page(1, [9, 10, 11, 12], [], {}, [])],
         "interview": " 2; REASON: nothing for me"},
    ]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "run_lightgcn_1000.jsonl", "w") as handle:
        for agent in agents:
            handle.write(json.dumps(agent) + "\n")
    (folder / "user_statistic.csv").write_text(
        "user_id,activity,conformity,diversity\n0,1,2,3\n1,2,2,2\n2,3,1,1\n"
    )
    (folder / "user_statistic_num.csv").write_text(
        "user_id,activity_num,deviation,diversity_num\n0,10,0.5,3\n1,20,0.7,4\n2,30,0.9,5\n"
    )
    rows = "\n".join(f"{i},{t},Drama|Comedy,3.5,A film." for i, t in TITLES.items())
    (folder / "movie_detail.csv").write_text(f"movie_id,title,genres,rating,summary\n{rows}\n")
    (folder / "train.txt").write_text("0 1 2\n1 3\n2 4 5\n")
    return folder


def test_replay_gives_back_every_recorded_decision(tmp_path: Path) -> None:
    result = P.replay_official(_export(tmp_path / "run"))
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


def test_official_metrics_follow_the_released_definitions(tmp_path: Path) -> None:
    result = P.replay_official(_export(tmp_path / "run"))
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
    assert m["metrics_txt"].isna().all()  # the constructed export has no metrics.txt: n/a


def test_an_unreadable_interview_is_a_counted_finding(tmp_path: Path) -> None:
    """A score our interview schema cannot take is unusable, and listed with its cause."""
    result = P.replay_official(_export(tmp_path / "run", interview_two=[" 7.5", " fine"]))
    row = result.disagreements.set_index("field").loc["satisfaction"]
    assert row["user_id"] == "1" and row["recorded"] == 7.5 and math.isnan(row["replayed"])
    assert "integer" in row["cause"]
    assert result.log.problems.get("interview_unusable") == 1
    assert result.agreement.set_index("user_id")["agrees"].to_dict() == {
        "0": True, "1": False, "2": True,
    }  # fmt: skip


def test_a_sample_is_the_first_agents_by_id(tmp_path: Path) -> None:
    visits = P.read_recorded_visits(_export(tmp_path / "run"), n_agents=2)
    assert list(visits) == ["0", "1"]
    assert visits["0"].reason == "so-so" and visits["0"].satisfaction == 4.0


def test_the_recorded_client_refuses_what_the_records_do_not_hold(tmp_path: Path) -> None:
    from recagents.llm.client import ChatRequest

    client = P.recorded_client(P.read_recorded_visits(_export(tmp_path / "run")))
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
    path.write_text("Average recall: 0.5\nAverage presion: 0.4\nOverall click rate: 0.3\n")
    with pytest.raises(ValueError, match="lacks"):
        P.read_metrics_txt(path)
    path.write_text(path.read_text() + "Average number of likes: x\nAverage exit page: 3\n")
    with pytest.raises(ValueError, match="not a number"):
        P.read_metrics_txt(path)


@pytest.fixture
def official_folder() -> Path:
    folder = R.official_run_dir()
    if folder is None:
        pytest.skip("official Agent4Rec run not available (set RECAGENTS_AGENT4REC_RECORDED)")
    return folder


def test_a_sample_of_the_authors_agents_replays_exactly(official_folder: Path) -> None:
    result = P.replay_official(official_folder, n_agents=60)
    assert len(result.agreement) == 60
    assert result.agreement_rate == 1.0, result.disagreements.head(10)
    m = result.metrics.set_index("metric")
    assert (m["from_replay"] - m["from_records"]).abs().max() < 1e-12
    assert m["metrics_txt"].isna().all()  # a sample has no total to match


@pytest.mark.slow
def test_the_whole_recorded_run_matches_metrics_txt(official_folder: Path) -> None:
    """All 1,000 agents: every record back, and metrics.txt to the last digit."""
    result = P.replay_official(official_folder)
    assert result.agreement_rate == 1.0, result.disagreements.head(10)
    m = result.metrics.set_index("metric").dropna(subset=["metrics_txt"])
    assert len(m) == 5
    assert (m["from_records"] - m["metrics_txt"]).abs().max() < 1e-9
    assert (m["from_replay"] - m["metrics_txt"]).abs().max() < 1e-9


_GOOD = {"agent_id": 0, "pages": [_page(1, [1, 2, 3, 4], [1], {1: 4}, [1])], "interview": " 5"}
_MALFORMED = {
    "not JSON": ("{oops", "line 2, column 2: not valid JSON"),
    "a list, not a record": ("[1, 2]", "line 2: a visit record must be a JSON object, not list"),
    "no agent_id": ('{"pages": []}', "line 2: agent_id is missing"),
    "no pages": ('{"agent_id": 1}', "line 2: pages is missing"),
    "pages not a list": ('{"agent_id": 1, "pages": 5}', "line 2: pages is int, not a list"),
    "page not an object": ('{"agent_id": 1, "pages": [3]}', "line 2: pages[0] is int"),
    "no recommended_id": (
        '{"agent_id": 1, "pages": [{"page": 1}]}',
        "line 2: pages[0].recommended_id is missing",
    ),
    "id of another type": (
        '{"agent_id": 1, "pages": [{"recommended_id": [1, [2]]}]}',
        "line 2: pages[0].recommended_id[1] is [2], not an id",
    ),
    "rating not a number": (
        '{"agent_id": 1, "pages": [{"recommended_id": [1], "rating_id": [1], "rating": ["x"]}]}',
        "line 2: pages[0].rating[0] is 'x', not a finite number",
    ),
    "rating NaN": (
        '{"agent_id": 1, "pages": [{"recommended_id": [1], "rating_id": [1], "rating": [NaN]}]}',
        "line 2: pages[0].rating[0] is nan, not a finite number",
    ),
    "ratings not one per rated item": (
        '{"agent_id": 1, "pages": [{"recommended_id": [1], "rating_id": [1], "rating": []}]}',
        "line 2: pages[0].rating has 0 entries but rating_id has 1",
    ),
    "page number a string": (
        '{"agent_id": 1, "pages": [{"recommended_id": [1], "page": "2"}]}',
        "line 2: pages[0].page is '2', not a page number",
    ),
    "agent twice": (
        '{"agent_id": 0, "pages": []}',
        "line 2: agent_id 0 was already recorded on line 1",
    ),
    "too deep": ("[" * 100_000 + "]" * 100_000, "line 2: JSON nested too deeply"),
    "huge integer": ('{"agent_id": ' + "9" * 5000 + ', "pages": []}', "line 2: not valid JSON"),
}


@pytest.mark.parametrize("line, fragment", _MALFORMED.values(), ids=_MALFORMED.keys())
@pytest.mark.parametrize("reader", ["read_recorded_visits", "load_official_run"])
def test_a_malformed_record_names_file_line_and_field(
    tmp_path: Path, line: str, fragment: str, reader: str
) -> None:
    folder = _export(tmp_path / "run")
    path = folder / "run_lightgcn_1000.jsonl"
    path.write_text(json.dumps(_GOOD) + "\n" + line + "\n", encoding="utf-8")
    read = P.read_recorded_visits if reader == "read_recorded_visits" else R.load_official_run
    with pytest.raises(R.RecordedRunError) as caught:
        read(folder)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and fragment in message, message
    assert isinstance(caught.value, ValueError) and len(message) < 300


def test_a_record_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    folder = _export(tmp_path / "run")
    path = folder / "run_lightgcn_1000.jsonl"
    path.write_bytes(json.dumps(_GOOD).encode() + b'\n{"agent_id": "\xff"}\n')
    with pytest.raises(R.RecordedRunError, match=r"line 2 \(byte 14 of the line\): not valid"):
        P.read_recorded_visits(folder)


def test_optional_lists_may_be_absent_or_null(tmp_path: Path) -> None:
    folder = _export(tmp_path / "run")
    record = {"agent_id": 7, "pages": [{"recommended_id": [1, 2], "watch_id": None}]}
    (folder / "run_lightgcn_1000.jsonl").write_text(json.dumps(record) + "\n\n")
    visits = P.read_recorded_visits(folder)
    assert visits["7"].pages[0]["watch_id"] == [] and visits["7"].pages[0]["feeling"] == []
    run = R.load_official_run(folder)
    assert run.exposures["watched"].tolist() == [False, False]
    assert run.exposures["page"].tolist() == [1, 1]


def test_an_overlong_line_is_refused_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(R, "MAX_RECORD_BYTES", 1000)
    folder = _export(tmp_path / "run")
    path = folder / "run_lightgcn_1000.jsonl"
    path.write_text(json.dumps(_GOOD) + "\n" + " " * 5000 + "{}\n")
    with pytest.raises(R.RecordedRunError, match="line 2: longer than 1,000 bytes"):
        P.read_recorded_visits(folder)


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("movie_detail.csv", lambda t: t.replace(",3.5,", ",abc,", 1), "line 2, column rating"),
        ("movie_detail.csv", lambda t: t.replace(",3.5,", ",1e400,", 1), "line 2, column rating"),
        ("movie_detail.csv", lambda t: t.replace("rating", "stars"), "missing column"),
        ("user_statistic_num.csv", lambda t: t.replace("0.7", "x"), "line 3, column deviation"),
        ("user_statistic.csv", lambda t: "", "not a readable CSV"),
    ],
)
def test_a_malformed_release_csv_names_file_line_and_column(
    tmp_path: Path, name: str, edit: Any, message: str
) -> None:
    folder = _export(tmp_path / "run")
    (folder / name).write_text(edit((folder / name).read_text()))
    for read in (R.load_official_run, P.replay_official):
        with pytest.raises(R.RecordedRunError, match=message) as caught:
            read(folder)
        assert name in str(caught.value)
