"""The verdict rules: pure functions from the paper's value and ours to a verdict and its reason.

Each ``judge_*`` function implements one rule of ``recagents/resources/verdict_rules.json``
(the text printed at the top of REPRODUCTION.md) and returns a :class:`Verdict`. Every rule
knows its power: a result whose interval is wider than the effect the claim is about, whose
sample is below the claim's ``min_n`` (:func:`judge_sample_size`), or whose "no difference"
rests on two methods that both did nothing is **inconclusive (underpowered)**, never
reproduced.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from recagents.report.claims import (
    DIRECTION_ONLY,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_REPRODUCED,
    REPRODUCED,
)
from recagents.report.values import Estimate


@dataclass(frozen=True)
class Verdict:
    """A verdict, the one-line reason for it, and the power it rests on.

    Attributes:
        verdict: One of :data:`~recagents.report.claims.VERDICTS`.
        reason: Why, in one line.
        detectable: The half-width of the interval the verdict rests on (of the difference,
            for a comparison): the smallest shift the sample resolves; ``None`` without one.
        effect: The size of the effect the claim is about, ``None`` when none is known.
    """

    verdict: str
    reason: str
    detectable: float | None = None
    effect: float | None = None


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _named(label: str, value: float) -> str:
    """``"AFL 0.43"``, or just ``"0.43"`` for a fixed threshold (empty label)."""
    return f"{label} {_fmt(value)}" if label else _fmt(value)


def _too_wide(detectable: float | None, effect: float | None) -> bool:
    """Whether an interval of this half-width cannot resolve the claim's effect."""
    return detectable is not None and effect is not None and detectable > effect


def _wider(detectable: float, effect: float) -> str:
    return f"half-width {_fmt(detectable)} is wider than the claim's effect {_fmt(effect)}"


def judge_contains(
    paper: float | None,
    ours: Estimate,
    chance: float | None = None,
    effect: float | None = None,
) -> Verdict:
    """Reproduced when the paper's value lies in our 95% interval and that interval can decide.

    Args:
        paper: The paper's value (``None``: its cell holds no single number).
        ours: Our estimate.
        chance: A random baseline's value on the same candidates, if recorded. The claim's
            effect is then the distance ``|paper - chance|``, and an interval holding both
            cannot tell them apart.
        effect: The claim's tolerance, used when no ``chance`` is recorded.

    Returns:
        **not comparable** without a paper number or an interval; **not reproduced** when the
        paper's value lies outside our interval; **inconclusive (underpowered)** when it lies
        inside but the interval also holds chance or is wider than the effect; otherwise
        **reproduced**.
    """
    if paper is None:
        return Verdict(NOT_COMPARABLE, "the paper's cell holds no single number")
    if ours.low is None or ours.high is None:
        return Verdict(NOT_COMPARABLE, "we recorded a point value without an interval")
    scale = abs(paper - chance) if chance is not None else effect
    half = ours.half_width
    interval = f"[{_fmt(ours.low)}, {_fmt(ours.high)}]"
    if not ours.low <= paper <= ours.high:
        side = "above" if paper > ours.high else "below"
        return Verdict(
            NOT_REPRODUCED, f"paper {_fmt(paper)} is {side} our interval {interval}", half, scale
        )
    if chance is not None and ours.low <= chance <= ours.high:
        reason = (
            f"our interval {interval} holds the paper's {_fmt(paper)} but also the random "
            f"baseline's {_fmt(chance)}: it cannot tell the paper's result from chance"
        )
        return Verdict(INCONCLUSIVE, reason, half, scale)
    if _too_wide(half, scale):
        assert half is not None and scale is not None
        reason = f"paper {_fmt(paper)} lies in our interval {interval}, but its " + _wider(
            half, scale
        )
        return Verdict(INCONCLUSIVE, reason, half, scale)
    unchecked = "" if scale is not None else " (no effect size stated: power not checked)"
    return Verdict(
        REPRODUCED, f"paper {_fmt(paper)} lies in our interval {interval}{unchecked}", half, scale
    )


def judge_at_least(paper: float | None, ours: Estimate) -> Verdict:
    """Reproduced when ours is not below the paper's value."""
    if paper is None:
        return Verdict(NOT_COMPARABLE, "the paper's cell holds no single number")
    top = ours.high if ours.has_interval else ours.mean
    assert top is not None
    what = "our interval's upper end" if ours.has_interval else "our value"
    half = ours.half_width
    if top >= paper:
        return Verdict(REPRODUCED, f"{what} {_fmt(top)} reaches the paper's {_fmt(paper)}", half)
    return Verdict(NOT_REPRODUCED, f"{what} {_fmt(top)} is below the paper's {_fmt(paper)}", half)


def judge_matches(paper_text: str, paper: float | None, ours: Estimate) -> Verdict:
    """Reproduced when a deterministic recomputation equals the released value as printed.

    For totals recomputed from released records (no sampling, so no interval): ours must
    equal the paper's number to half a unit of its last printed digit (at least 1e-9).
    """
    if paper is None:
        return Verdict(NOT_COMPARABLE, "the paper's cell holds no single number")
    if ours.has_interval and (ours.high or 0.0) - (ours.low or 0.0) > 0:
        return Verdict(NOT_COMPARABLE, "a sampled estimate cannot match a total digit by digit")
    digits = paper_text.strip().split(".")[1] if "." in paper_text else ""
    leading = re.match(r"\d*", digits)  # always matches (maybe empty)
    decimals = len(leading.group()) if leading else 0
    tolerance = max(0.5 * 10.0**-decimals, 1e-9)
    assert ours.mean is not None
    gap = abs(ours.mean - paper)
    shown = f"ours {ours.mean:.10g} against the released {paper_text.strip()}"
    if gap <= tolerance:
        return Verdict(REPRODUCED, f"{shown}: equal to the printed digits", 0.0)
    return Verdict(NOT_REPRODUCED, f"{shown}: differs by {gap:.3g}", 0.0)


def difference_half_width(a: Estimate, b: Estimate) -> float | None:
    """Half-width of the interval of ``A - B`` from two independent intervals.

    ``sqrt(h_A^2 + h_B^2)``: the standard errors of independent means add in quadrature.
    ``None`` unless both intervals were recorded.
    """
    if a.half_width is None or b.half_width is None:
        return None
    return math.hypot(a.half_width, b.half_width)


def _disjoint(a: Estimate, b: Estimate) -> bool:
    """Whether two recorded intervals do not touch."""
    assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
    return a.low > b.high or b.low > a.high


def _overlapping(
    a_label: str, b_label: str, a: float, b: float, half: float | None, effect: float | None
) -> Verdict:
    """The verdict when the intervals overlap (or are missing) and A's mean is above B's."""
    if _too_wide(half, effect):
        assert half is not None and effect is not None
        reason = f"{_named(a_label, a)} vs {_named(b_label, b)}: the difference's " + _wider(
            half, effect
        )
        return Verdict(INCONCLUSIVE, reason, half, effect)
    why = "but the intervals overlap" if half is not None else "; no intervals recorded"
    sep = " " if half is not None else ""
    return Verdict(
        DIRECTION_ONLY, f"{_named(a_label, a)} > {_named(b_label, b)}{sep}{why}", half, effect
    )


def judge_greater(
    a: Estimate,
    b: Estimate,
    a_label: str = "A",
    b_label: str = "B",
    effect: float | None = None,
) -> Verdict:
    """A above B: reproduced with disjoint intervals, direction only with overlapping ones.

    With ``effect`` (the claimed difference), overlapping intervals whose difference has a
    half-width (:func:`difference_half_width`) above it are **inconclusive (underpowered)**,
    whichever mean is higher: the sample cannot tell the claimed gain from none.
    """
    half = difference_half_width(a, b)
    overlap = half is not None and not _disjoint(a, b)
    if a.mean <= b.mean:
        if overlap and _too_wide(half, effect):
            return _overlapping(a_label, b_label, a.mean, b.mean, half, effect)
        relation = "equals" if a.mean == b.mean else "is below"
        reason = f"{_named(a_label, a.mean)} {relation} {_named(b_label, b.mean)}"
        return Verdict(NOT_REPRODUCED, reason, half, effect)
    if half is not None and not overlap:
        assert a.low is not None and b.high is not None
        reason = (
            f"{a_label} above {b_label or _fmt(b.mean)}, 95% intervals disjoint "
            f"({_fmt(a.low)} > {_fmt(b.high)})"
        )
        return Verdict(REPRODUCED, reason, half, effect)
    return _overlapping(a_label, b_label, a.mean, b.mean, half, effect)


def judge_above(
    ours: Estimate, threshold: float, label: str = "ours", effect: float | None = None
) -> Verdict:
    """Ours above a fixed threshold: as :func:`judge_greater` against a constant."""
    return judge_greater(ours, Estimate(threshold, threshold, threshold), label, "", effect)


def judge_no_amplification(
    diff: float,
    amplifies: bool,
    interval: tuple[float, float] | None = None,
    effect: float | None = None,
    idle: bool = False,
) -> Verdict:
    """The loop does not amplify the bias (the notebook's paired test decides ``amplifies``).

    Args:
        diff: The paired difference loop - single agent.
        amplifies: Whether the notebook's test found amplification.
        interval: The 95% interval of ``diff``, when recorded.
        effect: The smallest shift that counts as amplification.
        idle: Whether both methods did nothing (every activity record is 0).

    Returns:
        **not reproduced** when the test finds amplification; **inconclusive (underpowered)**
        when both methods did nothing, the loop chose exactly what the single agent chose, no
        interval of the difference was recorded, or it is wider than ``effect``; otherwise
        **reproduced**.
    """
    half = None if interval is None else (interval[1] - interval[0]) / 2.0
    if amplifies:
        reason = f"the loop amplifies it (difference {_fmt(diff)})"
        return Verdict(NOT_REPRODUCED, reason, half, effect)
    if idle:
        reason = "both methods did nothing (every activity record is 0): no bias to amplify"
        return Verdict(INCONCLUSIVE, reason, half, effect)
    if diff == 0 and not half:
        reason = "the loop chose exactly what the single agent chose (difference 0): no test"
        return Verdict(INCONCLUSIVE, reason, half, effect)
    if half is None:
        reason = f"difference {_fmt(diff)}, but no interval of it was recorded: power unknown"
        return Verdict(INCONCLUSIVE, reason, half, effect)
    if _too_wide(half, effect):
        assert effect is not None
        reason = "no amplification found, but the difference's " + _wider(half, effect)
        return Verdict(INCONCLUSIVE, reason, half, effect)
    reason = f"no amplification (difference {_fmt(diff)}, interval not biased)"
    return Verdict(REPRODUCED, reason, half, effect)


def judge_sample_size(judged: Verdict, n: int | None, min_n: int | None) -> Verdict:
    """Inconclusive when the sample ``n`` is below the ``min_n`` the claim needs.

    Applies to a decided verdict (reproduced, direction only, not reproduced); an unknown
    ``n`` or no ``min_n`` leaves it as it is.
    """
    decided = judged.verdict in (REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED)
    if not decided or n is None or min_n is None or n >= min_n:
        return judged
    reason = (
        f"n={n} is below the {min_n} this claim needs (else: {judged.verdict}, {judged.reason})"
    )
    return replace(judged, verdict=INCONCLUSIVE, reason=reason)
