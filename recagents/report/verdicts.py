"""The verdict rules: pure functions from the paper's value and ours to a verdict and its reason.

Each ``judge_*`` function implements one rule of ``recagents/resources/verdict_rules.json``
(the text printed at the top of REPRODUCTION.md) and returns a :class:`Verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass

from recagents.report.claims import (
    DIRECTION_ONLY,
    NOT_COMPARABLE,
    NOT_REPRODUCED,
    REPRODUCED,
)
from recagents.report.values import Estimate

__all__ = [
    "Verdict",
    "judge_above",
    "judge_at_least",
    "judge_contains",
    "judge_greater",
    "judge_no_amplification",
]


@dataclass(frozen=True)
class Verdict:
    """A verdict and the one-line reason for it."""

    verdict: str
    reason: str


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def judge_contains(paper: float | None, ours: Estimate, chance: float | None = None) -> Verdict:
    """Reproduced when the paper's value lies in our 95% interval (bounds included).

    Args:
        paper: The paper's value (``None``: its cell holds no single number).
        ours: Our estimate.
        chance: A random baseline's value on the same candidates, if recorded: an interval
            that holds both the paper's value and this one cannot tell them apart, so it is
            not counted as reproduced.
    """
    if paper is None:
        return Verdict(NOT_COMPARABLE, "the paper's cell holds no single number")
    if not ours.has_interval:
        return Verdict(NOT_COMPARABLE, "we recorded a point value without an interval")
    assert ours.low is not None and ours.high is not None
    interval = f"[{_fmt(ours.low)}, {_fmt(ours.high)}]"
    if ours.low <= paper <= ours.high:
        if chance is not None and ours.low <= chance <= ours.high:
            return Verdict(
                NOT_REPRODUCED,
                f"our interval {interval} holds the paper's {_fmt(paper)} but also the random "
                f"baseline's {_fmt(chance)}: it cannot tell the paper's result from chance",
            )
        return Verdict(REPRODUCED, f"paper {_fmt(paper)} lies in our interval {interval}")
    side = "above" if paper > ours.high else "below"
    return Verdict(NOT_REPRODUCED, f"paper {_fmt(paper)} is {side} our interval {interval}")


def judge_at_least(paper: float | None, ours: Estimate) -> Verdict:
    """Reproduced when ours is not below the paper's value."""
    if paper is None:
        return Verdict(NOT_COMPARABLE, "the paper's cell holds no single number")
    top = ours.high if ours.has_interval else ours.mean
    assert top is not None
    what = "our interval's upper end" if ours.has_interval else "our value"
    if top >= paper:
        return Verdict(REPRODUCED, f"{what} {_fmt(top)} reaches the paper's {_fmt(paper)}")
    return Verdict(NOT_REPRODUCED, f"{what} {_fmt(top)} is below the paper's {_fmt(paper)}")


def judge_greater(a: Estimate, b: Estimate, a_label: str = "A", b_label: str = "B") -> Verdict:
    """A above B: reproduced with disjoint intervals, direction only with overlapping ones."""
    if a.mean <= b.mean:
        relation = "equals" if a.mean == b.mean else "is below"
        return Verdict(
            NOT_REPRODUCED,
            f"{a_label} {_fmt(a.mean)} {relation} {b_label} {_fmt(b.mean)}",
        )
    if a.has_interval and b.has_interval:
        assert a.low is not None and b.high is not None
        if a.low > b.high:
            return Verdict(
                REPRODUCED,
                f"{a_label} above {b_label}, 95% intervals disjoint "
                f"({_fmt(a.low)} > {_fmt(b.high)})",
            )
        return Verdict(
            DIRECTION_ONLY,
            f"{a_label} {_fmt(a.mean)} > {b_label} {_fmt(b.mean)} but the intervals overlap",
        )
    return Verdict(
        DIRECTION_ONLY,
        f"{a_label} {_fmt(a.mean)} > {b_label} {_fmt(b.mean)}; no intervals recorded",
    )


def judge_above(ours: Estimate, threshold: float, label: str = "ours") -> Verdict:
    """Ours above a fixed threshold: as :func:`judge_greater` against a constant."""
    if ours.mean <= threshold:
        relation = "equals" if ours.mean == threshold else "is below"
        return Verdict(NOT_REPRODUCED, f"{label} {_fmt(ours.mean)} {relation} {_fmt(threshold)}")
    if ours.has_interval:
        assert ours.low is not None
        if ours.low > threshold:
            return Verdict(
                REPRODUCED,
                f"{label}'s 95% interval lies above {_fmt(threshold)} (low end {_fmt(ours.low)})",
            )
        return Verdict(
            DIRECTION_ONLY,
            f"{label} {_fmt(ours.mean)} > {_fmt(threshold)} but the interval reaches it",
        )
    return Verdict(
        DIRECTION_ONLY, f"{label} {_fmt(ours.mean)} > {_fmt(threshold)}; no interval recorded"
    )


def judge_no_amplification(diff: float, amplifies: bool) -> Verdict:
    """The loop does not amplify the bias (the notebook's paired test decides ``amplifies``)."""
    if amplifies:
        return Verdict(NOT_REPRODUCED, f"the loop amplifies it (difference {_fmt(diff)})")
    if diff == 0:
        return Verdict(
            NOT_COMPARABLE,
            "the loop chose exactly what the single agent chose (difference 0): nothing to test",
        )
    return Verdict(REPRODUCED, f"no amplification (difference {_fmt(diff)}, interval not biased)")
