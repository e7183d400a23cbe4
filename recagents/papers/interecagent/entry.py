"""InteRecAgent's entry points: the paper's experiment in one call, and its one-turn ranking.

:func:`run` is the one entry point every paper has, of the same shape
(``run(dataset, config, options)`` -> :class:`~recagents.protocol.PaperRun`, the shared
arguments in one :class:`~recagents.protocol.RunOptions`): the paper's conversations with a
simulated user (Table 2: Hit@5 and AT@5 by id and by the fuzzy rule, with 95% bootstrap
intervals) for InteRecAgent and the same LLM without tools (notebook 04, sections 1 and 3).
:func:`rank` is what the cross-paper comparison calls: the one-turn ranking task on
candidates it is given, framed by the pure :func:`target_rank_frame`. Everything here
composes the package's public functions; nothing changes their behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recagents import baselines
from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION, Dataset, Split, leave_one_out
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunLog
from recagents.papers.interecagent.config import InteRecConfig, SimulatorConfig
from recagents.papers.interecagent.conversations import conversation_metrics, run_sessions
from recagents.papers.interecagent.evaluate import one_turn_ranking
from recagents.papers.interecagent.simulator import make_sessions
from recagents.papers.interecagent.toolbox import ToolContext, build_context
from recagents.protocol import (
    PaperRun,
    Ranking,
    RunOptions,
    metric_rows,
    ordered_frame,
)

PAPER = "InteRecAgent"

#: The agents :func:`run` compares in conversation (the paper's Table 2 rows with an LLM).
METHODS = ("InteRecAgent", "LLM only")

#: Most turns per conversation, K of Hit@K and AT@K (the paper: 5).
MAX_TURNS = 5

#: Simulated users when :attr:`RunOptions.n_users` is ``None`` (notebook 04's default
#: profile; the paper: 1,000).
DEFAULT_USERS = 5

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`.
TABLES = ("sessions", "conversations", "turns")


def run(
    dataset: Dataset,
    config: InteRecConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """InteRecAgent's conversations with a simulated user in one call (the paper's Table 2).

    Leave-one-out on ratings >= 3; SASRec trained on the split is the preference ranker of
    the tools (:func:`build_context` on the known interactions); ``options.n_users`` users
    (:func:`make_sessions`, seeded by ``config.seed``) each look for their held-out item over
    at most :data:`MAX_TURNS` turns with every method (:func:`run_sessions`, simulator
    :class:`SimulatorConfig` with the paper's settings and ``config.seed``); Hit@5 and AT@5
    by :func:`conversation_metrics`.

    Args:
        dataset: The dataset.
        config: The agent's settings (default: the paper's).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`); here
            ``n_users`` (simulated users) defaults to :data:`DEFAULT_USERS`, ``methods`` are
            agents of :data:`METHODS` (default: both) and ``training`` and ``progress`` are
            SASRec's.

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and
        ``Hit@5/<method>/<rule>``, ``AT@5/<method>/<rule>`` (AT@5: lower is better).
    """
    started = time.perf_counter()
    config = config or InteRecConfig()
    options = options or RunOptions()
    chosen = options.chosen_methods(PAPER, METHODS)
    client = options.resolved_client()
    split = leave_one_out(dataset, min_rating=3)
    ranker = baselines.train_baseline("SASRec", split, options.training, progress=options.progress)
    ctx = build_context(dataset, split.history("test"), ranker=ranker, seed=config.seed)
    n_users = DEFAULT_USERS if options.n_users is None else options.n_users
    sessions = make_sessions(split, dataset, n_users, seed=config.seed,
                             table=ctx.table, domain=config.domain)  # fmt: skip
    sim = SimulatorConfig(seed=config.seed)
    own = RunLog()
    runs = [
        run_sessions(sessions, ctx, config, client, own, max_turns=MAX_TURNS, method=m, sim=sim)
        for m in chosen
    ]
    options.record(own)
    conversations = pd.concat([r.sessions for r in runs], ignore_index=True)
    table = conversation_metrics(
        conversations, max_turns=MAX_TURNS, n_boot=options.n_boot, seed=config.seed
    )
    tables = {
        "sessions": sessions.frame(),
        "conversations": conversations,
        "turns": pd.concat([r.turns for r in runs], ignore_index=True),
    }
    wall = time.perf_counter() - started
    return PaperRun(PAPER, config, tables, _headline(table), own, wall)


def _headline(table: pd.DataFrame) -> pd.DataFrame:
    """``[metric, value, low, high, n]`` from :func:`conversation_metrics`'s wide table."""
    parts = []
    for name, column in ((f"Hit@{MAX_TURNS}", "hit"), (f"AT@{MAX_TURNS}", "at")):
        part = table[["method", "rule", "n"]].assign(
            metric=name, mean=table[column], low=table[f"{column}_low"],
            high=table[f"{column}_high"],
        )  # fmt: skip
        parts.append(part)
    return metric_rows(pd.concat(parts, ignore_index=True), ("method", "rule"))


# --------------------------------------------------------------------------- shared candidates


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

    Raises:
        ValueError: A rank outside ``1..n``.
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
        parts.append(ordered_frame(user, order))
    return pd.concat(parts, ignore_index=True)


def rank(
    dataset: Dataset,
    split: Split,
    candidates: pd.DataFrame,
    config: InteRecConfig | None = None,
    *,
    ctx: ToolContext,
    client: LLMClient | None = None,
    sim: SimulatorConfig | None = None,
    embed: Callable[[Sequence[str]], Any] | None = None,
    seed: int = 0,
    n_negatives: int | None = None,
    cache_dir: Path | None = None,
) -> Ranking:
    """InteRecAgent in one-turn mode, ranking the given 1 + n candidates.

    :func:`one_turn_ranking` on sessions of the candidates' users (:func:`make_sessions` on
    ``split``); it draws its candidates with :func:`recagents.data.datasets.candidate_sets` from the
    same split, ``seed`` and ``cache_dir``, so they are the ones given when those come from
    the same draw (it checks the target). It reports the target's rank only, so the frame is
    :func:`target_rank_frame` (NDCG/HR exact; popularity of the top-k beyond the target not
    meaningful for this method). A failed plan or a direct answer is ``failed``; a target
    left out is placed at random (``missing="random"``, not the paper's zero). Because the
    evaluation re-reads the saved candidates in their saved order, a re-ordered candidate
    frame is not re-presented to it.

    Args:
        dataset: The full dataset.
        split: The shared split the candidates were drawn from.
        candidates: ``[user_id, item_id, label, position]``, the same number per user.
        config: The agent's settings (default: the paper's).
        ctx: :func:`build_context` on ``dataset`` and ``split.history("test")``.
        client: LLM client.
        sim: Simulator settings (writes the one-turn request).
        embed: Embedding function of the agent's tools.
        seed: The seed the candidates were drawn with.
        n_negatives: Negatives per user they were drawn with (default: as shown, less one).
        cache_dir: Where the candidate sets were saved (``None``: the settings' cache).
    """
    config = config or InteRecConfig()
    client = client or get_client()
    users = sorted(candidates[USER].unique())
    if n_negatives is None:
        n_negatives = int(candidates.groupby(USER).size().max()) - 1
    started = time.perf_counter()
    sessions = make_sessions(split, dataset, users, table=ctx.table, domain=config.domain)
    log = RunLog()
    table = one_turn_ranking(
        sessions, ctx, config, client, log, methods=("InteRecAgent",), sim=sim,
        n_negatives=n_negatives, seed=seed, missing="random", cache_dir=cache_dir, embed=embed,
    )  # fmt: skip
    ranks = {
        row[USER]: (None if pd.isna(row["rank"]) else int(row["rank"]))
        for row in table.to_dict("records")
    }
    frame = target_rank_frame(candidates, ranks, seed=seed)
    wall = time.perf_counter() - started
    status = table[[USER, "status"]].reset_index(drop=True)
    note = "target rank only; other candidates in display order"
    return Ranking("InteRecAgent", frame, status, log, wall, note, extra={"one_turn": table})
