"""The leaderboard: NDCG@k and HR@k of every method, with paired tests to a reference.

:func:`leaderboard` scores each method's frame against the held-out items, gives bootstrap
intervals (the same users resampled for every method) and the paired difference of each
method to the reference (by default the best classic baseline of
:data:`~recagents.compare.protocol.CLASSIC`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from recagents.compare.protocol import CLASSIC
from recagents.metrics import compare_to_reference, ranking_metrics, summarize_methods


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
