"""AgentCF end to end against the real embedded model (SmolLM2-135M), at the smallest size.

The assertions are about the mechanics — every pair trained, every call accounted, memories
changed only through stored reflections, rankings well formed, a rerun replayed from the
cache — never about the quality of the model's choices.
"""

import dataclasses

import pytest

from recagents.columns import ITEM, RANK, USER
from recagents.config import settings
from recagents.llm.cache import ResponseCache
from recagents.llm.client import LLMClient
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.pipeline import run_subset


@pytest.fixture
def client(tmp_path):
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None, llm_structured="auto"
    )
    return LLMClient(config=config, cache=ResponseCache(tmp_path / "cache.sqlite"))


def test_run_trains_ranks_and_replays(tiny, cache_dir, client):
    config = AgentCFConfig(batch_size=2, steps=1, rounds=1, user_words=40, item_words=20,
                           candidate_pool="dataset")  # fmt: skip
    result = run_subset(tiny, "dense", 2, config, client, ("AgentCF B",), seed=0)
    subset, candidates = result.subset, result.candidates

    calls = result.log.calls_frame().groupby("kind").size().to_dict()
    events = result.log.events_frame()
    forward = events[events["kind"] == "forward"]
    answered = int(forward["ok"].sum())
    # One round over 2 pairs: 2 choices; each answered one gets a user and an item reflection.
    assert calls["forward"] == 2 and calls["rank"] == 2
    assert calls.get("user_reflection", 0) == answered == calls.get("item_reflection", 0)
    assert set(forward[USER]) == set(subset.users)
    for user in subset.users:
        versions = result.trained.user_versions[user]
        assert len(versions) == 2, "one saved version per batch after the initial one"
        assert versions[-1] == result.trained.user_memory[user]
    stored = events[(events["kind"] == "item_reflection") & events["stored"]]
    assert set(stored["role"]) <= {"positive"}, "only the positive item's rewrite is stored"
    for item, memory in result.trained.item_memory.items():
        assert len(memory) == 1 + int((stored[ITEM] == item).sum())
        assert memory[0] == result.initial.item_memory[item][0]

    ranked = result.rankings["AgentCF B"]
    assert len(ranked) == len(candidates)
    for _, group in ranked.groupby(USER):
        assert sorted(group[RANK]) == list(range(1, 11))

    again = run_subset(tiny, "dense", 2, config, client, ("AgentCF B",), seed=0)
    assert again.log.calls_frame()["cached"].all(), "a rerun must replay from the cache"
    assert again.trained.user_memory == result.trained.user_memory
