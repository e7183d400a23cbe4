"""The zero-shot LLM adapter against the real embedded model (SmolLM2-135M), smallest size.

Assertions are about the mechanics (every candidate ranked, every call accounted, unusable
replies counted, a rerun replayed from the cache), never about the quality of the ranking.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from recagents.compare.adapters import run_paper
from recagents.compare.cost import cost_per_user
from recagents.compare.leaderboard import leaderboard
from recagents.compare.protocol import Protocol, check_frame, shared_protocol
from recagents.config import settings
from recagents.data.datasets import Dataset
from recagents.llm.cache import ResponseCache
from recagents.llm.client import LLMClient
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.protocol import Ranking, RunOptions


def zero_shot(protocol: Protocol, client: LLMClient) -> Ranking:
    """AgentCF's zero-shot LLM ranker on the protocol, five history titles per user."""
    options = RunOptions(methods=("Zero-shot LLM",), client=client)
    config = AgentCFConfig(zero_shot_history_len=5)
    return run_paper(protocol, "AgentCF", config, options)["Zero-shot LLM"]


@pytest.fixture
def client(tmp_path: Path) -> LLMClient:
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None, llm_structured="auto"
    )
    return LLMClient(config=config, cache=ResponseCache(tmp_path / "cache.sqlite"))


def test_llm_ranker_on_the_shared_candidates(
    tiny: Dataset, cache_dir: Path, client: LLMClient
) -> None:
    protocol = shared_protocol(tiny, seed=0, n_users=2, n_negatives=9, cache_dir=cache_dir)
    run = zero_shot(protocol, client)
    check_frame(run.frame, protocol.candidates)
    counts = run.status_counts()
    assert sum(counts.values()) == 2 and len(run.calls) == 2
    cost = cost_per_user({run.method: run.calls}, 2)
    assert cost["prompt_tokens"].iloc[0] > 0 and cost["calls"].iloc[0] == 2
    again = zero_shot(protocol, client)
    assert again.calls["cached"].all()
    assert again.frame.equals(run.frame)
    table = leaderboard({"LLM": run.frame}, protocol.truth, n_boot=50)
    assert set(table["reference"]) == {"LLM"}
