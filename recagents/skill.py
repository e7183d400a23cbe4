"""Skill sweeps: a scripted policy's outcome against how much of the truth it may use.

Why: the embedded 135M model is at chance, so with it no paper's mechanism produces its
effect. A *skilled scripted policy* (a few readable lines in the paper's package, named as
scripted, never an LLM result) plays a role of the loop and, with probability ``skill``, uses
the true signal (the user's held-out taste, the true outcome); otherwise it acts without it.
Sweeping ``skill`` from 0 ("no information") to 1 ("knows the held-out taste") shows how the
paper's mechanism turns information into outcome, with intervals over the independent unit
(users or agents), and marks the smallest skill at which the notebook's sample size detects
the effect. The same sweep at skill 1 and 0 is each paper's positive and negative control in
the tests.

:func:`sweep` runs the policy at each level and summarises the per-unit values;
:func:`detectable_skill` reads the mark; :func:`plot_skill` draws the curve beside the
authors' recorded reference and the embedded model; :func:`describe_sweep` writes the
sentence that says what the sweep found, from its numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from recagents.metrics import bootstrap_ci

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: The skill levels of a default sweep: no information, a little, half, most, all of it.
DEFAULT_LEVELS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)

#: Columns of a sweep frame.
SWEEP_COLUMNS = ("skill", "estimate", "low", "high", "n")


def check_skill(skill: float) -> float:
    """``skill`` as a float in [0, 1]; anything else raises a ValueError naming it."""
    value = float(skill)
    if not 0.0 <= value <= 1.0 or not np.isfinite(value):
        raise ValueError(f"skill must be in [0, 1], got {skill!r}")
    return value


def uses_truth(rng: np.random.Generator, skill: float) -> bool:
    """Whether one decision of a policy of this ``skill`` uses the true signal (prob. skill)."""
    return bool(rng.random() < check_skill(skill))


def summarise_units(
    values: npt.ArrayLike, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float, int]:
    """``(mean, low, high, n)`` of per-unit values, with a bootstrap interval over the units."""
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise ValueError("no per-unit values to summarise")
    mean, low, high = bootstrap_ci(array, n_boot=n_boot, ci=ci, seed=seed)
    return mean, low, high, int(array.size)


def sweep(
    outcome: Callable[[float], npt.ArrayLike],
    levels: Sequence[float] = DEFAULT_LEVELS,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Run ``outcome(skill)`` at every level and summarise its per-unit values.

    Args:
        outcome: Returns one value per independent unit (user, agent) for a skill level: a
            metric (NDCG, HR@1, a rating) or a paired effect (B+R minus B on the same user).
        levels: The skill levels, each in [0, 1].
        n_boot: Bootstrap resamples of the units.
        ci: Confidence level of the intervals.
        seed: Seed of the resampling (same seed, same intervals).

    Returns:
        One row per level: ``skill, estimate, low, high, n``.
    """
    rows = []
    for level in levels:
        skill = check_skill(level)
        mean, low, high, n = summarise_units(outcome(skill), n_boot=n_boot, ci=ci, seed=seed)
        rows.append({"skill": skill, "estimate": mean, "low": low, "high": high, "n": n})
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


def detectable_skill(frame: pd.DataFrame, null: float = 0.0) -> float | None:
    """The smallest skill from which every interval excludes ``null``, or None if none does.

    ``null`` is what no effect looks like (0 for a paired difference, the chance level for a
    metric). A level counts only when the interval excludes ``null`` on the same side as at
    skill 1 and every higher level does too, so a lucky excursion at a low skill does not
    mark the curve.
    """
    if frame.empty:
        return None
    ordered = frame.sort_values("skill")
    top = ordered.iloc[-1]
    above = bool(top["low"] > null)
    below = bool(top["high"] < null)
    if not (above or below):
        return None
    found: float | None = None
    for row in ordered[::-1].itertuples():
        excludes = row.low > null if above else row.high < null
        if not excludes:
            break
        found = float(row.skill)
    return found


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _interval_text(estimate: float, low: float, high: float, n: int) -> str:
    if high - low <= 1e-12:
        return f"{_fmt(estimate)} (no spread at n = {n})"
    return f"{_fmt(estimate)} [{_fmt(low)}, {_fmt(high)}] (n = {n})"


def describe_sweep(
    frame: pd.DataFrame,
    what: str,
    null: float = 0.0,
    null_label: str = "no effect",
    embedded: tuple[float, float, float, int] | None = None,
    reference: Mapping[str, float] | None = None,
) -> str:
    """What a sweep found, in words made from its numbers.

    Args:
        frame: A :func:`sweep` frame.
        what: The outcome's name ("pairwise accuracy", "HR@1 gain over round 1").
        null: The no-effect value (0 for a paired difference, the chance level).
        null_label: Its name ("chance", "no effect").
        embedded: The embedded model's ``(mean, low, high, n)`` on the same outcome.
        reference: Recorded capable-model values by label ("authors' gpt-3.5 run").
    """
    ordered = frame.sort_values("skill")
    first, last = ordered.iloc[0], ordered.iloc[-1]
    parts = [
        f"{what[:1].upper() + what[1:]} goes from "
        f"{_interval_text(first.estimate, first.low, first.high, int(first.n))} at skill "
        f"{first.skill:g} to {_interval_text(last.estimate, last.low, last.high, int(last.n))} "
        f"at skill {last.skill:g}."
    ]
    mark = detectable_skill(frame, null)
    if mark is None:
        parts.append(
            f"At this sample size no skill level's interval excludes {null_label} "
            f"({_fmt(null)}): the sweep cannot show the effect here."
        )
    else:
        parts.append(
            f"From skill {mark:g} on, every interval excludes {null_label} ({_fmt(null)}): "
            "that is the least information with which this sample size detects the effect."
        )
    if embedded is not None:
        mean, low, high, n = embedded
        where = "inside" if low <= null <= high else ("above" if low > null else "below")
        parts.append(
            f"The embedded model scores {_interval_text(mean, low, high, n)}, its interval "
            f"{'containing' if where == 'inside' else 'lying ' + where} {null_label}"
            + (
                f"; the scripted policy's nearest level is skill {_nearest_skill(ordered, mean):g}."
                if where != "below"
                else "."
            )
        )
    for label, value in (reference or {}).items():
        parts.append(
            f"{label[:1].upper() + label[1:]} reaches {_fmt(value)}, which the scripted "
            f"policy matches near skill "
            f"{_nearest_skill(ordered, value):g}."
        )
    return " ".join(parts)


def _nearest_skill(ordered: pd.DataFrame, value: float) -> float:
    """The skill level whose estimate is closest to ``value``."""
    index = (ordered["estimate"] - value).abs().to_numpy().argmin()
    return float(ordered["skill"].iloc[int(index)])


def plot_skill(
    ax: Axes,
    frame: pd.DataFrame,
    label: str,
    null: float | None = None,
    null_label: str = "no effect",
    embedded: tuple[float, float, float, int] | None = None,
    embedded_label: str = "embedded model",
    reference: Mapping[str, float] | None = None,
    color: Any = None,
    mark: bool = True,
) -> float | None:
    """Draw a sweep: the estimate against skill with its interval band, and its context.

    The embedded model is drawn as a point with its interval at the left edge (x = -0.08,
    it has no skill knob); each recorded reference as a dashed horizontal line; ``null`` as a
    grey dotted line; the detectable skill (when ``mark``) as a vertical line.

    Returns:
        The detectable skill (None when no level detects the effect, or ``null`` is None).
    """
    ordered = frame.sort_values("skill")
    x = ordered["skill"].to_numpy(dtype=float)
    line = ax.plot(x, ordered["estimate"], marker="o", label=label, color=color, zorder=3)[0]
    ax.fill_between(
        x, ordered["low"], ordered["high"], color=line.get_color(), alpha=0.2, linewidth=0
    )
    if null is not None:
        ax.axhline(null, color="0.5", linestyle=":", linewidth=1, label=f"{null_label}: {null:g}")
    if embedded is not None:
        mean, low, high, n = embedded
        ax.errorbar(
            [-0.08], [mean], yerr=[[mean - low], [high - mean]], fmt="s", color="#a50f15",
            capsize=3, label=f"{embedded_label} (n = {n})", zorder=4,
        )  # fmt: skip
    for (name, value), style in zip(
        (reference or {}).items(), ("--", "-.", (0, (5, 2, 1, 2))), strict=False
    ):
        ax.axhline(
            value, color="black", linestyle=style, linewidth=1.2, label=f"{name}: {value:.3g}"
        )
    found = detectable_skill(frame, null) if null is not None else None
    if mark and found is not None:
        ax.axvline(found, color=line.get_color(), linestyle="--", linewidth=0.8, alpha=0.7)
        ax.annotate(
            f"detectable from\nskill {found:g}", (found, 1.0), xycoords=ax.get_xaxis_transform(),
            xytext=(3, -3), textcoords="offset points", ha="left", va="top", fontsize=8,
            color=line.get_color(),
        )  # fmt: skip
    ax.set_xlim(-0.15, 1.05)
    ax.set_xlabel("skill of the scripted policy (probability of using the true signal)")
    return found


def sweep_records(frame: pd.DataFrame, null: float | None = None) -> dict[str, Any]:
    """A sweep as plain data for ``record()``: its rows and its detectable skill."""
    return {
        "rows": [{k: (float(v) if k != "n" else int(v)) for k, v in row.items()}
                 for row in frame[list(SWEEP_COLUMNS)].to_dict("records")],
        "detectable_skill": detectable_skill(frame, null) if null is not None else None,
    }  # fmt: skip
