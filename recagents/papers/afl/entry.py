"""AFL's entry points: the paper's experiment in one call, and its agents on shared candidates.

:func:`run` is the one entry point every paper has, of the same shape
(``run(dataset, config, options)`` -> :class:`~recagents.protocol.PaperRun`, the shared
arguments in one :class:`~recagents.protocol.RunOptions`): leave-one-out, 20 candidates per
sampled test user, the SASRec tool, the feedback loop, and HR@1 of the tool alone, the
single recommendation agent and the loop with 95% bootstrap intervals (notebook 03, sections
1-3). :func:`rank` is what the cross-paper comparison calls: the same agents on candidates
it is given, each framed by the pure :func:`afl_frame`. Everything here composes the
package's public functions; nothing changes their behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from recagents import baselines
from recagents.columns import ITEM, SCORE, USER
from recagents.data.datasets import (
    POSITION,
    Dataset,
    Split,
    candidate_sets,
    item_text,
    leave_one_out,
    subsample_users,
)
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunLog
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.evaluate import hit_rate_table, hits_by_round, predictions, stop_counts
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.samples import make_samples, recent_histories, tool_scores
from recagents.protocol import (
    PaperRun,
    Ranking,
    RunOptions,
    metric_rows,
    ordered_frame,
)

PAPER = "AFL"

#: The methods :func:`run` compares: the single recommendation agent (one round) and the loop.
METHODS = ("Rec Agent", "AFL")

#: Test users when :attr:`RunOptions.n_users` is ``None`` (notebook 03's default profile;
#: the paper: all 943).
DEFAULT_USERS = 16

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`.
TABLES = ("candidates", "scored", "rounds", "hits", "stops", "rankings")

#: Name of the tool model's own top pick in the headline metrics.
TOOL = "SASRec (tool alone)"


def run(
    dataset: Dataset,
    config: AFLConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """AFL's recommendation experiment in one call (the paper's Table 4): HR@1 of 20 candidates.

    Leave-one-out split; ``options.n_users`` test users (:func:`subsample_users`)
    with their target and ``n_candidates - 1`` saved negatives
    (:func:`recagents.data.datasets.candidate_sets`); SASRec trained on the split
    (:func:`recagents.baselines.train_baseline`) scores them after each user's recent
    history (:func:`tool_scores`, :func:`make_samples`); one :func:`feedback_loop` run up to
    ``config.max_rounds`` answers every smaller limit (:func:`hits_by_round`). All seeded by
    ``config.seed``.

    Args:
        dataset: The dataset.
        config: The paper's settings (default: the paper's).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`); here
            ``n_users`` defaults to :data:`DEFAULT_USERS`, ``methods`` are of :data:`METHODS`
            (without ``"AFL"`` the loop stops after round 1) and ``training`` and
            ``progress`` are SASRec's.

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and ``HR@1/<method>``.
    """
    started = time.perf_counter()
    config = config or AFLConfig()
    options = options or RunOptions()
    chosen = options.chosen_methods(PAPER, METHODS)
    client = options.resolved_client()
    split = leave_one_out(dataset)
    users = subsample_users(
        split, (DEFAULT_USERS if options.n_users is None else options.n_users), seed=config.seed
    )
    every = candidate_sets(split, config.n_candidates - 1, seed=config.seed, phase="test")
    candidates = every[every[USER].isin(set(users))].reset_index(drop=True)
    histories = recent_histories(split.history("test"), users, config.history_length)
    tool = baselines.train_baseline("SASRec", split, options.training, progress=options.progress)
    scored = tool_scores(tool, candidates, histories)
    samples = make_samples(scored, histories, config.focus_size)
    limit = config.max_rounds if "AFL" in chosen else 1
    own = RunLog()
    titles = item_text(dataset.items, with_genres=False).to_dict()
    rounds = feedback_loop(samples, titles, config, client, own, max_rounds=limit, phase="afl")
    options.record(own)
    hits = hits_by_round(rounds, limit)
    limits = {"Rec Agent": 1, "AFL": limit}
    values = {TOOL: np.array([s.prior == s.target for s in samples], dtype=float)}
    for name in chosen:
        values[name] = hits.loc[hits["limit"] == limits[name], "hit"].to_numpy()
    summary = hit_rate_table(values, n_boot=options.n_boot, seed=config.seed)
    rankings = pd.concat(
        [afl_frame(rounds, scored, limits[name]).assign(method=name) for name in chosen],
        ignore_index=True,
    )
    tables = {
        "candidates": candidates, "scored": scored, "rounds": rounds, "hits": hits,
        "stops": stop_counts(rounds).rename_axis("stop").reset_index(name="dialogues"),
        "rankings": rankings,
    }  # fmt: skip
    wall = time.perf_counter() - started
    return PaperRun(PAPER, config, tables, metric_rows(summary, ("method",)), own, wall)


# --------------------------------------------------------------------------- shared candidates


def afl_frame(rounds: pd.DataFrame, scored: pd.DataFrame, limit: int) -> pd.DataFrame:
    """AFL's ranking of every candidate: its proposal first, then the tool model's order.

    AFL proposes one item per round; the prediction under round limit ``limit`` is the last
    usable proposal (:func:`predictions`). The frame puts it at rank 1 and the other
    candidates after it in the tool model's order (score descending, unscored items last,
    ties by display position). A dialogue without a usable proposal is ranked by the tool
    model alone.

    Args:
        rounds: :func:`feedback_loop` output.
        scored: ``[user_id, item_id, position, score]`` (:func:`tool_scores`).
        limit: Round limit (1: the single recommendation agent).

    Returns:
        ``[user_id, item_id, score, rank]``, score ``n - rank + 1``.
    """
    chosen = predictions(rounds, limit).set_index(USER)[ITEM].to_dict()
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
        parts.append(ordered_frame(user, order))
    return pd.concat(parts, ignore_index=True)


def _status(rounds: pd.DataFrame, limit: int, users: Sequence[str]) -> pd.DataFrame:
    """``complete`` where a usable proposal exists under ``limit``, else ``failed``."""
    chosen = predictions(rounds, limit).set_index(USER)[ITEM]
    status = []
    for user in users:
        pick = chosen.get(user)
        status.append("failed" if pick is None or pd.isna(pick) else "complete")
    return pd.DataFrame({USER: list(users), "status": status})


def rank(
    dataset: Dataset,
    split: Split,
    candidates: pd.DataFrame,
    config: AFLConfig | None = None,
    *,
    tool: Any,
    limits: Mapping[str, int] | None = None,
    client: LLMClient | None = None,
) -> dict[str, Ranking]:
    """The AFL recommendation agent alone and in its feedback loop, on given candidates.

    The tool model (a trained SASRec :class:`~recagents.baselines.Baseline` on ``split``)
    scores the candidates after each user's last ``history_length`` items
    (:func:`tool_scores`, :func:`make_samples`); each entry of ``limits`` is one
    :func:`feedback_loop` run (limit 1 = the single agent, whose calls are its round-1
    proposals only). The frame is :func:`afl_frame`. A failed proposal is ``failed`` in the
    status (ranked by the tool model) and counted.

    Args:
        dataset: The full dataset (titles).
        split: The shared split (histories before the test item).
        candidates: ``[user_id, item_id, label, position]``, the same number per user.
        config: AFL settings (default: the paper's, with as many candidates as shown).
        tool: The trained sequential tool model.
        limits: Method name -> round limit (default: single agent 1, loop ``max_rounds``).
        client: LLM client.

    Returns:
        Method name -> its ranking.

    Raises:
        ValueError: ``config.n_candidates`` differs from the candidates shown per user.
    """
    client = client or get_client()
    sizes = candidates.groupby(USER).size()
    shown = int(sizes.max())
    config = config or AFLConfig(n_candidates=shown)
    if config.n_candidates != shown or sizes.nunique() != 1:
        raise ValueError(
            f"AFLConfig.n_candidates={config.n_candidates} but the protocol shows "
            f"{sorted(set(sizes.tolist()))} candidates per user"
        )
    limits = limits or {"AFL single agent": 1, "AFL loop": config.max_rounds}
    users = sorted(candidates[USER].unique())
    started = time.perf_counter()
    histories = recent_histories(split.history("test"), users, config.history_length)
    scored = tool_scores(tool, candidates, histories)
    samples = make_samples(scored, histories, config.focus_size)
    tool_wall = time.perf_counter() - started
    titles = item_text(dataset.items, with_genres=False).to_dict()
    rankings = {}
    for name, limit in limits.items():
        began = time.perf_counter()
        log = RunLog()
        rounds = feedback_loop(samples, titles, config, client, log, max_rounds=limit, phase=name)
        frame = afl_frame(rounds, scored, limit)
        wall = tool_wall + time.perf_counter() - began
        rankings[name] = Ranking(
            name, frame, _status(rounds, limit, users), log, wall,
            note="proposal at rank 1, the tool model's order after it", extra={"rounds": rounds},
        )  # fmt: skip
    return rankings
