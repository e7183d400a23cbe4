"""Rec4Agentverse with the real embedded SmolLM2-135M: mechanics and accounting, not quality."""

from __future__ import annotations

import dataclasses

import pytest

from recagents.config import settings
from recagents.data import load_dataset
from recagents.data.datasets import leave_one_out
from recagents.llm.cache import ResponseCache
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.rec4agentverse.catalogue import build_catalogue
from recagents.papers.rec4agentverse.config import Rec4AConfig
from recagents.papers.rec4agentverse.manipulation import manipulation_experiment
from recagents.papers.rec4agentverse.stages import run_stages
from recagents.papers.rec4agentverse.users import make_users


@pytest.fixture(scope="module")
def ml100k():
    dataset = load_dataset("ml-100k")
    split = leave_one_out(dataset, min_rating=4)
    return dataset, split


@pytest.fixture(scope="module")
def catalogue(ml100k):
    dataset, split = ml100k
    return build_catalogue(dataset, split.train)


@pytest.fixture(scope="module")
def users(ml100k):
    dataset, split = ml100k
    return make_users(split, dataset, 12, seed=0)


def test_embedded_model_runs_the_protocol_and_the_manipulation(tmp_path, users, catalogue):
    """The real SmolLM2-135M at the smallest size: mechanics and accounting, not quality."""
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None, llm_structured="auto"
    )
    client = LLMClient(config=config, cache=ResponseCache(tmp_path / "cache.sqlite"))
    log = RunLog()
    one = users[:1]
    session_config = Rec4AConfig(max_turns=1, shortlist_size=10)
    run = run_stages(one, catalogue, session_config, stages=(2, 3), client=client, log=log)
    calls = log.calls_frame()
    shown = int(run.turns["agent_ok"].sum())
    kinds = calls.groupby("kind").size().to_dict()
    assert kinds == {"user": 2 + shown, "agent": 2, **({"report": shown} if shown else {})}
    stage3_user = calls[(calls["phase"] == "rec4a stage 3") & (calls["kind"] == "user")]
    assert stage3_user["cached"].iloc[0], "stage 3 replays stage 2's opening"
    assert run.sessions["n_turns"].tolist() == [1, 1]
    for row in run.turns.to_dict("records"):
        assert set(row["items"]) <= set(row["shortlist"]) and len(row["items"]) <= 5
    failures = run.sessions[["agent_failures", "user_failures", "report_failures"]]
    assert failures.to_numpy().sum() == (~calls["ok"]).sum(), "every failed call is counted"
    decisions = manipulation_experiment(one, catalogue, Rec4AConfig(recommender="llm"), client, log)
    assert len(decisions) == 4 and len(log.calls) == len(calls) + 4
    assert set(decisions["chosen"].dropna()) <= set(catalogue.ids)
    again = RunLog()
    run_stages(one, catalogue, session_config, stages=(2, 3), client=client, log=again)
    assert again.calls_frame()["cached"].all(), "a rerun replays from the cache"
