"""Shared figure theme and byte-reproducible figure saving for the notebooks.

Every notebook calls :func:`set_theme` (usually via :func:`recagents.notebook.setup`) so that
all figures look alike, and saves figures with :func:`savefig` so that re-running a notebook
rewrites identical PNG bytes (no version strings or timestamps in the file), which keeps
``figures/`` diffs meaningful.

Importing this module has no side effects: the theme is applied only when asked for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from recagents.data import Dataset

FIGURES_DIR_ENV = "RECAGENTS_FIGURES_DIR"
"""Environment variable that overrides the figures directory."""

SAVEFIG_ENV = "RECAGENTS_SAVEFIG"
"""Environment variable; ``"0"`` makes :func:`savefig` skip writing (smoke runs)."""

# Colour-blind-safe palette shared by every figure (seaborn's "colorblind").
PALETTE = "colorblind"

# PNG text chunks matplotlib would otherwise write. Agg's PNG writer adds only
# "Software" ("Matplotlib version X, https://matplotlib.org/") by default; a value of None
# drops the key. We also drop the other standard keys in case a caller's rcParams or a
# future matplotlib adds them, so the bytes depend only on the pixels and the dpi.
_REPRODUCIBLE_PNG_METADATA: dict[str, str | None] = {
    "Software": None,
    "Creation Time": None,
}

_RC_OVERRIDES = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "legend.title_fontsize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def set_theme() -> None:
    """Apply the one seaborn/matplotlib theme used by every notebook.

    A white-grid style, a colour-blind-safe palette and readable font sizes. Calling it more
    than once yields the same state (it resets to the same theme, it does not stack changes).

    Taught in: not shown in a notebook (used by recagents.notebook.setup).
    """
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette=PALETTE, rc=_RC_OVERRIDES)


def _find_repo_root(start: Path) -> Path | None:
    """Return the first directory at or above ``start`` that contains ``pyproject.toml``."""
    for directory in (start, *start.parents):
        if (directory / "pyproject.toml").is_file():
            return directory
    return None


def _resolve_figures_dir() -> Path:
    """Work out the figures directory without creating it (see :func:`figures_dir`)."""
    override = os.environ.get(FIGURES_DIR_ENV)
    if override:
        return Path(override).expanduser()
    cwd = Path.cwd().resolve()
    return (_find_repo_root(cwd) or cwd) / "figures"


def figures_dir() -> Path:
    """Return the directory that figures are saved to, creating it if needed.

    Resolution order: the ``RECAGENTS_FIGURES_DIR`` environment variable; else ``figures/``
    at the repository root, found by walking up from the current working directory to the
    first directory holding a ``pyproject.toml`` (notebooks run with cwd ``notebooks/``);
    else ``./figures``.

    Taught in: not shown in a notebook (used by recagents.plotting.savefig).

    Returns:
        The (existing) figures directory.

    """
    directory = _resolve_figures_dir()
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _check_name(name: str) -> None:
    """Reject figure names that are not a bare file stem (the ``.png`` is added for you)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"figure name must be a non-empty string, got {name!r}")
    if "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name):
        raise ValueError(
            f"figure name {name!r} must not contain path separators; "
            f"figures always go to figures_dir()"
        )
    if name in {".", ".."} or Path(name).suffix:
        raise ValueError(
            f"figure name {name!r} must not have an extension; pass e.g. "
            f"'00_rating_distribution' and savefig writes '00_rating_distribution.png'"
        )


def savefig(fig: Figure, name: str, dpi: int = 150) -> Path:
    """Save ``fig`` as a byte-reproducible PNG ``figures_dir()/<name>.png``.

    The PNG carries no matplotlib version or timestamp, the dpi is fixed and the bounding box
    is tight, so saving the same figure again writes identical bytes. Setting the environment
    variable ``RECAGENTS_SAVEFIG=0`` skips writing (useful for smoke runs).

    Taught in: notebook 00, section 1 "The data"; notebook 01, section 5 "Ranking 1 + 9 candidates";
        notebook 02, section 3 "Comparing five recommenders (Table 2)";
        notebook 03, section 3 "The loop (Table 4, and the round-limit curve)";
        notebook 04, section 4 "One-turn retrieval and ranking (Table 5)";
        notebook 05, section 4 "Stage comparison"; notebook 06, section 3 "The leaderboard".

    Args:
        fig: The matplotlib figure to save.
        name: File stem without directory or extension, e.g. ``"00_rating_distribution"``.
        dpi: Resolution in dots per inch.

    Returns:
        The path written (or that would have been written when saving is disabled).

    Raises:
        ValueError: If ``name`` contains a path separator or an extension.

    """
    _check_name(name)
    if os.environ.get(SAVEFIG_ENV, "1").strip() == "0":
        return _resolve_figures_dir() / f"{name}.png"
    path = figures_dir() / f"{name}.png"
    fig.savefig(
        path,
        format="png",
        dpi=dpi,
        bbox_inches="tight",
        metadata=dict(_REPRODUCIBLE_PNG_METADATA),
    )
    return path


def dataset_overview(dataset: Dataset) -> Figure:
    """Four panels: rating distribution, item popularity long tail, genres, user activity.

    Panels whose data the dataset lacks (no ratings, no genres) say so instead of failing.

    Taught in: notebook 00, section 1 "The data".
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from recagents.columns import GENRES, ITEM, RATING, USER

    frame = dataset.interactions
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    ax = axes[0, 0]
    if RATING in frame:
        shares = frame[RATING].value_counts(normalize=True).sort_index()
        labels = [f"{value:g}" for value in shares.index]
        ax.bar(labels, shares.to_numpy() * 100)
        ax.set(title="Rating distribution", xlabel="rating", ylabel="% of interactions")
    else:
        ax.text(0.5, 0.5, "no ratings in this dataset", ha="center", transform=ax.transAxes)
    ax = axes[0, 1]
    counts = np.sort(frame.groupby(ITEM).size().to_numpy())[::-1]
    ax.plot(np.arange(1, len(counts) + 1), counts)
    ax.set(
        title="Item popularity (long tail)",
        xlabel="item rank by popularity",
        ylabel="interactions",
        yscale="log",
    )
    ax = axes[1, 0]
    if dataset.items is not None and dataset.items[GENRES].map(len).sum() > 0:
        genres = dataset.items[[ITEM, GENRES]].explode(GENRES).dropna()
        per_genre = frame[[ITEM]].merge(genres, on=ITEM)[GENRES].value_counts()
        ax.barh(per_genre.index[::-1], per_genre.to_numpy()[::-1] / len(frame) * 100)
        ax.set(title="Genres of watched items", xlabel="% of interactions (multi-label)")
    else:
        ax.text(0.5, 0.5, "no genres in this dataset", ha="center", transform=ax.transAxes)
    ax = axes[1, 1]
    activity = frame.groupby(USER).size()
    ax.hist(activity, bins=40)
    ax.set(title="User activity", xlabel="interactions per user", ylabel="users")
    fig.suptitle(f"{dataset.name}: {len(frame):,} interactions", y=1.0)
    fig.tight_layout()
    return fig


def interval_plot(
    summary: pd.DataFrame,
    x: str = "mean",
    y: str = "method",
    hue: str | None = None,
    title: str = "",
    xlabel: str = "",
) -> Figure:
    """Point estimates with their confidence intervals, one row per method.

    ``summary`` needs columns ``y``, ``mean``, ``low`` and ``high`` (as from
    :func:`recagents.metrics.summarize`), and optionally ``hue`` for groups side by side.

    Taught in: notebook 00, section 5.1 "Candidate protocols (1+9 and 1+19)";
        notebook 01, section 5 "Ranking 1 + 9 candidates";
        notebook 02, section 3 "Comparing five recommenders (Table 2)";
        notebook 03, section 6 "User simulation (Table 5)";
        notebook 04, section 4 "One-turn retrieval and ranking (Table 5)";
        notebook 05, section 6 "Manipulation: an agent item that lobbies the recommender";
        notebook 06, section 3 "The leaderboard".
    """
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    methods = list(dict.fromkeys(summary[y]))
    groups = list(dict.fromkeys(summary[hue])) if hue else [None]
    colors = sns.color_palette(PALETTE, len(groups))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(methods) * max(1, len(groups) / 1.5) + 1.2))
    offsets = np.linspace(-0.2, 0.2, len(groups)) if len(groups) > 1 else [0.0]
    for group, offset, color in zip(groups, offsets, colors, strict=True):
        part = summary if group is None else summary[summary[hue] == group]
        rows = part.set_index(y).reindex(methods).dropna(subset=[x])
        positions = np.array([methods.index(m) for m in rows.index]) + offset
        errors = np.vstack([rows[x] - rows["low"], rows["high"] - rows[x]])
        ax.errorbar(rows[x], positions, xerr=errors, fmt="o", color=color, capsize=3, label=group)
    ax.set_yticks(range(len(methods)), methods)
    ax.invert_yaxis()
    ax.set(title=title, xlabel=xlabel or x)
    if hue:
        ax.legend(title=hue, loc="best")
    fig.tight_layout()
    return fig


def curves_plot(curves: dict[str, list[float]], title: str = "", ylabel: str = "") -> Figure:
    """One line per named curve over epochs (e.g. validation NDCG@10 while training).

    Taught in: notebook 00, section 4 "Training the baselines".
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in curves.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=name)
    ax.set(title=title, xlabel="epoch", ylabel=ylabel)
    ax.legend()
    fig.tight_layout()
    return fig
