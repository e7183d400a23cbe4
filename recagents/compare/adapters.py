"""Adapters: every method run on one :class:`~recagents.compare.protocol.Protocol`.

One function per method turns its own output into a :class:`~recagents.compare.protocol.MethodRun`
over exactly the protocol's candidates: :func:`run_baseline` (the classic RecBole baselines
and Random), :func:`run_llm_ranker` (a zero-shot LLM ranker with AgentCF's LLMRank prompt),
:func:`run_agentcf` (AgentCF B / B+H / B+R, on :func:`agentcf_subset`), :func:`run_afl`
(the AFL recommendation agent alone and in its feedback loop, framed by the pure
:func:`afl_frame`) and :func:`run_interecagent` (InteRecAgent in one-turn mode, framed by the
pure :func:`target_rank_frame`). The deviations each adapter makes are documented at it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recagents import baselines as baselines_module
from recagents.columns import ITEM, LABEL, RANK, SCORE, USER
from recagents.compare.protocol import CLASSIC, MethodRun, Protocol, _all_ok
from recagents.data import POSITION, Dataset, DatasetError, Split, item_text
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunLog
from recagents.papers import afl as afl_module
from recagents.papers import agentcf

__all__ = [
    "afl_frame",
    "agentcf_subset",
    "run_afl",
    "run_agentcf",
    "run_baseline",
    "run_interecagent",
    "run_llm_ranker",
    "target_rank_frame",
]


def _titles(dataset: Dataset) -> dict[str, str]:
    return agentcf.item_titles(dataset)


def _outcome_status(outcome: agentcf.RankOutcome) -> pd.DataFrame:
    return outcome.parses[[USER, "status"]].reset_index(drop=True)


# --------------------------------------------------------------------------- classic baselines


def run_baseline(
    protocol: Protocol,
    model: str,
    train: baselines_module.TrainConfig | None = None,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    cache_dir: Path | None = None,
) -> MethodRun:
    """A classic baseline's scores of the protocol's candidates.

    ``Random`` is :func:`recagents.baselines.random_scores`; every other model is trained on
    the protocol's split with :func:`recagents.baselines.train_baseline` (cached) and scores
    the candidates with :meth:`~recagents.baselines.Baseline.score` (ties broken by a seeded
    shuffle). Wall time includes training (zero-ish when the weights come from the cache).

    Taught in: notebook 06, section 2 "Every method on the same candidates".

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
        note = "weights from the cache" if fitted.from_cache else ""
    frame = frame[[USER, ITEM, SCORE, RANK]].reset_index(drop=True)
    wall = time.perf_counter() - started
    return MethodRun(model, frame, RunLog(), wall, _all_ok(protocol.candidates), note)


# --------------------------------------------------------------------------- LLM rankers


def agentcf_subset(protocol: Protocol, n_targets: int = 5) -> agentcf.Subset:
    """AgentCF's data for the protocol's users: each user's last ``n_targets + 3`` items.

    :func:`recagents.papers.agentcf.make_subset` over every eligible user, kept to the protocol's
    users, so each user's test item is the split's test item (both use
    :func:`recagents.data.chronological_order`) and the shared candidates apply unchanged.

    Taught in: not shown in a notebook (used by recagents.compare.adapters.run_agentcf and
        recagents.compare.adapters.run_llm_ranker).

    Raises:
        DatasetError: A protocol user has fewer than ``n_targets + 3`` interactions, or the
            subset's test item differs from the split's.
    """
    full = agentcf.make_subset(protocol.dataset, "sparse", None, n_targets, seed=protocol.seed)
    wanted = set(protocol.users)
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
    subset = agentcf.Subset(full.name, keep(full.windows), split)
    ours = split.test.set_index(USER)[ITEM].sort_index()
    theirs = protocol.truth.set_index(USER)[ITEM].sort_index()
    if ours.to_dict() != theirs.to_dict():
        raise DatasetError("AgentCF's test items differ from the shared split's")
    return subset


def run_llm_ranker(
    protocol: Protocol,
    client: LLMClient | None = None,
    history_len: int = 10,
    config: agentcf.AgentCFConfig | None = None,
    method: str = "Zero-shot LLM",
) -> MethodRun:
    """The zero-shot LLM ranker: AgentCF's LLMRank-style prompt, no agents, no training.

    Each user's last ``history_len`` titles before the test item and the 20 candidates in
    display order go to :func:`recagents.papers.agentcf.rank_candidates` (variant ``"LLMRank"``,
    prompt :func:`recagents.papers.agentcf.llmrank_messages`); replies are checked with
    :func:`recagents.protocol.parse_ranking` and completed by the ``repaired`` scorer. An
    unusable reply is ``failed`` in :attr:`MethodRun.status` and its user ranked at random.

    Taught in: notebook 06, section 2 "Every method on the same candidates".

    Args:
        protocol: The shared protocol.
        client: LLM client (default: the process-wide one).
        history_len: History titles shown.
        config: AgentCF settings (domain, sampling); ``history_len`` overrides its own.
        method: Name on the leaderboard.
    """
    client = client or get_client()
    config = dataclasses.replace(config or agentcf.AgentCFConfig(), history_len=history_len)
    started = time.perf_counter()
    subset = agentcf_subset(protocol, n_targets=max(1, history_len - 2))
    log = RunLog()
    outcome = agentcf.rank_candidates(
        agentcf.AgentState({}, {}, {}),
        subset,
        protocol.candidates,
        _titles(protocol.dataset),
        "LLMRank",
        config,
        client,
        log,
        phase=method,
    )
    wall = time.perf_counter() - started
    return MethodRun(method, outcome.ranked, log, wall, _outcome_status(outcome))


def run_agentcf(
    protocol: Protocol,
    variants: Sequence[str] = ("B", "B+H", "B+R"),
    train_steps: int | None = None,
    config: agentcf.AgentCFConfig | None = None,
    client: LLMClient | None = None,
    embed: Any | None = None,
    progress: bool = False,
) -> dict[str, MethodRun]:
    """AgentCF trained on the protocol's users, then each variant ranking their candidates.

    The steps of :func:`recagents.papers.agentcf.run`, timed separately: the agents are trained once
    by collaborative reflection (:func:`recagents.papers.agentcf.train`) on each user's window
    (:func:`agentcf_subset`), then every variant ranks with
    :func:`recagents.papers.agentcf.rank_candidates`. Each variant's :class:`MethodRun` carries the
    shared training calls and time *plus* its own ranking (each variant would need the
    training on its own), so the cost table shows what one variant costs.

    Training is ``n_targets x rounds`` forward calls per user plus reflections; with
    ``train_steps`` only the first steps are trained (a documented deviation that saves
    calls; ``None`` trains every target, as the paper). ``train_steps=0`` skips training
    (the untrained agents rank: a cheap smoke setting, not AgentCF).

    Taught in: notebook 06, section 2 "Every method on the same candidates".

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
    client = client or get_client()
    config = config or agentcf.AgentCFConfig()
    if train_steps is not None and train_steps > 0:
        config = dataclasses.replace(config, steps=train_steps)
    started = time.perf_counter()
    subset = agentcf_subset(protocol, n_targets=config.n_targets)
    titles = _titles(protocol.dataset)
    state = agentcf.initial_state(protocol.dataset, subset, config.domain)
    train_log = RunLog()
    if train_steps != 0:
        pairs = agentcf.schedule(
            agentcf.training_pairs(subset, config.seed, config.exclude_future_negatives),
            config.batch_size,
            config.steps,
        )
        state, train_log = agentcf.train(
            state, pairs, subset, titles, config, client=client, progress=progress
        )
    train_wall = time.perf_counter() - started
    runs = {}
    for variant in variants:
        began = time.perf_counter()
        log = RunLog()
        log.extend(train_log)
        outcome = agentcf.rank_candidates(
            state, subset, protocol.candidates, titles, variant, config, client, log, embed=embed
        )
        wall = train_wall + time.perf_counter() - began
        name = f"AgentCF {variant}"
        steps = "no training" if train_steps == 0 else f"{config.n_steps} training step(s)"
        runs[name] = MethodRun(
            name, outcome.ranked, log, wall, _outcome_status(outcome), note=steps,
            extra={"outcome": outcome, "state": state},
        )  # fmt: skip
    return runs


# --------------------------------------------------------------------------- AFL


def _ordered_frame(user: str, order: Sequence[str]) -> pd.DataFrame:
    """One user's ranking in the long format: ``order`` first to last, scores descending."""
    n = len(order)
    return pd.DataFrame(
        {USER: user, ITEM: list(order), SCORE: np.arange(n, 0, -1, dtype=float),
         RANK: np.arange(1, n + 1, dtype=np.int64)}
    )  # fmt: skip


def afl_frame(rounds: pd.DataFrame, scored: pd.DataFrame, limit: int) -> pd.DataFrame:
    """AFL's ranking of every candidate: its proposal first, then the tool model's order.

    AFL proposes one item per round; the prediction under round limit ``limit`` is the last
    usable proposal (:func:`recagents.papers.afl.predictions`). The frame puts it at rank 1 and
    the other candidates after it in the tool model's order (score descending, unscored
    items last, ties by display position). A dialogue without a usable proposal is ranked
    by the tool model alone.

    Taught in: not shown in a notebook (used by recagents.compare.adapters.run_afl).

    Args:
        rounds: :func:`recagents.papers.afl.feedback_loop` output.
        scored: ``[user_id, item_id, position, score]`` (:func:`recagents.papers.afl.tool_scores`).
        limit: Round limit (1: the single recommendation agent).

    Returns:
        ``[user_id, item_id, score, rank]``, score ``n - rank + 1``.
    """
    chosen = afl_module.predictions(rounds, limit).set_index(USER)[ITEM].to_dict()
    parts = []
    for user, group in scored.groupby(USER, sort=True):
        tool = group.assign(_nan=group[SCORE].isna()).sort_values(
            ["_nan", SCORE, POSITION], ascending=[True, False, True], kind="stable"
        )
        order = tool[ITEM].tolist()
        pick = chosen.get(user)
        if pick is not None and not pd.isna(pick) and pick in order:
            order.remove(pick)
            order.insert(0, pick)
        parts.append(_ordered_frame(user, order))
    return pd.concat(parts, ignore_index=True)


def _afl_status(rounds: pd.DataFrame, limit: int, users: Sequence[str]) -> pd.DataFrame:
    chosen = afl_module.predictions(rounds, limit).set_index(USER)[ITEM]
    status = []
    for user in users:
        pick = chosen.get(user)
        status.append("failed" if pick is None or pd.isna(pick) else "complete")
    return pd.DataFrame({USER: list(users), "status": status})


def run_afl(
    protocol: Protocol,
    tool: Any,
    limits: Mapping[str, int] | None = None,
    config: afl_module.AFLConfig | None = None,
    client: LLMClient | None = None,
) -> dict[str, MethodRun]:
    """The AFL recommendation agent alone and in its feedback loop, on the shared candidates.

    The tool model (a trained SASRec :class:`~recagents.baselines.Baseline` on the protocol's
    split) scores the candidates after each user's last ``history_length`` items
    (:func:`recagents.papers.afl.tool_scores`, :func:`recagents.papers.afl.make_samples`);
    each entry of ``limits`` is one :func:`recagents.papers.afl.feedback_loop` run (limit 1 =
    the single agent, whose calls are its round-1 proposals only). The frame is
    :func:`afl_frame`. A failed proposal is ``failed`` in the status (ranked by the tool
    model) and counted.

    Taught in: notebook 06, section 2 "Every method on the same candidates".

    Args:
        protocol: The shared protocol (``1 + n_negatives`` must equal ``n_candidates``).
        tool: The trained sequential tool model.
        limits: Method name -> round limit (default: single agent 1, loop ``max_rounds``).
        config: AFL settings (default: the paper's, 20 candidates).
        client: LLM client.

    Returns:
        Method name -> its run.
    """
    client = client or get_client()
    config = config or afl_module.AFLConfig(n_candidates=protocol.n_negatives + 1)
    if config.n_candidates != protocol.n_negatives + 1:
        raise ValueError(
            f"AFLConfig.n_candidates={config.n_candidates} but the protocol shows "
            f"{protocol.n_negatives + 1} candidates"
        )
    limits = limits or {"AFL single agent": 1, "AFL loop": config.max_rounds}
    started = time.perf_counter()
    histories = afl_module.recent_histories(
        protocol.split.history("test"), protocol.users, config.history_length
    )
    scored = afl_module.tool_scores(tool, protocol.candidates, histories)
    samples = afl_module.make_samples(scored, histories, config.focus_size)
    tool_wall = time.perf_counter() - started
    titles = item_text(protocol.dataset.items, with_genres=False).to_dict()
    runs = {}
    for name, limit in limits.items():
        began = time.perf_counter()
        log = RunLog()
        rounds = afl_module.feedback_loop(
            samples, titles, config, client, log, max_rounds=limit, phase=name
        )
        frame = afl_frame(rounds, scored, limit)
        wall = tool_wall + time.perf_counter() - began
        runs[name] = MethodRun(
            name, frame, log, wall, _afl_status(rounds, limit, protocol.users),
            note="proposal at rank 1, the tool model's order after it",
            extra={"rounds": rounds},
        )  # fmt: skip
    return runs


# --------------------------------------------------------------------------- InteRecAgent


def target_rank_frame(
    candidates: pd.DataFrame, target_ranks: Mapping[str, int | None], seed: int = 0
) -> pd.DataFrame:
    """A full frame from the target's rank alone: the target at its rank, the rest in order.

    For evaluations that report only where the target landed. The other candidates take the
    remaining ranks in display order, so NDCG and HR are exact but top-k popularity of the
    non-target items is *not* the method's. A user whose rank is ``None`` (nothing usable)
    gets the target at a seeded uniformly random rank, as a random placement would.

    Taught in: not shown in a notebook (used by recagents.compare.adapters.run_interecagent).

    Args:
        candidates: ``[user_id, item_id, label, position]``.
        target_ranks: User -> 1-based rank of the target, or ``None``.
        seed: Seeds the placement of unranked targets.

    Returns:
        ``[user_id, item_id, score, rank]``.
    """
    rng = np.random.default_rng(seed)
    parts = []
    for user, group in candidates.sort_values([USER, POSITION]).groupby(USER, sort=True):
        items = group[ITEM].tolist()
        target = group.loc[group[LABEL] == 1, ITEM].iloc[0]
        n = len(items)
        rank = target_ranks.get(user)
        rank = int(rng.integers(1, n + 1)) if rank is None or pd.isna(rank) else int(rank)
        if not 1 <= rank <= n:
            raise ValueError(f"user {user}: target rank {rank} outside 1..{n}")
        others = [i for i in items if i != target]
        order = others[: rank - 1] + [target] + others[rank - 1 :]
        parts.append(_ordered_frame(user, order))
    return pd.concat(parts, ignore_index=True)


def run_interecagent(
    protocol: Protocol,
    ctx: Any,
    config: Any,
    client: LLMClient | None = None,
    sim: Any | None = None,
    embed: Any | None = None,
    method: str = "InteRecAgent",
) -> MethodRun:
    """InteRecAgent in one-turn mode, ranking the shared 1 + 19 candidates.

    :func:`recagents.papers.interecagent.evaluate.one_turn_ranking` on sessions of the protocol's
    users (:func:`~recagents.papers.interecagent.evaluate.make_sessions` on the shared split); it
    draws its candidates with :func:`recagents.data.candidate_sets` from the same split, seed
    and cache folder, so they are the protocol's (it checks the target). It reports the
    target's rank only, so the frame is :func:`target_rank_frame` (NDCG/HR exact; popularity
    bias of the top-k beyond the target not meaningful for this method). A failed plan or a
    direct answer is ``failed``; a target left out is placed at random (``missing="random"``,
    not the paper's zero). Because the evaluation re-reads the saved candidates in their
    saved order, :func:`position_sensitivity` cannot re-present them to this adapter.

    Taught in: notebook 06, section 2 "Every method on the same candidates".

    Args:
        protocol: The shared protocol.
        ctx: :func:`recagents.papers.interecagent.tools.build_context` on the protocol's dataset
            and ``split.history("test")``.
        config: :class:`recagents.papers.interecagent.agent.InteRecConfig`.
        client: LLM client.
        sim: Simulator settings (writes the one-turn request).
        embed: Embedding function of the agent's tools.
        method: Name on the leaderboard.
    """
    from recagents.papers.interecagent import evaluate

    client = client or get_client()
    started = time.perf_counter()
    sessions = evaluate.make_sessions(
        protocol.split, protocol.dataset, protocol.users, table=ctx.table, domain=config.domain
    )
    log = RunLog()
    table = evaluate.one_turn_ranking(
        sessions, ctx, config, client, log, methods=("InteRecAgent",), sim=sim,
        n_negatives=protocol.n_negatives, seed=protocol.seed, missing="random",
        cache_dir=protocol.cache_dir, embed=embed,
    )  # fmt: skip
    ranks = {
        row[USER]: (None if pd.isna(row["rank"]) else int(row["rank"]))
        for row in table.to_dict("records")
    }
    frame = target_rank_frame(protocol.candidates, ranks, seed=protocol.seed)
    wall = time.perf_counter() - started
    status = table[[USER, "status"]].reset_index(drop=True)
    note = "target rank only; other candidates in display order"
    return MethodRun(method, frame, log, wall, status, note, extra={"one_turn": table})
