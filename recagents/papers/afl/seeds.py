"""AFL against the single recommendation agent over several seeds: a pooled paired comparison.

Why: one seed's sample is small, and its HR@1 difference is mostly noise; the paper's gain on
LastFM (+0.057 HR@1) needs hundreds of paired samples to show. Each seed draws other test
users and other candidates (:func:`seeded_samples`); on each sample the single agent
("Rec Agent") is AFL's own dialogue stopped after round 1 (:func:`~recagents.papers.afl.
evaluate.predictions` at limit 1), so the two are paired sample by sample. The per-sample
differences of all seeds are pooled (:func:`paired_summary`) into one mean with a paired
bootstrap interval and the paired minimum detectable effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.data import datasets
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.metrics import paired_bootstrap, paired_min_detectable_effect
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.evaluate import predictions
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.samples import Sample, all_test_samples

SEED = "seed"


def seeded_samples(
    split: Any, tool: Any, seed: int, n_samples: int, config: AFLConfig
) -> list[Sample]:
    """The samples one seed draws: its test users and its candidates, scored by the tool.

    The same steps as AFL's run (:func:`~recagents.papers.afl.entry.prepare`: every test
    user's candidates scored, then the seed's users kept), so the run's own seed gives the
    very samples (and prompts, hence cached replies) of its main run.
    """
    _, every = all_test_samples(split, tool, config, seed)
    users = set(datasets.subsample_users(split, n_samples, seed=seed))
    return [s for s in every if s.user in users]


@dataclass(frozen=True)
class SeedComparison:
    """AFL against the single agent over seeds.

    Attributes:
        per_sample: ``[seed, user_id, single, afl, diff]``, one row per (seed, sample).
        per_seed: ``[seed, n, single, afl, diff]``, the means of each seed.
        summary: ``diff, low, high, p_value`` (paired bootstrap over the pooled samples),
            ``n`` (pairs), ``n_seeds`` and ``mde`` (the paired minimum detectable effect).
    """

    per_sample: pd.DataFrame
    per_seed: pd.DataFrame
    summary: dict[str, float]


def paired_summary(
    per_sample: pd.DataFrame, n_boot: int = 1000, seed: int = 0
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per-seed means and the pooled paired comparison of ``afl`` against ``single``.

    Pooling treats every (seed, sample) pair as one unit; the same user drawn by two seeds
    counts twice (with other candidates, so it is another task).

    Args:
        per_sample: ``[seed, user_id, single, afl]`` (hits, 0 or 1, or any paired values).
        n_boot: Bootstrap resamples.
        seed: Seed of the bootstrap.

    Returns:
        ``(per_seed, summary)`` as in :class:`SeedComparison`.
    """
    if per_sample.empty:
        raise ValueError("paired_summary: no samples")
    frame = per_sample.assign(diff=per_sample["afl"] - per_sample["single"])
    per_seed = (
        frame.groupby(SEED, sort=True)
        .agg(
            n=("diff", "size"),
            single=("single", "mean"),
            afl=("afl", "mean"),
            diff=("diff", "mean"),
        )
        .reset_index()
    )
    result = paired_bootstrap(frame["afl"], frame["single"], n_boot=n_boot, seed=seed)
    mde = paired_min_detectable_effect(frame["afl"], frame["single"])
    summary = {
        "diff": float(result.diff),
        "low": float(result.low),
        "high": float(result.high),
        "p_value": float(result.p_value),
        "n": int(len(frame)),
        "n_seeds": int(frame[SEED].nunique()),
        "mde": float(mde),
    }
    return per_seed, summary


def paired_over_seeds(
    samples_by_seed: Mapping[int, Sequence[Sample]],
    titles: dict[str, str],
    config: AFLConfig,
    client: LLMClient,
    log: RunLog,
    max_rounds: int | None = None,
    n_boot: int = 1000,
    boot_seed: int = 0,
) -> SeedComparison:
    """Run AFL on every seed's samples and compare it, sample by sample, with the single agent.

    The single agent is the same dialogue stopped after round 1 (as in notebook 03's Table
    4), so one :func:`~recagents.papers.afl.loop.feedback_loop` per seed answers both; its
    calls are accounted in ``log`` under phase ``afl seed <seed>``.
    """
    limit = config.max_rounds if max_rounds is None else max_rounds
    parts = []
    for seed, samples in samples_by_seed.items():
        rounds = feedback_loop(samples, titles, config, client, log, max_rounds=limit,
                               phase=f"afl seed {seed}")  # fmt: skip
        single = predictions(rounds, 1).set_index(USER)["hit"]
        loop = predictions(rounds, limit).set_index(USER)["hit"]
        users = [s.user for s in samples]
        parts.append(pd.DataFrame({SEED: seed, USER: users,
                                   "single": single.reindex(users).to_numpy(dtype=float),
                                   "afl": loop.reindex(users).to_numpy(dtype=float)}))  # fmt: skip
    per_sample = pd.concat(parts, ignore_index=True)
    per_seed, summary = paired_summary(per_sample, n_boot=n_boot, seed=boot_seed)
    per_sample = per_sample.assign(diff=per_sample["afl"] - per_sample["single"])
    return SeedComparison(per_sample, per_seed, summary)


def seeds_text(
    summary: Mapping[str, float],
    model: str,
    paper_diff: float | None = None,
    paper_source: str = "",
    rerun_diff: float | None = None,
    rerun_source: str = "",
) -> str:
    """One generated paragraph: does AFL's gain over the single agent survive the seeds?

    Every statement is computed from ``summary``; the paper's difference is compared only
    when given (the caller passes it only when it ran on the paper's dataset).
    """
    diff, low, high, n = summary["diff"], summary["low"], summary["high"], int(summary["n"])
    mde = summary["mde"]
    spread = f"no spread at n = {n}" if np.isclose(low, high) else f"[{low:+.3f}, {high:+.3f}]"
    head = (
        f"**AFL − Rec Agent over {int(summary['n_seeds'])} seeds** ({model}, n={n} paired "
        f"samples): {diff:+.3f} HR@1, {spread}."
    )
    if low > 0:
        verdict = "A gain survives: the whole interval lies above 0."
    elif high < 0:
        verdict = "The loop loses: the whole interval lies below 0."
    elif low == high == 0:
        verdict = (
            "No gain survives: the two methods predicted the same item on every sample "
            "(a zero difference everywhere, not a measured null effect)."
        )
    else:
        verdict = "No gain survives: the interval contains 0."
    mde_text = (
        f"The paired test could detect a true difference of {mde:.3f} at this n."
        if np.isfinite(mde) and mde > 0
        else "With no spread in the differences, the paired MDE is undefined here; "
        "read the interval, not a detectable effect."
    )
    parts = [head, verdict, mde_text]
    if paper_diff is not None:
        where = "inside" if low <= paper_diff <= high else "outside"
        parts.append(
            f"The paper's gain is {paper_diff:+.3f} ({paper_source}), {where} our interval."
        )
        if np.isfinite(mde) and mde > 0 and abs(paper_diff) < mde:
            parts.append("It is smaller than our detectable effect: this n cannot decide it.")
        if rerun_diff is not None:
            parts.append(f"The independent re-run found {rerun_diff:+.3f} ({rerun_source}).")
    else:
        parts.append("The paper has no value for this dataset, so ours is not compared with one.")
    return " ".join(parts)
