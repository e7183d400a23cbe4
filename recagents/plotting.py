"""Shared figure theme and byte-reproducible figure saving for the notebooks.

Every notebook calls :func:`set_theme` (usually via :func:`recagents.notebook.setup`) so that
all figures look alike, and saves figures with :func:`savefig` so that re-running a notebook
rewrites identical PNG bytes (no version strings or timestamps in the file), which keeps
``figures/`` diffs meaningful.

Figures must never mislead, so the shared helpers below are used by every figure function:
:func:`note_if_degenerate` says on the panel when all its values are equal (and pins the axis
instead of zooming on a flat line), :func:`integer_axis` keeps rounds and pages whole,
:func:`fixed_scale` and :data:`NATURAL_RANGES` give the paper's fixed scales, and
:func:`reference_line` draws the paper's value (or a recorded capable-model run's) on the same
axes as ours. :func:`interval_plot` and :func:`curves_plot` apply them by themselves.

Importing this module has no side effects: the theme is applied only when asked for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from recagents.data.datasets import Dataset

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
    metadata = dict(_REPRODUCIBLE_PNG_METADATA)
    metadata[FLAT_PANELS_KEY] = json.dumps(flat_panels(fig))
    fig.savefig(path, format="png", dpi=dpi, bbox_inches="tight", metadata=metadata)
    return path


#: The markers matplotlib's errorbar draws its caps with.
_CAP_MARKERS = ("_", "|")

#: PNG text key under which :func:`savefig` lists the figure's flat panels (see flat_panels).
FLAT_PANELS_KEY = "recagents:flat-panels"


def _panel_points(ax: Axes) -> list[tuple[float, float]]:
    """The data points a panel draws: its data-space lines, markers and bars (not axhlines)."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Rectangle

    points: list[tuple[float, float]] = []
    for line in ax.get_lines():
        if line.get_transform() != ax.transData:  # axhline/axvline: a reference, not data
            continue
        if line.get_marker() in _CAP_MARKERS and line.get_linestyle() in ("None", ""):
            continue  # an error bar's caps: the interval, not the estimate
        xs, ys = (np.asarray(v, dtype=float).ravel() for v in line.get_data())
        points += [(x, y) for x, y in zip(xs, ys, strict=False)]
    for collection in ax.collections:
        if isinstance(collection, PathCollection):
            offsets = np.asarray(collection.get_offsets(), dtype=float).reshape(-1, 2)
            points += [(float(x), float(y)) for x, y in offsets]
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_data_transform() == ax.transData:
            x, y = patch.get_xy()
            points.append((x + patch.get_width(), y + patch.get_height()))
    return [(x, y) for x, y in points if np.isfinite(x) and np.isfinite(y)]


def flat_panels(fig: Figure) -> list[dict[str, Any]]:
    """The panels of ``fig`` whose data show no difference, and whether they say so.

    A panel is flat when it carries a note of :func:`note_if_degenerate` (or any text with its
    gid, which only a degenerate panel gets), or when it draws two or more data points that
    all share one value on the axis along which the others vary (every y equal while x
    varies, or the reverse), e.g. a curve of equal values or equal estimates across methods.
    Reference lines drawn across the panel and error-bar caps are not data. ``noted`` tells
    whether the panel says on its face why it is flat (it carries such a note).
    """
    import numpy as np

    found = []
    for index, ax in enumerate(fig.get_axes()):
        noted = any(text.get_gid() == NOTE_GID for text in ax.texts)
        points = _panel_points(ax)
        flat = False
        if len(points) >= 2:
            xs, ys = np.array(points).T
            equal = [bool(np.ptp(v) <= 1e-9 * max(1.0, float(np.abs(v).max()))) for v in (xs, ys)]
            flat = equal[0] != equal[1]
        if flat or noted:
            found.append({"panel": ax.get_title() or f"panel {index + 1}", "noted": noted})
    return found


def read_flat_panels(path: str | os.PathLike[str]) -> list[dict[str, Any]] | None:
    """The flat-panel list a PNG written by :func:`savefig` carries (None: not recorded)."""
    from PIL import Image

    with Image.open(path) as image:
        text = image.text.get(FLAT_PANELS_KEY) if hasattr(image, "text") else None
    return None if text is None else list(json.loads(text))


def dataset_overview(dataset: Dataset) -> Figure:
    """Four panels: rating distribution, item popularity long tail, genres, user activity.

    Panels whose data the dataset lacks (no ratings, no genres) say so instead of failing.
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


# --------------------------------------------------------------------------- honest axes

#: The natural range of a metric, by its name (lower case, without an ``@k`` suffix). A panel
#: whose values are all equal is pinned to this range instead of being autoscaled around a
#: flat line; a figure function may also pin a panel to it always (``scale=``).
NATURAL_RANGES: dict[str, tuple[float, float]] = {
    "satisfaction": (1.0, 10.0),
    "rating": (1.0, 5.0),
    "hr": (0.0, 1.0),
    "hit": (0.0, 1.0),
    "hit rate": (0.0, 1.0),
    "ndcg": (0.0, 1.0),
    "recall": (0.0, 1.0),
    "precision": (0.0, 1.0),
    "accuracy": (0.0, 1.0),
    "f1": (0.0, 1.0),
    "mrr": (0.0, 1.0),
    "share": (0.0, 1.0),
    "rate": (0.0, 1.0),
    "percent": (0.0, 100.0),
}

#: How a reference value is drawn: the paper's value, a recorded run of a capable model, or
#: a simple baseline (chance, a tool alone).
REFERENCE_STYLES: dict[str, dict[str, Any]] = {
    "paper": {"color": "black", "linestyle": "--", "linewidth": 1.3},
    "recorded": {"color": "#7b3294", "linestyle": "-.", "linewidth": 1.3},
    "baseline": {"color": "grey", "linestyle": ":", "linewidth": 1.2},
}

#: The marker of a reference value that belongs to one row of an interval plot.
REFERENCE_MARKERS: dict[str, dict[str, Any]] = {
    "paper": {"marker": "D", "s": 46, "facecolors": "none", "edgecolors": "black"},
    "recorded": {"marker": "X", "s": 60, "color": "#7b3294"},
    "baseline": {"marker": "|", "s": 120, "color": "grey"},
}

#: The ``gid`` of the note :func:`note_if_degenerate` writes (tests and callers look it up).
NOTE_GID = "degenerate-note"


def natural_range(metric: str) -> tuple[float, float] | None:
    """The natural range of a metric by name, e.g. ``"NDCG@10"`` -> ``(0, 1)``; None if unknown."""
    key = str(metric).strip().lower().split("@")[0].strip()
    return NATURAL_RANGES.get(key)


def resolve_scale(scale: tuple[float, float] | str | None) -> tuple[float, float] | None:
    """Turn a ``scale=`` argument (a metric name or ``(low, high)``) into ``(low, high)``.

    Raises:
        ValueError: For an unknown metric name or a range with ``low >= high``.
    """
    if scale is None:
        return None
    if isinstance(scale, str):
        found = natural_range(scale)
        if found is None:
            raise ValueError(
                f"scale {scale!r} names no known metric; known: {sorted(NATURAL_RANGES)} "
                f"(or pass (low, high))"
            )
        return found
    low, high = (float(v) for v in scale)
    if not low < high:
        raise ValueError(f"scale must be (low, high) with low < high, got {scale!r}")
    return low, high


def fixed_scale(ax: Axes, low: float, high: float, axis: str = "y", pad: float = 0.03) -> None:
    """Pin one axis to ``[low, high]``, with a small margin so edge markers stay whole.

    Use it where the paper's scale is fixed (satisfaction 1-10, HR 0-1), so that a small
    wobble is not zoomed to fill the panel.
    """
    _check_axis(axis)
    margin = pad * (high - low)
    if axis == "y":
        ax.set_ylim(low - margin, high + margin)
    else:
        ax.set_xlim(low - margin, high + margin)


def integer_axis(ax: Axes, axis: str = "x") -> None:
    """Put ticks on whole numbers only, for rounds, pages, steps, epochs and counts."""
    from matplotlib.ticker import MaxNLocator

    _check_axis(axis)
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def reference_line(
    ax: Axes, value: float, label: str, style: str = "paper", axis: str = "y"
) -> Any:
    """A labelled line across the panel at a reference value (the paper's, a recorded run's).

    ``axis="y"`` draws a horizontal line at ``y = value``; ``"x"`` a vertical one. The legend
    label carries the value, so the reader sees it even where the line leaves the panel.

    Returns:
        The matplotlib line (its ``gid`` is ``"reference:<style>"``).
    """
    _check_axis(axis)
    if style not in REFERENCE_STYLES:
        raise ValueError(f"style must be one of {sorted(REFERENCE_STYLES)}, got {style!r}")
    draw = ax.axhline if axis == "y" else ax.axvline
    line = draw(float(value), label=f"{label}: {value:.3g}", zorder=1.5, **REFERENCE_STYLES[style])
    line.set_gid(f"reference:{style}")
    return line


def note_if_degenerate(
    ax: Axes,
    values: Any,
    what: str = "values",
    axis: str = "y",
    scale: tuple[float, float] | str | None = None,
    include: Sequence[float] = (),
    count: int | None = None,
    why: str | None = None,
) -> str | None:
    """Say so on the panel when all its values are equal, and pin the axis instead of zooming.

    A panel of two or more equal values (all zero, or a zero-width range) would otherwise be
    autoscaled around a flat line, which looks like a result. Then the note ("every value is
    0", "all 5 methods scored 0.404 — no difference to show") is written on the axes, on
    the side away from the data, and ``axis`` is pinned to ``scale`` (a metric name or
    ``(low, high)``), else to a range around the value (0-1 for a value in it), widened to
    ``include`` (e.g. reference values). An empty panel gets "no values to show". ``count``
    is the number the note names (default: the number of values). ``why`` is appended to the
    note: the reason the values are equal (e.g. "every agent left on page 1"), so that a
    flat panel explains itself.

    Returns:
        The note written, or None when the panel is not degenerate (nothing is changed).
    """
    import numpy as np

    _check_axis(axis)
    array = np.asarray(values, dtype=float).ravel()
    finite = array[np.isfinite(array)]
    value = _all_equal(finite)
    if finite.size == 0:
        note = "no values to show"
    elif value is None:
        return None
    else:
        n = finite.size if count is None else count
        note = (
            f"every value is 0 ({n} {what})"
            if value == 0
            else f"all {n} {what} are {value:.3g} — no difference to show"
        )
    if why:
        note = f"{note}: {why}"
    low, high = resolve_scale(scale) or _range_around(value)
    extra = [float(v) for v in include if np.isfinite(v)]
    low, high = min([low, *extra]), max([high, *extra])
    fixed_scale(ax, low, high, axis=axis)
    place_note(ax, note, value, (low, high), axis)
    return note


def _all_equal(values: Any) -> float | None:
    """The common value of two or more finite values that are all equal, else None."""
    import numpy as np

    array = np.asarray(values, dtype=float).ravel()
    finite = array[np.isfinite(array)]
    if finite.size < 2 or np.ptp(finite) > 1e-9 * max(1.0, float(np.abs(finite).max())):
        return None
    return float(finite[0])


def _check_axis(axis: str) -> None:
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")


def _range_around(value: float | None) -> tuple[float, float]:
    """A range that shows ``value`` without zooming: 0-1 for shares, else from 0 to twice it."""
    if value is None or 0.0 <= value <= 1.0:
        return 0.0, 1.0
    if -1.0 <= value < 0.0:
        return -1.0, 0.0
    return (0.0, 2.0 * value) if value > 0 else (2.0 * value, 0.0)


def place_note(
    ax: Axes, note: str, value: float | None, limits: tuple[float, float], axis: str
) -> None:
    """Write ``note`` in a box on the half of the panel the value is not in."""
    import textwrap

    low, high = limits
    frac = 0.5 if value is None else (value - low) / (high - low)
    inverted = ax.yaxis_inverted() if axis == "y" else ax.xaxis_inverted()
    frac = 1.0 - frac if inverted else frac
    far = 0.27 if frac > 0.5 else 0.73
    x, y = (0.5, far) if axis == "y" else (far, 0.5)
    ax.text(
        x, y, textwrap.fill(note, 34), transform=ax.transAxes, ha="center", va="center",
        fontsize=9, color="#a50f15", zorder=6, gid=NOTE_GID,
        bbox={"boxstyle": "round,pad=0.35", "fc": "white", "ec": "#a50f15", "alpha": 0.92},
    )  # fmt: skip


def _interval_words(mean: float, low: float, high: float) -> str:
    """``mean [low, high]``, or ``mean, no spread`` when the interval has no width."""
    if abs(high - low) <= 1e-12:
        return f"{mean:.3g}, no spread"
    return f"{mean:.3g} [{low:.3g}, {high:.3g}]"


def _identical_rows(rows: pd.DataFrame, x: str, least: int = 3) -> list[str]:
    """Notes for rows (``least`` or more, not all) with the same estimate and interval.

    Two equal rows are common and visible at a glance; three or more (e.g. every LLM variant
    returning the same rankings) are worth naming.
    """
    keys = rows[[x, "low", "high"]].round(9).apply(tuple, axis=1)
    notes = []
    for key, members in rows.groupby(keys, sort=False):
        if least <= len(members) < len(rows):
            mean, low, high = key
            names = ", ".join(str(m) for m in members.index)
            notes.append(f"{len(members)} identical, {_interval_words(mean, low, high)}: {names}")
    return notes


def _row_references(
    ax: Axes,
    refs: Any,
    label: str,
    style: str,
    methods: list[Any],
    offset_of: dict[Any, float],
) -> list[float]:
    """Draw reference values on an interval plot; return the values drawn.

    A number is a vertical line; a mapping puts a marker on a row, keyed by method (the
    row's middle) or by ``(method, group)`` (that group's offset).
    """
    import math
    from collections.abc import Mapping

    if refs is None:
        return []
    if not isinstance(refs, Mapping):
        reference_line(ax, float(refs), label, style, axis="x")
        return [float(refs)]
    xs, ys = [], []
    for key, value in refs.items():
        method, group = key if isinstance(key, tuple) else (key, None)
        if method not in methods or (group is not None and group not in offset_of):
            raise ValueError(
                f"{label} value for {key!r}: no such row; rows are {methods}"
                + (f", groups {list(offset_of)}" if len(offset_of) > 1 else "")
            )
        if value is None or not math.isfinite(float(value)):
            continue
        xs.append(float(value))
        ys.append(methods.index(method) + (0.0 if group is None else offset_of[group]))
    if xs:
        shown = ax.scatter(xs, ys, label=label, zorder=4, **REFERENCE_MARKERS[style])
        shown.set_gid(f"reference:{style}")
    return xs


def interval_plot(
    summary: pd.DataFrame,
    x: str = "mean",
    y: str = "method",
    hue: str | None = None,
    title: str = "",
    xlabel: str = "",
    *,
    scale: tuple[float, float] | str | None = None,
    paper: float | Mapping[Any, float] | None = None,
    recorded: float | Mapping[Any, float] | None = None,
    paper_label: str = "paper",
    recorded_label: str = "recorded run",
    note: bool = True,
) -> Figure:
    """Point estimates with their confidence intervals, one row per method.

    ``summary`` needs columns ``y``, ``mean``, ``low`` and ``high`` (as from
    :func:`recagents.metrics.summarize`), and optionally ``hue`` for groups side by side.

    The figure never misleads: with ``note`` (the default) a panel whose values are all
    equal says so and is pinned to ``scale`` (or a range around the value) instead of
    autoscaled, an all-equal ``hue`` group and rows with identical results are named under
    the axis. ``scale`` (a metric name such as ``"satisfaction"``, or ``(low, high)``) pins
    the axis always. ``paper`` and ``recorded`` draw reference values on the same axis: a
    number is a vertical line; a mapping marks rows, keyed by method or ``(method, group)``.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    methods = list(dict.fromkeys(summary[y]))
    groups = list(dict.fromkeys(summary[hue])) if hue else [None]
    colors = sns.color_palette(PALETTE, len(groups))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(methods) * max(1, len(groups) / 1.5) + 1.2))
    offsets = np.linspace(-0.2, 0.2, len(groups)) if len(groups) > 1 else [0.0]
    captions: list[str] = []
    for group, offset, color in zip(groups, offsets, colors, strict=True):
        part = summary if group is None else summary[summary[hue] == group]
        rows = part.set_index(y).reindex(methods).dropna(subset=[x])
        positions = np.array([methods.index(m) for m in rows.index]) + offset
        errors = np.vstack([rows[x] - rows["low"], rows["high"] - rows[x]])
        ax.errorbar(rows[x], positions, xerr=errors, fmt="o", color=color, capsize=3, label=group)
        captions += _group_captions(rows, x, group, _plural(y), many=len(groups) > 1)
    panel_note = None
    ax.set_yticks(range(len(methods)), methods)
    ax.invert_yaxis()
    offset_of = dict(zip(groups, offsets, strict=True))
    drawn = _row_references(ax, paper, paper_label, "paper", methods, offset_of)
    drawn += _row_references(ax, recorded, recorded_label, "recorded", methods, offset_of)
    limits = resolve_scale(scale)
    if limits is not None:
        fixed_scale(ax, min([limits[0], *drawn]), max([limits[1], *drawn]), axis="x")
    if note:
        values = summary[[x, "low", "high"]].to_numpy(dtype=float)
        panel_note = note_if_degenerate(
            ax, values, _plural(y), axis="x", scale=scale, include=drawn, count=len(summary)
        )
    label = xlabel or x
    if note and captions and panel_note is None:
        label = "\n".join([label, *captions])
        fig.set_figheight(fig.get_figheight() + 0.2 * label.count("\n"))
    ax.set(title=title, xlabel=label)
    if drawn or (hue and len(groups) > 1):  # markers or several series: keep the legend off
        fig.set_figwidth(fig.get_figwidth() + 2.6)
        ax.legend(title=hue, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    elif hue:
        ax.legend(title=hue, loc="best")
    fig.tight_layout()
    return fig


def _plural(noun: str) -> str:
    """``"method"`` -> ``"methods"``; a name already plural (``"memories"``) is kept."""
    return noun if noun.endswith("s") else f"{noun}s"


def _group_captions(rows: pd.DataFrame, x: str, group: Any, what: str, many: bool) -> list[str]:
    """Lines under an interval plot: an all-equal group (with hues), identical rows."""
    import textwrap

    prefix = f"{group}: " if many else ""
    value = _all_equal(rows[[x, "low", "high"]].to_numpy(dtype=float))
    if many and len(rows) > 1 and value is not None:
        return [f"{prefix}all {len(rows)} {what} are {value:.3g} — no difference to show"]
    same = rows[[x, "low", "high"]].round(9).drop_duplicates()
    if len(rows) > 1 and len(same) == 1:  # every row the same estimate and interval
        mean, low, high = same.iloc[0]
        line = (f"{prefix}all {len(rows)} {what} identical, {_interval_words(mean, low, high)}"
                " — no difference to show")  # fmt: skip
        return [textwrap.fill(line, 56, subsequent_indent="  ")]
    lines = [prefix + line for line in _identical_rows(rows, x)]
    return [textwrap.fill(line, 56, subsequent_indent="  ") for line in lines]


def curves_plot(
    curves: dict[str, list[float]],
    title: str = "",
    ylabel: str = "",
    *,
    xlabel: str = "epoch",
    scale: tuple[float, float] | str | None = None,
    paper: float | Mapping[str, float] | None = None,
    recorded: float | Mapping[str, float] | None = None,
    paper_label: str = "paper",
    recorded_label: str = "recorded run",
    note: bool = True,
) -> Figure:
    """One line per named curve over epochs (e.g. validation NDCG@10 while training).

    The x axis has whole-number ticks. With ``note`` (the default) curves that are all one
    flat value say so and the y axis is pinned (to ``scale`` or around the value);
    ``scale`` pins it always; ``paper`` and ``recorded`` draw reference lines (a number, or
    a mapping name -> value for several).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in curves.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=name)
    drawn = _line_references(ax, paper, paper_label, "paper")
    drawn += _line_references(ax, recorded, recorded_label, "recorded")
    limits = resolve_scale(scale)
    if limits is not None:
        fixed_scale(ax, min([limits[0], *drawn]), max([limits[1], *drawn]), axis="y")
    if note:
        flat = [v for values in curves.values() for v in values]
        note_if_degenerate(ax, flat, "points", axis="y", scale=scale, include=drawn)
    integer_axis(ax, "x")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend()
    fig.tight_layout()
    return fig


def _line_references(ax: Axes, refs: Any, label: str, style: str) -> list[float]:
    """Horizontal reference lines: one number, or a mapping name -> value."""
    from collections.abc import Mapping

    if refs is None:
        return []
    items = refs.items() if isinstance(refs, Mapping) else [(None, refs)]
    drawn = []
    for name, value in items:
        reference_line(ax, float(value), label if name is None else f"{label} ({name})", style)
        drawn.append(float(value))
    return drawn
