"""Reading a run: the stage comparison table and figure, exposure counts, message traces.

:func:`stage_comparison` (means with bootstrap intervals per stage and mode),
:func:`stage_figure`, :func:`describe_hits` (why Hit@k is what it is, from the run's
shortlists), :func:`exposure_summary` (which consented fields crossed which boundary) and
:func:`session_trace` (one session as readable text) for the notebook.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.metrics import bootstrap_ci
from recagents.papers.rec4agentverse.catalogue import Catalogue
from recagents.papers.rec4agentverse.config import METRICS, STAGES
from recagents.papers.rec4agentverse.evaluate import preference_share
from recagents.papers.rec4agentverse.session import SessionRun
from recagents.papers.rec4agentverse.users import SimUser


def stage_comparison(
    sessions: pd.DataFrame,
    metrics: Sequence[str] = METRICS,
    n_boot: int = 1000,
    seed: int = 0,
    by: Sequence[str] = ("stage", "mode"),
) -> pd.DataFrame:
    """Mean and 95% bootstrap interval of each session metric per stage and mode.

    Args:
        sessions: ``SessionRun.sessions`` (several runs concatenated is fine).
        metrics: Columns to summarise (default :data:`METRICS`).
        n_boot: Bootstrap resamples.
        seed: Bootstrap seed.
        by: Grouping columns.

    Returns:
        ``[*by, metric, mean, low, high, n]``, one row per group and metric.
    """
    rows = []
    for keys, group in sessions.groupby(list(by), sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        for metric in metrics:
            values = group[metric].dropna().to_numpy(float)
            if len(values) == 0:
                continue
            mean, low, high = bootstrap_ci(values, n_boot=n_boot, seed=seed)
            rows.append(
                {
                    **dict(zip(by, keys, strict=True)),
                    "metric": metric,
                    "mean": mean,
                    "low": low,
                    "high": high,
                    "n": len(values),
                }
            )
    return pd.DataFrame(rows, columns=[*by, "metric", "mean", "low", "high", "n"])


_METRIC_LABELS = {
    "hit": "Hit@k (held-out films)",
    "pref_share": "films fitting hidden taste",
    "pref_satisfied": "taste satisfied (rule)",
    "user_satisfied": "user said satisfied",
    "turns_needed": "turns needed",
    "profile_jaccard": "profile Jaccard (genres)",
    "era_match": "profile era correct",
}


#: The natural range of each session metric: shares are 0-1; turns start at 1.
_METRIC_SCALES: dict[str, tuple[float, float]] = {
    "hit": (0.0, 1.0),
    "pref_share": (0.0, 1.0),
    "pref_satisfied": (0.0, 1.0),
    "user_satisfied": (0.0, 1.0),
    "profile_jaccard": (0.0, 1.0),
    "era_match": (0.0, 1.0),
}


#: Below this width an interval is a point: every resample gave the same value.
POINT = 1e-12


def interval_text(mean: float, low: float, high: float, n: int, digits: int = 2) -> str:
    """``0.73 [0.54, 0.90]``, or ``1.00 (no spread at n = 16)`` when the interval is a point.

    A zero-width bootstrap interval means every unit had the same value (or n is tiny): it
    says nothing about precision, so it is never printed as ``[1.00, 1.00]``.
    """
    if high - low <= POINT:
        return f"{mean:.{digits}f} (no spread at n = {n})"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def mode_label(mode: Any) -> str:
    """How a run's ``mode`` is named on figures and in sentences (the template as a baseline)."""
    return {"llm": "LLM", "template": "template (baseline)"}.get(str(mode), str(mode))


def stage_figure(
    comparison: pd.DataFrame,
    title: str = "",
    max_turns: int | None = None,
    why_flat: Mapping[str, str] | None = None,
) -> Any:
    """One small panel per metric: mean and 95% interval by stage, one line per mode.

    Share metrics are drawn on their full 0-1 scale and ``turns_needed`` from 1 (to
    ``max_turns + 1``, "never satisfied", when given), with whole-number ticks; a panel whose
    values are all equal (e.g. no hit at any stage) says so instead of zooming on a flat line,
    adding ``why_flat[metric]`` when given (e.g. :func:`hit_reason`). Scripted modes (names
    starting ``scripted``) are dashed: rules, never a model's output.
    """
    import matplotlib.pyplot as plt

    from recagents.plotting import fixed_scale, integer_axis, note_if_degenerate

    metrics = list(dict.fromkeys(comparison["metric"]))
    cols = min(4, max(1, len(metrics)))
    rows = int(np.ceil(len(metrics) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.0 * rows), squeeze=False)
    modes = list(dict.fromkeys(comparison["mode"])) if "mode" in comparison else [None]
    # A session never satisfied scores max_turns + 1 (evaluate.turns_needed): keep it on the axis.
    turns = {"turns_needed": (1.0, float(max_turns + 1))} if max_turns else {}
    scales = _METRIC_SCALES | turns
    for ax, metric in zip(axes.flat, metrics, strict=False):
        part = comparison[comparison["metric"] == metric]
        for k, mode in enumerate(modes):
            line = part if mode is None else part[part["mode"] == mode]
            x = line["stage"].to_numpy(float) + (k - (len(modes) - 1) / 2) * 0.08
            y = line["mean"].to_numpy(float)
            err = [y - line["low"].to_numpy(float), line["high"].to_numpy(float) - y]
            dashed = str(mode).startswith("scripted")
            ax.errorbar(x, y, yerr=err, marker="s" if dashed else "o", capsize=3,
                        linestyle="--" if dashed else "-", label=mode_label(mode))  # fmt: skip
        scale = scales.get(metric)
        if scale is not None:
            fixed_scale(ax, *scale)
        if metric == "turns_needed":
            integer_axis(ax, "y")
        values = part[["mean", "low", "high"]].to_numpy(float)
        why = (why_flat or {}).get(metric)
        what = f"values; {why}" if why else "values"
        note_if_degenerate(ax, values, what, scale=scale, count=len(part))
        ax.set_title(_METRIC_LABELS.get(metric, metric), fontsize=10)
        ax.set_xticks(list(STAGES))
        ax.set_xlabel("stage")
    spare = list(axes.flat)[len(metrics) :]
    for ax in spare:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if spare:  # the legend goes in the first empty cell, clear of the data
        where = {"loc": "center", "bbox_to_anchor": spare[0].get_position().bounds}
    else:
        where = {"loc": "upper right", "ncol": len(labels)}
    fig.legend(handles, labels, title="mode", fontsize=10, bbox_transform=fig.transFigure, **where)
    return fig


def held_out_reach(turns: pd.DataFrame, users: Sequence[SimUser]) -> pd.DataFrame:
    """Per mode: how many turns' shortlists (the films the agent chose from) held a held-out film.

    Hit@k can only count a film the agent could pick, so this bounds it from the run itself.

    Returns:
        ``[mode, turns, with_held_out]``, modes in order of appearance.
    """
    targets = {u.user_id: set(u.targets) for u in users}
    rows = turns[[USER, "shortlist"]].to_dict("records")
    held = [bool(targets.get(str(r[USER]), set()) & set(r["shortlist"])) for r in rows]
    frame = turns.assign(held_out=held)
    table = frame.groupby("mode", sort=False)["held_out"].agg(turns="size", with_held_out="sum")
    return table.reset_index()


def targets_fitting_taste(users: Sequence[SimUser], catalogue: Catalogue) -> tuple[int, int]:
    """How many held-out films fit their user's hidden taste (a favourite genre and the era).

    Returns:
        ``(fitting, total)`` over every user's targets.
    """
    fits = [
        preference_share([t], u.favourite_genres, u.era, catalogue.genres, catalogue.years, 1)
        for u in users
        for t in u.targets
    ]
    return int(sum(fits)), len(fits)


def hit_reason(turns: pd.DataFrame, users: Sequence[SimUser]) -> str:
    """A short reason for a Hit@k panel: shortlists that held a held-out film, over all turns."""
    reach = held_out_reach(turns, users)
    return (
        f"a held-out film was on {int(reach['with_held_out'].sum())} of "
        f"{int(reach['turns'].sum())} shortlists"
    )


def describe_hits(
    comparison: pd.DataFrame,
    turns: pd.DataFrame,
    users: Sequence[SimUser],
    catalogue: Catalogue,
) -> str:
    """Why Hit@k is what it is, in sentences made from the run's numbers.

    Args:
        comparison: :func:`stage_comparison` rows (any modes, e.g. with a scripted one).
        turns: ``SessionRun.turns`` of the runs whose shortlists are counted.
        users: The simulated users (their targets and hidden tastes).
        catalogue: The agent items (film genres and years).
    """
    hits = comparison[comparison["metric"] == "hit"].sort_values("stage", kind="stable")
    hits = hits.reset_index(drop=True)
    modes = list(dict.fromkeys(hits["mode"]))
    per_mode = []
    for mode in modes:
        rows = hits[hits["mode"] == mode]
        values = ", ".join(
            interval_text(m, lo, hi, int(n))
            for m, lo, hi, n in rows[["mean", "low", "high", "n"]].to_numpy(float)
        )
        per_mode.append(f"{mode_label(mode)} {values}")
    stages = ", ".join(str(s) for s in dict.fromkeys(hits["stage"]))
    parts = [f"**Hit@k** (a held-out film among the final films) at stages {stages}: "
             + "; ".join(per_mode) + "."]  # fmt: skip
    reach = held_out_reach(turns, users)
    parts.append(
        "A held-out film was among the films the agent chose from in "
        + " and ".join(
            f"{int(r.with_held_out)} of the {int(r.turns)} turns of the {mode_label(r.mode)}"
            for r in reach.itertuples(index=False)
        )
        + "."
    )
    fitting, total = targets_fitting_taste(users, catalogue)
    parts.append(
        f"{fitting} of the {total} held-out films fit their user's hidden taste (a favourite "
        "genre and the era), the signal the stages pass on."
    )
    if len(reach) and int(reach["with_held_out"].sum()) == 0:
        parts.append(
            "With no held-out film on any of these shortlists, no final list of these runs "
            "could contain one: their Hit@k of 0 is set by what the agents had to choose "
            "from, not by the stages."
        )
    best = hits.loc[hits.groupby("mode", sort=False)["mean"].idxmax()].set_index("mode")
    scripted = [m for m in modes if str(m).startswith("scripted")]
    others = [m for m in modes if m not in scripted]
    for mode in scripted:
        beaten = [m for m in others if best.at[mode, "mean"] > best.at[m, "mean"]]
        if not beaten:
            continue
        top = best.loc[mode]
        sentence = (
            f"The run labelled \u201c{mode_label(mode)}\u201d hit a held-out film more often "
            f"(at best {interval_text(top['mean'], top['low'], top['high'], int(top['n']))}, "
            f"stage {top['stage']}"
            + ("; an interval that includes 0" if top["low"] <= 0 else "")
            + ") than the "
            + " and the ".join(mode_label(m) for m in beaten)
            + f" (at best {max(best.at[m, 'mean'] for m in beaten):.2f})"
        )
        if "template" in beaten and best.at["template", "mean"] == 0:
            # the template follows the hidden taste at full skill, and hit nothing
            sentence += ": here Hit@k does not reward following the hidden taste"
        parts.append(sentence + ".")
    return " ".join(parts)


def exposure_summary(exposure: pd.DataFrame) -> pd.DataFrame:
    """Per stage, boundary and field: how often it crossed or was withheld.

    Returns:
        ``[stage, boundary, field, sensitive, consented, crossed, withheld]``.
    """
    if exposure.empty:
        return pd.DataFrame(
            columns=["stage", "boundary", "field", "sensitive", "consented", "crossed", "withheld"]
        )
    crossed = exposure["crossed"].astype(bool)
    frame = exposure.assign(crossed=crossed.astype(int), withheld=(~crossed).astype(int))
    table = frame.groupby(["stage", "boundary", "field", "sensitive", "consented"], sort=True).agg(
        crossed=("crossed", "sum"), withheld=("withheld", "sum")
    )
    return table.reset_index()


# --------------------------------------------------------------------------- teaching


def session_trace(run: SessionRun, user: str, stage: int, width: int = 96) -> str:
    """One session as readable text: every message, who sent it to whom, what crossed."""
    rows = run.messages[(run.messages[USER] == user) & (run.messages["stage"] == stage)]
    if rows.empty:
        raise KeyError(f"no session for user {user!r} in stage {stage}")
    out, turn = [], None
    for row in rows.to_dict("records"):
        if row["turn"] != turn:
            turn = row["turn"]
            out.append(f"=== turn {turn}")
        crossed = f"  [fields: {', '.join(row['fields'])}]" if len(row["fields"]) else ""
        head = f"{row['sender']} -> {row['receiver']} ({row['kind']}){crossed}:"
        out.append(head)
        out.append(
            textwrap.fill(
                str(row["content"]), width=width, initial_indent="    ", subsequent_indent="    "
            )
        )
    return "\n".join(out)
