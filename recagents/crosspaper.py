"""One leaderboard for every method: the same split, the same 1 + 19 candidates, the same users.

The logic behind the cross-paper notebook. Every method of the other modules (the classic
RecBole baselines, a zero-shot LLM ranker, AgentCF B / B+H / B+R, the AFL recommendation agent
alone and in its feedback loop, InteRecAgent in one-turn mode) is run on one
:class:`Protocol` and turned into the project's long frame ``[user_id, item_id, score, rank]``
over exactly the protocol's candidates, with the calls it made (a
:class:`~recagents.llm.runlog.RunLog`), its wall time and, per user, whether its reply was usable.
Unusable replies are counted in :attr:`MethodRun.status`, never dropped: the user keeps a
ranking (the repair rule of :func:`recagents.protocol.ranking_frame`) and is scored.

What is here, in the order a run uses it:

- :func:`shared_protocol`: the single leave-one-out split, saved candidate sets and user
  sample every method ranks.
- Adapters, one per method: :func:`run_baseline`, :func:`run_llm_ranker`, :func:`run_agentcf`,
  :func:`run_afl` (with the pure :func:`afl_frame`), :func:`run_interecagent` (with the pure
  :func:`target_rank_frame`).
- :func:`leaderboard`: NDCG@k / HR@k with bootstrap intervals and paired tests against a
  reference method.
- Bias: :func:`popularity_bias` (average popularity, coverage and Gini of the top-k against
  the ground truth) and :func:`position_sensitivity` (the same candidates shown in another
  order).
- Cost: :func:`cost_per_user`, :func:`cost_scaling` and :func:`scaling_figure`.

Deviations, each deliberate and documented at its adapter: AgentCF trains on the last
``n_targets + 2`` interactions before each shared user's test item (the paper's window) and
may train on fewer steps (``train_steps``); AFL's frame is its proposal first, then the tool
model's order; InteRecAgent's one-turn evaluation reports only the target's rank, so its frame
places the other candidates in display order around it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents import afl as afl_module
from recagents import agentcf
from recagents import baselines as baselines_module
from recagents.columns import ITEM, LABEL, RANK, SCORE, USER
from recagents.data import (
    POSITION,
    Dataset,
    DatasetError,
    Split,
    candidate_sets,
    item_text,
    leave_one_out,
    subsample_users,
)
from recagents.llm.cache import PRICES
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunLog, cost_table
from recagents.metrics import compare_to_reference, ranking_metrics, summarize_methods

__all__ = [
    "CLASSIC",
    "COST_QUANTITIES",
    "ORDERS",
    "MethodRun",
    "Protocol",
    "afl_frame",
    "agentcf_subset",
    "check_frame",
    "cost_per_user",
    "cost_scaling",
    "gini",
    "leaderboard",
    "popularity_bias",
    "position_sensitivity",
    "reorder_candidates",
    "run_afl",
    "run_agentcf",
    "run_baseline",
    "run_interecagent",
    "run_llm_ranker",
    "scaling_figure",
    "scaling_runner",
    "shared_protocol",
    "shared_rankers",
    "status_table",
    "target_rank_frame",
]

#: The classic baselines: ``Random`` needs no training, the rest are RecBole models.
CLASSIC = ("Random", *baselines_module.MODELS)

#: The orders :func:`position_sensitivity` knows.
ORDERS = ("given", "reversed", "shuffled")

#: What :func:`cost_per_user` and :func:`cost_scaling` report per method.
COST_QUANTITIES = ("calls", "failed", "prompt_tokens", "completion_tokens", "endpoint_s", "wall_s")

#: Per-user status of a method's ranking: ``ok`` (a model score), ``complete`` (a full reply),
#: ``repaired`` (a partial reply, completed), ``failed`` (an unusable reply, ranked by the
#: documented fallback and counted).
STATUSES = ("ok", "complete", "repaired", "failed")


# --------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class Protocol:
    """The one evaluation protocol every method ranks.

    Attributes:
        dataset: The full dataset (titles, genres, user features).
        split: Chronological leave-one-out split of every user.
        users: The sampled test users, sorted.
        candidates: ``[user_id, item_id, label, position]`` of those users, 1 target and
            ``n_negatives`` unseen items each, sorted by user then display position.
        seed: Seed of the user sample and the candidates.
        n_negatives: Negatives per user.
        cache_dir: Where the candidate sets are saved (``None``: the settings' cache).
    """

    dataset: Dataset
    split: Split
    users: list[str]
    candidates: pd.DataFrame
    seed: int
    n_negatives: int
    cache_dir: Path | None = None

    @property
    def truth(self) -> pd.DataFrame:
        """``[user_id, item_id]`` of the held-out test items of :attr:`users`."""
        truth = self.split.truth("test")
        return truth[truth[USER].isin(set(self.users))].sort_values(USER).reset_index(drop=True)

    def with_candidates(self, candidates: pd.DataFrame) -> Protocol:
        """The same protocol with the candidates shown in another order (same items)."""
        return dataclasses.replace(self, candidates=candidates)

    def for_users(self, users: Sequence[str]) -> Protocol:
        """The same protocol restricted to ``users`` (some of :attr:`users`), e.g. for a probe.

        Raises:
            ValueError: If a user is not one of :attr:`users`, or none is given.
        """
        keep = sorted(set(users))
        unknown = set(keep) - set(self.users)
        if not keep or unknown:
            raise ValueError(f"for_users needs some of the protocol's users; unknown: {unknown}")
        shown = self.candidates[self.candidates[USER].isin(keep)].reset_index(drop=True)
        return dataclasses.replace(self, users=keep, candidates=shown)


def shared_protocol(
    dataset: Dataset,
    seed: int = 0,
    n_users: int | None = 50,
    n_negatives: int = 19,
    cache_dir: Path | None = None,
) -> Protocol:
    """One leave-one-out split, one saved candidate-set frame and one user sample.

    The candidates are :func:`recagents.data.candidate_sets` of the whole split (saved under
    ``cache_dir``, keyed by the split's fingerprint, size and seed), so InteRecAgent's
    one-turn evaluation, which draws them the same way, ranks the very same lists.

    Args:
        dataset: The dataset.
        seed: Seeds the user sample and the candidates.
        n_users: Test users to sample (``None``: all).
        n_negatives: Negatives per user (19: 1 + 19 candidates).
        cache_dir: Where the candidate sets are saved.

    Returns:
        The :class:`Protocol`; a deterministic function of ``(dataset, seed, n_users,
        n_negatives)``.
    """
    split = leave_one_out(dataset)
    users = subsample_users(split, n_users, seed=seed)
    frame = candidate_sets(split, n_negatives, seed=seed, cache_dir=cache_dir)
    frame = frame[frame[USER].isin(set(users))]
    frame = frame.sort_values([USER, POSITION], kind="stable").reset_index(drop=True)
    return Protocol(dataset, split, users, frame, seed, n_negatives, cache_dir)


# --------------------------------------------------------------------------- method runs


@dataclass
class MethodRun:
    """One method's ranking of the protocol's candidates, and what it cost.

    Attributes:
        method: The method's name on the leaderboard.
        frame: ``[user_id, item_id, score, rank]`` over exactly the protocol's candidates.
        log: Every LLM call (empty for the classic baselines).
        wall_s: Wall time of the whole adapter (training included).
        status: ``[user_id, status]`` (one of :data:`STATUSES`) per user.
        note: How the frame was made, where it differs from the method's own output.
    """

    method: str
    frame: pd.DataFrame
    log: RunLog
    wall_s: float
    status: pd.DataFrame
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def calls(self) -> pd.DataFrame:
        """The log's calls as a frame (one row per call)."""
        return self.log.calls_frame()

    def status_counts(self) -> dict[str, int]:
        """Users per status; ``failed`` are unusable replies, counted and still ranked."""
        counts = self.status["status"].value_counts()
        return {name: int(counts.get(name, 0)) for name in STATUSES}


def status_table(runs: Mapping[str, MethodRun]) -> pd.DataFrame:
    """Users per reply status and method: how many replies were unusable, beside the note.

    Returns:
        ``[method, ok, complete, repaired, failed, failed_share, note]``.
    """
    rows = []
    for name, run in runs.items():
        counts = run.status_counts()
        users = max(1, sum(counts.values()))
        rows.append({"method": name, **counts, "failed_share": counts["failed"] / users,
                     "note": run.note})  # fmt: skip
    return pd.DataFrame(rows, columns=["method", *STATUSES, "failed_share", "note"])


def check_frame(frame: pd.DataFrame, candidates: pd.DataFrame) -> None:
    """Raise unless ``frame`` ranks exactly the candidates, 1..n per user with no ties.

    Raises:
        ValueError: An extra or a missing (user, item) pair, or ranks that are not 1..n.
    """
    got = set(zip(frame[USER], frame[ITEM], strict=True))
    want = set(zip(candidates[USER], candidates[ITEM], strict=True))
    if got != want or len(frame) != len(candidates):
        raise ValueError(
            f"the frame does not cover the candidates: {len(got - want)} extra, "
            f"{len(want - got)} missing, {len(frame)} rows for {len(candidates)} candidates"
        )
    ranks = frame.groupby(USER)[RANK].apply(lambda r: sorted(r) == list(range(1, len(r) + 1)))
    if not ranks.all():
        raise ValueError(f"ranks are not 1..n for users {ranks[~ranks].index[:3].tolist()}")


def _titles(dataset: Dataset) -> dict[str, str]:
    return agentcf.item_titles(dataset)


def _outcome_status(outcome: agentcf.RankOutcome) -> pd.DataFrame:
    return outcome.parses[[USER, "status"]].reset_index(drop=True)


def _all_ok(candidates: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({USER: sorted(candidates[USER].unique()), "status": "ok"})


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

    :func:`recagents.agentcf.make_subset` over every eligible user, kept to the protocol's
    users, so each user's test item is the split's test item (both use
    :func:`recagents.data.chronological_order`) and the shared candidates apply unchanged.

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
    display order go to :func:`recagents.agentcf.rank_candidates` (variant ``"LLMRank"``,
    prompt :func:`recagents.agentcf.llmrank_messages`); replies are checked with
    :func:`recagents.protocol.parse_ranking` and completed by the ``repaired`` scorer. An
    unusable reply is ``failed`` in :attr:`MethodRun.status` and its user ranked at random.

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

    The steps of :func:`recagents.agentcf.run`, timed separately: the agents are trained once
    by collaborative reflection (:func:`recagents.agentcf.train`) on each user's window
    (:func:`agentcf_subset`), then every variant ranks with
    :func:`recagents.agentcf.rank_candidates`. Each variant's :class:`MethodRun` carries the
    shared training calls and time *plus* its own ranking (each variant would need the
    training on its own), so the cost table shows what one variant costs.

    Training is ``n_targets x rounds`` forward calls per user plus reflections; with
    ``train_steps`` only the first steps are trained (a documented deviation that saves
    calls; ``None`` trains every target, as the paper). ``train_steps=0`` skips training
    (the untrained agents rank: a cheap smoke setting, not AgentCF).

    Args:
        protocol: The shared protocol.
        variants: Rankers (:data:`recagents.agentcf.VARIANTS`).
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
    usable proposal (:func:`recagents.afl.predictions`). The frame puts it at rank 1 and
    the other candidates after it in the tool model's order (score descending, unscored
    items last, ties by display position). A dialogue without a usable proposal is ranked
    by the tool model alone.

    Args:
        rounds: :func:`recagents.afl.feedback_loop` output.
        scored: ``[user_id, item_id, position, score]`` (:func:`recagents.afl.tool_scores`).
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
    (:func:`recagents.afl.tool_scores`, :func:`recagents.afl.make_samples`); each entry of
    ``limits`` is one :func:`recagents.afl.feedback_loop` run (limit 1 = the single agent,
    whose calls are its round-1 proposals only). The frame is :func:`afl_frame`. A failed
    proposal is ``failed`` in the status (ranked by the tool model) and counted.

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

    :func:`recagents.interecagent.evaluate.one_turn_ranking` on sessions of the protocol's
    users (:func:`~recagents.interecagent.evaluate.make_sessions` on the shared split); it
    draws its candidates with :func:`recagents.data.candidate_sets` from the same split, seed
    and cache folder, so they are the protocol's (it checks the target). It reports the
    target's rank only, so the frame is :func:`target_rank_frame` (NDCG/HR exact; popularity
    bias of the top-k beyond the target not meaningful for this method). A failed plan or a
    direct answer is ``failed``; a target left out is placed at random (``missing="random"``,
    not the paper's zero). Because the evaluation re-reads the saved candidates in their
    saved order, :func:`position_sensitivity` cannot re-present them to this adapter.

    Args:
        protocol: The shared protocol.
        ctx: :func:`recagents.interecagent.tools.build_context` on the protocol's dataset
            and ``split.history("test")``.
        config: :class:`recagents.interecagent.agent.InteRecConfig`.
        client: LLM client.
        sim: Simulator settings (writes the one-turn request).
        embed: Embedding function of the agent's tools.
        method: Name on the leaderboard.
    """
    from recagents.interecagent import evaluate

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


# --------------------------------------------------------------------------- leaderboard


def leaderboard(
    frames: Mapping[str, pd.DataFrame],
    truth: pd.DataFrame,
    ks: Sequence[int] = (1, 5, 10),
    n_boot: int = 1000,
    seed: int = 0,
    reference: str | None = None,
    ci: float = 0.95,
) -> pd.DataFrame:
    """NDCG@k and HR@k per method with bootstrap intervals, and paired tests to a reference.

    Per-user metrics come from :func:`recagents.metrics.ranking_metrics` on the truth users
    (a user a method left out scores 0), intervals from
    :func:`recagents.metrics.summarize_methods` and the paired differences (method -
    reference, users resampled jointly) from :func:`recagents.metrics.compare_to_reference`.

    Args:
        frames: Method -> ``[user_id, item_id, score, rank]``.
        truth: ``[user_id, item_id]`` of the held-out items.
        ks: Cut-offs.
        n_boot: Bootstrap resamples.
        seed: Seed of every resampling (the same users for every method).
        reference: Method every other is tested against (default: the classic baseline of
            :data:`CLASSIC` with the best mean NDCG at the largest cut-off; failing that,
            the best method).
        ci: Confidence level.

    Returns:
        ``[method, metric, mean, low, high, n, reference, diff, diff_low, diff_high,
        p_value]``, one row per method and metric; the reference's own rows have no test.
    """
    if not frames:
        raise ValueError("leaderboard needs at least one method")
    metrics = ("ndcg", "hr")
    per_user = {
        name: ranking_metrics(frame, truth, ks=ks, metrics=metrics)
        for name, frame in frames.items()
    }
    summary = summarize_methods(per_user, n_boot=n_boot, ci=ci, seed=seed)
    key = f"ndcg@{max(ks)}"
    if reference is None:
        means = summary[summary["metric"] == key].set_index("method")["mean"]
        classic = means[means.index.isin(CLASSIC)]
        reference = str((classic if len(classic) else means).idxmax())
    tests = []
    for metric in summary["metric"].unique():
        table = compare_to_reference(per_user, reference, metric, n_boot=n_boot, ci=ci, seed=seed)
        tests.append(table.assign(metric=metric))
    paired = pd.concat(tests, ignore_index=True).rename(
        columns={"low": "diff_low", "high": "diff_high"}
    )
    out = summary.merge(paired, on=["method", "metric"], how="left")
    out.insert(6, "reference", reference)
    return out


# --------------------------------------------------------------------------- bias


def gini(counts: Sequence[float] | np.ndarray) -> float:
    """Gini index of exposure counts: 0 when every item is shown equally, near 1 for one.

    With ``x`` sorted ascending over ``n`` items,
    ``G = sum_i (2i - n - 1) x_i / (n sum_i x_i)`` (``i = 1..n``); 0 for no exposure.
    """
    x = np.sort(np.asarray(counts, dtype=float))
    n = len(x)
    if n == 0 or x.sum() == 0:
        return 0.0
    index = np.arange(1, n + 1)
    return float(np.sum((2 * index - n - 1) * x) / (n * x.sum()))


def _exposure(items: pd.Series, catalogue: pd.Index) -> dict[str, float]:
    counts = items.value_counts().reindex(catalogue, fill_value=0)
    return {"coverage": float((counts > 0).mean()), "gini": gini(counts.to_numpy())}


def popularity_bias(
    frames: Mapping[str, pd.DataFrame],
    train_interactions: pd.DataFrame,
    k: int = 10,
    truth: pd.DataFrame | None = None,
    catalogue: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Popularity of what each method puts in its top ``k``, against the ground truth.

    Popularity is an item's number of training interactions. Per method:

    - ``avg_pop``: mean popularity of the top-``k`` items over all users' lists;
    - ``pop_ratio``: ``avg_pop`` over the mean popularity of the truth's targets (1: as
      popular as what users actually chose next; > 1: a lean toward popular items);
    - ``coverage``: share of the catalogue that appears in some top-``k`` list;
    - ``gini``: :func:`gini` of how often each catalogue item appears in the top-``k`` lists.

    A ``Ground truth`` row gives the same numbers for the targets (one item per user).

    Args:
        frames: Method -> ``[user_id, item_id, score, rank]``.
        train_interactions: ``[user_id, item_id, ...]`` the popularity is counted on.
        k: Cut-off.
        truth: ``[user_id, item_id]`` of the targets (``None``: no truth row or ratio).
        catalogue: Items coverage and Gini are over (default: every item of
            ``train_interactions`` and of the frames).

    Returns:
        ``[method, k, avg_pop, pop_ratio, coverage, gini, n_users]``.
    """
    popularity = train_interactions[ITEM].value_counts()
    items = set(popularity.index)
    for frame in frames.values():
        items |= set(frame[ITEM])
    if truth is not None:
        items |= set(truth[ITEM])
    index = pd.Index(sorted(items) if catalogue is None else list(catalogue))
    truth_pop = None
    rows = []
    if truth is not None:
        truth_pop = float(truth[ITEM].map(popularity).fillna(0).mean())
        rows.append(
            {"method": "Ground truth", "k": 1, "avg_pop": truth_pop, "pop_ratio": 1.0,
             **_exposure(truth[ITEM], index), "n_users": truth[USER].nunique()}
        )  # fmt: skip
    for name, frame in frames.items():
        top = frame[frame[RANK] <= k]
        avg = float(top[ITEM].map(popularity).fillna(0).mean())
        ratio = avg / truth_pop if truth_pop else float("nan")
        rows.append(
            {"method": name, "k": k, "avg_pop": avg, "pop_ratio": ratio,
             **_exposure(top[ITEM], index), "n_users": top[USER].nunique()}
        )  # fmt: skip
    columns = ["method", "k", "avg_pop", "pop_ratio", "coverage", "gini", "n_users"]
    return pd.DataFrame(rows, columns=columns)


def reorder_candidates(
    candidates: pd.DataFrame, order: Literal["given", "reversed", "shuffled"], seed: int = 0
) -> pd.DataFrame:
    """The same candidates with display positions given, reversed or shuffled per user.

    Returns:
        ``candidates`` with new ``position`` values, sorted by user then position.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    frame = candidates.sort_values([USER, POSITION], kind="stable").reset_index(drop=True)
    if order == "reversed":
        size = frame.groupby(USER)[POSITION].transform("size")
        frame[POSITION] = size - 1 - frame.groupby(USER).cumcount()
    elif order == "shuffled":
        rng = np.random.default_rng(seed)
        positions = []
        for _, group in frame.groupby(USER, sort=False):
            positions.extend(rng.permutation(len(group)).tolist())
        frame[POSITION] = positions
    return frame.sort_values([USER, POSITION], kind="stable").reset_index(drop=True)


def _kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if len(a) < 2:
        return 1.0
    return float(kendalltau(a, b).statistic)


def position_sensitivity(
    rank_fn: Callable[[pd.DataFrame], pd.DataFrame],
    candidates: pd.DataFrame,
    orders: Sequence[str] = ORDERS,
    k: int = 5,
    seed: int = 0,
    per_user: bool = False,
) -> pd.DataFrame:
    """How much a ranking changes when the same candidates are shown in another order.

    ``rank_fn`` receives the candidates with their display ``position`` (the order a method
    shows them in) and returns ``[user_id, item_id, score, rank]``; for an adapter, e.g.
    ``lambda c: run_llm_ranker(protocol.with_candidates(c), client).frame``. Each order's
    ranking is compared per user with the ranking under ``"given"``: Kendall's tau of the
    ranks (1: the same ranking), overlap@k (share of the top-k in common) and whether the
    top-1 item changed. An order-invariant ranker scores 1, 1, 0.

    Args:
        rank_fn: The ranker.
        candidates: ``[user_id, item_id, label, position]``.
        orders: Orders to present (``"given"`` is always run, as the comparison point).
        k: Cut-off of the overlap.
        seed: Seeds the shuffle.
        per_user: Return one row per order and user instead of the means.

    Returns:
        ``[order, kendall_tau, overlap@k, top1_changed, n_users]`` (means over users), or
        with ``per_user`` ``[order, user_id, kendall_tau, overlap@k, top1_changed]``.
    """
    unknown = set(orders) - set(ORDERS)
    if unknown:
        raise ValueError(f"unknown orders {sorted(unknown)}; use {ORDERS}")
    rankings = {}
    for order in dict.fromkeys(["given", *orders]):
        shown = reorder_candidates(candidates, order, seed=seed)  # type: ignore[arg-type]
        rankings[order] = rank_fn(shown)
    base = rankings["given"].set_index([USER, ITEM])[RANK]
    rows = []
    for order in orders:
        other = rankings[order].set_index([USER, ITEM])[RANK].reindex(base.index)
        if other.isna().any():
            raise ValueError(f"the {order!r} ranking does not cover the same candidates")
        for user in base.index.get_level_values(USER).unique():
            a = base.loc[user].sort_index()
            b = other.loc[user].reindex(a.index)
            top_a = set(a[a <= k].index)
            top_b = set(b[b <= k].index)
            rows.append(
                {"order": order, USER: user,
                 "kendall_tau": _kendall_tau(a.to_numpy(), b.to_numpy()),
                 f"overlap@{k}": len(top_a & top_b) / max(1, min(k, len(a))),
                 "top1_changed": float(a.idxmin() != b.idxmin())}
            )  # fmt: skip
    table = pd.DataFrame(rows)
    if per_user:
        return table
    summary = table.groupby("order", sort=False).agg(
        kendall_tau=("kendall_tau", "mean"),
        overlap=(f"overlap@{k}", "mean"),
        top1_changed=("top1_changed", "mean"),
        n_users=(USER, "nunique"),
    )
    return summary.rename(columns={"overlap": f"overlap@{k}"}).reset_index()


def shared_rankers(
    run_methods: Callable[[Protocol], Mapping[str, MethodRun]],
    protocol: Protocol,
    methods: Sequence[str],
) -> dict[str, Callable[[pd.DataFrame], pd.DataFrame]]:
    """Rank functions for :func:`position_sensitivity` from an adapter that runs several methods.

    AgentCF's variants share one training and AFL's single agent and loop share the tool
    model's scores, so their adapters return several methods at once. Each function here
    shows the candidates in the order it is given to ``run_methods`` (through
    :meth:`Protocol.with_candidates`), runs the adapter once per distinct order for all
    ``methods`` together, and returns its own method's frame.

    Args:
        run_methods: An adapter bound to its settings, e.g.
            ``lambda p: run_agentcf(p, train_steps=1, client=client)``.
        protocol: The protocol whose candidates are re-presented.
        methods: The methods of the adapter to probe.

    Returns:
        Method -> ``rank(candidates) -> [user_id, item_id, score, rank]``.

    Raises:
        KeyError: When called, if the adapter did not return the method.
    """
    runs_by_order: dict[tuple[Any, ...], Mapping[str, MethodRun]] = {}

    def ranker(method: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
        def rank(candidates: pd.DataFrame) -> pd.DataFrame:
            shown = candidates.sort_values([USER, POSITION], kind="stable")
            key = tuple(zip(shown[USER], shown[ITEM], strict=True))
            if key not in runs_by_order:
                runs_by_order[key] = run_methods(protocol.with_candidates(shown))
            runs = runs_by_order[key]
            if method not in runs:
                raise KeyError(f"the adapter returned {sorted(runs)}, not {method!r}")
            return runs[method].frame

        return rank

    return {method: ranker(method) for method in methods}


# --------------------------------------------------------------------------- cost


def cost_per_user(
    calls_by_method: Mapping[str, pd.DataFrame],
    n_users: int | Mapping[str, int],
    price_model: str = "gpt-4o-mini",
    wall_s: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Calls, tokens, endpoint seconds and estimated USD per method, in total and per user.

    Totals come from :func:`recagents.llm.runlog.cost_table` (tokens and endpoint seconds as
    stored with each reply, so a warm rerun reports the cold run's spend); the price is
    those tokens at ``price_model``'s listed rate in :data:`recagents.llm.cache.PRICES`
    (an editable estimate). A method with no calls (a classic baseline) costs 0.

    Args:
        calls_by_method: Method -> its calls frame (:meth:`RunLog.calls_frame`).
        n_users: Users each method ranked (one number for all, or per method).
        price_model: Whose per-token price to apply.
        wall_s: Method -> wall seconds of its run (adds ``wall_s`` columns).

    Returns:
        One row per method: ``calls, failed, prompt_tokens, completion_tokens, endpoint_s,
        usd`` (totals) and the same with a ``_per_user`` suffix, plus ``wall_s`` when given,
        and ``n_users``.
    """
    if price_model not in PRICES:
        raise ValueError(f"no listed price for {price_model!r}; known: {sorted(PRICES)}")
    rows = []
    for method, calls in calls_by_method.items():
        users = n_users[method] if isinstance(n_users, Mapping) else n_users
        if users < 1:
            raise ValueError(f"{method}: n_users must be positive, got {users}")
        table = cost_table(calls, price_model)
        if table.empty:
            totals = {q: 0.0 for q in COST_QUANTITIES if q != "wall_s"} | {"usd": 0.0}
        else:
            total = table.loc["total"]
            totals = {
                q: float(total[q])
                for q in ("calls", "failed", "prompt_tokens", "completion_tokens")
            }
            totals["endpoint_s"] = float(calls["latency_s"].sum())
            price_in, price_out = PRICES[price_model]
            totals["usd"] = (
                totals["prompt_tokens"] * price_in + totals["completion_tokens"] * price_out
            ) / 1e6
        if wall_s is not None and method in wall_s:
            totals["wall_s"] = float(wall_s[method])
        row: dict[str, Any] = {"method": method, "n_users": users, **totals}
        row |= {f"{q}_per_user": v / users for q, v in totals.items()}
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["price_model"] = price_model
    return out


def cost_scaling(
    measure: Callable[[int, int], Mapping[str, MethodRun]],
    sizes: Sequence[tuple[int, int]],
    price_model: str = "gpt-4o-mini",
) -> pd.DataFrame:
    """Measured cost at several (users, candidates) sizes, as a tidy frame.

    ``measure(n_users, n_candidates)`` runs the methods at one size (e.g. builds
    :func:`shared_protocol` with ``n_negatives = n_candidates - 1`` and calls the adapters)
    and returns one :class:`MethodRun` per method; :func:`cost_per_user` costs each size.

    Args:
        measure: Runs every method at one size.
        sizes: ``(n_users, n_candidates)`` pairs, e.g. 2-3 of them.
        price_model: Whose per-token price to apply.

    Returns:
        ``[method, n_users, n_candidates, quantity, total, per_user]``; quantities are
        :data:`COST_QUANTITIES` and ``usd``.
    """
    rows = []
    for n_users, n_candidates in sizes:
        runs = measure(n_users, n_candidates)
        table = cost_per_user(
            {name: run.calls for name, run in runs.items()},
            {name: run.status[USER].nunique() or n_users for name, run in runs.items()},
            price_model,
            wall_s={name: run.wall_s for name, run in runs.items()},
        )
        for record in table.to_dict("records"):
            for quantity in (*COST_QUANTITIES, "usd"):
                if quantity not in record:
                    continue
                rows.append(
                    {"method": record["method"], "n_users": n_users,
                     "n_candidates": n_candidates, "quantity": quantity,
                     "total": record[quantity], "per_user": record[f"{quantity}_per_user"]}
                )  # fmt: skip
    return pd.DataFrame(
        rows, columns=["method", "n_users", "n_candidates", "quantity", "total", "per_user"]
    )


def scaling_runner(
    dataset: Dataset,
    adapters: Mapping[str, Callable[[Protocol], MethodRun | Mapping[str, MethodRun]]],
    seed: int = 0,
    cache_dir: Path | None = None,
) -> Callable[[int, int], dict[str, MethodRun]]:
    """A ``measure`` for :func:`cost_scaling`: a fresh protocol per size, then every adapter.

    Args:
        dataset: The dataset.
        adapters: Name -> a function of a :class:`Protocol` returning one run (e.g.
            ``lambda p: run_llm_ranker(p, client)``) or several (e.g. :func:`run_agentcf`).
        seed: Seed of every protocol.
        cache_dir: Where the candidate sets are saved.

    Returns:
        ``measure(n_users, n_candidates)`` -> method name -> run.
    """

    def measure(n_users: int, n_candidates: int) -> dict[str, MethodRun]:
        protocol = shared_protocol(dataset, seed, n_users, n_candidates - 1, cache_dir)
        runs: dict[str, MethodRun] = {}
        for name, adapter in adapters.items():
            result = adapter(protocol)
            runs.update({name: result} if isinstance(result, MethodRun) else dict(result))
        return runs

    return measure


def scaling_figure(
    frame: pd.DataFrame,
    quantities: Sequence[str] = ("calls", "prompt_tokens", "wall_s", "usd"),
    value: Literal["total", "per_user"] = "total",
) -> Any:
    """How each cost grows with users (x axis) and candidates (line style), per method.

    Args:
        frame: :func:`cost_scaling` output.
        quantities: One panel each.
        value: Plot totals or per-user values.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    shown = [q for q in quantities if q in set(frame["quantity"])]
    if not shown:
        raise ValueError(f"none of {list(quantities)} in the frame")
    methods = list(dict.fromkeys(frame["method"]))
    colors = dict(zip(methods, sns.color_palette("colorblind", len(methods)), strict=True))
    sizes = sorted(frame["n_candidates"].unique())
    styles = dict(zip(sizes, ["-", "--", ":", "-."] * len(sizes), strict=False))
    fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.6), squeeze=False)
    for ax, quantity in zip(axes[0], shown, strict=True):
        part = frame[frame["quantity"] == quantity]
        for (method, n_candidates), group in part.groupby(["method", "n_candidates"], sort=False):
            group = group.sort_values("n_users")
            ax.plot(
                group["n_users"], group[value], marker="o", color=colors[method],
                linestyle=styles[n_candidates], label=f"{method}, {n_candidates} candidates",
            )  # fmt: skip
        ax.set(xlabel="users", ylabel=f"{quantity} ({value.replace('_', ' ')})", title=quantity)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
