"""AgentCF B+R against B over seeds: pooled, paired user by user (scripted replies, no LLM)."""

from __future__ import annotations

import math
import re

import pytest

from recagents.columns import ITEM, USER
from recagents.data.datasets import chronological_order
from recagents.llm.scripted import ScriptedClient
from recagents.papers.agentcf.agents import item_titles
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.seeds import variants_over_seeds


def _policy(wanted: set[str], retrieval_knows: bool):
    """Schema-valid replies; with ``retrieval_knows`` the B+R ranker puts a test title first."""

    def answer(request):
        required = set(request.schema["required"])
        if "choice" in required:
            return {"choice": 1, "explanation": "the first one"}
        if "self_description" in required:
            return {"self_description": "I like what I chose."}
        if "preferred" in required:
            return {"preferred": "liked", "other": "not chosen"}
        text = request.messages[-1]["content"]
        lines = re.findall(r"^(\d+)\. (.*?): ", text, flags=re.M)
        order = [int(k) for k, _ in lines]
        if retrieval_knows and "Earlier, the user described" in text:
            order = sorted(order, key=lambda k: lines[k - 1][1] not in wanted)
        return {"ranking": order}

    return answer


@pytest.fixture
def test_titles(tiny):
    last = chronological_order(tiny.interactions).groupby(USER).tail(1)[ITEM]
    titles = item_titles(tiny)
    return {titles[item] for item in last}


@pytest.mark.parametrize("knows", [True, False])
def test_a_gain_only_retrieval_has_is_found_and_a_null_is_zero(tiny, test_titles, cache_dir, knows):
    config = AgentCFConfig(steps=1, batch_size=3, rounds=1, candidate_pool="dataset")
    client = ScriptedClient(_policy(test_titles, knows), "agentcf-seeds")
    result = variants_over_seeds(tiny, "sparse", 3, [1, 2], config, client, n_boot=200)
    summary = result.summary.iloc[0]
    assert summary["n"] == 6 and summary["n_seeds"] == 2 and len(result.per_seed) == 2
    assert list(result.per_user["seed"]) == [1, 1, 1, 2, 2, 2]
    assert summary["low"] <= summary["diff"] <= summary["high"]
    if knows:
        assert summary["diff"] > 0 and (result.per_user["diff"] >= 0).all()
    else:
        assert summary["diff"] == 0 and math.isnan(summary["mde"])


def test_repeated_seeds_are_refused(tiny):
    with pytest.raises(ValueError, match="distinct"):
        variants_over_seeds(tiny, "dense", 3, [1, 1], AgentCFConfig(), None)
