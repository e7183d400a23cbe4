"""recagents.papers.afl.loop.feedback_loop: termination and failure accounting.

The scripted OpenAI-compatible test server (tests/scripted_server.py) is used here ONLY to
inject fixed replies and faults: a user agent that rejects forever or accepts at once,
malformed or off-list replies, and transport errors. It is never a stand-in model for
results; nothing here measures recommendation quality.

The client runs one request at a time (``llm_concurrency=1``) and, as a remote client,
schedules requests in the order given, so the server's queue of scripted actions is consumed
deterministically. Where one reply must serve both agents, it is a JSON object valid under
both schemas (``{"reason", "choice", "decision"}``: neither schema forbids extra keys).
Caching is off and retries and backoff are small, so the whole file takes seconds.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from scripted_server import ScriptedServer, closed_port_url, reply, sequential_client, status

from recagents import baselines
from recagents.columns import ITEM, RANK, USER
from recagents.data import datasets
from recagents.llm.client import EndpointUnreachableError, LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.afl import entry
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.evaluate import predictions, stop_counts
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.samples import Sample
from recagents.protocol import RankTask, RunOptions

MAX_ATTEMPTS = 2
MAX_REASKS = 1
N_CANDIDATES = 5
CONFIG = AFLConfig(n_candidates=N_CANDIDATES, max_rounds=3)


def _json(**fields) -> str:
    return json.dumps({"reason": "r", **fields})


REJECT = _json(choice=1, decision="no")  # valid for both agents: recommend #1, reject it
ACCEPT = _json(choice=3, decision="yes")  # recommend #3 (the target), accept it


def _samples(n: int) -> list[Sample]:
    samples = []
    for k in range(n):
        candidates = tuple(f"u{k}-c{j}" for j in range(N_CANDIDATES))
        samples.append(
            Sample(
                user=f"u{k}",
                history=(f"u{k}-h0", f"u{k}-h1"),
                candidates=candidates,
                target=candidates[2],
                prior=candidates[3],
                focus=candidates[3:],
                scores={c: float(j) for j, c in enumerate(candidates)},
            )
        )
    return samples


def _titles(samples) -> dict[str, str]:
    return {i: f"Title of {i}" for s in samples for i in (*s.candidates, *s.history)}


def _client(url: str, tmp_path) -> LLMClient:
    return sequential_client(url, tmp_path, MAX_ATTEMPTS, MAX_REASKS)


def _run(server_url, tmp_path, samples, config=CONFIG, **kwargs):
    log = RunLog()
    client = _client(server_url, tmp_path)
    assert client.local is False and client.default_concurrency == 1
    started = time.perf_counter()
    rounds = feedback_loop(samples, _titles(samples), config, client, log, **kwargs)
    elapsed = time.perf_counter() - started
    assert elapsed < 20, f"the loop took {elapsed:.1f} s"
    return rounds, log.calls_frame()


def _last_rows(rounds):
    return rounds.groupby(USER, sort=False).tail(1).set_index(USER)


def _check_stops(rounds):
    """Exactly one stop per dialogue, on its last row."""
    for _, group in rounds.groupby(USER, sort=False):
        assert group["round"].tolist() == list(range(1, len(group) + 1))
        stops = group["stop"].tolist()
        assert all(s is None for s in stops[:-1]) and stops[-1] is not None


def _is_rec(body) -> bool:
    return body["messages"][0]["content"].startswith("You are a movie recommender")


# ------------------------------------------------------------------------------ termination


def test_a_user_agent_that_always_rejects_runs_to_the_limit(tmp_path):
    samples = _samples(3)
    with ScriptedServer(default=reply(REJECT)) as server:
        rounds, calls = _run(server.url, tmp_path, samples, phase="test-phase")
        bodies = server.chat_bodies()
    _check_stops(rounds)
    assert (rounds.groupby(USER).size() == CONFIG.max_rounds).all()
    assert (_last_rows(rounds)["stop"] == "limit").all()
    assert rounds["accepted"].tolist() == [False] * len(rounds)
    assert (rounds[ITEM] == rounds[USER] + "-c0").all(), "choice 1 is the first candidate"
    assert stop_counts(rounds)["limit"] == len(samples)

    per_kind = calls.groupby("kind").size().to_dict()
    assert per_kind == {"rec": 3 * 3, "user": 3 * 3}, "2 calls per round per sample"
    assert len(calls) == len(bodies) == 2 * CONFIG.max_rounds * len(samples)
    assert set(calls["phase"]) == {"test-phase"} and calls["ok"].all()

    # what the agents were told: the prior in round 1 only, the memory afterwards
    rec = [b["messages"][1]["content"] for b in bodies if _is_rec(b)]
    user = [b["messages"][1]["content"] for b in bodies if not _is_rec(b)]
    assert len(rec) == len(user) == 9
    first, later = rec[:3], rec[3:]
    assert all("suggests: Title of" in text for text in first)
    assert not any("Round 1:" in text for text in first)
    assert all("Round 1: you recommended" in text for text in later)
    assert all("suggests" not in text for text in later)
    assert all("Round 2: you recommended" in text for text in rec[6:])
    assert not any("Round 1:" in text for text in user[:3])
    assert all("Round 2: the agent recommended" in text for text in user[6:])


def test_acceptance_in_round_one_ends_the_dialogue(tmp_path):
    samples = _samples(2)
    with ScriptedServer(default=reply(ACCEPT)) as server:
        rounds, calls = _run(server.url, tmp_path, samples)
        assert server.count() == 4
    _check_stops(rounds)
    assert len(rounds) == 2 and set(rounds["round"]) == {1}
    assert (rounds["stop"] == "accepted").all()
    assert rounds["accepted"].tolist() == [True, True]
    assert rounds["label"].tolist() == [1, 1], "choice 3 is the target here"
    assert calls.groupby("kind").size().to_dict() == {"rec": 2, "user": 2}
    assert predictions(rounds, 5)["hit"].tolist() == [1, 1]


def test_a_round_limit_of_one_never_asks_the_user_agent(tmp_path):
    samples = _samples(3)
    with ScriptedServer(default=reply(REJECT)) as server:
        rounds, calls = _run(server.url, tmp_path, samples, max_rounds=1)
        assert server.count() == 3
        assert all(_is_rec(b) for b in server.chat_bodies())
    _check_stops(rounds)
    assert set(calls["kind"]) == {"rec"} and len(calls) == 3
    assert (rounds["stop"] == "limit").all() and len(rounds) == 3
    assert rounds["accepted"].isna().all() and rounds["user_ok"].isna().all()


def test_mixed_dialogues_end_independently(tmp_path):
    # round 1: u0 and u1 recommend; u0 accepts, u1 rejects; round 2: only u1 is asked again
    samples = _samples(2)
    with ScriptedServer(default=reply(REJECT)) as server:
        server.script(reply(REJECT), reply(REJECT), reply(ACCEPT), reply(REJECT))
        rounds, calls = _run(server.url, tmp_path, samples, max_rounds=2)
        assert server.count() == 4 + 2
    _check_stops(rounds)
    last = _last_rows(rounds)
    assert last.loc["u0", "stop"] == "accepted" and last.loc["u0", "round"] == 1
    assert last.loc["u1", "stop"] == "limit" and last.loc["u1", "round"] == 2
    assert calls.groupby("kind").size().to_dict() == {"rec": 3, "user": 3}


# ------------------------------------------------------------------------------ failures


@pytest.mark.parametrize(
    "bad",
    [
        _json(choice=N_CANDIDATES + 1),  # off the list
        _json(choice=0),
        _json(choice="1"),
        "this is not JSON",
        _json(),  # no choice at all
    ],
)
def test_an_unusable_recommendation_ends_the_dialogue(tmp_path, bad):
    samples = _samples(1)
    with ScriptedServer(default=reply(bad)) as server:
        rounds, calls = _run(server.url, tmp_path, samples)
        assert server.count() == 1 + MAX_REASKS, "bounded re-asks, then give up"
    assert len(rounds) == 1
    row = rounds.iloc[0]
    assert row["stop"] == "rec_failed" and not row["rec_ok"] and row[ITEM] is None
    assert calls["kind"].tolist() == ["rec"]
    assert calls["failure"].tolist() == ["invalid"] and not calls["ok"].any()
    assert calls["reasks"].tolist() == [MAX_REASKS]
    assert predictions(rounds, 3)["hit"].tolist() == [0]


def test_a_failed_later_recommendation_keeps_the_previous_proposal(tmp_path):
    samples = _samples(1)
    bad = _json(choice=99)
    with ScriptedServer(default=reply(bad)) as server:
        server.script(reply(_json(choice=4)), reply(_json(decision="no")))
        rounds, calls = _run(server.url, tmp_path, samples)
        assert server.count() == 2 + 1 + MAX_REASKS
    _check_stops(rounds)
    assert rounds["stop"].tolist() == [None, "rec_failed"]
    assert rounds["rec_ok"].tolist() == [True, False]
    assert calls["kind"].tolist() == ["rec", "user", "rec"]
    assert calls["ok"].tolist() == [True, True, False]
    prediction = predictions(rounds, 3).iloc[0]
    assert prediction[ITEM] == "u0-c3" and prediction["position"] == 3


def test_an_unusable_decision_ends_the_dialogue_as_user_failed(tmp_path):
    samples = _samples(1)
    with ScriptedServer(default=reply(_json(decision="maybe"))) as server:
        server.script(reply(_json(choice=2)))
        rounds, calls = _run(server.url, tmp_path, samples)
        assert server.count() == 1 + 1 + MAX_REASKS
    assert len(rounds) == 1
    row = rounds.iloc[0]
    assert row["stop"] == "user_failed" and row["accepted"] is None
    assert rounds["user_ok"].tolist() == [False]
    assert row["rec_ok"] and row[ITEM] == "u0-c1"
    assert calls["kind"].tolist() == ["rec", "user"]
    assert calls["failure"].tolist() == [None, "invalid"]
    assert predictions(rounds, 3)[ITEM].tolist() == ["u0-c1"], "the proposal still counts"


def test_faithful_parsing_miss_is_a_failed_recommendation(tmp_path):
    samples = _samples(1)
    config = AFLConfig(n_candidates=N_CANDIDATES, max_rounds=3, faithful_parsing=True)
    bolded = _json(item="**Title of u0-c2**")  # valid under the schema, but not a title
    with ScriptedServer(default=reply(bolded)) as server:
        rounds, calls = _run(server.url, tmp_path, samples, config=config)
        assert server.count() == 1
    assert rounds["stop"].tolist() == ["rec_failed"]
    assert calls["ok"].tolist() == [True], "the client got valid JSON; the title missed"


def test_faithful_parsing_exact_title_is_accepted(tmp_path):
    samples = _samples(1)
    config = AFLConfig(n_candidates=N_CANDIDATES, max_rounds=3, faithful_parsing=True)
    with ScriptedServer(default=reply(_json(item=" title OF u0-c2 ", decision="yes"))) as server:
        rounds, _ = _run(server.url, tmp_path, samples, config=config)
    assert rounds["stop"].tolist() == ["accepted"] and rounds["label"].tolist() == [1]


def test_transport_errors_are_recorded_not_raised(tmp_path):
    samples = _samples(2)
    with ScriptedServer(default=status(500)) as server:
        rounds, calls = _run(server.url, tmp_path, samples)
        assert server.count() == MAX_ATTEMPTS * len(samples), "bounded retries"
    assert rounds["stop"].tolist() == ["rec_failed", "rec_failed"]
    assert calls["failure"].tolist() == ["transport", "transport"]
    assert stop_counts(rounds)["rec_failed"] == 2


def test_an_unreachable_endpoint_stops_the_loop_naming_it(tmp_path):
    """No reply at all: one message naming the URL, not a run of failures to analyse."""
    url = closed_port_url()
    with pytest.raises(EndpointUnreachableError, match=re.escape(url)):
        _run(url, tmp_path, _samples(3))


def test_a_transport_error_on_the_user_call_is_user_failed(tmp_path):
    samples = _samples(1)
    with ScriptedServer(default=status(503)) as server:
        server.script(reply(_json(choice=3)))
        rounds, calls = _run(server.url, tmp_path, samples)
        assert server.count() == 1 + MAX_ATTEMPTS
    assert rounds["stop"].tolist() == ["user_failed"]
    assert calls["failure"].tolist() == [None, "transport"]
    assert rounds["user_ok"].tolist() == [False]


# ------------------------------------------------------------------------------ arguments


def test_bad_arguments_raise_before_any_call(tmp_path):
    samples = _samples(2)
    with ScriptedServer(default=reply(REJECT)) as server:
        client = _client(server.url, tmp_path)
        with pytest.raises(ValueError, match="max_rounds"):
            feedback_loop(samples, _titles(samples), CONFIG, client, RunLog(), max_rounds=0)
        with pytest.raises(ValueError, match="more than one sample"):
            feedback_loop([samples[0], samples[0]], _titles(samples), CONFIG, client, RunLog())
        log = RunLog()
        empty = feedback_loop([], {}, CONFIG, client, log)
        assert server.count() == 0
    assert empty.empty and {"stop", "round", ITEM}.issubset(empty.columns)
    assert log.calls == []


# ------------------------------------------------------------------------------ entry.rank


def test_rank_frames_both_rankers_and_counts_failed_proposals(tiny, tmp_path, cache_dir):
    """entry.rank trains its own SASRec tool and runs one loop per ranker on the candidates."""
    split = datasets.leave_one_out(tiny)
    users = sorted(datasets.subsample_users(split, 3, seed=0))
    every = datasets.candidate_sets(split, 9, seed=0, phase="test")
    candidates = every[every[USER].isin(users)].reset_index(drop=True)
    task = RankTask(tiny, split, candidates, seed=0)
    quick = baselines.TrainConfig(epochs=1, stopping_step=1)
    pick = json.dumps({"reason": "fits the history", "choice": 5})
    bad = reply("no JSON here")  # unusable, and so is the client's one re-ask
    with ScriptedServer(default=bad) as server:
        # Single agent: user 1 proposes item 5, users 2-3 are unusable. Loop (the smoke
        # profile's limit 2): the same, then user 1 rejects and its round-2 proposal fails.
        server.script(reply(pick), *[bad] * 4, reply(pick), *[bad] * 4, reply(REJECT))
        client = sequential_client(server.url, tmp_path / "llm")
        options = RunOptions(profile="smoke", client=client, training=quick)
        runs = entry.rank(task, None, options)
        with pytest.raises(ValueError, match="n_candidates"):
            entry.rank(task, AFLConfig(n_candidates=20), options)
        with pytest.raises(ValueError, match="unknown AFL method"):
            entry.rank(task, None, RunOptions(methods=("AFL",), client=client))
    assert list(runs) == list(entry.RANKERS)
    fifth = candidates[candidates[USER] == users[0]].sort_values("position")[ITEM].iloc[4]
    for name, run in runs.items():
        assert run.frame.groupby(USER).size().tolist() == [10] * 3, name
        assert run.status_counts()["failed"] == 2, name
        top = run.frame[(run.frame[USER] == users[0]) & (run.frame[RANK] == 1)][ITEM].item()
        assert top == fifth, name  # a failed later round keeps the earlier proposal
    assert len(runs["AFL single agent"].calls) == 3
    assert runs["AFL loop"].calls["kind"].value_counts().to_dict() == {"rec": 4, "user": 1}
    assert runs["AFL loop"].extra["rounds"]["round"].max() == 2
