"""Ranking and classification metrics with per-user values and bootstrap confidence intervals.

Every recommender in the package returns one long frame ``[user_id, item_id, score, rank]``
(rank 1 = best). :func:`ranking_metrics` scores such a frame against a truth frame
``[user_id, item_id]`` and returns one row per truth user, so that :func:`summarize`,
:func:`bootstrap_ci` and :func:`paired_bootstrap` can attach uncertainty to the means.

All ranking metrics use binary relevance. They agree with RecBole's ``Hit``, ``NDCG``,
``Recall`` and ``Precision`` at every cutoff. RecBole's ``MRR@K`` is truncated at K, while
``mrr`` here is taken over the full ranked list (it equals RecBole's value at K = list length).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from recagents.columns import ITEM, RANK, SCORE, USER

RANKING_METRICS: tuple[str, ...] = ("hr", "ndcg", "mrr", "recall", "precision")
"""Metric names understood by :func:`ranking_metrics`."""

CLASSIFICATION_METRICS: tuple[str, ...] = ("accuracy", "precision", "recall", "f1")

_Stat = Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]]
"""Maps an index matrix (resamples x n) to one statistic (or one row of them) per resample."""

# Largest number of random indices drawn at once by the bootstrap helpers (bounds memory).
_BOOT_CHUNK_CELLS = 4_000_000


# --------------------------------------------------------------------------- validation


def _require_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; it has {list(frame.columns)}")


def _validated_ranks(ranked: pd.DataFrame) -> npt.NDArray[np.int64]:
    """Return the rank column as int64 after checking it holds integers >= 1."""
    ranks = ranked[RANK]
    if pd.api.types.is_bool_dtype(ranks) or not pd.api.types.is_numeric_dtype(ranks):
        raise ValueError(f"ranked[{RANK!r}] must hold integers, got dtype {ranks.dtype}")
    values = ranks.to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isnan(values).any():
        raise ValueError(f"ranked[{RANK!r}] contains missing values")
    if not pd.api.types.is_integer_dtype(ranks) and not np.all(values == np.round(values)):
        raise ValueError(f"ranked[{RANK!r}] must hold integers, found non-integral values")
    if (values < 1).any():
        raise ValueError(
            f"ranked[{RANK!r}] must be >= 1 (1 = best), found minimum {values.min():g}"
        )
    return values.astype(np.int64)


def _validate_ks(ks: Iterable[int]) -> list[int]:
    out: list[int] = []
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"every cutoff in ks must be an integer >= 1, got {k!r}")
        if int(k) not in out:
            out.append(int(k))
    return out


def _as_float_array(values: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    return arr


def _check_boot_args(n_boot: int, ci: float) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must lie strictly between 0 and 1, got {ci!r}")


def _as_binary(values: npt.ArrayLike, name: str) -> npt.NDArray[np.bool_]:
    arr = np.asarray(values).ravel()
    if arr.dtype == np.bool_:
        return arr
    if arr.size and not np.isin(arr, [0, 1]).all():
        bad = arr[~np.isin(arr, [0, 1])][:5]
        raise ValueError(f"{name} must be binary (True/False or 1/0), found e.g. {bad.tolist()}")
    return arr.astype(bool)


# --------------------------------------------------------------------------- ranking


def rank_by_score(
    frame: pd.DataFrame, ascending: bool = False, seed: int | None = None
) -> pd.DataFrame:
    """Rank each user's items by score, breaking ties without favouring any item.

    ``rank`` is 1 for the best item of each user and increases by one per item (no shared
    ranks). By default the best item is the one with the highest score; with
    ``ascending=True`` it is the one with the lowest. Missing (NaN) scores are ranked last.

    Ties are broken as follows:

    * ``seed`` given: by a random permutation of the rows drawn from
      ``np.random.default_rng(seed)``, so tied items get a uniformly random order that is
      reproducible for the same seed and input.
    * ``seed=None``: by the frame's row order (the first tied row gets the better rank).

    Neither rule looks at relevance, so a ranker that gives every candidate the same score
    (as LLM rankers often do) gets chance-level metrics, provided that with ``seed=None``
    the rows are not already ordered with the positive item first. Pass a seed whenever
    candidate lists may have been built positive-first.

    Args:
        frame: Long frame with columns ``user_id``, ``item_id`` and ``score`` (extra columns
            are kept). An existing ``rank`` column is replaced.
        ascending: Rank the lowest score first instead of the highest.
        seed: Seed for random tie-breaking; ``None`` keeps row order for ties.

    Returns:
        A new frame with an int64 ``rank`` column, sorted by ``user_id`` then ``rank``,
        with a fresh RangeIndex.

    Raises:
        ValueError: If a column is missing or a (user, item) pair occurs twice.
    """
    _require_columns(frame, [USER, ITEM, SCORE], "frame")
    if frame.duplicated([USER, ITEM]).any():
        n_dup = int(frame.duplicated([USER, ITEM]).sum())
        raise ValueError(f"frame has {n_dup} duplicate ({USER}, {ITEM}) row(s)")
    n = len(frame)
    scores = frame[SCORE].to_numpy(dtype=np.float64, na_value=np.nan)
    is_nan = np.isnan(scores)
    score_key = np.where(is_nan, 0.0, scores if ascending else -scores)
    tie_key = np.random.default_rng(seed).permutation(n) if seed is not None else np.arange(n)
    user_codes, _ = pd.factorize(frame[USER], sort=True)
    # np.lexsort sorts by the last key first: user, then NaN-last, then score, then ties.
    order = np.lexsort((tie_key, score_key, is_nan, user_codes))
    out = frame.iloc[order].drop(columns=[RANK], errors="ignore").reset_index(drop=True)
    sorted_codes = user_codes[order]
    out[RANK] = pd.Series(sorted_codes).groupby(sorted_codes).cumcount().to_numpy() + 1
    out[RANK] = out[RANK].astype(np.int64)
    return out


def ranking_metrics(
    ranked: pd.DataFrame,
    truth: pd.DataFrame,
    ks: Sequence[int] = (1, 5, 10),
    metrics: Sequence[str] = RANKING_METRICS,
) -> pd.DataFrame:
    """Compute per-user top-K ranking metrics with binary relevance.

    Let ``R_u`` be the relevant items of user ``u`` (from ``truth``) and ``r_i`` the rank
    of item ``i`` in ``ranked`` (1 = best). With ``H_u@K = |{i in R_u : r_i <= K}|``:

    * ``hr@K = 1[H_u@K > 0]``
    * ``ndcg@K = DCG/IDCG`` with ``DCG = sum_{i in R_u, r_i <= K} 1/log2(r_i + 1)`` and
      ``IDCG = sum_{j=1}^{min(|R_u|, K)} 1/log2(j + 1)``
    * ``recall@K = H_u@K / |R_u|``
    * ``precision@K = H_u@K / K`` (K, not the list length, is the denominator)
    * ``mrr = 1 / min_{i in R_u} r_i`` over the full list (not truncated at K); 0 if no
      relevant item is ranked. RecBole's ``MRR@K`` truncates at K instead.

    A truth user absent from ``ranked`` scores 0 on every metric; users only in ``ranked``
    are ignored. Duplicate truth rows count once.

    Args:
        ranked: Long frame with ``user_id``, ``item_id`` and integer ``rank`` (>= 1);
            other columns (e.g. ``score``) are ignored.
        truth: Frame with ``user_id`` and ``item_id`` of the relevant items.
        ks: Cutoffs K.
        metrics: Any of ``"hr"``, ``"ndcg"``, ``"mrr"``, ``"recall"``, ``"precision"``.

    Returns:
        One row per truth user, sorted by ``user_id``, with a ``user_id`` column and one
        float column per metric and cutoff (``hr@5``, ``ndcg@10``, ..., ``mrr``), ordered by
        ``metrics`` then ``ks``.

    Raises:
        ValueError: On a missing column, an unknown metric, a bad cutoff, non-integer or
            < 1 ranks, a duplicate (user, item) row or two items sharing a user's rank.
    """
    _require_columns(ranked, [USER, ITEM, RANK], "ranked")
    _require_columns(truth, [USER, ITEM], "truth")
    unknown = [m for m in metrics if m not in RANKING_METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(RANKING_METRICS)}")
    cutoffs = _validate_ks(ks)
    if any(m != "mrr" for m in metrics) and not cutoffs:
        raise ValueError("ks is empty but a truncated metric was requested")

    ranks = _validated_ranks(ranked)
    if ranked.duplicated([USER, ITEM]).any():
        n_dup = int(ranked.duplicated([USER, ITEM]).sum())
        raise ValueError(f"ranked has {n_dup} duplicate ({USER}, {ITEM}) row(s)")
    rank_frame = pd.DataFrame({USER: ranked[USER].to_numpy(), RANK: ranks})
    if rank_frame.duplicated([USER, RANK]).any():
        raise ValueError(
            f"ranked gives the same {RANK} to several items of one user; "
            "break ties first, e.g. with rank_by_score"
        )
    if truth[USER].isna().any():
        raise ValueError(f"truth[{USER!r}] contains missing values")

    relevant = truth[[USER, ITEM]].dropna(subset=[ITEM]).drop_duplicates()
    users = pd.Index(truth[USER].drop_duplicates()).sort_values()
    n_users = len(users)
    n_rel = np.bincount(users.get_indexer(relevant[USER]), minlength=n_users).astype(np.float64)

    hits = pd.DataFrame(
        {USER: ranked[USER].to_numpy(), ITEM: ranked[ITEM].to_numpy(), RANK: ranks}
    ).merge(relevant, on=[USER, ITEM], how="inner")
    hit_user = users.get_indexer(hits[USER])
    hit_rank = hits[RANK].to_numpy(dtype=np.int64)
    discount = 1.0 / np.log2(hit_rank + 1.0)

    max_k = max(cutoffs, default=1)
    ideal = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, max_k + 2)))])

    out: dict[str, npt.NDArray[np.float64] | pd.Index] = {USER: users}
    for metric in metrics:
        if metric == "mrr":
            rr = np.zeros(n_users)
            np.maximum.at(rr, hit_user, 1.0 / hit_rank)
            out["mrr"] = rr
            continue
        for k in cutoffs:
            in_k = (hit_rank <= k).astype(np.float64)
            n_hit = np.bincount(hit_user, weights=in_k, minlength=n_users)
            if metric == "hr":
                value = (n_hit > 0).astype(np.float64)
            elif metric == "recall":
                value = np.divide(n_hit, n_rel, out=np.zeros(n_users), where=n_rel > 0)
            elif metric == "precision":
                value = n_hit / k
            else:  # ndcg
                dcg = np.bincount(hit_user, weights=in_k * discount, minlength=n_users)
                idcg = ideal[np.minimum(n_rel, k).astype(np.int64)]
                value = np.divide(dcg, idcg, out=np.zeros(n_users), where=idcg > 0)
            out[f"{metric}@{k}"] = value
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- bootstrap


def _bootstrap_stats(
    n: int, n_boot: int, rng: np.random.Generator, stat: _Stat
) -> npt.NDArray[np.float64]:
    """Apply ``stat`` to ``n_boot`` resampled index rows, drawn in memory-bounded chunks."""
    chunk = max(1, _BOOT_CHUNK_CELLS // max(n, 1))
    parts = []
    for start in range(0, n_boot, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_boot - start), n))
        parts.append(stat(idx))
    return np.concatenate(parts, axis=0)


def _mean_of(values: npt.NDArray[np.float64]) -> _Stat:
    return lambda idx: values[idx].mean(axis=1)


def _percentile_bounds(stats: npt.NDArray[np.float64], ci: float) -> tuple[float, float]:
    alpha = 1.0 - ci
    low, high = np.quantile(stats, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return float(low), float(high)


def bootstrap_ci(
    values: npt.ArrayLike, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Percentile bootstrap confidence interval for the mean of per-user values.

    Draws ``n_boot`` resamples of size n with replacement (``np.random.default_rng(seed)``),
    takes each resample's mean ``m_b``, and returns the ``(1-ci)/2`` and ``(1+ci)/2``
    quantiles of ``{m_b}`` as the interval around the sample mean ``(1/n) sum_i x_i``.

    Args:
        values: Per-user metric values (1-D, no NaN).
        n_boot: Number of bootstrap resamples.
        ci: Confidence level, e.g. 0.95.
        seed: Seed of the resampling generator (same seed, same interval).

    Returns:
        ``(mean, low, high)``; ``mean`` is the plain sample mean.

    Raises:
        ValueError: If ``values`` is empty or has NaN, or ``n_boot``/``ci`` are invalid.
    """
    _check_boot_args(n_boot, ci)
    x = _as_float_array(values, "values")
    stats = _bootstrap_stats(x.size, n_boot, np.random.default_rng(seed), _mean_of(x))
    low, high = _percentile_bounds(stats, ci)
    return float(x.mean()), low, high


class PairedBootstrapResult(NamedTuple):
    """Result of :func:`paired_bootstrap` (a tuple ``(diff, low, high, p_value)``)."""

    diff: float
    low: float
    high: float
    p_value: float


def paired_bootstrap(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> PairedBootstrapResult:
    """Paired bootstrap comparison of two methods evaluated on the same users.

    With per-user differences ``d_i = a_i - b_i`` and mean ``d = (1/n) sum_i d_i``, users
    are resampled jointly (so the pairing is kept) giving bootstrap means ``d_b``. The CI is
    the percentile interval of ``{d_b}``, and the two-sided p-value for ``H0: E[d] = 0`` comes
    from the same resamples: twice the smaller share of ``d_b`` on either side of 0 (at most 1,
    at least ``1 / n_boot``). So the interval excludes 0 exactly when ``p < 1 - ci`` (up to
    the quantile's interpolation): the interval and the p-value never tell different stories,
    as a null-centred p-value beside a percentile interval can. Identical inputs give
    ``d = 0`` and ``p = 1``.

    Args:
        a: Per-user values of method A.
        b: Per-user values of method B, aligned with ``a`` (same users, same order).
        n_boot: Number of bootstrap resamples.
        ci: Confidence level of the interval for the difference.
        seed: Seed of ``np.random.default_rng``.

    Returns:
        ``PairedBootstrapResult(diff, low, high, p_value)`` with ``diff = mean(a - b)``.

    Raises:
        ValueError: If the inputs are empty, contain NaN or differ in length.
    """
    _check_boot_args(n_boot, ci)
    x = _as_float_array(a, "a")
    y = _as_float_array(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same length, got {x.size} and {y.size}")
    d = x - y
    diff = float(d.mean())
    stats = _bootstrap_stats(d.size, n_boot, np.random.default_rng(seed), _mean_of(d))
    low, high = _percentile_bounds(stats, ci)
    # Tolerance so that floating-point noise does not split exact zeros between the sides.
    tail = min(float(np.mean(stats <= 1e-12)), float(np.mean(stats >= -1e-12)))
    p_value = min(1.0, max(2.0 * tail, 1.0 / n_boot))
    return PairedBootstrapResult(diff, low, high, p_value)


def summarize(
    per_user: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Mean and percentile bootstrap CI of every metric column of a per-user frame.

    For each column other than ``user_id`` this calls :func:`bootstrap_ci` (mean
    ``(1/n) sum_u x_u`` and the ``(1-ci)/2``, ``(1+ci)/2`` quantiles of resampled means)
    with the same ``seed``, so every metric is resampled over the same users. NaN values
    are dropped per column; ``n`` is the number of values used.

    Args:
        per_user: Output of :func:`ranking_metrics` (or any frame of per-user values).
        n_boot: Number of bootstrap resamples.
        ci: Confidence level.
        seed: Seed of the resampling generator.

    Returns:
        Frame with columns ``metric, mean, low, high, n``, one row per metric column, in
        column order.

    Raises:
        ValueError: If a metric column has no non-missing values.
    """
    rows = []
    for column in per_user.columns:
        if column == USER:
            continue
        values = per_user[column].to_numpy(dtype=np.float64, na_value=np.nan)
        values = values[~np.isnan(values)]
        if values.size == 0:
            raise ValueError(f"column {column!r} has no non-missing values")
        mean, low, high = bootstrap_ci(values, n_boot=n_boot, ci=ci, seed=seed)
        rows.append({"metric": column, "mean": mean, "low": low, "high": high, "n": values.size})
    return pd.DataFrame(rows, columns=["metric", "mean", "low", "high", "n"])


def summarize_methods(
    per_user: dict[str, pd.DataFrame], n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """:func:`summarize` for several methods at once: one long table with a ``method`` column.

    Args:
        per_user: Method name -> per-user metric frame (from :func:`ranking_metrics`).
        n_boot: Number of bootstrap resamples.
        ci: Confidence level.
        seed: Seed of the resampling generator (the same for every method).

    Returns:
        Columns ``method, metric, mean, low, high, n``, methods in the order given.
    """
    parts = [
        summarize(values, n_boot=n_boot, ci=ci, seed=seed).assign(method=name)
        for name, values in per_user.items()
    ]
    table = pd.concat(parts, ignore_index=True)
    return table[["method", "metric", "mean", "low", "high", "n"]]


def pick_interval(summary: pd.DataFrame, method: str, metric: str, **where: str) -> list[float]:
    """``[mean, low, high]`` of one method and metric from a summary table, for recording.

    Args:
        summary: A table from :func:`summarize_methods`, possibly with extra columns.
        method: The method's name.
        metric: The metric's name, e.g. ``"ndcg@10"``.
        **where: Further column filters, e.g. ``protocol="1+9"``.

    Returns:
        The three values rounded to 4 decimals.

    Raises:
        KeyError: If no row or several rows match.
    """
    mask = (summary["method"] == method) & (summary["metric"] == metric)
    for column, value in where.items():
        mask &= summary[column] == value
    rows = summary[mask]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows match {method!r}, {metric!r}, {where}; expected 1")
    return [round(float(rows[c].iloc[0]), 4) for c in ("mean", "low", "high")]


def format_interval(summary: pd.DataFrame, digits: int = 3) -> pd.Series:
    """Render each row of a summary as ``"mean [low, high]"`` for a readable table.

    A row whose interval has no width (every unit gave the same value, or n is tiny) reads
    ``"mean (no spread at n = N)"`` (``N`` from an ``n`` column when there is one): a zero-width
    bootstrap interval is not precision, and printing ``[2, 2]`` would suggest it is.
    """
    pattern = f"{{:.{digits}f}}"
    counts = summary["n"] if "n" in summary else pd.Series([None] * len(summary), summary.index)

    def one(mean: float, low: float, high: float, n: Any) -> str:
        if abs(float(high) - float(low)) <= 1e-12:
            at = f" at n = {int(n)}" if n is not None and pd.notna(n) else ""
            return f"{pattern.format(mean)} (no spread{at})"
        return f"{pattern.format(mean)} [{pattern.format(low)}, {pattern.format(high)}]"

    return pd.Series(
        [
            one(m, lo, hi, n)
            for m, lo, hi, n in zip(
                summary["mean"], summary["low"], summary["high"], counts, strict=True
            )
        ],
        index=summary.index,
        dtype=object,
    )


def compare_to_reference(
    per_user: dict[str, pd.DataFrame],
    reference: str,
    metric: str,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Paired bootstrap of every method against ``reference`` on one metric, same users.

    Users are aligned on ``user_id`` (the frames must cover the same users).

    Returns:
        One row per other method: ``method, diff, low, high, p_value``, where ``diff`` is
        the mean of (method - reference) over users.

    Raises:
        KeyError: If ``reference`` is not among the methods.
        ValueError: If two frames cover different users.
    """
    if reference not in per_user:
        raise KeyError(f"reference method {reference!r} not in {list(per_user)}")
    base = per_user[reference].set_index(USER)[metric]
    rows = []
    for name, values in per_user.items():
        if name == reference:
            continue
        other = values.set_index(USER)[metric]
        if not other.index.sort_values().equals(base.index.sort_values()):
            raise ValueError(f"{name!r} and {reference!r} cover different users")
        result = paired_bootstrap(
            other.to_numpy(),
            base.reindex(other.index).to_numpy(),
            n_boot=n_boot,
            ci=ci,
            seed=seed,
        )
        rows.append({"method": name, **result._asdict()})
    return pd.DataFrame(rows, columns=["method", "diff", "low", "high", "p_value"])


# --------------------------------------------------------------------------- classification


def _confusion_rates(
    t: npt.NDArray[np.bool_], p: npt.NDArray[np.bool_], axis: int | None = None
) -> dict[str, npt.NDArray[np.float64]]:
    tp = np.asarray(np.count_nonzero(t & p, axis=axis), dtype=np.float64)
    fp = np.asarray(np.count_nonzero(~t & p, axis=axis), dtype=np.float64)
    fn = np.asarray(np.count_nonzero(t & ~p, axis=axis), dtype=np.float64)
    n = np.asarray(t.shape[-1], dtype=np.float64)
    correct = np.asarray(np.count_nonzero(t == p, axis=axis), dtype=np.float64)

    def ratio(num: npt.ArrayLike, den: npt.ArrayLike) -> npt.NDArray[np.float64]:
        num, den = np.broadcast_arrays(np.asarray(num, float), np.asarray(den, float))
        return np.divide(num, den, out=np.zeros(num.shape), where=den > 0)

    return {
        "accuracy": ratio(correct, n),
        "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn),
        "f1": ratio(2.0 * tp, 2.0 * tp + fp + fn),
    }


def classification_metrics(y_true: npt.ArrayLike, y_pred: npt.ArrayLike) -> dict[str, float]:
    """Binary classification metrics with positive class True/1.

    With TP, FP, FN, TN counted over the samples: ``accuracy = (TP + TN) / N``,
    ``precision = TP / (TP + FP)``, ``recall = TP / (TP + FN)`` and
    ``f1 = 2 TP / (2 TP + FP + FN)`` (the harmonic mean of precision and recall).
    Any 0/0 is defined as 0.0 (e.g. precision when nothing is predicted positive), which
    matches scikit-learn's ``zero_division=0``.

    Args:
        y_true: True labels (bool, or 0/1).
        y_pred: Predicted labels (bool, or 0/1), same length.

    Returns:
        ``{"accuracy", "precision", "recall", "f1"}`` as floats.

    Raises:
        ValueError: If the inputs are empty, differ in length or are not binary.
    """
    t = _as_binary(y_true, "y_true")
    p = _as_binary(y_pred, "y_pred")
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred differ in length: {t.size} vs {p.size}")
    if t.size == 0:
        raise ValueError("y_true and y_pred are empty")
    return {name: float(value) for name, value in _confusion_rates(t, p).items()}


def classification_ci(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Point estimates and percentile bootstrap CIs of the classification metrics.

    Samples (pairs ``(y_true_i, y_pred_i)``) are resampled with replacement ``n_boot``
    times with ``np.random.default_rng(seed)``; each metric of
    :func:`classification_metrics` (0/0 = 0.0) is recomputed per resample and the
    ``(1-ci)/2`` and ``(1+ci)/2`` quantiles form the interval.

    Args:
        y_true: True labels (bool, or 0/1).
        y_pred: Predicted labels (bool, or 0/1), same length.
        n_boot: Number of bootstrap resamples.
        ci: Confidence level.
        seed: Seed of the resampling generator.

    Returns:
        Frame with columns ``metric, mean, low, high, n`` for accuracy, precision, recall
        and f1; ``mean`` is the estimate on the full sample and ``n`` the sample count.

    Raises:
        ValueError: As :func:`classification_metrics`, or on invalid ``n_boot``/``ci``.
    """
    _check_boot_args(n_boot, ci)
    point = classification_metrics(y_true, y_pred)
    t = _as_binary(y_true, "y_true")
    p = _as_binary(y_pred, "y_pred")

    def stat(idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        rates = _confusion_rates(t[idx], p[idx], axis=1)
        return np.column_stack([rates[m] for m in CLASSIFICATION_METRICS])

    stats = _bootstrap_stats(t.size, n_boot, np.random.default_rng(seed), stat)
    rows = []
    for j, name in enumerate(CLASSIFICATION_METRICS):
        low, high = _percentile_bounds(stats[:, j], ci)
        rows.append({"metric": name, "mean": point[name], "low": low, "high": high, "n": t.size})
    return pd.DataFrame(rows, columns=["metric", "mean", "low", "high", "n"])


# --------------------------------------------------------------------------- power


def _z(p: float) -> float:
    """The standard normal quantile ``z_p`` (``_z(0.975) = 1.95996...``)."""
    return NormalDist().inv_cdf(p)


def _check_power_args(alpha: float, power: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")


def min_detectable_effect(
    n: int,
    sd: float | None = None,
    *,
    proportion: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Smallest true shift of a mean (or proportion) that a sample of ``n`` detects.

    Normal approximation, two-sided test at level ``alpha`` with the given ``power``:
    ``MDE = (z_{1-alpha/2} + z_power) * sd / sqrt(n)``; at the defaults the factor is
    ``1.95996 + 0.84162 = 2.80158``. For a proportion ``p``, ``sd = sqrt(p (1 - p))``
    (0.5 at ``p = 0.5``, the worst case of any value in [0, 1]).

    ``n`` counts the units (users, agents, sessions); pass ``sd`` (one unit's standard
    deviation) or ``proportion``, not both.

    Raises:
        ValueError: ``n < 1``, not exactly one of ``sd``/``proportion``, or a value out of range.
    """
    _check_power_args(alpha, power)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if (sd is None) == (proportion is None):
        raise ValueError("pass exactly one of sd and proportion")
    if proportion is not None:
        if not 0.0 <= proportion <= 1.0:
            raise ValueError(f"proportion must be in [0, 1], got {proportion}")
        sd = math.sqrt(proportion * (1.0 - proportion))
    assert sd is not None
    if sd < 0:
        raise ValueError(f"sd must be non-negative, got {sd}")
    return (_z(1.0 - alpha / 2.0) + _z(power)) * sd / math.sqrt(n)


def paired_min_detectable_effect(
    a: npt.ArrayLike, b: npt.ArrayLike, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true mean difference a paired comparison of ``a`` and ``b`` detects.

    :func:`min_detectable_effect` with ``n`` pairs and the standard deviation (``ddof=1``) of
    the differences ``d_i = a_i - b_i``. One pair gives ``inf`` (no spread to estimate).

    Raises:
        ValueError: Empty, NaN or unequal-length inputs, or ``alpha``/``power`` outside (0, 1).
    """
    x, y = _as_float_array(a, "a"), _as_float_array(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same length, got {x.size} and {y.size}")
    if x.size < 2:
        _check_power_args(alpha, power)
        return math.inf
    return min_detectable_effect(x.size, float(np.std(x - y, ddof=1)), alpha=alpha, power=power)


def interval_half_width(low: float, high: float) -> float:
    """Half the width of a recorded interval, ``(high - low) / 2`` (``ValueError`` if negative)."""
    if high < low:
        raise ValueError(f"interval upper end {high} is below its lower end {low}")
    return (high - low) / 2.0


def interval_min_detectable_effect(
    low: float, high: float, ci: float = 0.95, power: float = 0.8
) -> float:
    """The MDE implied by a recorded ``ci`` interval, when the raw values are gone.

    The interval's half-width is ``z_{(1+ci)/2} * se``, so ``se = half / z_{(1+ci)/2}`` and
    ``MDE = (z_{(1+ci)/2} + z_power) * se``; for a 95% interval at power 0.8 that is
    ``1.4294 * half-width``. A zero-width interval (every unit alike) gives 0: combine it
    with :func:`all_equal_min_n` rather than reading it as perfect precision.
    """
    _check_power_args(1.0 - ci, power)
    z = _z((1.0 + ci) / 2.0)
    return (z + _z(power)) * interval_half_width(low, high) / z


def all_equal_min_n(effect: float, alpha: float = 0.05) -> int:
    """Smallest ``n`` at which ``n`` identical results at a bound can rule out ``effect``.

    For values in [0, 1] with mean ``mu``, each unit is 0 with probability at most
    ``1 - mu``, so ``P(all n are 0) <= (1 - mu)^n``; excluding ``mu = effect`` at level
    ``alpha`` needs ``(1 - effect)^n <= alpha``, i.e. ``n >= ln(alpha) / ln(1 - effect)``
    (about ``3 / effect``, the rule of three), however narrow the bootstrap interval looks.

    Raises:
        ValueError: ``effect`` outside (0, 1) or ``alpha`` outside (0, 1).
    """
    if not 0.0 < effect < 1.0:
        raise ValueError(f"effect must be in (0, 1), got {effect}")
    _check_power_args(alpha, 0.5)
    return math.ceil(math.log(alpha) / math.log(1.0 - effect) - 1e-9)


def power_fields(
    low: float, high: float, n: int, ci: float = 0.95, power: float = 0.8
) -> dict[str, float | int]:
    """``{"n", "half_width", "mde"}`` to record beside a result's interval.

    What an experiment of this size could detect (:func:`interval_min_detectable_effect`),
    rounded to 4 decimals; REPRODUCTION.md shows it in every row.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    half = interval_half_width(low, high)
    mde = interval_min_detectable_effect(low, high, ci, power)
    return {"n": int(n), "half_width": round(half, 4), "mde": round(mde, 4)}
