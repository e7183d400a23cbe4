"""Agent4Rec's causal discovery: per-item variables, DirectLiNGAM, and the causal graph.

The paper reports that quality and popularity drive the agents' ratings and a popularity ->
exposure -> views loop; this module builds the per-item table, runs DirectLiNGAM
(causal-learn) with the causal order as prior knowledge, and draws the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, RATING
from recagents.papers.agent4rec.frames import (
    as_series,
    bool_column,
    check_unknown,
    require,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


CAUSAL_COLUMNS: tuple[str, ...] = ("quality", "popularity", "exposure", "views", "rating")
"""Per-item variables of the causal analysis, in the paper's causal order."""


# --------------------------------------------------------------------------- causal discovery


def item_causal_table(
    exposures: pd.DataFrame,
    item_mean_rating: pd.Series,
    item_popularity: pd.Series,
    min_exposures: int = 10,
) -> pd.DataFrame:
    """Per-item variables of the paper's causal analysis.

    * ``quality``: the item's mean rating in the data;
    * ``popularity``: its training interactions (items absent from the Series get 0);
    * ``exposure``: times shown to agents; ``views``: times watched;
    * ``rating``: mean agent rating (NaN when nobody rated it).

    Only items shown at least ``min_exposures`` times are kept.

    Returns:
        ``item_id, quality, popularity, exposure, views, rating``, sorted by ``item_id``.
    """
    require(exposures, [ITEM, "watched", RATING], "exposures")
    if isinstance(min_exposures, bool) or not isinstance(min_exposures, int) or min_exposures < 1:
        raise ValueError(f"min_exposures must be an integer >= 1, got {min_exposures!r}")
    means = as_series(item_mean_rating, "item_mean_rating")
    popularity = as_series(item_popularity, "item_popularity")
    frame = pd.DataFrame(
        {
            ITEM: exposures[ITEM].astype(str).to_numpy(),
            "watched": bool_column(exposures["watched"], "watched").to_numpy(),
            RATING: pd.to_numeric(exposures[RATING], errors="coerce").to_numpy(),
        }
    )
    frame.loc[~frame["watched"], RATING] = np.nan
    grouped = frame.groupby(ITEM).agg(
        exposure=("watched", "size"), views=("watched", "sum"), rating=(RATING, "mean")
    )
    grouped = grouped[grouped["exposure"] >= min_exposures]
    check_unknown(grouped.index, means, "item_mean_rating")
    out = pd.DataFrame(
        {
            ITEM: grouped.index.astype(str),
            "quality": grouped.index.map(means).astype(float),
            "popularity": grouped.index.map(popularity).fillna(0).astype(float),
            "exposure": grouped["exposure"].to_numpy(dtype=float),
            "views": grouped["views"].to_numpy(dtype=float),
            "rating": grouped["rating"].to_numpy(dtype=float),
        }
    )
    return out.sort_values(ITEM, kind="stable").reset_index(drop=True)


def causal_discovery(
    table: pd.DataFrame,
    prior_order: Sequence[str] | None = CAUSAL_COLUMNS,
    columns: Sequence[str] | None = None,
    random_state: int = 0,
) -> pd.DataFrame:
    """DirectLiNGAM over z-scored per-item variables, optionally with a causal order prior.

    Rows with a missing value are dropped. With ``prior_order``, the prior knowledge matrix
    ``pk`` (causal-learn's convention: ``pk[j, i] = 0`` means no directed path from
    ``x_i`` to ``x_j``) forbids every path from a later variable of the order to an earlier
    one; all other entries are ``-1`` (unknown). ``prior_order=None`` runs without prior.

    Args:
        table: Output of :func:`item_causal_table` (or any numeric frame).
        prior_order: Variables from cause to effect; it sets the variables when
            ``columns`` is None. Must contain every variable.
        columns: Variables to use; defaults to ``prior_order`` or :data:`CAUSAL_COLUMNS`.
        random_state: Passed to DirectLiNGAM.

    Returns:
        The adjacency matrix ``B`` as causal-learn returns it: row = effect, column = cause,
        so ``B.loc["rating", "quality"]`` is the (standardised) effect of quality on rating.
        ``attrs`` holds ``n_rows`` and ``causal_order``.

    Raises:
        ValueError: On missing or constant columns, a bad order or too few rows.
    """
    from causallearn.search.FCMBased.lingam import DirectLiNGAM

    variables = list(columns or prior_order or CAUSAL_COLUMNS)
    if len(set(variables)) != len(variables) or len(variables) < 2:
        raise ValueError(f"need at least two distinct variables, got {variables}")
    require(table, variables, "table")
    if prior_order is not None:
        order = list(prior_order)
        if sorted(order) != sorted(variables):
            raise ValueError(
                f"prior_order {order} must list exactly the variables {variables} once each"
            )
    data = table[variables].apply(pd.to_numeric, errors="coerce").dropna()
    if len(data) < len(variables) + 2:
        raise ValueError(f"need at least {len(variables) + 2} complete rows, got {len(data)}")
    std = data.std(ddof=0)
    constant = std.index[~(std > 0)].tolist()
    if constant:
        raise ValueError(f"column(s) {constant} are constant; they cannot be standardised")
    z = ((data - data.mean()) / std).to_numpy(dtype=float)
    prior = None
    if prior_order is not None:
        position = {name: k for k, name in enumerate(prior_order)}
        prior = np.full((len(variables), len(variables)), -1)
        for i, earlier in enumerate(variables):
            for j, later in enumerate(variables):
                if position[later] > position[earlier]:
                    prior[i, j] = 0  # no path from `later` (x_j) into `earlier` (x_i)
    model = DirectLiNGAM(random_state=random_state, prior_knowledge=prior)
    model.fit(z)
    out = pd.DataFrame(model.adjacency_matrix_, index=variables, columns=variables)
    out.index.name, out.columns.name = "effect", "cause"
    out.attrs["n_rows"] = int(len(data))
    out.attrs["causal_order"] = [variables[k] for k in model.causal_order_]
    return out


def _draw_edge(ax: Any, start: tuple[float, float], end: tuple[float, float], weight: float,
               biggest: float) -> None:  # fmt: skip
    """One arrow cause -> effect, coloured by sign, as thick as ``|weight|``, with its label."""
    from matplotlib.patches import FancyArrowPatch

    arrow = FancyArrowPatch(
        start,
        end,
        arrowstyle="-|>",
        mutation_scale=16,
        shrinkA=28,
        shrinkB=28,
        connectionstyle="arc3,rad=0.12",
        color="tab:blue" if weight > 0 else "tab:red",
        linewidth=1 + 3 * abs(weight) / biggest,
    )
    ax.add_patch(arrow)
    (x0, y0), (x1, y1) = start, end
    # The arc bulges by rad/2 of the chord at its middle: put the label there.
    mx, my = (x0 + x1) / 2 + (y1 - y0) * 0.06, (y0 + y1) / 2 - (x1 - x0) * 0.06
    ax.text(mx, my, f"{weight:+.2f}", ha="center", va="center", fontsize=9,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})  # fmt: skip


def _check_adjacency(adjacency: pd.DataFrame, threshold: float) -> None:
    if not isinstance(adjacency, pd.DataFrame) or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError("adjacency must be a square DataFrame (row = effect, column = cause)")
    if list(adjacency.index) != list(adjacency.columns):
        raise ValueError("adjacency rows and columns must name the same variables in order")
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold!r}")


def causal_figure(
    adjacency: pd.DataFrame, threshold: float = 0.05, title: str = "DirectLiNGAM"
) -> Figure:
    """Draw the causal graph: nodes on a circle, arrows cause -> effect labelled by weight.

    Edges with ``|weight| <= threshold`` are omitted; positive weights are blue, negative
    red, and the line width grows with ``|weight|``. A graph with no edge left says so on
    the figure. Matplotlib only (no graphviz).
    """
    import matplotlib.pyplot as plt

    from recagents.plotting import NOTE_GID

    _check_adjacency(adjacency, threshold)
    names = list(adjacency.index)
    angles = np.pi / 2 - 2 * np.pi * np.arange(len(names)) / len(names)
    pos = {n: (np.cos(a), np.sin(a)) for n, a in zip(names, angles, strict=True)}
    fig, ax = plt.subplots(figsize=(6, 6))
    weights = adjacency.to_numpy(dtype=float)
    biggest = max(float(np.nanmax(np.abs(weights))), 1e-12)
    edges = 0
    for i, effect in enumerate(names):
        for j, cause in enumerate(names):
            w = weights[i, j]
            if i == j or not np.isfinite(w) or abs(w) <= threshold:
                continue
            _draw_edge(ax, pos[cause], pos[effect], float(w), biggest)
            edges += 1
    for name, (x, y) in pos.items():
        ax.text(x, y, name, ha="center", va="center", fontsize=11, zorder=3,
                bbox={"boxstyle": "round,pad=0.4", "fc": "#eeeeee", "ec": "#555555"})  # fmt: skip
    if edges == 0:
        ax.text(0, 0, f"no edge with |weight| > {threshold:g}", ha="center", va="center",
                fontsize=10, color="#a50f15", gid=NOTE_GID)  # fmt: skip
    ax.set_xlim(-1.45, 1.45)
    ax.set_ylim(-1.45, 1.45)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title)
    fig.tight_layout()
    return fig
