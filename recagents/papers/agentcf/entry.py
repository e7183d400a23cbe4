"""AgentCF's entry points: the paper's experiment in one call, and its rankers on shared candidates.

:func:`run` is the one entry point every paper has, of the same shape
(``run(dataset, config, options)`` -> :class:`~recagents.protocol.PaperRun`, the shared
arguments in one :class:`~recagents.protocol.RunOptions`): it draws the dense subset, its 1
+ 9 candidates, trains the agents by collaborative reflection and ranks with each variant
(:func:`recagents.papers.agentcf.pipeline.run`), then scores NDCG@1/5/10 with 95% bootstrap
intervals. :func:`rank` and :func:`rank_zero_shot` are what the cross-paper comparison
calls: AgentCF (trained on the windows of the shared users) and the zero-shot LLMRank ranker
on candidates it is given, from plain shared objects (a dataset, a split, a candidate
frame). Everything here composes the package's public functions; nothing changes their
behaviour.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data.atomic import DatasetError
from recagents.data.datasets import Dataset, Split
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunLog
from recagents.metrics import ranking_metrics, summarize_methods
from recagents.papers.agentcf.agents import (
    AgentState,
    initial_state,
    item_titles,
    train,
)
from recagents.papers.agentcf.config import VARIANTS, AgentCFConfig
from recagents.papers.agentcf.evaluate import RankOutcome, rank_candidates
from recagents.papers.agentcf.pipeline import run as run_pipeline
from recagents.papers.agentcf.subsets import (
    Subset,
    make_subset,
    schedule,
    subset_candidates,
    training_pairs,
)
from recagents.protocol import PaperRun, Ranking, RunOptions, metric_rows

PAPER = "AgentCF"

#: The rankers :func:`run` compares by default (the paper's Table 2 rows).
METHODS = ("B", "B+H", "B+R")

#: Users in the subset when :attr:`RunOptions.n_users` is ``None`` (notebook 01's default
#: profile; the paper: 100).
DEFAULT_USERS = 6

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`.
TABLES = ("windows", "candidates", "pairs", "rankings", "parses", "per_user", "events")

#: NDCG cut-offs of the headline metrics (the paper's Table 2).
KS = (1, 5, 10)


def run(
    dataset: Dataset,
    config: AgentCFConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """AgentCF's experiment in one call: train the agents, rank 1 + 9 candidates, score NDCG.

    The dense subset of ``options.n_users`` users (:func:`make_subset`, seeded by ``config.seed``),
    their test item and 9 negatives from the subset (:func:`subset_candidates`), then
    :func:`recagents.papers.agentcf.pipeline.run` (initial agents, scheduled training pairs,
    collaborative reflection, one ranking per variant). Notebook 01 runs the same steps one
    by one, with more rankers and baselines beside them.

    Args:
        dataset: The dataset (titles, genres, user features).
        config: The paper's settings (default: the paper's).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`); here
            ``n_users`` defaults to :data:`DEFAULT_USERS`, ``methods`` are variants of
            :data:`VARIANTS` (default :data:`METHODS`), ``log`` also receives the memory
            events and ``training`` is unused (AgentCF trains no classic model).

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and ``ndcg@K/AgentCF <v>``.
    """
    started = time.perf_counter()
    config = (config or AgentCFConfig()).for_dataset(dataset)
    options = options or RunOptions()
    variants = options.chosen_methods(PAPER, VARIANTS, METHODS)
    n_users = DEFAULT_USERS if options.n_users is None else options.n_users
    subset = make_subset(dataset, "dense", n_users, config.n_targets, seed=config.seed)
    candidates = subset_candidates(subset, dataset, 9, seed=config.seed, pool="subset")
    result = run_pipeline(
        dataset, subset, candidates, config, variants, options.client, options.progress
    )
    options.record(result.log)
    truth = candidates.loc[candidates[LABEL] == 1, [USER, ITEM]]
    names = {variant: f"AgentCF {variant}" for variant in variants}
    per_user = {
        names[v]: ranking_metrics(o.ranked, truth, ks=KS, metrics=("ndcg",))
        for v, o in result.rankings.items()
    }
    summary = summarize_methods(per_user, n_boot=options.n_boot, seed=config.seed)
    tables = {
        "windows": subset.windows,
        "candidates": candidates,
        "pairs": result.pairs,
        "rankings": _stacked({names[v]: o.ranked for v, o in result.rankings.items()}),
        "parses": _stacked({names[v]: o.parses for v, o in result.rankings.items()}),
        "per_user": _stacked(per_user),
        "events": result.log.events_frame(),
    }
    wall = time.perf_counter() - started
    return PaperRun(PAPER, config, tables, metric_rows(summary, ("method",)), result.log, wall)


def _stacked(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One frame per method, stacked with a leading ``method`` column."""
    parts = [frame.assign(method=name) for name, frame in frames.items()]
    stacked = pd.concat(parts, ignore_index=True)
    return stacked[["method", *[c for c in stacked.columns if c != "method"]]]


# --------------------------------------------------------------------------- shared candidates


def shared_subset(
    dataset: Dataset, truth: pd.DataFrame, n_targets: int = 5, seed: int = 0
) -> Subset:
    """AgentCF's data for given users: each user's last ``n_targets + 3`` items.

    :func:`make_subset` over every eligible user (``sparse``, seeded), kept to the users of
    ``truth``, so each user's test item is the shared split's test item (both use
    :func:`recagents.data.datasets.chronological_order`) and shared candidates apply unchanged.

    Args:
        dataset: The full dataset.
        truth: ``[user_id, item_id]``: the users and their held-out test items.
        n_targets: Training targets per user.
        seed: Seeds the (unused beyond ordering) subset draw.

    Raises:
        DatasetError: A user has fewer than ``n_targets + 3`` interactions, or the
            subset's test item differs from ``truth``'s.
    """
    full = make_subset(dataset, "sparse", None, n_targets, seed=seed)
    wanted = set(truth[USER])
    missing = wanted - set(full.windows[USER])
    if missing:
        raise DatasetError(
            f"{len(missing)} protocol user(s) have fewer than {n_targets + 3} interactions, "
            f"e.g. {sorted(missing)[:3]}; lower n_targets"
        )

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame[USER].isin(wanted)].reset_index(drop=True)

    split = Split(
        keep(full.split.train),
        keep(full.split.valid),
        keep(full.split.test),
        name=f"{full.split.name}-crosspaper-{len(wanted)}",
    )
    subset = Subset(full.name, keep(full.windows), split)
    ours = split.test.set_index(USER)[ITEM].sort_index()
    theirs = truth.set_index(USER)[ITEM].sort_index()
    if ours.to_dict() != theirs.to_dict():
        raise DatasetError("AgentCF's test items differ from the shared split's")
    return subset


def _shared_truth(split: Split, candidates: pd.DataFrame) -> pd.DataFrame:
    """``[user_id, item_id]`` of the held-out test items of the candidates' users, sorted."""
    truth = split.truth("test")
    users = set(candidates[USER])
    return truth[truth[USER].isin(users)].sort_values(USER).reset_index(drop=True)


def _status(outcome: RankOutcome) -> pd.DataFrame:
    return outcome.parses[[USER, "status"]].reset_index(drop=True)


def rank_zero_shot(
    dataset: Dataset,
    split: Split,
    candidates: pd.DataFrame,
    config: AgentCFConfig | None = None,
    *,
    history_len: int = 10,
    client: LLMClient | None = None,
    phase: str = "Zero-shot LLM",
    seed: int = 0,
) -> Ranking:
    """The zero-shot LLM ranker on shared candidates: AgentCF's LLMRank prompt, no agents.

    Each user's last ``history_len`` titles before the test item and the candidates in
    display order go to :func:`rank_candidates` (variant ``"LLMRank"``, prompt
    :func:`recagents.papers.agentcf.prompts.llmrank_messages`); replies are checked with
    :func:`recagents.protocol.parse_ranking` and completed by the ``repaired`` scorer. An
    unusable reply is ``failed`` in the status and its user ranked at random.

    Args:
        dataset: The full dataset.
        split: The shared leave-one-out split.
        candidates: ``[user_id, item_id, label, position]`` of the users to rank for.
        config: AgentCF settings (domain, sampling); ``history_len`` overrides its own.
        history_len: History titles shown.
        client: LLM client (default: the process-wide one).
        phase: Label of the calls in the log.
        seed: Seeds the subset draw (the shared protocol's seed).
    """
    client = client or get_client()
    config = dataclasses.replace(config or AgentCFConfig(), history_len=history_len)
    started = time.perf_counter()
    truth = _shared_truth(split, candidates)
    subset = shared_subset(dataset, truth, n_targets=max(1, history_len - 2), seed=seed)
    log = RunLog()
    outcome = rank_candidates(
        AgentState({}, {}, {}), subset, candidates, item_titles(dataset), "LLMRank", config,
        client, log, phase=phase,
    )  # fmt: skip
    wall = time.perf_counter() - started
    return Ranking(phase, outcome.ranked, _status(outcome), log, wall)


def rank(
    dataset: Dataset,
    split: Split,
    candidates: pd.DataFrame,
    config: AgentCFConfig | None = None,
    *,
    variants: Sequence[str] = METHODS,
    train_steps: int | None = None,
    client: LLMClient | None = None,
    embed: Any | None = None,
    progress: bool = False,
    seed: int = 0,
) -> dict[str, Ranking]:
    """AgentCF trained on the candidates' users, then each variant ranking their candidates.

    The steps of :func:`run`, timed separately: the agents are trained once by collaborative
    reflection (:func:`train`) on each user's window (:func:`shared_subset`), then every
    variant ranks with :func:`rank_candidates`. Each variant's result carries the shared
    training calls and time *plus* its own ranking (each variant would need the training on
    its own), so a cost table shows what one variant costs.

    With ``train_steps`` only the first steps are trained (a documented deviation that saves
    calls; ``None`` trains every target, as the paper). ``train_steps=0`` skips training
    (the untrained agents rank: a cheap smoke setting, not AgentCF).

    Args:
        dataset: The full dataset.
        split: The shared leave-one-out split.
        candidates: ``[user_id, item_id, label, position]`` of the users to rank for.
        config: AgentCF settings (default: the paper's).
        variants: Rankers (:data:`VARIANTS`).
        train_steps: Training steps per user (``None``: all; ``0``: none).
        client: LLM client.
        embed: Embedding function for B+R (default: :func:`recagents.llm.embed`).
        progress: Show progress bars.
        seed: Seeds the subset draw (the shared protocol's seed).

    Returns:
        Variant -> its ranking, with note ``"no training"`` or ``"<n> training step(s)"``.
    """
    client = client or get_client()
    config = (config or AgentCFConfig()).for_dataset(dataset)
    if train_steps is not None and train_steps > 0:
        config = dataclasses.replace(config, steps=train_steps)
    started = time.perf_counter()
    subset = shared_subset(dataset, _shared_truth(split, candidates), config.n_targets, seed)
    titles = item_titles(dataset)
    state = initial_state(dataset, subset, config.domain)
    train_log = RunLog()
    if train_steps != 0:
        pairs = schedule(
            training_pairs(subset, config.seed, config.exclude_future_negatives),
            config.batch_size,
            config.steps,
        )
        state, train_log = train(state, pairs, subset, titles, config, client=client,
                                 progress=progress)  # fmt: skip
    train_wall = time.perf_counter() - started
    note = "no training" if train_steps == 0 else f"{config.n_steps} training step(s)"
    rankings = {}
    for variant in variants:
        began = time.perf_counter()
        log = RunLog()
        log.extend(train_log)
        outcome = rank_candidates(
            state, subset, candidates, titles, variant, config, client, log, embed=embed
        )
        wall = train_wall + time.perf_counter() - began
        rankings[variant] = Ranking(
            variant, outcome.ranked, _status(outcome), log, wall, note,
            extra={"outcome": outcome, "state": state},
        )  # fmt: skip
    return rankings
