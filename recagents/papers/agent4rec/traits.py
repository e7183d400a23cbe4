"""Agent4Rec's social traits: computed from the data, and checked against the agents' acts.

:func:`compute_traits` gives every user the paper's activity, conformity and diversity
levels; :func:`trait_behaviour`, :func:`trait_anova` and :func:`trait_figure` relate the
agents' behaviour to their levels (trait alignment, one-way ANOVA).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, RATING, USER
from recagents.metrics import bootstrap_ci
from recagents.papers.agent4rec.config import TRAIT_CUTS, TRAITS
from recagents.papers.agent4rec.frames import (
    RECOMMENDER,
    as_series,
    bool_column,
    check_boot,
    check_unknown,
    require,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from recagents.data.datasets import Dataset


TRAIT_MEASURES: tuple[tuple[str, str], ...] = (
    ("activity", "exit_page"),
    ("activity", "n_watched"),
    ("conformity", "rating_mse"),
    ("diversity", "n_genres_watched"),
)
"""(trait, behaviour column) pairs the paper relates by one-way ANOVA."""


# --------------------------------------------------------------------------- traits


def _levels(values: pd.Series, cuts: tuple[float, float], ties: str) -> pd.Series:
    """1 + (value past the low cut) + (value past the high cut)."""
    low, high = np.percentile(values.to_numpy(dtype=float), list(cuts))
    if ties == "lower":
        level = 1 + (values > low).astype(int) + (values > high).astype(int)
    else:
        level = 1 + (values >= low).astype(int) + (values >= high).astype(int)
    return level.astype(int)


def _n_top_genres(genre_counts: pd.DataFrame, share: float) -> pd.Series:
    """Per user: genres (ranked by count) whose cumulative share stays <= ``share``, >= 1."""
    ranked = genre_counts.sort_values([USER, "count"], ascending=[True, False], kind="stable")
    cumulative = ranked.groupby(USER, sort=False)["count"].cumsum()
    total = ranked.groupby(USER, sort=False)["count"].transform("sum")
    # Exact rational comparison cum/total <= share: 4 of 5 labels is exactly 80%.
    frac = Fraction(share).limit_denominator(10_000)
    inside = cumulative * frac.denominator <= total * frac.numerator
    counts = inside.groupby(ranked[USER], sort=False).sum()
    return counts.clip(lower=1).astype(int)


def compute_traits(
    dataset: Dataset,
    top_share: float = 0.8,
    ties: Literal["lower", "upper"] = "lower",
) -> pd.DataFrame:
    """The paper's three social traits of every user, cut into levels 1-3.

    Computed over *all* users of the dataset (the paper cuts over all 6,040 ML-1M users,
    not only the simulated ones):

    * activity: ``n_ratings``, the number of ratings; cut at P60 and P90.
    * conformity: ``conformity_mse``, the mean over the user's ratings of
      ``(rating - item's mean rating)^2`` (item means over all users); cut at P25 and P80,
      so level 1 is a small deviation (a follower of the crowd).
    * diversity: ``n_top_genres``; the genres of the user's rated items (each rating adds
      each of its item's genres once) ranked by share, counting the top genres whose
      cumulative share stays <= ``top_share`` (at least 1); cut at P33 and P66.

    ``level = 1 + (value > low cut) + (value > high cut)`` with numpy's linear percentiles.
    With ``ties="upper"`` a value equal to a cut moves up (``>=``), which is the official
    code's ``x < cut`` rule; the two differ only on ties, which integer statistics have.
    The official code also drops users whose top genre alone exceeds ``top_share``; here
    they get ``n_top_genres = 1``.

    Args:
        dataset: Interactions with ratings and items with genres.
        top_share: Cumulative genre share of the diversity statistic.
        ties: ``"lower"`` (the formula above) or ``"upper"`` (official tie rule).

    Returns:
        ``user_id, activity, conformity, diversity, n_ratings, conformity_mse,
        n_top_genres``, one row per user, sorted by ``user_id``.

    Raises:
        ValueError: Without ratings, items or genres, or on bad parameters.
    """
    if not 0.0 < top_share <= 1.0:
        raise ValueError(f"top_share must lie in (0, 1], got {top_share!r}")
    if ties not in ("lower", "upper"):
        raise ValueError(f"ties must be 'lower' or 'upper', got {ties!r}")
    frame = dataset.interactions
    require(frame, [USER, ITEM, RATING], "dataset.interactions")
    if dataset.items is None:
        raise ValueError("compute_traits needs the item table (genres) of the dataset")
    require(dataset.items, [ITEM, GENRES], "dataset.items")
    frame = frame[[USER, ITEM, RATING]].dropna()
    if frame.empty:
        raise ValueError("dataset has no rated interactions")

    n_ratings = frame.groupby(USER).size()
    item_mean = frame.groupby(ITEM)[RATING].transform("mean")
    mse = ((frame[RATING] - item_mean) ** 2).groupby(frame[USER]).mean()

    genres = dataset.items[[ITEM, GENRES]].explode(GENRES).dropna()
    genres = genres[genres[GENRES].astype(str) != ""]
    per_rating = frame[[USER, ITEM]].merge(genres, on=ITEM, how="inner")
    counts = per_rating.groupby([USER, GENRES]).size().rename("count").reset_index()
    n_top = _n_top_genres(counts, top_share).reindex(n_ratings.index)
    if n_top.isna().any():
        missing = n_top.index[n_top.isna()].tolist()
        raise ValueError(
            f"{len(missing)} user(s) rated only items without genres, e.g. {missing[:5]}"
        )

    out = pd.DataFrame(
        {
            USER: n_ratings.index.astype(str),
            "n_ratings": n_ratings.to_numpy(dtype=int),
            "conformity_mse": mse.reindex(n_ratings.index).to_numpy(dtype=float),
            "n_top_genres": n_top.to_numpy(dtype=int),
        }
    )
    for trait, column in (
        ("activity", "n_ratings"),
        ("conformity", "conformity_mse"),
        ("diversity", "n_top_genres"),
    ):
        out[trait] = _levels(out[column], TRAIT_CUTS[trait], ties).to_numpy()
    ordered = [USER, *TRAITS, "n_ratings", "conformity_mse", "n_top_genres"]
    return out[ordered].sort_values(USER, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- traits vs behaviour


def trait_behaviour(
    exposures: pd.DataFrame,
    sessions: pd.DataFrame,
    traits: pd.DataFrame,
    item_mean_rating: pd.Series,
    item_genres: pd.Series,
) -> pd.DataFrame:
    """Per-agent behaviour next to the agent's trait levels.

    * ``exit_page`` from ``sessions``;
    * ``n_watched``: items watched;
    * ``rating_mse``: mean over the agent's ratings of ``(rating - item mean rating)^2``
      (NaN when the agent rated nothing);
    * ``n_genres_watched``: distinct genres among the watched items.

    Args:
        exposures: Exposure log.
        sessions: Session log.
        traits: ``user_id`` and the three trait levels.
        item_mean_rating: Item id -> mean rating in the data (the "history rating").
        item_genres: Item id -> tuple of genres.

    Returns:
        ``recommender, user_id, exit_page, n_watched, rating_mse, n_genres_watched,
        activity, conformity, diversity``; agents without a trait row are left out.

    Raises:
        ValueError: On a missing column or a watched item missing from the lookups.
    """
    require(exposures, [USER, RECOMMENDER, ITEM, "watched", RATING], "exposures")
    require(sessions, [USER, RECOMMENDER, "exit_page"], "sessions")
    require(traits, [USER, *TRAITS], "traits")
    means = as_series(item_mean_rating, "item_mean_rating")
    genres = as_series(item_genres, "item_genres")
    keys = [RECOMMENDER, USER]
    frame = exposures[[*keys, ITEM, RATING]].copy()
    for column in (*keys, ITEM):
        frame[column] = frame[column].astype(str)
    frame["watched"] = bool_column(exposures["watched"], "exposures['watched']").to_numpy()
    frame[RATING] = pd.to_numeric(frame[RATING], errors="coerce")
    seen = frame[frame["watched"]]
    rated = seen.dropna(subset=[RATING])
    check_unknown(rated[ITEM], means, "item_mean_rating")
    check_unknown(seen[ITEM], genres, "item_genres")

    sess = sessions[[*keys, "exit_page"]].copy()
    sess[RECOMMENDER] = sess[RECOMMENDER].astype(str)
    sess[USER] = sess[USER].astype(str)
    n_watched = seen.groupby(keys).size().rename("n_watched")
    squared = (rated[RATING] - rated[ITEM].map(means).astype(float)) ** 2
    mse = squared.groupby([rated[RECOMMENDER], rated[USER]]).mean().rename("rating_mse")
    exploded = seen[[*keys, ITEM]].assign(genre=seen[ITEM].map(genres)).explode("genre")
    n_genres = exploded.dropna(subset=["genre"]).groupby(keys)["genre"].nunique()
    out = (
        sess.set_index(keys)
        .join(n_watched, how="left")
        .join(mse, how="left")
        .join(n_genres.rename("n_genres_watched"), how="left")
        .reset_index()
    )
    out["n_watched"] = out["n_watched"].fillna(0).astype(int)
    out["n_genres_watched"] = out["n_genres_watched"].fillna(0).astype(int)
    out["exit_page"] = out["exit_page"].astype(float)
    levels = traits[[USER, *TRAITS]].copy()
    levels[USER] = levels[USER].astype(str)
    out = out.merge(levels, on=USER, how="inner")
    columns = [*keys, "exit_page", "n_watched", "rating_mse", "n_genres_watched", *TRAITS]
    return out[columns].sort_values(keys, kind="stable").reset_index(drop=True)


def trait_anova(behaviour: pd.DataFrame, min_group: int = 2) -> pd.DataFrame:
    """Mean behaviour per trait level and a one-way ANOVA across levels.

    For each pair of :data:`TRAIT_MEASURES` (activity/exit page, activity/items watched,
    conformity/rating MSE, diversity/genres watched) NaN values are dropped, levels with
    fewer than ``min_group`` agents are left out of the test, and
    :func:`scipy.stats.f_oneway` gives F and p; both are NaN when fewer than two levels
    remain (or when every group is constant). With a ``recommender`` column the test runs
    per recommender.

    Returns:
        ``[recommender,] trait, measure, mean_1, mean_2, mean_3, n_1, n_2, n_3, f_stat,
        p_value`` (level means over every agent of the level).
    """
    from scipy.stats import f_oneway

    if isinstance(min_group, bool) or not isinstance(min_group, int) or min_group < 2:
        raise ValueError(f"min_group must be an integer >= 2, got {min_group!r}")
    needed = sorted({c for pair in TRAIT_MEASURES for c in pair})
    require(behaviour, needed, "behaviour")
    groups = (
        list(behaviour.groupby(RECOMMENDER, sort=False))
        if RECOMMENDER in behaviour
        else [(None, behaviour)]
    )
    rows = []
    for recommender, frame in groups:
        for trait, measure in TRAIT_MEASURES:
            part = frame[[trait, measure]].dropna()
            row: dict[str, Any] = {} if recommender is None else {"recommender": recommender}
            row |= {"trait": trait, "measure": measure}
            samples = []
            for level in (1, 2, 3):
                values = part.loc[part[trait] == level, measure].to_numpy(dtype=float)
                row[f"mean_{level}"] = float(values.mean()) if values.size else math.nan
                row[f"n_{level}"] = int(values.size)
                if values.size >= min_group:
                    samples.append(values)
            f_stat = p_value = math.nan
            if len(samples) >= 2:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = f_oneway(*samples)
                f_stat, p_value = float(result.statistic), float(result.pvalue)
            row |= {"f_stat": f_stat, "p_value": p_value}
            rows.append(row)
    return pd.DataFrame(rows)


_MEASURE_LABELS = {
    "exit_page": "exit page",
    "n_watched": "items watched",
    "rating_mse": "(rating - item mean)$^2$",
    "n_genres_watched": "genres watched",
}

_MEASURE_TITLES = {
    "exit_page": "exit page",
    "n_watched": "items watched",
    "rating_mse": "rating deviation",
    "n_genres_watched": "genres watched",
}

#: Measures that count whole things (pages, items, genres): their axis gets integer ticks.
_COUNT_MEASURES = ("exit_page", "n_watched", "n_genres_watched")


def _why_equal(behaviour: pd.DataFrame, measure: str) -> str | None:
    """Why a trait panel is flat, when its measure has one value over every session."""
    values = behaviour[measure].dropna().unique()
    if len(values) != 1:
        return None
    what = _MEASURE_TITLES[measure]
    return (
        f"every one of the {len(behaviour)} sessions has {what} {values[0]:g}, whatever the trait"
    )


def _trait_panel(
    ax: Any,
    behaviour: pd.DataFrame,
    trait: str,
    measure: str,
    recommenders: list[Any],
    n_boot: int,
    seed: int,
) -> list[float]:
    """Draw one (trait, measure) panel; return every plotted mean and bound."""
    import seaborn as sns

    from recagents.plotting import PALETTE

    colors = sns.color_palette(PALETTE, len(recommenders))
    offsets = np.linspace(-0.15, 0.15, len(recommenders)) if len(recommenders) > 1 else [0.0]
    drawn: list[float] = []
    for name, offset, color in zip(recommenders, offsets, colors, strict=True):
        frame = behaviour if name is None else behaviour[behaviour[RECOMMENDER] == name]
        xs, means, lows, highs = [], [], [], []
        for level in (1, 2, 3):
            values = frame.loc[frame[trait] == level, measure].dropna()
            if values.empty:
                continue
            mean, low, high = bootstrap_ci(values.to_numpy(float), n_boot=n_boot, seed=seed)
            xs.append(level + offset)
            means.append(mean)
            lows.append(mean - low)
            highs.append(high - mean)
            drawn += [mean, low, high]
        ax.errorbar(xs, means, yerr=[lows, highs], fmt="o-", capsize=3, color=color, label=name)
    return drawn


def trait_figure(
    behaviour: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    recorded: Mapping[str, Sequence[float]] | None = None,
    recorded_label: str = "official run (recorded)",
) -> Figure:
    """One panel per (trait, measure) pair: mean and 95% bootstrap CI per trait level.

    Each panel is titled by its trait and measure; a panel whose values are all equal says
    so and is not zoomed; counts (pages, items, genres) get whole-number ticks. ``recorded``
    (measure -> the level 1, 2, 3 means of a recorded capable-model run, e.g. the official
    run's in ``paper_numbers.table("A4R-F-traits")``) is drawn on the same axes.
    """
    import matplotlib.pyplot as plt

    from recagents.plotting import REFERENCE_STYLES, integer_axis, note_if_degenerate

    needed = sorted({c for pair in TRAIT_MEASURES for c in pair})
    require(behaviour, needed, "behaviour")
    check_boot(n_boot)
    unknown = sorted(set(recorded or {}) - {m for _, m in TRAIT_MEASURES})
    if unknown:
        known = [m for _, m in TRAIT_MEASURES]
        raise ValueError(f"recorded: unknown measure(s) {unknown}; known: {known}")
    recommenders = (
        list(dict.fromkeys(behaviour[RECOMMENDER])) if RECOMMENDER in behaviour else [None]
    )
    fig, axes = plt.subplots(1, len(TRAIT_MEASURES), figsize=(3.3 * len(TRAIT_MEASURES), 3.6))
    for ax, (trait, measure) in zip(axes, TRAIT_MEASURES, strict=True):
        drawn = _trait_panel(ax, behaviour, trait, measure, recommenders, n_boot, seed)
        reference = [float(v) for v in (recorded or {}).get(measure, [])]
        if reference:
            ax.plot(range(1, len(reference) + 1), reference, marker="X", markersize=8,
                    label=recorded_label, **REFERENCE_STYLES["recorded"])  # fmt: skip
        ax.set_xticks([1, 2, 3])
        if measure in _COUNT_MEASURES:
            integer_axis(ax, "y")
        note_if_degenerate(
            ax, drawn, "values", include=reference, count=len(drawn) // 3,
            why=_why_equal(behaviour, measure),
        )  # fmt: skip
        title = f"{trait}: {_MEASURE_TITLES[measure]}"
        ax.set(title=title, xlabel=f"{trait} level", ylabel=_MEASURE_LABELS[measure])
    if recommenders != [None] or recorded:
        handles, labels = axes[0].get_legend_handles_labels()
        for ax in axes[1:]:
            more = ax.get_legend_handles_labels()
            handles += [h for h, lab in zip(*more, strict=True) if lab not in labels]
            labels += [lab for lab in more[1] if lab not in labels]
        legend_title = "recommender" if recommenders != [None] else None
        axes[-1].legend(handles, labels, title=legend_title, fontsize=9,
                        loc="center left", bbox_to_anchor=(1.02, 0.5))  # fmt: skip
    fig.tight_layout()
    return fig
