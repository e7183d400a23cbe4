"""AFL end to end against the real embedded model (SmolLM2-135M), at the smallest size.

The assertions are about the mechanics: dialogues end once and within the round limit,
every proposal is one of its sample's candidates, every call is accounted for, a rerun is
replayed from the cache, and the user-simulation path produces one judgement per agent and
item. Never about the quality of the model's choices.
"""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from recagents import baselines
from recagents.columns import ITEM, LABEL, USER
from recagents.config import settings
from recagents.data import datasets
from recagents.data.datasets import POSITION
from recagents.llm.cache import ResponseCache
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.afl.analysis import dialogue_trace
from recagents.papers.afl.config import STOPS, AFLConfig
from recagents.papers.afl.evaluate import hits_by_round, simulation_metrics
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.samples import make_samples, recent_histories, tool_scores
from recagents.papers.afl.user_simulation import (
    judge_history,
    simulate_users,
    step1_candidates,
    user_sim_sets,
    user_sim_split,
)

QUICK = baselines.TrainConfig(epochs=2, stopping_step=2)


@pytest.fixture
def client(tmp_path):
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None, llm_structured="auto"
    )
    return LLMClient(config=config, cache=ResponseCache(tmp_path / "cache.sqlite"))


def _check_dialogues(rounds, samples, limit, calls):
    """Mechanics every feedback_loop result must satisfy."""
    by_user = {s.user: s for s in samples}
    assert set(rounds[USER]) == set(by_user)
    for user, group in rounds.groupby(USER, sort=False):
        sample = by_user[user]
        assert group["round"].tolist() == list(range(1, len(group) + 1))
        assert len(group) <= limit
        stops = group["stop"].tolist()
        assert all(s is None for s in stops[:-1]), "a stop only on the last row"
        assert stops[-1] in STOPS
        if stops[-1] == "limit":
            assert len(group) == limit
        for row in group.to_dict("records"):
            if row["rec_ok"]:
                assert row[ITEM] in sample.candidates
                assert sample.candidates[int(row[POSITION])] == row[ITEM]
                assert row[LABEL] == int(row[ITEM] == sample.target)
            else:
                assert row[ITEM] is None and row["stop"] == "rec_failed"
            if row["accepted"] is not None:
                assert row["user_ok"]
            if row["accepted"] is not None and bool(row["accepted"]):
                assert row["stop"] == "accepted"
    kinds = calls["kind"].value_counts().to_dict()
    assert kinds.get("rec", 0) == len(rounds), "one recommendation call per round row"
    asked = int(rounds["user_ok"].notna().sum()) if limit > 1 else 0
    assert kinds.get("user", 0) == asked, "one user call per row with a decision or failure"
    if limit > 1:
        assert asked == int(rounds["rec_ok"].sum())


def test_feedback_loop_mechanics_and_replay(tiny, tmp_path, client):
    split = datasets.leave_one_out(tiny)
    model = baselines.train_baseline(
        "SASRec", split, QUICK, cache_dir=tmp_path / "models", progress=False
    )
    config = AFLConfig(n_candidates=10, max_rounds=2)
    users = datasets.subsample_users(split, 2, seed=0)
    candidates = datasets.sample_candidates(split, config.n_candidates - 1, seed=config.seed,
                                        users=users)  # fmt: skip
    histories = recent_histories(split.history("test"), users, config.history_length)
    scored = tool_scores(model, candidates, histories)
    assert scored["score"].notna().all(), "every candidate is known to the tool model"
    samples = make_samples(scored, histories, config.focus_size)
    assert [s.user for s in samples] == users
    for s in samples:
        assert len(s.candidates) == 10 and s.target in s.candidates
        assert s.prior == max(s.candidates, key=s.scores.get)
    titles = datasets.item_text(tiny.items, with_genres=False).to_dict()

    log = RunLog()
    rounds = feedback_loop(samples, titles, config, client, log, keep_prompts=[users[0]])
    calls = log.calls_frame()
    _check_dialogues(rounds, samples, config.max_rounds, calls)
    assert set(calls["phase"]) == {"afl"}
    assert not calls["cached"].any(), "a fresh cache: every call went to the model"
    trace = dialogue_trace(rounds, users[0], titles)
    assert "=== round 1" in trace and "recommendation agent was asked" in trace
    hits = hits_by_round(rounds, config.max_rounds)
    assert len(hits) == 2 * len(samples) and set(hits["hit"]) <= {0, 1}

    again_log = RunLog()
    again = feedback_loop(samples, titles, config, client, again_log, keep_prompts=[users[0]])
    assert again_log.calls_frame()["cached"].all(), "a rerun must replay from the cache"
    assert len(again_log.calls) == len(log.calls)
    pd.testing.assert_frame_equal(again, rounds)


def test_user_simulation_path(tiny, tmp_path, client):
    config = AFLConfig(
        n_candidates=6, window=5, ratios=((1, 1),), user_rounds=2, nest_negatives=True
    )
    split, window = user_sim_split(tiny, config.window)
    model = baselines.train_baseline(
        "SASRec", split, QUICK, cache_dir=tmp_path / "models", progress=False
    )
    users = datasets.subsample_users(split, 1, seed=0)
    raw = user_sim_sets(split, window, None, users, config)
    histories = recent_histories(split.history("test"), users, config.history_length)
    step1_scores = tool_scores(model, step1_candidates(raw), histories)
    sets = user_sim_sets(split, window, step1_scores, users, config)
    pd.testing.assert_frame_equal(sets.judged, raw.judged)
    assert [s.candidates for s in sets.step1] == [s.candidates for s in raw.step1]
    for s in sets.step1:
        known = {i: v for i, v in s.scores.items() if pd.notna(v)}
        assert s.prior == max(known, key=known.get)
    assert sets.judged.groupby(LABEL).size().to_dict() == {0: 3, 1: 3}

    titles = datasets.item_text(tiny.items, with_genres=False).to_dict()
    log = RunLog()
    rounds = feedback_loop(sets.step1, titles, config, client, log,
                               max_rounds=config.user_rounds, phase="user-sim step 1")  # fmt: skip
    _check_dialogues(rounds, sets.step1, config.user_rounds, log.calls_frame())

    judge_histories = {s.user: judge_history(s, config) for s in sets.step1}
    for s in sets.step1:
        assert judge_histories[s.user][-1] == s.target
    judged_scores = tool_scores(model, sets.judged[[USER, ITEM]].drop_duplicates(), judge_histories)
    judgements = simulate_users(sets, judged_scores, rounds, titles, config, client, log)

    agents = ["User Agent", "AFL"]
    assert len(judgements) == len(agents) * len(sets.judged)
    assert list(judgements.columns) == [
        "agent", USER, "ratio", ITEM, LABEL, "score", "predicted", "reason"
    ]  # fmt: skip
    assert sorted(judgements["agent"].unique()) == sorted(agents)
    for agent in agents:
        mine = judgements[judgements["agent"] == agent]
        assert sorted(map(tuple, mine[[ITEM, LABEL]].to_numpy())) == sorted(
            map(tuple, sets.judged[[ITEM, LABEL]].to_numpy())
        )
    assert all(p is None or isinstance(p, bool | np.bool_) for p in judgements["predicted"])
    sim_calls = log.calls_frame().query("phase == 'user-sim'")
    distinct = len(sets.judged[[USER, ITEM]].drop_duplicates())
    assert sim_calls.groupby("kind").size().to_dict() == {a: distinct for a in agents}

    metrics = simulation_metrics(judgements, n_boot=50, failures_as_wrong=True)
    assert set(metrics["agent"]) == set(agents)
    assert (metrics["n"] == len(sets.judged)).all()
    answered = simulation_metrics(judgements, n_boot=50)
    for agent in agents:
        mine = judgements[judgements["agent"] == agent]
        rows = answered[answered["agent"] == agent]
        unanswered = int(mine["predicted"].isna().sum())
        if unanswered < len(mine):
            assert (rows["unanswered"] == unanswered).all()
            assert (rows["n"] == len(mine) - unanswered).all()
        else:
            assert rows.empty
