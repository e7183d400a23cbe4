"""Agent4Rec's filter bubble: how concentrated the recommended genres become, round by round.

Reads the lists of :func:`recagents.papers.agent4rec.evaluate.feedback_rounds`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.papers.agent4rec.frames import (
    RECOMMENDER,
    as_series,
    check_unknown,
    require,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# --------------------------------------------------------------------------- filter bubble


def genre_concentration(recommended: pd.DataFrame, item_genres: pd.Series) -> pd.DataFrame:
    """How concentrated the recommended genres are, per round of the feedback loop.

    Every recommendation row counts (an item shown to two users counts twice) and each of
    an item's genres counts once. Per round (and per recommender when that column exists):

    * ``top_genre`` and ``top_share``: the most common genre and its count divided by all
      genre labels of the round (ties go to the alphabetically first genre);
    * ``items_with_top``: share of recommended items that carry the top genre;
    * ``n_genres``: distinct genres; ``n_items``: recommendation rows.

    A bubble shows as a rising ``top_share`` and a falling ``n_genres``.

    Returns:
        ``[recommender,] round, n_items, n_genres, top_genre, top_share, items_with_top``.
    """
    require(recommended, [USER, ITEM, "round"], "recommended")
    genres = as_series(item_genres, "item_genres")
    frame = recommended.copy()
    frame[ITEM] = frame[ITEM].astype(str)
    check_unknown(frame[ITEM], genres, "item_genres")
    frame["_row"] = np.arange(len(frame))
    keys = [RECOMMENDER, "round"] if RECOMMENDER in frame else ["round"]
    rows = []
    for key, group in frame.groupby(keys, sort=True):
        labels = group[["_row", ITEM]].assign(genre=group[ITEM].map(genres)).explode("genre")
        labels = labels.dropna(subset=["genre"]).drop_duplicates(["_row", "genre"])
        counts = labels["genre"].value_counts()
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row |= {"n_items": len(group), "n_genres": int(counts.size)}
        if counts.empty:
            row |= {"top_genre": None, "top_share": math.nan, "items_with_top": math.nan}
        else:
            best = counts[counts == counts.max()].index.astype(str).sort_values()[0]
            row |= {
                "top_genre": best,
                "top_share": float(counts[best] / counts.sum()),
                "items_with_top": float(counts[best] / len(group)),
            }
        rows.append(row)
    columns = [*keys, "n_items", "n_genres", "top_genre", "top_share", "items_with_top"]
    return pd.DataFrame(rows, columns=columns)


def bubble_figure(table: pd.DataFrame, n_genres_total: int | None = None) -> Figure:
    """Top-genre share and number of genres recommended, round by round.

    Rounds get whole-number ticks; the share is drawn on its full 0-100% scale and the
    genre count from 0 (to ``n_genres_total``, the catalogue's genres, when given), so a
    wobble of a point is not zoomed to fill the panel; a panel whose values are all equal
    says so.
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import PALETTE, fixed_scale, integer_axis, note_if_degenerate

    require(table, ["round", "n_genres", "top_share"], "table")
    names = list(dict.fromkeys(table[RECOMMENDER])) if RECOMMENDER in table else [None]
    colors = sns.color_palette(PALETTE, len(names))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, color in zip(names, colors, strict=True):
        part = table if name is None else table[table[RECOMMENDER] == name]
        part = part.sort_values("round")
        axes[0].plot(part["round"], part["top_share"] * 100, "o-", color=color, label=name)
        axes[1].plot(part["round"], part["n_genres"], "o-", color=color, label=name)
    fixed_scale(axes[0], 0.0, 100.0)
    most = float(n_genres_total or max(1.0, float(table["n_genres"].max()) * 1.15))
    fixed_scale(axes[1], 0.0, most)
    note_if_degenerate(axes[0], table["top_share"] * 100, "rounds", scale=(0.0, 100.0))
    note_if_degenerate(axes[1], table["n_genres"], "rounds", scale=(0.0, most))
    for ax in axes:
        integer_axis(ax, "x")
    integer_axis(axes[1], "y")
    axes[0].set(title="Share of the top genre", xlabel="round", ylabel="% of genre labels")
    axes[1].set(title="Distinct genres recommended", xlabel="round", ylabel="genres")
    if names != [None]:
        axes[1].legend(title="recommender")
    fig.tight_layout()
    return fig
