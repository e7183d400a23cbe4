"""Adapters: every method run on one :class:`~recagents.compare.protocol.Protocol`.

One function per method turns its output into a :class:`~recagents.protocol.Ranking`
over exactly the protocol's candidates: :func:`run_baseline` (the classic RecBole baselines
and Random), :func:`run_llm_ranker` (a zero-shot LLM ranker with AgentCF's LLMRank prompt),
:func:`run_agentcf` (AgentCF B / B+H / B+R, on :func:`agentcf_subset`), :func:`run_afl`
(the AFL recommendation agent alone and in its feedback loop, framed by the pure
:func:`afl_frame`) and :func:`run_interecagent` (InteRecAgent in one-turn mode, framed by the
pure :func:`target_rank_frame`).

The paper methods are composed in each paper's own entry module
(``recagents.papers.<paper>.entry.rank``, which takes the protocol's plain parts: dataset,
split, candidates); an adapter here only hands them over and wraps the
:class:`~recagents.protocol.Ranking` it gets back, so the comparison never touches
a paper's internals. The deviations each method makes are documented at its ``rank``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recagents import baselines as baselines_module
from recagents.columns import ITEM, RANK, SCORE, USER
from recagents.compare.protocol import CLASSIC, Protocol, _all_ok
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.afl import AFLConfig
from recagents.papers.afl import entry as afl_entry
from recagents.papers.agentcf import AgentCFConfig, Subset
from recagents.papers.agentcf import entry as agentcf_entry
from recagents.papers.interecagent import entry as interecagent_entry
from recagents.protocol import Ranking


def _method_run(method: str, ranking: Ranking) -> Ranking:
    """A paper's ranking of the protocol's candidates, under its name on the leaderboard."""
    return dataclasses.replace(ranking, method=method)


# --------------------------------------------------------------------------- classic baselines


def run_baseline(
    protocol: Protocol,
    model: str,
    train: baselines_module.TrainConfig | None = None,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    cache_dir: Path | None = None,
) -> Ranking:
    """A classic baseline's scores of the protocol's candidates.

    ``Random`` is :func:`recagents.baselines.random_scores`; every other model is trained on
    the protocol's split with :func:`recagents.baselines.train_baseline` (cached) and scores
    the candidates with :meth:`~recagents.baselines.Baseline.score` (ties broken by a seeded
    shuffle). Wall time includes training (zero-ish when the weights come from the cache).

    Args:
        protocol: The shared protocol.
        model: ``"Random"`` or one of :data:`recagents.baselines.MODELS`.
        train: Training settings.
        params: RecBole hyper-parameters.
        seed: Seeds the tie-break (and Random's scores).
        cache_dir: Where RecBole's files and weights are kept.
    """
    if model not in CLASSIC:
        raise ValueError(f"unknown baseline {model!r}; choose from {CLASSIC}")
    started = time.perf_counter()
    note = ""
    if model == "Random":
        frame = baselines_module.random_scores(protocol.candidates, seed=seed)
    else:
        fitted = baselines_module.train_baseline(
            model, protocol.split, train, params, cache_dir=cache_dir, progress=False
        )
        frame = fitted.score(protocol.candidates, seed=seed)
        # What the model is, never whether this run found its weights cached: a published
        # page must read the same on a fresh clone (training) and on a rerun (the cache).
        note = f"best epoch {fitted.best_epoch}" if fitted.valid_curve else "no training epochs"
    frame = frame[[USER, ITEM, SCORE, RANK]].reset_index(drop=True)
    wall = time.perf_counter() - started
    return Ranking(model, frame, _all_ok(protocol.candidates), RunLog(), wall, note)


# --------------------------------------------------------------------------- LLM rankers


def agentcf_subset(protocol: Protocol, n_targets: int = 5) -> Subset:
    """AgentCF's data for the protocol's users: each user's last ``n_targets + 3`` items.

    :func:`recagents.papers.agentcf.entry.shared_subset` on the protocol's test items, so
    each user's test item is the split's and the shared candidates apply unchanged.

    Raises:
        DatasetError: A protocol user has fewer than ``n_targets + 3`` interactions, or the
            subset's test item differs from the split's.
    """
    return agentcf_entry.shared_subset(
        protocol.dataset, protocol.truth, n_targets=n_targets, seed=protocol.seed
    )


def run_llm_ranker(
    protocol: Protocol,
    client: LLMClient | None = None,
    history_len: int = 10,
    config: AgentCFConfig | None = None,
    method: str = "Zero-shot LLM",
) -> Ranking:
    """The zero-shot LLM ranker: AgentCF's LLMRank-style prompt, no agents, no training.

    :func:`recagents.papers.agentcf.entry.rank_zero_shot` on the protocol's candidates: each
    user's last ``history_len`` titles and the candidates in display order; an unusable
    reply is ``failed`` in :attr:`Ranking.status` and its user ranked at random.

    Args:
        protocol: The shared protocol.
        client: LLM client (default: the process-wide one).
        history_len: History titles shown.
        config: AgentCF settings (domain, sampling); ``history_len`` overrides its own.
        method: Name on the leaderboard (and phase of its calls).
    """
    ranking = agentcf_entry.rank_zero_shot(
        protocol.dataset, protocol.split, protocol.candidates, config, history_len=history_len,
        client=client, phase=method, seed=protocol.seed,
    )  # fmt: skip
    return _method_run(method, ranking)


def run_agentcf(
    protocol: Protocol,
    variants: Sequence[str] = ("B", "B+H", "B+R"),
    train_steps: int | None = None,
    config: AgentCFConfig | None = None,
    client: LLMClient | None = None,
    embed: Any | None = None,
    progress: bool = False,
) -> dict[str, Ranking]:
    """AgentCF trained on the protocol's users, then each variant ranking their candidates.

    :func:`recagents.papers.agentcf.entry.rank`: trained once by collaborative reflection on
    each user's window, then every variant ranks; each variant's run carries the shared
    training calls and time plus its own ranking. ``train_steps`` trains only the first
    steps (``None``: all, as the paper; ``0``: none, a cheap smoke setting, not AgentCF).

    Args:
        protocol: The shared protocol.
        variants: Rankers (:data:`recagents.papers.agentcf.VARIANTS`).
        train_steps: Training steps per user (``None``: all; ``0``: none).
        config: AgentCF settings (default: the paper's).
        client: LLM client.
        embed: Embedding function for B+R (default: :func:`recagents.llm.embed`).
        progress: Show progress bars.

    Returns:
        ``"AgentCF <variant>"`` -> its run.
    """
    rankings = agentcf_entry.rank(
        protocol.dataset, protocol.split, protocol.candidates, config, variants=variants,
        train_steps=train_steps, client=client, embed=embed, progress=progress,
        seed=protocol.seed,
    )  # fmt: skip
    return {
        f"AgentCF {variant}": _method_run(f"AgentCF {variant}", ranking)
        for variant, ranking in rankings.items()
    }


# --------------------------------------------------------------------------- AFL


def run_afl(
    protocol: Protocol,
    tool: Any,
    limits: Mapping[str, int] | None = None,
    config: AFLConfig | None = None,
    client: LLMClient | None = None,
) -> dict[str, Ranking]:
    """The AFL recommendation agent alone and in its feedback loop, on the shared candidates.

    :func:`recagents.papers.afl.entry.rank`: the tool model (a trained SASRec on the
    protocol's split) scores the candidates, each entry of ``limits`` is one feedback-loop
    run (limit 1 = the single agent), framed by :func:`afl_frame` (the proposal first, then
    the tool model's order). A failed proposal is ``failed`` in the status and counted.

    Args:
        protocol: The shared protocol (``1 + n_negatives`` must equal ``n_candidates``).
        tool: The trained sequential tool model.
        limits: Method name -> round limit (default: single agent 1, loop ``max_rounds``).
        config: AFL settings (default: the paper's, 20 candidates).
        client: LLM client.

    Returns:
        Method name -> its run.
    """
    rankings = afl_entry.rank(
        protocol.dataset, protocol.split, protocol.candidates, config, tool=tool, limits=limits,
        client=client,
    )  # fmt: skip
    return {name: _method_run(name, ranking) for name, ranking in rankings.items()}


# --------------------------------------------------------------------------- InteRecAgent


def run_interecagent(
    protocol: Protocol,
    ctx: Any,
    config: Any,
    client: LLMClient | None = None,
    sim: Any | None = None,
    embed: Any | None = None,
    method: str = "InteRecAgent",
) -> Ranking:
    """InteRecAgent in one-turn mode, ranking the shared 1 + 19 candidates.

    :func:`recagents.papers.interecagent.entry.rank` on the protocol's users, split, seed
    and candidate cache, so its one-turn evaluation draws the very same candidates. It
    reports the target's rank only, so the frame is :func:`target_rank_frame` (NDCG/HR
    exact; popularity bias of the top-k beyond the target not meaningful for this method).
    A failed plan or a direct answer is ``failed``; a target left out is placed at random.
    :func:`position_sensitivity` cannot re-present the candidates to this adapter.

    Args:
        protocol: The shared protocol.
        ctx: :func:`recagents.papers.interecagent.build_context` on the protocol's dataset
            and ``split.history("test")``.
        config: :class:`recagents.papers.interecagent.InteRecConfig`.
        client: LLM client.
        sim: Simulator settings (writes the one-turn request).
        embed: Embedding function of the agent's tools.
        method: Name on the leaderboard.
    """
    ranking = interecagent_entry.rank(
        protocol.dataset, protocol.split, protocol.candidates, config, ctx=ctx, client=client,
        sim=sim, embed=embed, seed=protocol.seed, n_negatives=protocol.n_negatives,
        cache_dir=protocol.cache_dir,
    )  # fmt: skip
    return _method_run(method, ranking)
