"""Generated "what you should see" sentences for notebooks 00 and 06, built from their tables.

Hand-written prose written before a run can contradict it; these sentences cannot: every
direction, ordering and verdict in them is computed from the table passed in. The rules they
follow: an interval decides only when it excludes the value compared with (chance, or 0 for a
paired difference); an interval with no spread is reported as "no spread at n = ...", never as
precision; a Random row outside its chance level, or Pop below Random, gets a sentence on why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

#: Below this width an interval counts as having no spread.
FLAT = 1e-12

#: Below this many users a bootstrap verdict is flagged as a mechanics check.
SMALL_N = 10


def chance_level(metric: str, n_candidates: int) -> float:
    """What a uniformly random order of ``n_candidates`` scores on ``metric``, in expectation.

    One relevant item at rank ``r`` (uniform on ``1..N``): ``E[HR@K] = min(K, N) / N``,
    ``E[NDCG@K] = (1/N) sum_{r <= min(K, N)} 1 / log2(r + 1)``, ``E[MRR] = (1/N) sum_r 1/r``.

    Raises:
        ValueError: an unknown metric name (``hr@K``, ``ndcg@K`` or ``mrr``).
    """
    n = int(n_candidates)
    if metric == "mrr":
        return sum(1 / r for r in range(1, n + 1)) / n
    name, _, cutoff = metric.partition("@")
    if name not in ("hr", "ndcg") or not cutoff.isdigit():
        raise ValueError(f"no chance level for metric {metric!r}")
    top = min(int(cutoff), n)
    if name == "hr":
        return top / n
    return sum(1 / math.log2(r + 1) for r in range(1, top + 1)) / n


def interval_text(mean: float, low: float, high: float, n: int) -> str:
    """``mean [low, high]``, or ``mean (no spread at n = ...)`` when every unit agreed."""
    if high - low <= FLAT:
        return f"{mean:.3f} (no spread at n = {int(n)}: every user gave this value)"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def _side(low: float, high: float, value: float) -> str:
    """``"above"``, ``"below"`` or ``"inside"``: where an interval lies relative to ``value``."""
    if low > value:
        return "above"
    if high < value:
        return "below"
    return "inside"


def _names(names: list[str]) -> str:
    if not names:
        return "none"
    return ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]


def describe_chance(rows: pd.DataFrame, metric: str, n_candidates: int) -> str:
    """Where each method's interval lies relative to chance on one metric, and Random's row.

    Args:
        rows: ``[method, metric, mean, low, high, n]`` (one protocol).
        metric: The metric read, e.g. ``"ndcg@10"``.
        n_candidates: Candidates per user (chance depends on it).
    """
    table = rows[rows["metric"] == metric].sort_values("mean", ascending=False)
    chance = chance_level(metric, n_candidates)
    sides: dict[str, list[str]] = {"above": [], "inside": [], "below": []}
    for row in table.to_dict("records"):
        sides[_side(row["low"], row["high"], chance)].append(str(row["method"]))
    n = int(table["n"].max())
    parts = [
        f"On {metric} with {n_candidates} candidates (chance {chance:.3f}, n = {n} users): "
        f"above chance: {_names(sides['above'])}; interval includes chance: "
        f"{_names(sides['inside'])}; below chance: {_names(sides['below'])}."
    ]
    random = describe_random(rows, metric, n_candidates)
    if random:
        parts.append(random)
    return " ".join(parts)


def describe_random(rows: pd.DataFrame, metric: str, n_candidates: int) -> str:
    """Random's row against its own chance level, with why it may miss it ("" without Random)."""
    table = rows[(rows["metric"] == metric) & (rows["method"] == "Random")]
    if table.empty:
        return ""
    random = table.iloc[0]
    chance = chance_level(metric, n_candidates)
    where = _side(random["low"], random["high"], chance)
    shown = interval_text(random["mean"], random["low"], random["high"], int(random["n"]))
    flat = random["high"] - random["low"] <= FLAT
    if where != "inside" and not flat:  # close to its end: enough digits to see the miss
        shown = f"{random['mean']:.4f} [{random['low']:.4f}, {random['high']:.4f}]"
    if where == "inside":
        return (f"Random scores {shown} on {metric}, its interval holding its chance level "
                f"{chance:.3f}, as a random order should.")  # fmt: skip
    return (
        f"Random scores {shown} on {metric}, {where} its own chance level {chance:.4f}: the "
        "Random row is one seeded draw, and a 95% interval misses the true value in about 1 "
        "draw in 20 (more often when many rows are read at once); another SEED draws again. "
        "It says nothing about the other methods."
    )


def describe_pop_vs_random(rows: pd.DataFrame, metric: str) -> str:
    """Pop against Random on one metric, with the reason when Pop is not above Random."""
    table = rows[rows["metric"] == metric].set_index("method")
    if not {"Pop", "Random"} <= set(table.index):
        return ""
    pop, random = table.loc["Pop"], table.loc["Random"]
    n = int(pop["n"])
    text = (f"Pop {interval_text(pop['mean'], pop['low'], pop['high'], n)} against Random "
            f"{interval_text(random['mean'], random['low'], random['high'], n)}: ")  # fmt: skip
    if pop["low"] > random["high"]:
        return text + ("Pop is above Random. The negatives are drawn uniformly from the "
                       "catalogue, so most are rarely rated, while a held-out item is "
                       "usually a popular one.")  # fmt: skip
    if pop["mean"] >= random["mean"]:
        return text + (f"Pop is above Random in the mean, but the intervals overlap at n = {n}, "
                       "so this sample does not separate them.")  # fmt: skip
    return text + (
        f"Pop is below Random here. With n = {n} users a few held-out items that are less "
        "popular than their negatives decide the mean, and Pop, which gives every user the "
        "same order, ranks exactly those targets last; Random is one seeded draw around chance."
    )


def describe_paired(tests: pd.DataFrame, reference: str, metric: str, n: int) -> str:
    """Which methods the paired tests against ``reference`` separate from it, and which way.

    Args:
        tests: ``[method, diff, low, high, p_value]`` (method - reference).
        reference: The reference's name.
        metric: The metric tested.
        n: Users per method.
    """
    above, below, undecided, flat = [], [], [], []
    for row in tests.to_dict("records"):
        name = str(row["method"])
        if row["high"] - row["low"] <= FLAT and row["diff"] == 0:
            flat.append(name)
        elif row["low"] > 0:
            above.append(f"{name} (+{row['diff']:.3f}, p = {row['p_value']:.3f})")
        elif row["high"] < 0:
            below.append(f"{name} ({row['diff']:.3f}, p = {row['p_value']:.3f})")
        else:
            undecided.append(f"{name} ({row['diff']:+.3f} [{row['low']:.3f}, "
                             f"{row['high']:.3f}])")  # fmt: skip
    parts = [f"Paired against {reference} on {metric} over the same {n} users, the interval of "
             f"the difference lies above 0 for: {_names(above)}; below 0 for: {_names(below)}; "
             f"it includes 0 (undecided) for: {_names(undecided)}."]  # fmt: skip
    if n < SMALL_N:
        parts.append(f"At n = {n} a bootstrap has only a handful of distinct resamples: read "
                     "these verdicts as a check of the mechanics, not as evidence.")  # fmt: skip
    if flat:
        parts.append(f"{_names(flat)}: the same value as {reference} for every user (no spread "
                     f"at n = {n}), which says they agree, not that they were measured "
                     "precisely.")  # fmt: skip
    return " ".join(parts)


def describe_leaderboard(
    board: pd.DataFrame, metric: str, n_candidates: int, failed: Mapping[str, int] | None = None
) -> str:
    """The leaderboard on one metric: best method, chance, paired verdicts, methods below chance.

    Args:
        board: The output of :func:`recagents.compare.leaderboard.leaderboard`.
        metric: The metric read, e.g. ``"ndcg@10"``.
        n_candidates: Candidates per user.
        failed: Method -> users whose reply failed (their target is then placed at random).
    """
    rows = board[board["metric"] == metric].sort_values("mean", ascending=False)
    n = int(rows["n"].max())
    reference = str(rows["reference"].iloc[0])
    best = rows.iloc[0]
    parts = [f"**What you should see** (generated from this run's leaderboard): the highest "
             f"mean {metric} is {best['method']}'s, "
             f"{interval_text(best['mean'], best['low'], best['high'], n)}."]  # fmt: skip
    parts.append(describe_chance(rows, metric, n_candidates))
    pop_random = describe_pop_vs_random(rows, metric)
    if pop_random:
        parts.append(pop_random)
    tests = rows[rows["method"] != reference][["method", "diff", "diff_low", "diff_high",
                                                "p_value"]]  # fmt: skip
    tests = tests.rename(columns={"diff_low": "low", "diff_high": "high"})
    parts.append(describe_paired(tests, reference, metric, n))
    chance = chance_level(metric, n_candidates)
    for row in rows[rows["high"] < chance].to_dict("records"):
        name = str(row["method"])
        if name == "Random":
            continue
        lost = int((failed or {}).get(name, 0))
        why = (f"{lost} of its {n} users' replies failed and had their target placed at a "
               "random rank, which scores chance on average but is one seeded draw per user, "
               "and the other users' targets sit where their replies put them") if lost else (
               "its rankings put the held-out item lower than a random order would, on "
               "average")  # fmt: skip
        parts.append(f"{name} is below chance: {why}.")
    return " ".join(parts)


def describe_popularity(popularity: pd.DataFrame) -> str:
    """Popularity ratios in order, and whether coverage and Gini separate the methods at all."""
    methods = popularity[popularity["method"] != "Ground truth"]
    ordered = methods.sort_values("pop_ratio", ascending=False)
    leaning = [f"{m} ({r:.2f})" for m, r in zip(ordered["method"], ordered["pop_ratio"],
                                                strict=True)]  # fmt: skip
    above = ordered[ordered["pop_ratio"] > 1]["method"].tolist()
    parts = [f"**What you should see** (generated): top-5 popularity relative to the held-out "
             f"targets, highest first: {', '.join(leaning)}. Above 1 (more popular than what "
             f"users chose next): {_names(above)}."]  # fmt: skip
    for column in ("coverage", "gini"):
        values = methods[column].round(4)
        share = int((values == values.mode().iloc[0]).sum())
        if share > len(values) / 2:
            parts.append(
                f"The {column} is {values.mode().iloc[0]:.3f} for {share} of {len(values)} "
                "methods: "
                f"with {int(methods['n_users'].max())} users whose candidate lists barely "
                "overlap, almost any top 5 shows 5 different items per user, so this column "
                "cannot separate the methods at this size."
            )
    return " ".join(parts)


def describe_position(position: pd.DataFrame) -> str:
    """Per method: order-invariant, following the display order, or in between.

    Args:
        position: ``[method, order, kendall_tau, overlap@5, top1_changed, n_users]``.
    """
    parts = []
    for method, rows in position.groupby("method", sort=False):
        by = rows.set_index("order")
        if "reversed" not in by.index:
            continue
        tau_r = float(by.loc["reversed", "kendall_tau"])
        top_r = float(by.loc["reversed", "top1_changed"])
        tau_s = float(by.loc["shuffled", "kendall_tau"]) if "shuffled" in by.index else math.nan
        if tau_r >= 0.95 and top_r == 0:
            verdict = "order-invariant"
        elif tau_r < 0:
            verdict = "pulled toward the display order (a ranking that copied it would give -1)"
        else:
            verdict = "partly order-dependent"
        parts.append(f"{method}: tau {tau_r:.2f} reversed, {tau_s:.2f} shuffled, top item "
                     f"changed for {top_r:.0%} of users when reversed, {verdict}")  # fmt: skip
    n = int(position["n_users"].max()) if len(position) else 0
    return (f"**What you should see** (generated; means over {n} probed users, no interval "
            "at this size): " + "; ".join(parts) + ".")  # fmt: skip


def describe_scaling(scaling: pd.DataFrame) -> str:
    """How calls and prompt tokens per method change from the smallest to the largest size."""
    parts = []
    for method, rows in scaling.groupby("method", sort=False):
        calls = rows[rows["quantity"] == "calls"]
        tokens = rows[rows["quantity"] == "prompt_tokens"]
        if calls.empty or calls["total"].max() == 0:
            continue
        text = [str(method) + ":"]
        widest = calls["n_candidates"].max()
        by_users = calls[calls["n_candidates"] == widest].sort_values("n_users")
        if by_users["n_users"].nunique() > 1:
            first, last = by_users.iloc[0], by_users.iloc[-1]
            text.append(f"calls {first['total']:.0f} -> {last['total']:.0f} as users go "
                        f"{first['n_users']} -> {last['n_users']}")  # fmt: skip
        most = tokens["n_users"].max()
        by_cands = tokens[tokens["n_users"] == most].sort_values("n_candidates")
        if by_cands["n_candidates"].nunique() > 1:
            first, last = by_cands.iloc[0], by_cands.iloc[-1]
            text.append(f"prompt tokens per user {first['per_user']:.0f} -> "
                        f"{last['per_user']:.0f} as candidates go {first['n_candidates']} -> "
                        f"{last['n_candidates']}")  # fmt: skip
        parts.append(" ".join(text[:1]) + " " + "; ".join(text[1:]))
    return "**What you should see** (generated from the scaling frame): " + ". ".join(parts) + "."
