"""InteRecAgent's LLM loop under faults: invalid plans, endless critics, bad replies, errors.

The scripted OpenAI-compatible test server (tests/scripted_server.py) is used here ONLY to
inject fixed replies and faults: a planner whose plans are invalid, a critic that always says
"no", malformed JSON, transport errors, a simulator that always leaks the target, a ReAct
agent that never finishes. It is never a stand-in model for results; nothing here measures
recommendation quality. The tools run for real on the tiny fixture dataset.

The client runs one request at a time (``llm_concurrency=1``) and, as a remote client,
schedules requests in the order given, so the queue of scripted replies is consumed in the
order the stages ask: all planners of a batch, then all critics, then the re-plans, ...
Caching is off and retries and backoff are small, so the whole file takes seconds.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pandas as pd
import pytest
from scripted_server import ScriptedServer, reply, sequential_client, status

from recagents.baselines import TrainConfig
from recagents.data import load_dataset
from recagents.data.datasets import candidate_sets, leave_one_out
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.interecagent import agent as A
from recagents.papers.interecagent import entry
from recagents.papers.interecagent import evaluate as E
from recagents.papers.interecagent.analysis import session_trace
from recagents.papers.interecagent.config import (
    APOLOGY,
    ExperimentConfig,
    InteRecConfig,
    SimulatorConfig,
)
from recagents.papers.interecagent.conversations import conversation_metrics, run_sessions
from recagents.papers.interecagent.scoring import leaks
from recagents.papers.interecagent.session import AgentSession
from recagents.papers.interecagent.simulator import make_sessions
from recagents.papers.interecagent.toolbox import build_context
from recagents.protocol import RankTask, RunOptions

TINY_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"

MAX_ATTEMPTS = 2
MAX_REASKS = 1
CONFIG = InteRecConfig(demo_mode="fixed", max_reflections=3)
QUIET = dataclasses.replace(CONFIG, reflection=False)


def _plan(*steps) -> str:
    return json.dumps(
        {"kind": "plan", "answer": "", "plan": [{"tool_name": t, "input": i} for t, i in steps]}
    )


ANSWER = json.dumps({"kind": "answer", "answer": "Which genre do you like?", "plan": []})
INVALID_PLAN = _plan(("hard_filter", "SELECT title FROM items"))  # selects no id
STORE_PLAN = _plan(("candidate_store", "The Usual Suspects"), ("map_titles", 5))
NO = json.dumps({"verdict": "no", "advice": "Try a soft filter on the named film."})
YES = json.dumps({"verdict": "yes", "advice": ""})
LOOKUP_STEP = json.dumps(
    {"thought": "look", "action": "lookup", "input": "SELECT title FROM items LIMIT 1"}
)


def _sim(text: str) -> str:
    return json.dumps({"message": text})


@pytest.fixture(scope="module")
def data():
    dataset = load_dataset(TINY_PATH)
    split = leave_one_out(dataset, min_rating=3)
    ctx = build_context(dataset, split.history("test"))
    return dataset, split, ctx


def _client(url: str, tmp_path) -> LLMClient:
    return sequential_client(url, tmp_path, MAX_ATTEMPTS, MAX_REASKS)


def _turns(server, tmp_path, ctx, texts, config=CONFIG, **kwargs):
    """One run_turns call over fresh sessions; returns (results, calls frame, bodies)."""
    client = _client(server.url, tmp_path)
    assert client.local is False and client.default_concurrency == 1
    sessions = [AgentSession.start(f"s{k}", ctx) for k in range(len(texts))]
    log = RunLog()
    started = time.perf_counter()
    results = A.run_turns(sessions, texts, config, client, log, **kwargs)
    assert time.perf_counter() - started < 20
    return results, log.calls_frame(), server.chat_bodies(), sessions


def _prompt(body) -> str:
    return body["messages"][-1]["content"] if body["messages"][-1]["role"] == "user" else ""


def _is_planner(body) -> bool:
    return "Your reply (JSON):" in body["messages"][1]["content"]


# ------------------------------------------------------------------------------ planner


def test_an_invalid_plan_is_a_counted_failure_that_recommends_nothing(tmp_path, data):
    _, _, ctx = data
    with ScriptedServer(default=reply(INVALID_PLAN)) as server:
        results, calls, bodies, sessions = _turns(server, tmp_path, ctx, ["a", "b"], QUIET)
    assert len(bodies) == 2 and calls["kind"].tolist() == ["planner", "planner"]
    assert calls["ok"].all(), "the LLM reply was fine; the plan was not"
    apology = APOLOGY.format(domain="movie")
    for result, session in zip(results, sessions, strict=True):
        assert result.kind == "failed" and result.reply == apology
        assert result.recommended_ids == [] and result.plan is None
        assert result.plan_failures == 1 and result.n_calls == 1 and result.reflections == 0
        assert "must select the id column" in result.attempts[0].problems[0]
        assert session.dialogue[-1] == ("agent", apology)
        assert len(session.ctx.bus) == len(ctx.table), "the bus is full again"


def test_invalid_plans_are_replanned_with_the_problems_at_most_max_reflections(tmp_path, data):
    _, _, ctx = data
    config = dataclasses.replace(CONFIG, max_reflections=2)
    with ScriptedServer(default=reply(INVALID_PLAN)) as server:
        results, calls, bodies, _ = _turns(server, tmp_path, ctx, ["comedies"], config)
    (result,) = results
    assert calls["kind"].tolist() == ["planner"] * 3, "no critic call for a failed plan"
    assert result.plan_failures == 3 and result.reflections == 2 and result.n_calls == 3
    assert result.kind == "failed" and len(result.attempts) == 3
    assert "could not be run" not in _prompt(bodies[0])
    for body in bodies[1:]:
        assert "Your last plan could not be run: step 1 (hard_filter)" in _prompt(body)
    assert [a.advice_in is None for a in result.attempts] == [True, False, False]

    once = dataclasses.replace(config, replan_on_failure=False)
    with ScriptedServer(default=reply(INVALID_PLAN)) as server:
        results, calls, _, _ = _turns(server, tmp_path, ctx, ["comedies"], once)
    assert len(calls) == 1 and results[0].reflections == 0


def test_a_critic_that_always_says_no_is_bounded(tmp_path, data):
    _, _, ctx = data
    rounds = [reply(STORE_PLAN), reply(STORE_PLAN), reply(NO), reply(NO)]
    with ScriptedServer(default=status(400)) as server:
        server.script(*rounds * CONFIG.max_reflections, reply(STORE_PLAN), reply(STORE_PLAN))
        results, calls, bodies, _ = _turns(server, tmp_path, ctx, ["x", "y"], CONFIG)
        assert server.pending() == 0
    assert calls.groupby("kind").size().to_dict() == {"planner": 8, "critic": 6}
    assert calls["ok"].all()
    for result in results:
        assert result.kind == "plan" and result.reflections == 3 and result.n_calls == 7
        assert result.recommended_ids == ["001"] and "The Usual Suspects" in result.reply
        assert [a.verdict for a in result.attempts] == [False, False, False, None]
        assert result.plan == json.loads(STORE_PLAN)["plan"]
    planner = [b for b in bodies if _is_planner(b)]
    assert len(planner) == 8
    assert all("advises: Try a soft filter" in _prompt(b) for b in planner[2:])
    assert not any("advises" in _prompt(b) for b in planner[:2])
    critic = [b for b in bodies if not _is_planner(b)]
    assert all("Tool execution track" in _prompt(b) for b in critic)


def test_critic_yes_ends_the_turn_and_the_summariser_writes_the_reply(tmp_path, data):
    _, _, ctx = data
    config = dataclasses.replace(CONFIG, summariser=True)
    summary = json.dumps({"reply": "You might enjoy The Usual Suspects."})
    with ScriptedServer(default=status(400)) as server:
        server.script(reply(STORE_PLAN), reply(YES), reply(summary))
        results, calls, bodies, sessions = _turns(server, tmp_path, ctx, ["crime?"], config)
    (result,) = results
    assert calls["kind"].tolist() == ["planner", "critic", "summariser"]
    assert result.reply == "You might enjoy The Usual Suspects." and result.n_calls == 3
    assert result.recommended_ids == ["001"] and result.reflections == 0
    assert "Never mention tools" in bodies[2]["messages"][0]["content"]
    assert sessions[0].dialogue[-1] == ("agent", result.reply)


def test_malformed_replies_are_counted_never_retried_forever(tmp_path, data):
    _, _, ctx = data
    with ScriptedServer(default=reply("this is not JSON")) as server:
        results, calls, _, _ = _turns(server, tmp_path, ctx, ["x"], CONFIG)
        http = server.count()
    (result,) = results
    assert http == 1 + MAX_REASKS, "the client re-asks a bounded number of times"
    assert calls["failure"].tolist() == ["invalid"]
    assert result.kind == "failed" and result.plan_failures == 1 and result.reflections == 0
    assert result.attempts[0].llm_failure, "an unusable reply is not re-planned"

    with ScriptedServer(default=reply("{not json")) as server:
        server.script(reply(STORE_PLAN))
        results, calls, _, _ = _turns(server, tmp_path, ctx, ["x"], CONFIG)
    (result,) = results
    assert calls["kind"].tolist() == ["planner", "critic"]
    assert calls["failure"].tolist() == [None, "invalid"]
    assert result.kind == "plan" and result.critic_failures == 1 and result.reflections == 0
    assert result.recommended_ids == ["001"], "an unusable review keeps the attempt"


def test_transport_errors_end_the_turn_with_an_apology(tmp_path, data):
    _, _, ctx = data
    with ScriptedServer(default=status(500)) as server:
        results, calls, _, _ = _turns(server, tmp_path, ctx, ["x", "y"], CONFIG)
        http = server.count()
    assert calls["failure"].tolist() == ["transport", "transport"]
    assert http == 2 * MAX_ATTEMPTS
    assert all(r.kind == "failed" and r.plan_failures == 1 for r in results)
    assert all(r.reply == APOLOGY.format(domain="movie") for r in results)


# ------------------------------------------------------------------------------ ReAct


def test_react_stops_after_the_iteration_limit_and_maps(tmp_path, data):
    _, _, ctx = data
    config = dataclasses.replace(QUIET, plan_mode="react")
    with ScriptedServer(default=reply(LOOKUP_STEP)) as server:
        results, calls, bodies, _ = _turns(server, tmp_path, ctx, ["x"], config)
    (result,) = results
    assert calls["kind"].tolist() == ["react"] * config.react_max_iterations
    assert result.n_calls == 5 and result.kind == "plan" and result.plan_failures == 0
    track = result.track
    assert [s.tool for s in track.steps] == ["lookup"] * 5 + ["map_titles"]
    assert track.steps[-1].added and track.map_added
    assert result.recommended_ids == list(ctx.table.ids[:5]), "all items, in table order"
    assert "(none yet)" in _prompt(bodies[0])
    assert '4. lookup("SELECT title FROM items LIMIT 1") -> title' in _prompt(bodies[4])


def test_react_reports_an_invalid_step_and_can_finish_with_an_answer(tmp_path, data):
    _, _, ctx = data
    config = dataclasses.replace(QUIET, plan_mode="react")
    bad = json.dumps({"thought": "t", "action": "hard_filter", "input": "SELECT title FROM items"})
    finish = json.dumps({"thought": "t", "action": "finish", "input": "Hello there!"})
    with ScriptedServer(default=status(400)) as server:
        server.script(reply(bad), reply(finish))
        results, calls, bodies, _ = _turns(server, tmp_path, ctx, ["hi"], config)
    (result,) = results
    assert len(calls) == 2 and result.n_calls == 2
    assert "1. hard_filter" in _prompt(bodies[1]) and "ERROR:" in _prompt(bodies[1])
    assert result.kind == "answer" and result.reply == "Hello there!"
    assert result.plan_failures == 1 and result.recommended_ids == []


# ------------------------------------------------------------------------------ LLM only


def test_llm_only_grounds_titles_and_counts_the_unmatched(tmp_path, data):
    _, _, ctx = data
    titles = ["The Usual Suspects (1995)", "A Few Good Men", "No Such Film (1990)",
              "An American in Paris", "Zzyzx Qwerty"]  # fmt: skip
    with ScriptedServer(default=reply(json.dumps({"titles": titles}))) as server:
        client = _client(server.url, tmp_path)
        sessions = [AgentSession.start("s", ctx)]
        log = RunLog()
        (result,) = A.llm_only_turns(sessions, ["something"], CONFIG, client, log)
        body = server.chat_bodies()[0]
    assert result.kind == "llm_only" and result.unmatched == 2 and result.n_calls == 1
    assert result.recommended_ids == ["001", "004", "003"]
    assert result.reply.startswith("Here are recommendations: 1. The Usual Suspects (1995)")
    assert body["temperature"] == 0.8
    assert log.calls_frame()["kind"].tolist() == ["llm_only"]


# ------------------------------------------------------------------------------ simulator


def test_a_simulator_that_always_leaks_is_regenerated_five_times_then_counted(tmp_path, data):
    dataset, split, ctx = data
    sessions = make_sessions(split, dataset, ["1", "2"], table=ctx.table)
    first, second = sessions.sessions
    clean = "Hello."
    assert not leaks(clean, first.target_title) and not leaks(clean, second.target_title)
    leak = _sim(f"I want {first.target_title}")
    script = [reply(leak), reply(_sim(clean))] + [reply(leak)] * 5 + [reply(ANSWER)] * 2
    with ScriptedServer(default=status(400)) as server:
        server.script(*script)
        client = _client(server.url, tmp_path)
        log = RunLog()
        run = run_sessions(sessions, ctx, QUIET, client, log, max_turns=1)
        bodies = server.chat_bodies()
        assert server.pending() == 0
    sim_bodies = [b for b in bodies if "You play a user" in b["messages"][0]["content"]]
    assert len(sim_bodies) == 7
    wants = f"one particular movie: {first.target_title} ("
    leaking = [b for b in sim_bodies if wants in b["messages"][0]["content"]]
    assert [b["seed"] for b in leaking] == [0, 1, 2, 3, 4, 5], "each regeneration differs"
    assert all(b["temperature"] == 0.8 for b in sim_bodies)
    frame = run.sessions.set_index("user_id")
    assert frame.loc["1", "leaks"] == 1 and frame.loc["1", "regenerations"] == 5
    assert frame.loc["1", "sim_calls"] == 6 and frame.loc["2", "sim_calls"] == 1
    assert frame.loc["2", "leaks"] == 0 and not frame["dropped"].any()
    turns = run.turns.set_index("user_id")
    assert (
        turns.loc["1", "leaked"] and turns.loc["1", "user_text"] == f"I want {first.target_title}"
    )
    assert run.simulator["1"][0].regenerations == 5
    calls = log.calls_frame()
    assert (calls["kind"] == "simulator").sum() == 7 and (calls["kind"] == "planner").sum() == 2
    assert len(calls) == frame["calls"].sum() + frame["sim_calls"].sum()

    dropping = SimulatorConfig(drop_leaking=True)
    with ScriptedServer(default=status(400)) as server:
        server.script(*script[:-1])
        run = run_sessions(sessions, ctx, QUIET, _client(server.url, tmp_path), RunLog(),
                             max_turns=1, sim=dropping)  # fmt: skip
        assert server.pending() == 0, "the leaking conversation got no agent call"
    frame = run.sessions.set_index("user_id")
    assert frame.loc["1", "ended_by"] == "leak" and frame.loc["1", "dropped"]
    assert frame.loc["1", "calls"] == 0 and frame.loc["1", "turns"] == 0
    metrics = conversation_metrics(run.sessions, n_boot=20)
    assert metrics["n"].tolist() == [1, 1] and metrics["dropped"].tolist() == [1, 1]


def test_simulator_transport_errors_close_the_conversation(tmp_path, data):
    dataset, split, ctx = data
    sessions = make_sessions(split, dataset, ["1"], table=ctx.table)
    with ScriptedServer(default=status(500)) as server:
        run = run_sessions(sessions, ctx, QUIET, _client(server.url, tmp_path), RunLog())
        assert server.count() == MAX_ATTEMPTS
    assert run.sessions.loc[0, "ended_by"] == "simulator_failed"
    assert run.turns.empty and run.sessions.loc[0, "calls"] == 0


def test_hits_by_id_and_fuzzy_close_a_conversation(tmp_path, data):
    dataset, split, ctx = data
    sessions = make_sessions(split, dataset, ["1", "10"], table=ctx.table)
    hit, miss = sessions.sessions
    assert ctx.table.match_title(hit.target_title).item_id == hit.target
    ask = _sim("Something classic, please.")
    assert not leaks("Something classic, please.", hit.target_title)
    assert not leaks("Something classic, please.", miss.target_title)
    found = _plan(("candidate_store", hit.target_title), ("map_titles", 5))
    with ScriptedServer(default=status(400)) as server:
        server.script(
            reply(ask),
            reply(ask),
            reply(found),
            reply(ANSWER),  # turn 1
            reply(ask),
            reply(ANSWER),
        )  # turn 2, the missing session only
        log = RunLog()
        run = run_sessions(sessions, ctx, QUIET, _client(server.url, tmp_path), log,
                             max_turns=2, keep_prompts=True)  # fmt: skip
        assert server.pending() == 0
    frame = run.sessions.set_index("user_id")
    assert frame.loc["1", "ended_by"] == "hit" and frame.loc["1", "turns"] == 1
    assert frame.loc["1", "turn_id"] == 1 and frame.loc["1", "turn_fuzzy"] == 1
    assert frame.loc["10", "ended_by"] == "max_turns" and frame.loc["10", "turns"] == 2
    assert not frame.loc["10", "hit_id"] and pd.isna(frame.loc["10", "turn_id"])
    assert run.turns["turn"].tolist() == [1, 1, 2]
    assert run.turns.iloc[0]["recommended"] == [hit.target]
    assert len(log.calls) == frame["calls"].sum() + frame["sim_calls"].sum() == 6
    metrics = conversation_metrics(run.sessions, max_turns=2, n_boot=20).set_index("rule")
    assert metrics.loc["id", "hit"] == 0.5 and metrics.loc["id", "at"] == (1 + 3) / 2
    trace = session_trace(run, "1")
    assert "--- turn 1" in trace and "candidate_store(An American in Paris)" in trace
    assert "hit by id: YES; fuzzy hit: YES" in trace and "[planner prompt, shown once]" in trace
    assert "ended by hit" in trace
    with pytest.raises(KeyError):
        session_trace(run, "nobody")


# ------------------------------------------------------------------------------ one turn


def test_one_turn_ranking_checks_and_repairs_rankings(tmp_path, data):
    dataset, split, ctx = data
    sessions = make_sessions(split, dataset, ["1", "10"], table=ctx.table)
    candidates = candidate_sets(split, 9, seed=0, cache_dir=tmp_path)
    ask = _sim("Something classic, please.")
    by_popularity = _plan(("rank", {"schema": "popularity", "prefer": [], "unwanted": []}),
                          ("map_titles", 10))  # fmt: skip
    duplicated = json.dumps({"ranking": [3, 3, 1, 4, 5, 6, 7, 8, 9, 10]})
    with ScriptedServer(default=status(400)) as server:
        server.script(reply(ask), reply(ask), reply(by_popularity), reply(by_popularity),
                      reply(duplicated), reply("nope"), reply("nope"))  # fmt: skip
        frame = E.one_turn_ranking(sessions, candidates, ctx, QUIET,
                                   _client(server.url, tmp_path), RunLog(),
                                   methods=("InteRecAgent", "LLM only", "Pop"))  # fmt: skip
        assert server.pending() == 0
    rows = frame.set_index(["method", "user_id"])
    for user in ("1", "10"):
        agent, pop = rows.loc[("InteRecAgent", user)], rows.loc[("Pop", user)]
        assert agent["rank"] == pop["rank"], "a popularity plan ranks like Pop"
        assert agent["status"] == "complete" and agent["calls"] == 1
    llm = rows.loc[("LLM only", "1")]
    assert llm["status"] == "repaired" and llm["duplicates"] == 1 and llm["n_missing"] == 1
    failed = rows.loc[("LLM only", "10")]
    assert failed["status"] == "failed" and failed["ndcg"] == 0.0 and pd.isna(failed["rank"])


# ------------------------------------------------------------------------------ entry points

QUICK = TrainConfig(epochs=1, stopping_step=1)


def test_entry_run_is_the_notebooks_experiment_in_one_call(tmp_path, data):
    dataset, _, _ = data
    config = ExperimentConfig(agent=QUIET, n_one_turn=2, n_negatives=9)
    with ScriptedServer(default=reply(_sim("Something classic, please."))) as server:
        options = RunOptions(profile="smoke", n_users=2, client=_client(server.url, tmp_path),
                             n_boot=50, training=QUICK)  # fmt: skip
        run = entry.run(dataset, config, options)
    assert set(run.tables) == set(entry.TABLES) and run.config.max_turns == 2  # the profile's
    assert run.config.agent is QUIET and run.config.sim == SimulatorConfig(seed=config.seed)
    metrics = run.metrics.set_index("metric")
    conversations = {f"{m}@2/{a}/{r}" for m in ("Hit", "AT") for a in entry.METHODS
                     for r in ("id", "fuzzy")}  # fmt: skip
    one_turn = {f"{m}/{a}" for m in ("Recall@5", "NDCG") for a in ("InteRecAgent",
                "LLM only", "Random", "Pop")}  # fmt: skip
    assert set(metrics.index) == conversations | one_turn and (metrics["n"] == 2).all()
    assert metrics.loc["Hit@2/InteRecAgent/id", "value"] == 0.0  # no usable plan, no hit
    assert metrics.loc["AT@2/InteRecAgent/id", "value"] == 3.0  # a miss counts K + 1
    assert len(run.table("conversations")) == 2 * 2 and len(run.table("ranking")) == 2 * 4
    assert "simulator" in set(run.log.calls_frame()["kind"])


def test_entry_rank_orders_the_shared_candidates_and_counts_failed_plans(tmp_path, data):
    dataset, _, _ = data
    split = leave_one_out(dataset)
    candidates = candidate_sets(split, 9, seed=0, cache_dir=tmp_path)
    candidates = candidates[candidates["user_id"].isin(["1", "10"])].reset_index(drop=True)
    task = RankTask(dataset, split, candidates, seed=0)
    ask = _sim("Something classic, please.")
    with ScriptedServer(default=reply("not a plan")) as server:
        server.script(reply(ask), reply(ask))  # the simulator's first messages
        options = RunOptions(client=_client(server.url, tmp_path), training=QUICK)
        config = ExperimentConfig(agent=QUIET)
        rankings = entry.rank(task, config, options)
    ranking = rankings["InteRecAgent"]
    assert list(rankings) == list(entry.RANKERS)
    shown = ranking.frame.merge(candidates, on=["user_id", "item_id"], how="outer")
    assert len(shown) == len(candidates) == 2 * 10 and shown["rank"].notna().all()
    assert ranking.status_counts()["failed"] == 2, "no usable plan: the target placed at random"
    assert "simulator" in set(ranking.calls["kind"].astype(str))
    with pytest.raises(ValueError, match="unknown InteRecAgent method"):
        entry.rank(task, config, RunOptions(methods=("LLM only",)))
