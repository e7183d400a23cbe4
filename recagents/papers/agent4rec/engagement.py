"""Agent4Rec's engagement tables: per-agent metrics, their intervals, the rating shares.

What Table 2 compares across recommenders (viewing and like ratios, exit page,
satisfaction), satisfaction per trait level, and the agents' rating distribution beside the
real users'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from recagents.columns import ITEM, RATING, USER
from recagents.metrics import bootstrap_ci
from recagents.papers.agent4rec.config import TRAITS
from recagents.papers.agent4rec.frames import (
    ENGAGEMENT_METRICS,
    RECOMMENDER,
    SUMMARY_COLUMNS,
    bool_column,
    check_boot,
    require,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# --------------------------------------------------------------------------- engagement


def engagement(
    exposures: pd.DataFrame, sessions: pd.DataFrame, like_threshold: float = 3.0
) -> pd.DataFrame:
    """Per-agent engagement metrics of the paper, one row per (recommender, user).

    * ``p_view`` = watched / exposed items.
    * ``n_like`` = watched items rated above ``like_threshold`` (the paper's threshold is
      not stated; a later paper reads it as rating > 3).
    * ``p_like`` = ``n_like`` / exposed items.
    * ``exit_page`` and ``satisfaction`` copied from ``sessions``.

    Sessions without exposures get NaN rates; exposures without a session get NaN
    ``exit_page``/``satisfaction``.

    Returns:
        ``recommender, user_id, p_view, n_like, p_like, exit_page, satisfaction``.

    Raises:
        ValueError: On a missing column or a non-finite ``like_threshold``.
    """
    require(exposures, [USER, RECOMMENDER, ITEM, "watched", RATING], "exposures")
    require(sessions, [USER, RECOMMENDER, "exit_page", "satisfaction"], "sessions")
    if not np.isfinite(like_threshold):
        raise ValueError(f"like_threshold must be a finite number, got {like_threshold!r}")
    keys = [RECOMMENDER, USER]
    watched = bool_column(exposures["watched"], "exposures['watched']")
    rating = pd.to_numeric(exposures[RATING], errors="coerce")
    per = pd.DataFrame(
        {
            RECOMMENDER: exposures[RECOMMENDER].astype(str),
            USER: exposures[USER].astype(str),
            "exposed": 1,
            "watched": watched.astype(int),
            "liked": (watched & (rating > like_threshold)).astype(int),
        }
    )
    counts = per.groupby(keys, sort=True)[["exposed", "watched", "liked"]].sum().reset_index()
    sess = sessions[[*keys, "exit_page", "satisfaction"]].copy()
    sess[RECOMMENDER] = sess[RECOMMENDER].astype(str)
    sess[USER] = sess[USER].astype(str)
    if sess.duplicated(keys).any():
        raise ValueError("sessions has several rows for one (recommender, user_id)")
    out = counts.merge(sess, on=keys, how="outer")
    exposed = out["exposed"].astype(float)
    out["p_view"] = out["watched"] / exposed
    out["n_like"] = out["liked"].astype(float)
    out["p_like"] = out["liked"] / exposed
    out["exit_page"] = out["exit_page"].astype(float)
    out["satisfaction"] = out["satisfaction"].astype(float)
    out = out.sort_values(keys, kind="stable").reset_index(drop=True)
    return out[[*keys, *ENGAGEMENT_METRICS]]


def _summary_rows(values: pd.Series, n_boot: int, seed: int) -> dict[str, float]:
    x = values.to_numpy(dtype=float, na_value=np.nan)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return {"mean": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    mean, low, high = bootstrap_ci(x, n_boot=n_boot, seed=seed)
    return {"mean": mean, "low": low, "high": high, "n": int(x.size)}


def _metric_columns(per_user: pd.DataFrame, metrics: Sequence[str] | None) -> list[str]:
    if metrics is None:
        return [
            c
            for c in per_user.columns
            if c not in (USER, RECOMMENDER, *TRAITS) and pd.api.types.is_numeric_dtype(per_user[c])
        ]
    require(per_user, metrics, "per_user")
    return list(metrics)


def engagement_summary(
    per_user: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    metrics: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Mean and 95% percentile bootstrap interval of each metric, per recommender.

    Uses :func:`recagents.metrics.bootstrap_ci` over agents (NaN values dropped per metric,
    the same seed for every cell). A metric with no values gets NaN and ``n = 0``.

    Args:
        per_user: Output of :func:`engagement`.
        n_boot: Bootstrap resamples.
        seed: Resampling seed.
        metrics: Columns to summarise; default every numeric metric column.

    Returns:
        ``recommender, metric, mean, low, high, n``.
    """
    require(per_user, [RECOMMENDER], "per_user")
    check_boot(n_boot)
    columns = _metric_columns(per_user, metrics)
    rows = []
    for recommender, group in per_user.groupby(RECOMMENDER, sort=False):
        for metric in columns:
            rows.append(
                {"recommender": recommender, "metric": metric}
                | _summary_rows(group[metric], n_boot, seed)
            )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def satisfaction_by(
    per_user: pd.DataFrame,
    traits: pd.DataFrame,
    trait: str = "activity",
    metrics: Sequence[str] | None = ("satisfaction",),
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """:func:`engagement_summary` stratified by one trait's level.

    An outside critique of Agent4Rec found that the activity trait alone inflates the
    reported satisfaction, so satisfaction should be read per activity level.

    Args:
        per_user: Output of :func:`engagement`.
        traits: Frame with ``user_id`` and the trait's level column.
        trait: ``"activity"``, ``"conformity"`` or ``"diversity"``.
        metrics: Columns to summarise (``None``: every metric column).
        n_boot: Bootstrap resamples.
        seed: Resampling seed.

    Returns:
        ``recommender, trait, level, metric, mean, low, high, n``; agents without a trait
        row are left out.
    """
    if trait not in TRAITS:
        raise ValueError(f"trait must be one of {TRAITS}, got {trait!r}")
    require(per_user, [USER, RECOMMENDER], "per_user")
    require(traits, [USER, trait], "traits")
    check_boot(n_boot)
    columns = _metric_columns(per_user.drop(columns=list(TRAITS), errors="ignore"), metrics)
    levels = traits[[USER, trait]].dropna().copy()
    levels[USER] = levels[USER].astype(str)
    frame = per_user.drop(columns=list(TRAITS), errors="ignore").copy()
    frame[USER] = frame[USER].astype(str)
    frame = frame.merge(levels, on=USER, how="inner")
    rows = []
    for (recommender, level), group in frame.groupby([RECOMMENDER, trait], sort=True):
        for metric in columns:
            rows.append(
                {
                    "recommender": recommender,
                    "trait": trait,
                    "level": int(level),
                    "metric": metric,
                }
                | _summary_rows(group[metric], n_boot, seed)
            )
    return pd.DataFrame(
        rows, columns=["recommender", "trait", "level", "metric", "mean", "low", "high", "n"]
    )


# --------------------------------------------------------------------------- ratings


def _rating_counts(values: pd.Series, name: str) -> pd.Series:
    x = pd.to_numeric(pd.Series(values), errors="coerce").dropna().to_numpy(dtype=float)
    if x.size == 0:
        raise ValueError(f"{name} holds no ratings")
    if (x < 1).any() or (x > 5).any():
        raise ValueError(f"{name} must lie in 1-5, found {x.min():g}..{x.max():g}")
    stars = np.rint(x).astype(int)
    return pd.Series(np.bincount(stars, minlength=6)[1:], index=range(1, 6))


def rating_distribution(
    exposures: pd.DataFrame, real_ratings: pd.Series | Sequence[float] | None = None
) -> pd.DataFrame:
    """Share of each star value 1-5 among agent ratings, and among real ratings if given.

    Agent ratings are the non-missing ``rating`` values of watched exposures. Ratings are
    rounded to the nearest star before counting.

    Returns:
        Long frame ``source`` (``"agents"``/``"real"``), ``rating`` (1-5), ``count``,
        ``share`` (of that source's ratings).

    Raises:
        ValueError: On a missing column, no ratings or a rating outside 1-5.
    """
    require(exposures, ["watched", RATING], "exposures")
    watched = bool_column(exposures["watched"], "exposures['watched']")
    sources = {"agents": _rating_counts(exposures.loc[watched, RATING], "agent ratings")}
    if real_ratings is not None:
        sources["real"] = _rating_counts(pd.Series(real_ratings), "real_ratings")
    rows = []
    for source, counts in sources.items():
        total = counts.sum()
        for star, count in counts.items():
            rows.append((source, int(star), int(count), count / total))
    return pd.DataFrame(rows, columns=["source", "rating", "count", "share"])


def rating_figure(
    table: pd.DataFrame,
    title: str = "Rating distribution",
    recorded: Mapping[int, float] | None = None,
    recorded_label: str = "official run (recorded)",
) -> Figure:
    """Grouped bars of the rating shares, agents next to real users.

    ``recorded`` (star -> share, 0-1, of a recorded capable-model run, e.g. the official
    run's in ``paper_numbers.table("A4R-F-rating")``) is marked across each star's bars, on
    the same axis.
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import PALETTE, REFERENCE_STYLES

    require(table, ["source", "rating", "share"], "table")
    sources = list(dict.fromkeys(table["source"]))
    colors = sns.color_palette(PALETTE, len(sources))
    width = 0.8 / len(sources)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for k, (source, color) in enumerate(zip(sources, colors, strict=True)):
        part = table[table["source"] == source].sort_values("rating")
        x = part["rating"].to_numpy(dtype=float) + (k - (len(sources) - 1) / 2) * width
        bars = ax.bar(x, part["share"] * 100, width=width, color=color, label=source)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    if recorded:
        stars = [int(star) for star in recorded]
        if not set(stars) <= set(range(1, 6)):
            raise ValueError(f"recorded: stars must be 1-5, got {sorted(stars)}")
        shares = [100 * float(v) for v in recorded.values()]
        color = REFERENCE_STYLES["recorded"]["color"]
        ax.hlines(shares, [s - 0.45 for s in stars], [s + 0.45 for s in stars], colors=color,
                  linestyles="-.", linewidth=2, label=recorded_label, zorder=3)  # fmt: skip
    ax.set_xticks(range(1, 6))
    top = max([float(table["share"].max()), *(recorded or {}).values()]) * 100
    ax.set_ylim(0, top * 1.22 if top > 0 else 1.0)
    ax.set(title=title, xlabel="rating", ylabel="% of ratings")
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    return fig
