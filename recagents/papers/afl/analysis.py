"""AFL's analyses for the notebook: popularity and position bias, figures, a dialogue trace.

Does the loop amplify bias? What each method chose (:func:`chosen_items`), how popular and
where in the list it was (:func:`bias_measures`), paired tests of loop against single agent
(:func:`bias_tests`), the figures, and one dialogue as readable text
(:func:`dialogue_trace`).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION
from recagents.metrics import paired_bootstrap
from recagents.papers.afl.config import ROUND
from recagents.papers.afl.samples import Sample

# --------------------------------------------------------------------------- bias


def chosen_items(samples: Sequence[Sample], methods: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """What each method chose per sample, with the display position, beside the truth.

    Args:
        samples: The recommendation samples.
        methods: Method name → ``[user_id, item_id]`` of its choice (``None`` = nothing).

    Returns:
        ``[method, user_id, item_id, position]``; ``Ground truth`` (the target) and
        ``Tool (SASRec)`` (the prior) are added; position is 1-based.
    """
    position_of = {s.user: {item: i + 1 for i, item in enumerate(s.candidates)} for s in samples}
    rows = []
    for s in samples:
        rows.append(("Ground truth", s.user, s.target, position_of[s.user][s.target]))
        rows.append(("Tool (SASRec)", s.user, s.prior, position_of[s.user][s.prior]))
    for method, frame in methods.items():
        for user, item in frame[[USER, ITEM]].itertuples(index=False):
            if item is None or pd.isna(item):
                continue
            rows.append((method, user, item, position_of[user][item]))
    return pd.DataFrame(rows, columns=["method", USER, ITEM, "position"])


def bias_measures(chosen: pd.DataFrame, popularity: pd.Series, n_items: int) -> pd.DataFrame:
    """Add each chosen item's training popularity and its popularity percentile.

    Args:
        chosen: From :func:`chosen_items`.
        popularity: Training interactions per item id.
        n_items: Catalogue size (items never interacted with have popularity 0).

    Returns:
        ``chosen`` with ``popularity`` (count) and ``pop_percentile`` (share of the
        catalogue strictly less popular, 0-100).
    """
    counts = popularity.astype(float)
    sorted_counts = np.sort(
        np.concatenate([counts.to_numpy(), np.zeros(max(0, n_items - len(counts)))])
    )
    frame = chosen.copy()
    frame["popularity"] = frame[ITEM].map(counts).fillna(0.0)
    below = np.searchsorted(sorted_counts, frame["popularity"].to_numpy(), side="left")
    frame["pop_percentile"] = 100.0 * below / len(sorted_counts)
    return frame


def bias_tests(
    measures: pd.DataFrame, loop: str, single: str, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Does the loop amplify bias? Paired differences ``loop - single`` per measure.

    Measures: mean popularity percentile of the chosen item, mean display position, and the
    share of choices at position 1. "Amplifies" means the 95% interval of the difference
    lies entirely on the biased side (more popular; earlier positions).

    Returns:
        ``[measure, loop, single, diff, low, high, p_value, amplifies]``.
    """
    both = measures[measures["method"].isin([loop, single])]
    wide = both.pivot_table(index=USER, columns="method", values=["pop_percentile", "position"])
    wide = wide.dropna()
    rows = []
    specs = [
        ("popularity percentile", "pop_percentile", lambda v: v, 1.0),
        ("mean position", "position", lambda v: v, -1.0),
        ("share at position 1", "position", lambda v: (v == 1).astype(float), 1.0),
    ]
    for name, column, transform, biased_sign in specs:
        a = transform(wide[(column, loop)].to_numpy(float))
        b = transform(wide[(column, single)].to_numpy(float))
        if len(a) == 0:
            continue
        result = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
        low, high = result.low, result.high
        amplifies = (low > 0) if biased_sign > 0 else (high < 0)
        rows.append(
            {"measure": name, "loop": float(a.mean()), "single": float(b.mean()),
             "diff": result.diff, "low": low, "high": high, "p_value": result.p_value,
             "amplifies": bool(amplifies), "n": len(a)}
        )  # fmt: skip
    return pd.DataFrame(rows)


def bias_figure(measures: pd.DataFrame, n_candidates: int, title: str = "") -> Any:
    """Two panels: popularity percentile of the chosen items, and their display positions.

    The percentile axis is the full 0-100; if every chosen item has the same percentile the
    panel says so. Methods that chose the same item for every sample (the loop when every
    dialogue ends in round 1) draw coinciding boxes and bars; the title then names them.
    """
    import matplotlib.pyplot as plt

    from recagents.plotting import note_if_degenerate

    methods = list(dict.fromkeys(measures["method"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    data = [measures.loc[measures["method"] == m, "pop_percentile"].to_numpy() for m in methods]
    left.boxplot(data, vert=False, tick_labels=methods, showmeans=True)
    left.set_xlabel("popularity percentile of the chosen item (training counts)")
    left.set_xlim(0, 100)
    note_if_degenerate(left, measures["pop_percentile"], "choices", axis="x", scale=(0, 100))
    left.set_title("Popularity bias")
    positions = np.arange(1, n_candidates + 1)
    width = 0.8 / max(1, len(methods))
    for k, method in enumerate(methods):
        picked = measures.loc[measures["method"] == method, "position"]
        share = picked.value_counts(normalize=True).reindex(positions, fill_value=0.0)
        right.bar(positions + (k - (len(methods) - 1) / 2) * width, share.to_numpy(), width,
                  label=method)  # fmt: skip
    right.axhline(1 / n_candidates, color="grey", linestyle=":", linewidth=1, label="uniform")
    right.set_xlabel("position of the chosen candidate in the displayed list")
    right.set_ylabel("share of samples")
    right.set_xticks(positions)
    right.set_title("Position bias")
    right.legend(fontsize=8)
    same = identical_choices(measures)
    if same:
        title = f"{title}\n" if title else ""
        title += "; ".join(same)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def identical_choices(measures: pd.DataFrame) -> list[str]:
    """Notes for pairs of methods that chose the same item for every sample (none: empty)."""
    chosen = {
        method: dict(zip(group[USER], group[ITEM], strict=True))
        for method, group in measures.groupby("method", sort=False)
    }
    names = list(chosen)
    return [
        f"{a} and {b} chose the same item in all {len(chosen[a])} samples (they coincide)"
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if chosen[a] == chosen[b]
    ]


def rounds_curve_figure(
    curve: pd.DataFrame,
    reference: dict[str, float] | None = None,
    n_candidates: int = 20,
    paper: Mapping[str, float] | None = None,
    scale: tuple[float, float] | None = (0.0, 1.0),
    label: str = "AFL (round limit)",
    title: str = "HR@1 by round limit (95% CI)",
    why_flat: str = "",
    chance: float | None = None,
) -> Any:
    """HR@1 against the round limit, with intervals, and horizontal reference lines.

    Round limits get whole-number ticks and HR@1 its full 0-1 scale (``scale=None``
    autoscales); a curve that is the same at every limit (e.g. 0 throughout) says so.
    ``reference`` lines are our own baselines (e.g. the tool model alone); ``paper`` lines
    (label -> HR@1, e.g. the paper's AFL and single-agent rows) are drawn in the paper's
    style on the same axis.

    Args:
        curve: ``[limit, mean, low, high]``.
        reference: Label → HR@1 drawn as a dashed line (e.g. the tool model alone).
        n_candidates: Candidates per sample, for the axis label.
        paper: Label → the paper's HR@1, drawn as black reference lines.
        scale: The HR@1 axis range; None autoscales.
        label: The curve's legend entry (say "scripted" for a scripted user agent).
        title: The figure's title.
        why_flat: Why the curve may be the same at every limit (e.g. "24 of 24 dialogues
            ended in round 1"), added to the note only when it is.
        chance: HR@1 of a uniformly random pick (1 / candidates), drawn as a dotted line.
    """
    import matplotlib.pyplot as plt

    from recagents.plotting import (
        fixed_scale,
        integer_axis,
        note_if_degenerate,
        place_note,
        reference_line,
    )

    fig, ax = plt.subplots(figsize=(8.2, 4.2))
    x = curve["limit"].to_numpy()
    y = curve["mean"].to_numpy()
    ax.errorbar(x, y, yerr=[y - curve["low"].to_numpy(), curve["high"].to_numpy() - y],
                marker="o", capsize=4, label=label)  # fmt: skip
    for k, (label, value) in enumerate((reference or {}).items()):
        ax.axhline(value, linestyle="--", color=f"C{k + 1}", label=label)
    if chance is not None:
        ax.axhline(
            chance, linestyle=":", color="0.4", label=f"chance (1/{n_candidates}): {chance:.3g}"
        )
    paper_styles = ("--", ":", "-.")
    for k, (label, value) in enumerate((paper or {}).items()):
        line = reference_line(ax, value, label, style="paper")
        line.set_linestyle(paper_styles[k % len(paper_styles)])
    if scale is not None:
        fixed_scale(ax, *scale)
    values = curve[["mean", "low", "high"]].to_numpy(dtype=float)
    flat = note_if_degenerate(ax, values, "round limits", scale=scale, count=len(curve))
    if flat is None and len(values) > 1 and (values.round(9) == values[0].round(9)).all():
        mean, low, high = values[0]
        note = (f"the same HR@1 at every round limit, {mean:.3g} [{low:.3g}, {high:.3g}]: "
                "no extra round changed a hit")  # fmt: skip
        note += f" ({why_flat})" if why_flat else ""
        place_note(ax, note, float(mean), ax.get_ylim(), "y")
    integer_axis(ax, "x")
    ax.set_xticks(x)
    ax.set_xlabel("maximum rounds (1 = single recommendation agent)")
    ax.set_ylabel(f"HR@1 over {n_candidates} candidates")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- teaching


def _wrap(text: Any, width: int) -> str:
    return textwrap.fill(str(text or ""), width=width, initial_indent="    ",
                         subsequent_indent="    ")  # fmt: skip


def _without_candidates(prompt: str) -> str:
    """A prompt without its numbered candidate lines (shown once, in round 1)."""
    return "\n".join(line for line in prompt.splitlines() if not re.match(r"\d+\. ", line))


def dialogue_trace(rounds: pd.DataFrame, user: str, titles: dict[str, str], width: int = 96) -> str:
    """One dialogue round by round: the prompts (when kept), proposals, verdicts, reasons."""
    rows = rounds[rounds[USER] == user].sort_values(ROUND)
    if rows.empty:
        raise KeyError(f"no dialogue for user {user!r}")
    out = []
    for row in rows.to_dict("records"):
        out.append(f"=== round {row[ROUND]}")
        if isinstance(row.get("rec_prompt"), str):
            first = row[ROUND] == 1
            out.append("  recommendation agent was asked" + (":" if first else " (no candidates):"))
            prompt = row["rec_prompt"] if first else _without_candidates(row["rec_prompt"])
            out.append(textwrap.indent(prompt, "    | "))
        if row[ITEM] is None or pd.isna(row[ITEM]):
            out.append(f"  recommendation agent: no usable reply ({row.get('rec_reply')!r})")
        else:
            mark = "TARGET" if row[LABEL] == 1 else "not the target"
            out.append(f"  recommends #{int(row[POSITION]) + 1} {titles[row[ITEM]]} [{mark}]")
            out.append(_wrap(f"because: {row['rec_reason']}", width))
        if isinstance(row.get("user_prompt"), str):
            out.append("  user agent was asked (candidates left out):")
            out.append(textwrap.indent(_without_candidates(row["user_prompt"]), "    | "))
        if row["accepted"] is not None and not pd.isna(row["accepted"]):
            verdict = "ACCEPTS" if row["accepted"] else "rejects"
            out.append(f"  user agent {verdict}")
            out.append(_wrap(f"because: {row['user_reason']}", width))
        if isinstance(row["stop"], str):
            out.append(f"  -> dialogue ends: {row['stop']}")
    return "\n".join(out)
