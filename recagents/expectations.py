"""Generated "what you should see" paragraphs: words made from the numbers a cell computed.

Why a module of its own: the papers' packages write their generated readings with it, and
they sit below :mod:`recagents.notebook` in the layering; :func:`recagents.notebook.expectation`
is the same function, re-exported for the notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["expectation"]


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def _against(value: float, low: float, high: float) -> str:
    """Where ``value`` lies relative to the interval ``[low, high]``."""
    if low <= value <= high:
        return "inside our interval"
    return "above our interval" if value > high else "below our interval"


def expectation(
    label: str,
    ours: Sequence[float],
    n: int,
    model: str,
    *,
    chance: float | None = None,
    paper: float | None = None,
    paper_source: str = "",
    recorded: float | None = None,
    recorded_source: str = "",
    why: str = "",
) -> str:
    """A "what you should see" paragraph generated from the values a cell just computed.

    Prose written before a run can contradict it; this text cannot: every comparison in it is
    computed from ``ours`` (mean, low, high of a 95% interval over ``n`` units) and the
    reference values passed in. Only ``why`` (one sentence on why ours and the paper's
    differ) is the author's, and it should name a cause, not a number.

    Args:
        label: What was measured, e.g. ``"NDCG@10 of AgentCF B+R"``.
        ours: ``(mean, low, high)``.
        n: The number of units the interval is over.
        model: The model that produced ours (e.g. the client's model name).
        chance: What a random method scores on the same candidates, if known.
        paper: The paper's value, if it has one for this setting.
        paper_source: Where the paper's value comes from and on what data (e.g.
            ``"Table 2, Amazon CDs-dense, gpt-3.5"``); say when the data differ from ours.
        recorded: A capable model's recorded value on the same axis (e.g. the authors' run).
        recorded_source: Where the recorded value comes from.
        why: One sentence on why ours and the references differ.

    Returns:
        Markdown text; show it with ``IPython.display.Markdown``.
    """
    mean, low, high = (float(v) for v in ours)
    if not low <= mean <= high:
        raise ValueError(f"{label}: mean {mean} is not within [{low}, {high}]")
    flat = high - low <= 1e-12
    shown = (
        f"{_fmt(mean)} (no spread at n = {n})"
        if flat
        else f"{_fmt(mean)} [{_fmt(low)}, {_fmt(high)}]"
    )
    parts = [f"**What you should see: {label}.** Ours ({model}, n={n}): {shown}."]
    if chance is not None:
        if flat:
            parts.append(f"Chance is {_fmt(chance)}; an interval with no spread at n = {n} "
                         "cannot say whether ours differs from it.")  # fmt: skip
        elif low <= chance <= high:
            parts.append(f"Chance is {_fmt(chance)}, inside our interval: this sample cannot "
                         "tell ours from a random method.")  # fmt: skip
        else:
            side = "above" if low > chance else "below"
            parts.append(f"Chance is {_fmt(chance)}: ours is {side} it.")
    if paper is not None:
        source = f" ({paper_source})" if paper_source else ""
        parts.append(f"The paper reports {_fmt(paper)}{source}, {_against(paper, low, high)}.")
    if recorded is not None:
        source = f" ({recorded_source})" if recorded_source else ""
        parts.append(f"A capable model's recorded run gives {_fmt(recorded)}{source}, "
                     f"{_against(recorded, low, high)}.")  # fmt: skip
    if flat:
        parts.append(
            f"Every one of the {n} units gave the same value, so the interval has no width: "
            "that says nothing about precision, only that nothing varied."
        )
    else:
        parts.append(f"Half the interval's width is {_fmt((high - low) / 2)}: a difference "
                     "smaller than that is not visible at this n.")  # fmt: skip
    if why:
        parts.append(why.strip())
    return " ".join(parts)
