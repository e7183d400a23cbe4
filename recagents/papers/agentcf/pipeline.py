"""AgentCF in one call: build the agents, train them and rank the candidates.

The notebook walks through these steps one by one; :func:`run` chains them for other
notebooks (e.g. the cross-paper comparison) and tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from recagents.data.datasets import Dataset
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunLog
from recagents.papers.agentcf.agents import AgentState, initial_state, item_titles, train
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.evaluate import RankOutcome, rank_candidates
from recagents.papers.agentcf.subsets import Subset, schedule, training_pairs

# --------------------------------------------------------------------------- one call


@dataclass
class AgentCFRun:
    """Everything :func:`run` produced.

    Attributes:
        initial: The untrained agents.
        trained: The agents after collaborative reflection.
        pairs: The scheduled training pairs.
        log: Every call and memory event.
        rankings: Variant -> its rankings of the candidates.
    """

    initial: AgentState
    trained: AgentState
    pairs: pd.DataFrame
    log: RunLog
    rankings: dict[str, RankOutcome]


def run(
    dataset: Dataset,
    subset: Subset,
    candidates: pd.DataFrame,
    config: AgentCFConfig | None = None,
    variants: Sequence[str] = ("B", "B+H", "B+R"),
    client: LLMClient | None = None,
    progress: bool = True,
) -> AgentCFRun:
    """Train AgentCF on a subset and rank the candidates with each variant, in one call.

    The notebook walks through these steps one by one; other notebooks (e.g. the
    cross-paper comparison) call this.

    Args:
        dataset: The dataset the subset was drawn from (titles, genres, user features).
        subset: From :func:`make_subset`.
        candidates: ``[user_id, item_id, label, position]`` for the subset's users.
        config: Settings (default: the paper's); without a ``domain``, the dataset's.
        variants: Rankers to run (:data:`VARIANTS`).
        client: LLM client (default: the process-wide one).
        progress: Show progress bars.
    """
    config = (config or AgentCFConfig()).for_dataset(dataset)
    client = client or get_client()
    titles = item_titles(dataset)
    initial = initial_state(dataset, subset, config.domain)
    pairs = schedule(
        training_pairs(subset, config.seed, config.exclude_future_negatives),
        config.batch_size,
        config.steps,
    )
    trained, log = train(initial, pairs, subset, titles, config, client=client, progress=progress)
    rankings = {
        variant: rank_candidates(trained, subset, candidates, titles, variant, config, client, log)
        for variant in variants
    }
    return AgentCFRun(initial, trained, pairs, log, rankings)
