"""InteRecAgent's plug-in: notebook 04's experiment in one call, and its one-turn ranking.

:func:`run` is the notebook's headline experiment at a profile of :data:`PROFILES`: SASRec
trained on a leave-one-out split (ratings >= 3) is the tools' preference ranker; a simulated
user converses with the agent and with the same LLM without tools (the paper's Table 2:
Hit@K and AT@K by id and by the fuzzy rule); then the one-turn retrieval and ranking tasks,
with Random and Pop (Table 5); every number with a 95% bootstrap interval. It is
:func:`prepare` then :func:`experiment`, the two steps the notebook calls itself, teaching
the tools on the prepared context in between. :func:`rank` is the one-turn ranking of shared
candidates (the cross-paper comparison), framed by the pure :func:`target_rank_frame`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from recagents import baselines
from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION, Dataset, Split, candidate_sets, leave_one_out
from recagents.llm.runlog import RunLog
from recagents.papers.interecagent.config import ExperimentConfig, InteRecConfig, SimulatorConfig
from recagents.papers.interecagent.conversations import (
    ConversationRun,
    conversation_metrics,
    run_sessions,
)
from recagents.papers.interecagent.evaluate import (
    one_turn_metrics,
    one_turn_ranking,
    one_turn_retrieval,
)
from recagents.papers.interecagent.simulator import SessionSet, make_sessions
from recagents.papers.interecagent.toolbox import ToolContext, build_context
from recagents.protocol import (
    PaperRun,
    Ranking,
    RankTask,
    RunOptions,
    metric_rows,
    ordered_frame,
)

PAPER = "InteRecAgent"
NOTEBOOK = "04_interecagent"
DATASET = "ml-100k"

#: The agents :func:`run` lets converse (the paper's Table 2 rows with an LLM); the one-turn
#: tasks add Random and Pop.
METHODS = ("InteRecAgent", "LLM only")

#: What :func:`rank` puts on shared candidates.
RANKERS = ("InteRecAgent",)

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`: the simulated users, one
#: row per conversation and per turn, Hit@K / AT@K (:func:`conversation_metrics`), one row
#: per user and method of each one-turn task, and their means (:func:`one_turn_metrics`).
TABLES = ("sessions", "conversations", "turns", "hits", "retrieval", "ranking", "one_turn")

#: Sizes per profile, read by notebook 04 and by :func:`run`: conversations, their most
#: turns, one-turn users, re-plans per turn, SASRec's most epochs, and the notebook's
#: ablations.
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"sessions": 2, "turns": 2, "one_turn": 2, "reflections": 1, "epochs": 1,
              "ablations": ["no reflection", "with profile memory"]},
    "default": {"sessions": 6, "turns": 2, "one_turn": 10, "reflections": 1, "epochs": 4,
                "ablations": ["no plan-first", "no demos", "no reflection",
                              "with profile memory"]},
    "paper": {"sessions": 1000, "turns": 5, "one_turn": 500, "reflections": 3, "epochs": 100,
              "ablations": ["no plan-first", "no demos", "no reflection"]},
}  # fmt: skip


def training(options: RunOptions) -> baselines.TrainConfig:
    """SASRec's training: ``options.training``, else the profile's epochs (stopping after 3)."""
    epochs = int(options.sizes(PROFILES)["epochs"])
    return options.training or baselines.TrainConfig(epochs=epochs, stopping_step=3)


@dataclass
class Bench:
    """What the experiment runs on, prepared once by :func:`prepare`.

    Attributes:
        config: The experiment's settings, every ``None`` filled in from the profile.
        agent: The agent's settings (``config.agent``).
        sim: The simulator's settings (``config.sim``).
        max_turns: Most turns per conversation, K (``config.max_turns``).
        split: The leave-one-out split (ratings >= 3).
        ctx: The tools' context: item table, ItemCF, SASRec as the preference ranker.
        sessions: The simulated users of the conversations.
        one_turn_users: The simulated users of the one-turn tasks.
        seconds: Wall time of the preparation, SASRec's training included.
    """

    config: ExperimentConfig
    agent: InteRecConfig
    sim: SimulatorConfig
    max_turns: int
    split: Split
    ctx: ToolContext
    sessions: SessionSet
    one_turn_users: SessionSet
    seconds: float


def prepare(
    dataset: Dataset, config: ExperimentConfig | None = None, options: RunOptions | None = None
) -> Bench:
    """The experiment's settings, split, tools and simulated users; no LLM call.

    Leave-one-out on ratings >= 3; SASRec (:func:`training`) trained on the split;
    :func:`build_context` on the known interactions; ``options.n_users`` conversation users
    (default: the profile's ``sessions``) seeded by ``config.seed`` and ``n_one_turn``
    one-turn users seeded by ``config.seed + 1`` (:func:`make_sessions`).
    """
    started = time.perf_counter()
    config = config or ExperimentConfig()
    options = options or RunOptions()
    sizes = options.sizes(PROFILES)
    agent = config.agent or InteRecConfig(max_reflections=sizes["reflections"], seed=config.seed)
    sim = config.sim or SimulatorConfig(seed=config.seed)
    max_turns = config.max_turns or int(sizes["turns"])
    n_one_turn = config.n_one_turn or int(sizes["one_turn"])
    config = replace(config, agent=agent, sim=sim, max_turns=max_turns, n_one_turn=n_one_turn)
    split = leave_one_out(dataset, min_rating=3)
    ranker = baselines.train_baseline("SASRec", split, training(options), progress=options.progress)
    ctx = build_context(dataset, split.history("test"), ranker=ranker, seed=config.seed)
    n_users = options.users(PROFILES, "sessions")
    sessions = make_sessions(split, dataset, n_users, seed=config.seed, table=ctx.table,
                             domain=agent.domain)  # fmt: skip
    one_turn_users = make_sessions(split, dataset, n_one_turn, seed=config.seed + 1,
                                   table=ctx.table, domain=agent.domain)  # fmt: skip
    seconds = time.perf_counter() - started
    return Bench(config, agent, sim, max_turns, split, ctx, sessions, one_turn_users, seconds)


def experiment(
    bench: Bench, options: RunOptions | None = None
) -> tuple[PaperRun, dict[str, ConversationRun]]:
    """The conversations and the one-turn tasks on a prepared :class:`Bench`.

    Each agent of ``options.methods`` (default: :data:`METHODS`) converses with every
    simulated user for at most ``bench.max_turns`` turns (:func:`run_sessions`; the first
    user's prompts are kept for a trace); Hit@K and AT@K by :func:`conversation_metrics`.
    Then the one-turn tasks (:func:`one_turn_retrieval`, :func:`one_turn_ranking` on the
    saved :func:`candidate_sets` of the split) for those agents, Random and Pop, summarised
    by :func:`one_turn_metrics`.

    Returns:
        The :class:`~recagents.protocol.PaperRun` (wall time: preparation included) with
        :data:`TABLES` and ``Hit@K/<method>/<rule>``, ``AT@K/<method>/<rule>`` (lower is
        better), ``Recall@5/<method>`` and ``NDCG/<method>`` (over all the candidates, not
        truncated; a target left out scores 0); and each agent's :class:`ConversationRun`.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    chosen = options.chosen_methods(PAPER, METHODS)
    client = options.resolved_client()
    seed, n_boot = bench.config.seed, options.n_boot
    own = RunLog()
    runs = {
        method: run_sessions(
            bench.sessions, bench.ctx, bench.agent, client, own, max_turns=bench.max_turns,
            method=method, sim=bench.sim, keep_prompts=bench.sessions.users[:1],
        )
        for method in chosen
    }  # fmt: skip
    conversations = pd.concat([r.sessions for r in runs.values()], ignore_index=True)
    hits = conversation_metrics(conversations, bench.max_turns, n_boot=n_boot, seed=seed)
    methods = (*chosen, "Random", "Pop")
    users, ctx, agent, sim = bench.one_turn_users, bench.ctx, bench.agent, bench.sim
    retrieval = one_turn_retrieval(users, ctx, agent, client, own, methods=methods, sim=sim)
    candidates = candidate_sets(bench.split, bench.config.n_negatives, seed=seed)
    ranking = one_turn_ranking(users, candidates, ctx, agent, client, own, methods=methods,
                               sim=sim, seed=seed)  # fmt: skip
    one_turn = pd.concat(
        [one_turn_metrics(retrieval, "recall", n_boot=n_boot, seed=seed),
         one_turn_metrics(ranking, "ndcg", n_boot=n_boot, seed=seed)],
        ignore_index=True,
    )  # fmt: skip
    options.record(own)
    tables = {
        "sessions": bench.sessions.frame(),
        "conversations": conversations,
        "turns": pd.concat([r.turns for r in runs.values()], ignore_index=True),
        "hits": hits,
        "retrieval": retrieval,
        "ranking": ranking,
        "one_turn": one_turn,
    }
    metrics = _headline(hits, one_turn, bench.max_turns)
    wall = bench.seconds + time.perf_counter() - started
    return PaperRun(PAPER, bench.config, tables, metrics, own, wall), runs


def run(
    dataset: Dataset,
    config: ExperimentConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """Notebook 04's experiment in one call: :func:`prepare`, then :func:`experiment`.

    Args:
        dataset: The dataset.
        config: The experiment's settings (default: the notebook's default parameters).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`): ``profile``
            sizes the run (:data:`PROFILES`), ``n_users`` the conversations, ``methods`` are
            agents of :data:`METHODS`, ``training`` and ``progress`` are SASRec's.

    Returns:
        :class:`~recagents.protocol.PaperRun`, as :func:`experiment` describes it.
    """
    result, _ = experiment(prepare(dataset, config, options), options)
    return result


def _headline(hits: pd.DataFrame, one_turn: pd.DataFrame, max_turns: int) -> pd.DataFrame:
    """``[metric, value, low, high, n]`` from the conversations' and one-turn summaries."""
    parts = [
        hits[["method", "rule", "n"]].assign(
            metric=metric, mean=hits[column], low=hits[f"{column}_low"],
            high=hits[f"{column}_high"],
        )
        for metric, column in ((f"Hit@{max_turns}", "hit"), (f"AT@{max_turns}", "at"))
    ]  # fmt: skip
    names = {"recall": "Recall@5", "ndcg": "NDCG"}  # one_turn_retrieval's k is 5
    return pd.concat(
        [metric_rows(pd.concat(parts, ignore_index=True), ("method", "rule")),
         metric_rows(one_turn.assign(metric=one_turn["metric"].map(names)), ("method",))],
        ignore_index=True,
    )  # fmt: skip


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
    task: RankTask, config: ExperimentConfig | None = None, options: RunOptions | None = None
) -> dict[str, Ranking]:
    """InteRecAgent in one-turn mode, ordering each user's shared candidates.

    SASRec trained on ``task.split`` (:func:`training`; cached, so the weights of any other
    run with the same settings) is the preference ranker of :func:`build_context` on
    ``task.dataset`` seeded by ``task.seed``; :func:`one_turn_ranking` orders
    ``task.candidates`` in their display order for sessions of the candidates' users. It
    reports the target's rank only, so the frame is :func:`target_rank_frame` (NDCG/HR
    exact; popularity of the top-k beyond the target not meaningful for this method). A
    failed plan or a direct answer is ``failed``; a target left out is placed at random
    (``missing="random"``, not the paper's zero).

    Args:
        task: The shared candidates.
        config: Only ``agent`` (default: the paper's, seeded by ``task.seed``) and ``sim``
            (default: the paper's, seed 0; it writes the one-turn request) are read.
        options: ``methods`` of :data:`RANKERS`, ``client``, ``log``, SASRec's ``training``
            (default: the profile's) and ``progress``.

    Returns:
        ``{"InteRecAgent": Ranking}``; its ``extra["one_turn"]`` is the one-turn table.
    """
    options = options or RunOptions()
    options.chosen_methods(PAPER, RANKERS)
    config = config or ExperimentConfig()
    agent = config.agent or InteRecConfig(seed=task.seed)
    started = time.perf_counter()
    tool = baselines.train_baseline("SASRec", task.split, training(options),
                                    progress=options.progress)  # fmt: skip
    ctx = build_context(task.dataset, task.split.history("test"), ranker=tool, seed=task.seed)
    users = sorted(task.candidates[USER].unique())
    sessions = make_sessions(task.split, task.dataset, users, table=ctx.table, domain=agent.domain)
    log = RunLog()
    table = one_turn_ranking(
        sessions, task.candidates, ctx, agent, options.resolved_client(), log, methods=RANKERS,
        sim=config.sim, seed=task.seed, missing="random",
    )  # fmt: skip
    options.record(log)
    ranks = {
        row[USER]: (None if pd.isna(row["rank"]) else int(row["rank"]))
        for row in table.to_dict("records")
    }
    frame = target_rank_frame(task.candidates, ranks, seed=task.seed)
    wall = time.perf_counter() - started
    status = table[[USER, "status"]].reset_index(drop=True)
    note = "target rank only; other candidates in display order"
    ranking = Ranking(PAPER, frame, status, log, wall, note, extra={"one_turn": table})
    return {PAPER: ranking}
