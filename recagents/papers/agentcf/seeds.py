"""AgentCF B+R against B over several seeds: a pooled paired comparison.

Why: the paper's claim that retrieval (B+R) helps over the self-description alone (B) is a
difference of a few NDCG points, far below what one small sample of users can show. Each seed
draws other users and their candidates (:func:`~recagents.papers.agentcf.pipeline.draw`: on
the CDs data from the release, with the paper's lists), trains them, and ranks the *same*
candidates with both variants, so the two are paired user by user; the differences of all
seeds are pooled into one mean with a paired bootstrap interval and the paired minimum
detectable effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.data.datasets import Dataset
from recagents.metrics import paired_min_detectable_effect
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.pipeline import run_subset
from recagents.papers.agentcf.reading import paired_interval


@dataclass(frozen=True)
class VariantSeedComparison:
    """One variant against another over seeds, paired user by user.

    Attributes:
        per_user: ``[seed, user_id, <base>, <better>, diff]`` (the metric per variant).
        per_seed: ``[seed, n, <base>, <better>, diff]``, the means of each seed.
        summary: One row: ``better, base, metric, diff, low, high, p_value, n, n_seeds, mde``
            (``p_value`` from the interval's own resamples, :func:`paired_interval`; ``mde`` is
            NaN when every user's difference is the same, e.g. all zero).
    """

    per_user: pd.DataFrame
    per_seed: pd.DataFrame
    summary: pd.DataFrame


def variants_over_seeds(
    dataset: Dataset,
    kind: Literal["dense", "sparse"],
    n_users: int,
    seeds: Sequence[int],
    config: AgentCFConfig,
    client: Any,
    better: str = "B+R",
    base: str = "B",
    metric: str = "ndcg@10",
    n_boot: int = 1000,
) -> VariantSeedComparison:
    """Train and rank on each seed's users; pool ``better - base`` per user over the seeds.

    Each seed is :func:`~recagents.papers.agentcf.pipeline.run_subset` drawn with that seed
    (negatives from ``config.candidate_pool``), ranking with ``AgentCF <base>`` and
    ``AgentCF <better>`` only; ``metric`` is an NDCG of
    :data:`~recagents.papers.agentcf.pipeline.KS`.

    Raises:
        ValueError: No seeds, or a repeated seed (it would count the same users twice).
    """
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and non-empty, got {list(seeds)}")
    frames = []
    for seed in seeds:
        methods = (f"AgentCF {base}", f"AgentCF {better}")
        part = run_subset(dataset, kind, n_users, config, client, methods, seed)
        scores = {
            variant: part.per_user[method].set_index(USER)[metric]
            for variant, method in zip((base, better), methods, strict=True)
        }
        frame = pd.DataFrame(scores).reset_index().assign(seed=seed)
        frames.append(frame)
    per_user = pd.concat(frames, ignore_index=True)
    per_user["diff"] = per_user[better] - per_user[base]
    per_user = per_user[["seed", USER, base, better, "diff"]]
    per_seed = per_user.groupby("seed", sort=False).agg(
        n=(USER, "size"), **{base: (base, "mean"), better: (better, "mean")}, diff=("diff", "mean")
    )
    a, b = per_user[better].to_numpy(), per_user[base].to_numpy()
    paired = paired_interval(a, b, n_boot=n_boot, seed=int(seeds[0]))  # p from the same resamples
    no_spread = np.ptp(a - b) == 0
    summary = pd.DataFrame(
        [
            {
                "better": better,
                "base": base,
                "metric": metric,
                "diff": paired.diff,
                "low": paired.low,
                "high": paired.high,
                "p_value": paired.p_value,
                "n": len(per_user),
                "n_seeds": len(seeds),
                "mde": float("nan") if no_spread else paired_min_detectable_effect(a, b),
            }
        ]
    )
    return VariantSeedComparison(per_user, per_seed.reset_index(), summary)
