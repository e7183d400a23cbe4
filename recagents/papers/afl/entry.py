"""AFL's entry points: the paper's experiment in one call, and its agents on shared candidates.

:func:`run` is notebook 03's headline experiment (sections 1-3): leave-one-out, 20 candidates
per test user, the SASRec tool, the feedback loop, and HR@1 of the tool alone, the single
recommendation agent and the loop with 95% bootstrap intervals. It is two steps the notebook
calls in the same order, with its teaching cells between them: :func:`prepare` (split,
candidates, tool, samples) and :func:`run_loop` (the loop and its numbers). :func:`rank` is
what the cross-paper comparison calls: the same agents on candidates it is given, each framed
by the pure :func:`afl_frame`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagents import baselines
from recagents.columns import ITEM, SCORE, USER
from recagents.data.datasets import (
    POSITION,
    Dataset,
    Split,
    item_text,
    leave_one_out,
    subsample_users,
)
from recagents.llm.runlog import RunLog
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.evaluate import hit_rate_table, hits_by_round, predictions, stop_counts
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.samples import Sample, all_test_samples, scored_samples
from recagents.protocol import PaperRun, Ranking, RankTask, RunOptions, metric_rows, ordered_frame

PAPER = "AFL"
NOTEBOOK = "03_afl"
DATASET = "ml-100k"

#: The methods :func:`run` compares: the single recommendation agent (one round) and the loop.
METHODS = ("Rec Agent", "AFL")

#: What :func:`rank` puts on shared candidates: round limit 1, and ``config.max_rounds``.
RANKERS = ("AFL single agent", "AFL loop")

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`.
TABLES = ("candidates", "scored", "rounds", "hits", "stops", "rankings")

#: Name of the tool model's own top pick in the headline metrics.
TOOL = "SASRec (tool alone)"

#: Sizes per profile, read by notebook 03 and by :func:`run`: test users (``n_test``), users
#: of the user simulation, round limit, simulation ratios, nested negatives, SASRec epochs,
#: the scripted demonstration's round limit, seeds of section 3c, released LastFM samples.
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"n_test": 3, "sim_users": 1, "rounds": 2, "ratios": [[1, 1]], "nest": 1,
              "epochs": 1, "demo_rounds": 3, "seeds": 2, "lastfm": 3},
    "default": {"n_test": 24, "sim_users": 2, "rounds": 5, "ratios": [[1, 1], [1, 3], [1, 9]],
                "nest": 1, "epochs": 4, "demo_rounds": 5, "seeds": 2, "lastfm": 24},
    "paper": {"n_test": 943, "sim_users": 60, "rounds": 5, "ratios": [[1, 1], [1, 3], [1, 9]],
              "nest": 0, "epochs": 100, "demo_rounds": 5, "seeds": 5, "lastfm": -1},
}  # fmt: skip


def default_config(dataset: Dataset, options: RunOptions | None = None) -> AFLConfig:
    """The settings notebook 03 builds from its default parameters at ``options.profile``.

    The paper's :class:`AFLConfig` with the profile's round limit, simulation ratios and
    nesting, and the dataset's item noun.
    """
    sizes = (options or RunOptions()).sizes(PROFILES)
    return AFLConfig(
        max_rounds=sizes["rounds"],
        ratios=tuple((int(p), int(n)) for p, n in sizes["ratios"]),
        nest_negatives=bool(sizes["nest"]),
        domain=dataset.domain,
    )


def tool_training(options: RunOptions) -> baselines.TrainConfig:
    """SASRec's training: ``options.training``, else the profile's epochs, early-stopped."""
    epochs = options.sizes(PROFILES)["epochs"]
    return options.training or baselines.TrainConfig(epochs=epochs, stopping_step=3)


@dataclass(frozen=True)
class Prepared:
    """What the loop runs on: :func:`prepare`'s output.

    Attributes:
        split: The leave-one-out split.
        titles: Item id -> the text shown in prompts.
        tool: SASRec trained on the split.
        every_sample: One sample per test user (the tool's HR@1 on all of them needs no LLM).
        samples: The sampled test users' samples, in user order.
        candidates: ``[user_id, item_id, label, position]`` of the sampled users.
        scored: ``candidates`` with the tool's ``score``.
        wall_seconds: Wall time of the preparation, training included.
    """

    split: Split
    titles: dict[str, str]
    tool: baselines.Baseline
    every_sample: list[Sample]
    samples: list[Sample]
    candidates: pd.DataFrame
    scored: pd.DataFrame
    wall_seconds: float


def prepare(dataset: Dataset, config: AFLConfig, options: RunOptions | None = None) -> Prepared:
    """Step 1 of :func:`run`: the split, the candidates, the SASRec tool and the samples.

    Leave-one-out split; ``config.n_candidates`` candidates for every test user, drawn and
    saved with ``config.seed``; SASRec trained on the split (``options.training``, else the
    profile's) scores every test user's candidates after their recent history; the samples
    are those of ``options.n_users`` test users (default: the profile's ``n_test``) drawn
    with ``config.seed``.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    split = leave_one_out(dataset)
    users = set(subsample_users(split, options.users(PROFILES, "n_test"), seed=config.seed))
    training = tool_training(options)
    tool = baselines.train_baseline("SASRec", split, training, progress=options.progress)
    scored, every = all_test_samples(split, tool, config, config.seed)
    scored = scored[scored[USER].isin(users)].reset_index(drop=True)
    titles = item_text(dataset.items, with_genres=False).to_dict()
    return Prepared(
        split, titles, tool, every, [s for s in every if s.user in users],
        scored.drop(columns=SCORE), scored, time.perf_counter() - started,
    )  # fmt: skip


def run_loop(prepared: Prepared, config: AFLConfig, options: RunOptions | None = None) -> PaperRun:
    """Step 2 of :func:`run`: the feedback loop on the samples, and HR@1 of each method.

    One :func:`feedback_loop` run up to ``config.max_rounds`` (phase ``afl``, every user's
    prompts kept) answers every smaller limit (:func:`hits_by_round`); limit 1 is the single
    recommendation agent. Without ``"AFL"`` in ``options.methods`` the loop stops after
    round 1. Intervals are seeded with ``config.seed``.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    chosen = options.chosen_methods(PAPER, METHODS)
    samples = prepared.samples
    limit = config.max_rounds if "AFL" in chosen else 1
    own = RunLog()
    rounds = feedback_loop(
        samples, prepared.titles, config, options.resolved_client(), own, max_rounds=limit,
        phase="afl", keep_prompts=[s.user for s in samples],
    )  # fmt: skip
    options.record(own)
    hits = hits_by_round(rounds, limit)
    limits = {"Rec Agent": 1, "AFL": limit}
    values = {TOOL: np.array([s.prior == s.target for s in samples], dtype=float)}
    for name in chosen:
        values[name] = hits.loc[hits["limit"] == limits[name], "hit"].to_numpy()
    summary = hit_rate_table(values, n_boot=options.n_boot, seed=config.seed)
    rankings = pd.concat(
        [afl_frame(rounds, prepared.scored, limits[n]).assign(method=n) for n in chosen],
        ignore_index=True,
    )
    tables = {
        "candidates": prepared.candidates, "scored": prepared.scored, "rounds": rounds,
        "hits": hits,
        "stops": stop_counts(rounds).rename_axis("stop").reset_index(name="dialogues"),
        "rankings": rankings,
    }  # fmt: skip
    wall = prepared.wall_seconds + time.perf_counter() - started
    return PaperRun(PAPER, config, tables, metric_rows(summary, ("method",)), own, wall)


def run(
    dataset: Dataset, config: AFLConfig | None = None, options: RunOptions | None = None
) -> PaperRun:
    """AFL's recommendation experiment (the paper's Table 4): HR@1 over 20 candidates.

    :func:`prepare` then :func:`run_loop`, exactly as notebook 03 runs them.

    Args:
        dataset: The dataset.
        config: AFL's settings (default: :func:`default_config`, the notebook's).
        options: The shared arguments; ``n_users`` defaults to the profile's ``n_test``,
            ``methods`` are of :data:`METHODS`, ``training`` and ``progress`` are SASRec's.

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and ``HR@1/<method>``
        (``HR@1/SASRec (tool alone)``, ``HR@1/Rec Agent``, ``HR@1/AFL``).
    """
    config = config or default_config(dataset, options)
    return run_loop(prepare(dataset, config, options), config, options)


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
    task: RankTask, config: AFLConfig | None = None, options: RunOptions | None = None
) -> dict[str, Ranking]:
    """The AFL recommendation agent alone and in its feedback loop, on given candidates.

    SASRec, trained on ``task.split`` with :func:`tool_training` (cached: the same weights for
    every caller), scores the candidates after each user's last ``history_length`` items
    (:func:`scored_samples`). ``AFL single agent`` is one :func:`feedback_loop` run with
    round limit 1 (its calls are round-1 proposals only), ``AFL loop`` another with
    ``config.max_rounds``; each is framed by :func:`afl_frame`. A failed proposal is
    ``failed`` in the status (ranked by the tool model) and counted.

    Args:
        task: The shared candidates (the same number per user).
        config: AFL settings (default: the paper's, with as many candidates as shown, the
            profile's round limit and the dataset's item noun).
        options: ``methods`` of :data:`RANKERS`, ``client``, ``training``, ``profile``.

    Returns:
        Method name -> its ranking; its wall time includes the tool's training (or loading).

    Raises:
        ValueError: ``config.n_candidates`` differs from the candidates shown per user.
    """
    options = options or RunOptions()
    chosen = options.chosen_methods(PAPER, RANKERS)
    sizes = task.candidates.groupby(USER).size()
    shown = int(sizes.max())
    config = config or AFLConfig(
        n_candidates=shown, max_rounds=options.sizes(PROFILES)["rounds"],
        domain=task.dataset.domain,
    )  # fmt: skip
    if config.n_candidates != shown or sizes.nunique() != 1:
        raise ValueError(
            f"AFLConfig.n_candidates={config.n_candidates} but the protocol shows "
            f"{sorted(set(sizes.tolist()))} candidates per user"
        )
    limits = {"AFL single agent": 1, "AFL loop": config.max_rounds}
    client = options.resolved_client()
    started = time.perf_counter()
    training = tool_training(options)
    tool = baselines.train_baseline("SASRec", task.split, training, progress=options.progress)
    scored, samples = scored_samples(tool, task.split, task.candidates, config)
    tool_wall = time.perf_counter() - started
    titles = item_text(task.dataset.items, with_genres=False).to_dict()
    users = [s.user for s in samples]
    rankings = {}
    for name in chosen:
        began, limit = time.perf_counter(), limits[name]
        log = RunLog()
        rounds = feedback_loop(samples, titles, config, client, log, max_rounds=limit, phase=name)
        options.record(log)
        wall = tool_wall + time.perf_counter() - began
        rankings[name] = Ranking(
            name, afl_frame(rounds, scored, limit), _status(rounds, limit, users), log, wall,
            note="proposal at rank 1, the tool model's order after it", extra={"rounds": rounds},
        )  # fmt: skip
    return rankings
