"""Notebook 03's generated sentences: what this run found, written from its own numbers.

Prose written before a run can contradict it (issue #39: "the model takes the first candidate
or the suggested one" above a table that showed otherwise). Every function here takes the
values a cell has just computed and returns markdown, so the words cannot disagree with the
table beside them. Two rules are kept throughout: an interval with no width is said as "no
spread at n = ..." (never as precision), and a paper value measured on another dataset or
as an average over datasets is never set against ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.expectations import expectation
from recagents.metrics import PairedBootstrapResult
from recagents.papers.afl.config import AGENT, RATIO, ROUND
from recagents.papers.afl.samples import Sample


def no_spread(low: float, high: float) -> bool:
    """Whether an interval has no width (every resample gave the same value)."""
    return bool(np.isclose(low, high, rtol=0.0, atol=1e-12))


def interval(
    mean: float, low: float, high: float, n: int, unit: str = "", signed: bool = False
) -> str:
    """``mean [low, high] (n = ...)``, or ``mean, no spread at n = ...`` for a zero width."""
    fmt = "{:+.3f}" if signed else "{:.3f}"
    units = f"n = {n}" + (f" {unit}" if unit else "")
    if no_spread(low, high):
        return f"{fmt.format(mean)} (no spread at {units})"
    return f"{fmt.format(mean)} [{fmt.format(low)}, {fmt.format(high)}] ({units})"


def expectation_text(
    label: str,
    ours: Sequence[float],
    n: int,
    model: str,
    chance: float | None = None,
    why: str = "",
) -> str:
    """:func:`recagents.expectations.expectation`, unless the interval has no spread.

    A zero-width interval (every resample the same, e.g. 0 hits in 3 samples) is no
    precision: it is said as "no spread at n = ..." and never as a visible difference.
    """
    mean, low, high = (float(v) for v in ours)
    if not no_spread(low, high):
        return expectation(label, (mean, low, high), n, model, chance=chance, why=why)
    parts = [
        f"**What you should see: {label}.** Ours ({model}): {interval(mean, low, high, n)}: "
        "every resample gave the same value, which says nothing about precision."
    ]
    if chance is not None:
        parts.append(
            f"Chance is {chance:.3f}; {n} samples without spread cannot tell ours from it."
        )
    if why:
        parts.append(why.strip())
    return " ".join(parts)


def paired_text(label: str, result: PairedBootstrapResult, n: int, unit: str = "samples") -> str:
    """A paired difference with its interval and p-value, both from one paired bootstrap."""
    if no_spread(result.low, result.high):
        pairs = "no pair differs" if result.diff == 0 else "every pair differs by the same amount"
        return (
            f"{label}: {result.diff:+.3f}, no spread at n = {n} {unit}: {pairs}, so the paired "
            f"bootstrap has nothing to resample (its p = {result.p_value:.3f} says no more "
            "than that)."
        )
    verdict = "excludes 0" if result.low > 0 or result.high < 0 else "contains 0"
    return (
        f"{label}: {result.diff:+.3f} [{result.low:+.3f}, {result.high:+.3f}], p = "
        f"{result.p_value:.3f}; the interval and p come from the same paired bootstrap over the "
        f"{n} {unit}, and the interval {verdict}."
    )


def first_round_acceptances(rounds: pd.DataFrame) -> tuple[int, int]:
    """``(accepted, judged)``: first proposals the user agent accepted, of those it judged."""
    first = rounds[(rounds[ROUND] == 1) & rounds["accepted"].notna()]
    return int(first["accepted"].astype(bool).sum()), len(first)


def acceptance_text(rounds: pd.DataFrame) -> str:
    """How often the user agent ended a dialogue in round 1 (the loop's memory then unused)."""
    accepted, judged = first_round_acceptances(rounds)
    if judged == 0:
        return "No first proposal was judged (the loop ran one round only)."
    deepest = int(rounds[ROUND].max())
    return (
        f"Its user agent accepted {accepted} of {judged} first proposals, each ending its "
        f"dialogue in round 1; the longest dialogue reached round {deepest}."
    )


def tool_text(
    hr1: tuple[float, float, float], top: tuple[float, float, float], n: int, n_candidates: int,
    focus: int,
) -> str:  # fmt: skip
    """SASRec alone on every test user, against chance."""
    chance, chance_top = 1 / n_candidates, min(focus, n_candidates) / n_candidates
    side = "above" if hr1[1] > chance else "not above"
    return (
        f"**What you should see** (generated from this run): SASRec alone has HR@1 "
        f"{interval(*hr1, n, 'test users')}, {side} chance (1/{n_candidates} = {chance:.3f}); "
        f"the target is in its top {focus} for {interval(*top, n, 'test users')} (chance "
        f"{chance_top:.3f}). This is the tool whose pick round 1 shows the agent."
    )


def lastfm_text(check: Mapping[str, float], reported: float, rerun: float) -> str:
    """Our SASRec HR@1 from the released picks against the paper's and the re-run's Base."""
    low, high = check["low"], check["high"]

    def where(value: float) -> str:
        if low <= value <= high:
            return "inside our interval"
        return "above our interval" if value > high else "below our interval"

    return (
        f"**What you should see** (generated from this run): SASRec's released picks score "
        f"{interval(check['hr@1'], low, high, int(check['n']), 'samples')} on LastFM; the "
        f"paper's Base cell ({reported:.4f}) is {where(reported)} and the issue 11 re-run's "
        f"({rerun:.4f}) {where(rerun)}: same data, samples and model, so they may be compared."
    )


def tool_gap_text(
    samples: Sequence[Sample], single: pd.DataFrame, tool_hr1: float, agent_hr1: float,
    n_candidates: int,
) -> str:  # fmt: skip
    """Why the single agent scores below (or not below) the tool whose pick it is shown."""
    pick = single.set_index(USER)[ITEM].to_dict()
    followed = [s for s in samples if pick.get(s.user) == s.prior]
    other = [s for s in samples if s.user in pick and pick[s.user] not in (None, s.prior)]
    other_hits = sum(pick[s.user] == s.target for s in other)
    n = len(samples)
    head = (
        f"The single Rec Agent ({agent_hr1:.3f}) scores "
        + (
            f"below SASRec alone ({tool_hr1:.3f})"
            if agent_hr1 < tool_hr1
            else f"at least as high as SASRec alone ({tool_hr1:.3f})"
        )  # fmt: skip
        + " although round 1 shows it SASRec's pick"
    )
    return (
        f"{head}: it proposed that pick in {len(followed)} of {n} samples; its other "
        f"{len(other)} proposals hit the target {other_hits} time{'' if other_hits == 1 else 's'} "
        f"(a random pick among {n_candidates} would hit about {len(other) / n_candidates:.1f})."
    )


def rounds_text(curve: pd.DataFrame, rounds: pd.DataFrame, tool_hr1: float, chance: float) -> str:
    """The round-limit curve in words: where it starts, where it ends, and why it is flat."""
    first, last = curve.iloc[0], curve.iloc[-1]
    accepted, judged = first_round_acceptances(rounds)
    deepest = int(rounds[ROUND].max())
    move = (
        "the same at every limit"
        if np.isclose(first["mean"], last["mean"])
        else ("higher" if last["mean"] > first["mean"] else "lower") + " at the last limit"
    )
    return (
        f"**What you should see** (generated from this run): HR@1 is "
        f"{interval(first['mean'], first['low'], first['high'], int(first['n']))} at limit 1 "
        f"and {last['mean']:.3f} at limit {int(last['limit'])}, {move}; the longest dialogue "
        f"reached round {deepest}, and {accepted} of {judged} first proposals were accepted. "
        f"Chance is {chance:.3f} and SASRec alone {tool_hr1:.3f} (the dotted and dashed lines)."
    )


def ablation_text(table: pd.DataFrame, silent_rounds: pd.DataFrame) -> str:
    """The three rows of the feedback-text ablation, and whether the reasons were ever read."""
    values = dict(zip(table["method"], table["mean"], strict=True))
    parts = ", ".join(f"{name} {value:.3f}" for name, value in values.items())
    read = int((silent_rounds[ROUND] > 1).sum())
    if read == 0:
        why = (
            "No dialogue of the ablation went past round 1, so no round-2 prompt existed to "
            "leave the reasons out of: the rows can only differ through round 1, which is the "
            "same prompt in both."
        )
    else:
        why = f"{read} proposals of the ablation came after a rejection (round 2 or later)."
    n = int(silent_rounds[USER].nunique())
    return f"**What you should see** (generated from this run): {parts} (n = {n}). {why}"


def bias_text(measures: pd.DataFrame, tests: pd.DataFrame, n_candidates: int) -> str:
    """Where each method's choices stand in the list and in popularity, and the paired tests."""
    lines = []
    uniform = 1 / n_candidates
    for method, group in measures.groupby("method", sort=False):
        shares = group["position"].value_counts(normalize=True)
        top = shares.sort_values(ascending=False, kind="stable").head(2)
        listed = " and ".join(f"position {int(p)} in {s:.0%}" for p, s in top.items())
        lines.append(
            f"{method} ({len(group)} choices): position 1 in "
            f"{shares.get(1, 0.0):.0%}, most often {listed}; mean popularity percentile "
            f"{group['pop_percentile'].mean():.0f}."
        )
    lines.append(
        f"A uniform choice puts {uniform:.0%} at every position (the dotted line); the target's "
        "position is uniform by construction."
    )
    for row in tests.to_dict("records"):
        result = PairedBootstrapResult(row["diff"], row["low"], row["high"], row["p_value"])
        lines.append(paired_text(f"{row['measure']}, AFL − Rec Agent", result, int(row["n"])))
    return "**What you should see** (generated from this run):\n\n" + "\n".join(
        f"- {line}" for line in lines
    )


def simulation_text(
    simulation: pd.DataFrame, floor: pd.DataFrame, judgements: pd.DataFrame, relative: float
) -> str:
    """The user simulation per ratio: each agent's yes-share, recall, precision, F1, the floor."""
    answered = judgements[judgements["predicted"].notna()]
    users = int(judgements[USER].nunique())
    unit = "user" if users == 1 else "users"
    per_agent = len(judgements) // max(1, judgements[AGENT].nunique())
    if users == 1:
        caveat = "; with one user no interval can show any spread."
    elif users < 5:
        caveat = f"; with {users} users an interval shows only how far they differ from each other."
    else:
        caveat = "."
    lines = [
        f"Every interval resamples the simulated users, each with all of their judgements "
        f"(n = {users} {unit}, {per_agent} judgements per agent){caveat}"
    ]
    both = pd.concat([simulation, floor], ignore_index=True).set_index([RATIO, AGENT, "metric"])
    for ratio in dict.fromkeys(simulation[RATIO]):
        floor_f1 = both.loc[(ratio, "Always yes", "f1")]
        parts = []
        for agent in dict.fromkeys(simulation[AGENT]):
            said = answered[(answered[RATIO] == ratio) & (answered[AGENT] == agent)]
            yes = float(said["predicted"].astype(bool).mean()) if len(said) else float("nan")
            f1 = both.loc[(ratio, agent, "f1")]
            recall = both.loc[(ratio, agent, "recall")]["mean"]
            precision = both.loc[(ratio, agent, "precision")]["mean"]
            same = ", the floor's" if np.isclose(f1["mean"], floor_f1["mean"]) else ""
            parts.append(
                f"{agent} says yes to {yes:.0%}, recall {recall:.3f}, precision "
                f"{precision:.3f}, F1 {interval(f1['mean'], f1['low'], f1['high'], users, unit)}"
                f"{same}"
            )
        lines.append(
            f"At {ratio}: " + "; ".join(parts) + f". The always-yes floor's F1 is "
            f"{floor_f1['mean']:.3f}."
        )
    gain = f"{relative:+.1f}%" if np.isfinite(relative) else "undefined (a User Agent F1 of 0)"
    lines.append(
        f"AFL's F1 relative to the User Agent's, mean over the ratios: {gain}. The paper's "
        "average gain pools its own datasets and base models (the side table below), so it is "
        "not set against this number."
    )
    return "**What you should see** (generated from this run):\n\n" + "\n".join(
        f"- {line}" for line in lines
    )


def cost_text(costs: pd.DataFrame, n_samples: int, loop_phase: str = "afl") -> str:
    """Calls, cache hits and the price at gpt-4o-mini's rate, beside the paper's estimate."""
    total = costs.loc["total"]
    loop_calls = int(costs.loc[loop_phase, "calls"]) if loop_phase in costs.index else 0
    usd = [c for c in costs.columns if c.startswith("usd")]
    price = f"; at gpt-4o-mini's price the tokens cost US${float(total[usd[0]]):.4f}" if usd else ""
    return (
        f"**What you should see** (generated from this run): {int(total['calls'])} calls in "
        f"all, {int(total['from_cache'])} answered from the cache, {int(total['failed'])} "
        f"failed; the AFL loop made {loop_calls / max(1, n_samples):.2f} calls per "
        f"recommendation sample (at most two per round){price}. The paper's estimate is for "
        "all of LastFM: under about 3,000 calls and well under US$1."
    )
