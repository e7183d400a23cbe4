"""InteRecAgent end to end against the real embedded model (SmolLM2-135M), at the smallest size.

Two simulated ml-100k users talk with the agent for two turns; the LLM-only baseline answers
their first messages. The assertions are about the mechanics: every call is accounted for,
every recommended id is a real item, there is one row per turn held, hits agree with the
recommended ids, and a rerun is replayed from the cache with identical results. Never about
the quality of the model's plans or recommendations.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from recagents.config import settings
from recagents.data import load_dataset
from recagents.data.datasets import leave_one_out
from recagents.llm.cache import ResponseCache
from recagents.llm.client import LLMClient
from recagents.llm.embed import Embedder
from recagents.llm.runlog import RunLog
from recagents.papers.interecagent import evaluate as E
from recagents.papers.interecagent.analysis import session_trace
from recagents.papers.interecagent.config import InteRecConfig
from recagents.papers.interecagent.conversations import conversation_metrics, run_sessions
from recagents.papers.interecagent.simulator import make_sessions
from recagents.papers.interecagent.toolbox import build_context

MAX_TURNS = 2
#: One re-plan at most keeps the test within a few minutes on two busy cores.
CONFIG = InteRecConfig(max_reflections=1)


@pytest.fixture
def client(tmp_path):
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None, llm_structured="auto"
    )
    return LLMClient(config=config, cache=ResponseCache(tmp_path / "cache.sqlite"))


@pytest.fixture(scope="module")
def setup():
    dataset = load_dataset("ml-100k")
    split = leave_one_out(dataset, min_rating=3)
    ctx = build_context(dataset, split.history("test"))
    sessions = make_sessions(split, dataset, 2, seed=0, table=ctx.table)
    return ctx, sessions


def _check(run, ctx, calls, config):
    frame, turns = run.sessions, run.turns
    assert len(frame) == 2 and set(frame["user_id"]) == set(run.specs)
    assert frame["turns"].between(0, MAX_TURNS).all()
    assert len(turns) == frame["turns"].sum(), "one row per turn held"
    for row in turns.to_dict("records"):
        spec = run.specs[row["user_id"]]
        assert all(i in ctx.table.rows for i in row["recommended"]), row["recommended"]
        assert len(row["recommended"]) <= config.map_n
        assert row["hit_id"] == (spec.target in row["recommended"])
        assert 1 <= row["calls"] <= 1 + 2 * config.max_reflections
    for user, group in turns.groupby("user_id"):
        assert group["turn"].tolist() == list(range(1, len(group) + 1))
        ended = frame.set_index("user_id").loc[user, "ended_by"]
        if len(group) < MAX_TURNS:
            assert ended in ("hit", "user", "simulator_failed")
    assert len(calls) == frame["calls"].sum() + frame["sim_calls"].sum(), "every call counted"
    per_kind = calls["kind"].value_counts().to_dict()
    assert per_kind.get("simulator", 0) == frame["sim_calls"].sum()
    assert set(per_kind) <= {"simulator", "planner", "critic"}
    assert per_kind.get("planner", 0) >= len(turns), "at least one plan per turn"
    assert per_kind.get("critic", 0) <= per_kind.get("planner", 0)


def test_two_conversations_end_to_end_and_replay(tmp_path, client, setup):
    ctx, sessions = setup
    embed = Embedder(cache=ResponseCache(tmp_path / "embed.sqlite")).embed
    log = RunLog()
    run = run_sessions(sessions, ctx, CONFIG, client, log, max_turns=MAX_TURNS,
                         keep_prompts=True, embed=embed)  # fmt: skip
    calls = log.calls_frame()
    _check(run, ctx, calls, CONFIG)
    assert not calls["cached"].any(), "a fresh cache: every call went to the model"
    metrics = conversation_metrics(run.sessions, max_turns=MAX_TURNS, n_boot=50)
    assert metrics["rule"].tolist() == ["id", "fuzzy"] and (metrics["n"] == 2).all()
    assert metrics["at"].between(1, MAX_TURNS + 1).all()
    user = sessions.users[0]
    trace = session_trace(run, user)
    assert "--- turn 1" in trace and "[planner prompt, shown once]" in trace
    assert trace.count("--- turn") == len(run.simulator[user])

    only_log = RunLog()
    retrieval = E.one_turn_retrieval(sessions, ctx, CONFIG, client, only_log,
                                     methods=("LLM only", "Pop"))  # fmt: skip
    only = only_log.calls_frame()
    assert only.query("kind == 'simulator'")["cached"].all(), "the first messages are reused"
    assert (only["kind"] == "llm_only").sum() == 2
    assert set(retrieval["recall"]) <= {0.0, 1.0} and len(retrieval) == 4

    again_log = RunLog()
    again = run_sessions(sessions, ctx, CONFIG, client, again_log, max_turns=MAX_TURNS,
                           keep_prompts=True, embed=embed)  # fmt: skip
    replay = again_log.calls_frame()
    assert replay["cached"].all(), "a rerun must replay from the cache"
    assert len(replay) == len(calls)
    pd.testing.assert_frame_equal(again.sessions, run.sessions)
    pd.testing.assert_frame_equal(again.turns, run.turns)
