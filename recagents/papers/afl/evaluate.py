"""AFL's metrics: HR@1 by round limit, how dialogues ended, and user-simulation accuracy.

A loop with limit *L* is the same dialogue stopped after round *L*, so one run at the
largest limit answers every smaller one (:func:`predictions`, :func:`hits_by_round`); the
user simulation is scored per agent and ratio beside an "always yes" floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION
from recagents.metrics import bootstrap_ci, classification_ci
from recagents.papers.afl.config import AGENT, RATIO, ROUND, STOPS


def predictions(rounds: pd.DataFrame, limit: int) -> pd.DataFrame:
    """Each dialogue's prediction under round limit ``limit``: its last usable proposal.

    A limit-*L* loop is the same dialogue stopped after round *L*, so one run at the largest
    limit answers every smaller one. A dialogue with no usable proposal predicts nothing.

    Returns:
        ``[user_id, item_id, position, hit]`` (``item_id`` ``None`` and ``hit`` 0 when none).
    """
    upto = rounds[(rounds[ROUND] <= limit)]
    rows: list[tuple[Any, Any, int | None, int]] = []
    for user, group in upto.groupby(USER, sort=False):
        usable = group[group[ITEM].notna()]
        if usable.empty:
            rows.append((user, None, None, 0))
        else:
            last = usable.iloc[-1]
            rows.append((user, last[ITEM], int(last[POSITION]), int(last[LABEL])))
    return pd.DataFrame(rows, columns=[USER, ITEM, POSITION, "hit"])


def hits_by_round(rounds: pd.DataFrame, max_rounds: int) -> pd.DataFrame:
    """HR@1 hits per user for every round limit 1..``max_rounds``: ``[user_id, limit, hit]``."""
    parts = [
        predictions(rounds, limit).assign(limit=limit)[[USER, "limit", "hit"]]
        for limit in range(1, max_rounds + 1)
    ]
    return pd.concat(parts, ignore_index=True)


def hit_rate_table(
    hits: Mapping[str, ArrayLike], n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """HR@1 with a bootstrap interval per method: ``[method, metric, mean, low, high, n]``."""
    rows = []
    for method, given in hits.items():
        values = np.asarray(given, dtype=float)
        mean, low, high = bootstrap_ci(values, n_boot=n_boot, ci=ci, seed=seed)
        rows.append(
            {"method": method, "metric": "HR@1", "mean": mean, "low": low, "high": high,
             "n": len(values)}
        )  # fmt: skip
    return pd.DataFrame(rows)


def stop_counts(rounds: pd.DataFrame) -> pd.Series:
    """How the dialogues ended (accepted, at the limit, or on an unusable reply)."""
    ended = rounds["stop"].dropna()
    return ended.value_counts().reindex(list(STOPS), fill_value=0)


def simulation_metrics(
    judgements: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    failures_as_wrong: bool = False,
    resample: str = "judgements",
) -> pd.DataFrame:
    """Accuracy, precision, recall and F1 per agent and ratio, with bootstrap intervals.

    Micro-averaged over all judgements of a ratio. Unusable replies are left out and
    counted in ``unanswered``; with ``failures_as_wrong`` they count as the wrong label
    instead (the paper's code, after its retries).

    ``resample="judgements"`` resamples single judgements, as if independent;
    ``"users"`` resamples users with all of their judgements (:func:`user_bootstrap`), the
    independent unit: one user's judgements share a history and a prompt, so they are not
    independent, and an interval over few users is honest about how little it knows.

    Returns:
        ``[agent, ratio, metric, mean, low, high, n, unanswered]``; ``n`` counts the
        resampled units (judgements, or users; then a ``judgements`` column is added).
    """
    if resample not in ("judgements", "users"):
        raise ValueError(f"resample must be 'judgements' or 'users', got {resample!r}")
    rows = []
    for (agent, ratio), group in judgements.groupby([AGENT, RATIO], sort=False):
        missing = group["predicted"].isna()
        if failures_as_wrong:
            predicted = group["predicted"].where(~missing, group[LABEL] == 0).astype(bool)
            labels = group[LABEL]
        else:
            predicted = group.loc[~missing, "predicted"].astype(bool)
            labels = group.loc[~missing, LABEL]
        if len(labels) == 0:
            continue
        if resample == "users":
            users = group.loc[labels.index, USER].to_numpy()
            table = user_bootstrap(
                labels.to_numpy(), predicted.to_numpy(), users, n_boot=n_boot, seed=seed
            )
        else:
            table = classification_ci(
                labels.to_numpy(), predicted.to_numpy(), n_boot=n_boot, seed=seed
            )
        rows.append(table.assign(agent=agent, ratio=ratio, unanswered=int(missing.sum())))
    columns = [AGENT, RATIO, "metric", "mean", "low", "high", "n", "unanswered"]
    if resample == "users":
        columns.append("judgements")
    if not rows:
        return pd.DataFrame(columns=columns)
    return pd.concat(rows, ignore_index=True)[columns]


def user_bootstrap(
    labels: ArrayLike,
    predicted: ArrayLike,
    users: ArrayLike,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> pd.DataFrame:
    """Classification metrics with a percentile bootstrap over users (the cluster bootstrap).

    Each resample draws as many users as there are, with replacement, and pools all
    judgements of the drawn users (micro-average, as the point estimate). With one user the
    interval has no spread; with two it spans what the two users alone give.

    Returns:
        ``[metric, mean, low, high, n, judgements]``, ``n`` the number of users.
    """
    t = np.asarray(labels).astype(bool)
    p = np.asarray(predicted).astype(bool)
    codes, unique = pd.factorize(pd.Series(np.asarray(users)), sort=True)
    n_users = len(unique)
    # Per user: true positives, false positives, false negatives, correct, judgements.
    counts = np.zeros((n_users, 5))
    np.add.at(counts, codes, np.column_stack([t & p, ~t & p, t & ~p, t == p, np.ones_like(t)]))

    def rates(c: np.ndarray) -> dict[str, np.ndarray]:
        tp, fp, fn, correct, total = (c[..., k] for k in range(5))

        def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
            return np.divide(num, den, out=np.zeros(np.shape(num)), where=den > 0)

        return {"accuracy": ratio(correct, total), "precision": ratio(tp, tp + fp),
                "recall": ratio(tp, tp + fn), "f1": ratio(2 * tp, 2 * tp + fp + fn)}  # fmt: skip

    point = rates(counts.sum(axis=0))
    drawn = np.random.default_rng(seed).integers(0, n_users, size=(n_boot, n_users))
    boot = rates(counts[drawn].sum(axis=1))
    alpha = (1.0 - ci) / 2.0
    rows = []
    for name in ("accuracy", "precision", "recall", "f1"):
        low, high = np.quantile(boot[name], [alpha, 1.0 - alpha])
        rows.append({"metric": name, "mean": float(point[name]), "low": float(low),
                     "high": float(high), "n": n_users, "judgements": int(t.size)})  # fmt: skip
    return pd.DataFrame(rows)


def always_yes_metrics(
    judgements: pd.DataFrame, n_boot: int = 1000, seed: int = 0, resample: str = "judgements"
) -> pd.DataFrame:
    """The metrics of a simulator that likes everything, per ratio: the floor to beat.

    Recall is 1 and precision the share of positives (0.5, 0.25, 0.1 at 1:1, 1:3, 1:9), so
    F1 is 0.67, 0.4, 0.18 without any judgement; an agent near these numbers says yes to
    nearly everything. Same columns as :func:`simulation_metrics`, agent ``Always yes``.
    """
    one_agent = judgements[judgements[AGENT] == judgements[AGENT].iloc[0]]
    return simulation_metrics(
        one_agent.assign(**{AGENT: "Always yes"}, predicted=True),
        n_boot=n_boot,
        seed=seed,
        resample=resample,
    )


def relative_gain(better: Sequence[float], base: Sequence[float]) -> float:
    """Mean relative gain (%) of ``better`` over ``base``, pair by pair.

    The paper's headline numbers are such averages (+11.52%, +21.12%); how it averages is
    not stated, so this is the plain mean of the per-pair relative gains, leaving out pairs
    whose base is 0 (``nan`` when none is left).
    """
    a, b = np.asarray(better, dtype=float), np.asarray(base, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"better and base differ in length: {a.size} vs {b.size}")
    keep = b > 0
    if not keep.any():
        return float("nan")
    return float(np.mean((a[keep] - b[keep]) / b[keep]) * 100)
