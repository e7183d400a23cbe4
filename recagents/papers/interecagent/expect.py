"""Notebook 04's generated "what you should see" text, its interval wording and side tables.

Why: hand-written prose cannot know what a run found, so every sentence of notebook 04 that
states a result is built here from the run's own frames, and placed next to the table or
figure it reads. Three rules of sound reporting are kept in one place: an interval with no
spread is said as "no spread at n = ...", never as precision; a baseline that lands where a
reader would not expect it (Random off its chance level, a method below Random) is
explained from the per-user rows; and the paper's values, measured on another dataset with
another metric, go to a side table (:func:`paper_side_table`) instead of onto our axes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

#: How the notebook opens every generated expectation (the prose test looks for it).
LEAD = "**What you should see (generated from this run's numbers):**"


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def interval_text(mean: float, low: float, high: float, n: int) -> str:
    """``0.8 [0.5, 1] (n = 6)``, or ``0 (no spread at n = 6)`` when the interval is a point."""
    if low == high:
        return f"{_fmt(mean)} (no spread at n = {n})"
    return f"{_fmt(mean)} [{_fmt(low)}, {_fmt(high)}] (n = {n})"


def interval_column(
    frame: pd.DataFrame, mean: str = "mean", low: str = "low", high: str = "high", n: str = "n"
) -> pd.Series:
    """One table cell per row: ``mean [low, high]``, or ``mean (no spread at n = ...)``."""
    return pd.Series(
        [interval_text(r[mean], r[low], r[high], int(r[n])) for _, r in frame.iterrows()],
        index=frame.index,
        dtype=object,
    )


def hit_chance(k: int, n_items: int, max_turns: int) -> float:
    """Chance of Hit@K for an agent showing ``k`` random items a turn: ``1 - (1 - k/M)^K``."""
    return 1 - (1 - k / n_items) ** max_turns


def random_ndcg(n_candidates: int) -> float:
    """Expected untruncated NDCG of the target in a uniformly random order of the candidates."""
    return sum(1 / math.log2(r + 1) for r in range(1, n_candidates + 1)) / n_candidates


def random_mean_range(
    n_users: int, n_candidates: int, ci: float = 0.95, draws: int = 20_000, seed: int = 0
) -> tuple[float, float]:
    """Where a random ranker's mean NDCG over ``n_users`` users falls in ``ci`` of draws.

    Each draw puts every user's target at a uniform rank; the range is the central ``ci`` of
    the draws' means. It is what Random's own row should be compared with: a bootstrap over
    the few ranks one run drew cannot see the ranks it did not draw.
    """
    ranks = np.random.default_rng(seed).integers(1, n_candidates + 1, size=(draws, n_users))
    means = (1 / np.log2(ranks + 1)).mean(axis=1)
    tail = (1 - ci) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def _row(rows: pd.DataFrame, method: str) -> pd.Series | None:
    found = rows[rows["method"] == method]
    return None if found.empty else found.iloc[0]


def explain_ranking_baselines(
    rows: pd.DataFrame, ranking: pd.DataFrame, n_candidates: int, seed: int = 0
) -> str:
    """Why the ranking task's baselines sit where they do, from the per-user rows.

    Random is set against its chance level and against the range a random ranker's mean
    takes at this many users; every method below Random is told how many targets it left
    out (they score 0); Pop's place against Random is said either way.

    Args:
        rows: ``method, metric, mean, low, high, n``; the ``ndcg`` rows are read.
        ranking: One row per user and method (``method, rank``; no rank = left out).
        n_candidates: Candidates per user (the target among them).
        seed: Seeds :func:`random_mean_range`.
    """
    ndcg = rows[rows["metric"] == "ndcg"]
    random_row = _row(ndcg, "Random")
    if random_row is None:
        return ""
    n = int(random_row["n"])
    chance = random_ndcg(n_candidates)
    low, high = random_mean_range(n, n_candidates, seed=seed)
    inside = random_row["low"] <= chance <= random_row["high"]
    shown = interval_text(random_row["mean"], random_row["low"], random_row["high"], n)
    text = [
        f"Random's ranking NDCG is {shown}; "
        f"its chance level is {chance:.3f}, "
        + ("inside its interval." if inside else "outside its bootstrap interval.")
    ]
    within = low <= random_row["mean"] <= high
    text.append(
        f"A uniformly random order averaged over {n} users lands between {low:.3f} and "
        f"{high:.3f} in 95% of draws, and this run's Random mean lies "
        + ("inside that range" if within else "outside that range")
        + (
            ": the bootstrap over users resamples only the ranks this one draw produced, so "
            "at this n it is narrower than the spread of a random ranker."
            if not inside and within
            else "."
        )
    )
    for _, row in ndcg.iterrows():
        method = str(row["method"])
        if method == "Random" or row["mean"] >= random_row["mean"]:
            continue
        users = ranking[ranking["method"] == method]
        if users.empty:
            continue
        left_out = int(users["rank"].isna().sum())
        text.append(
            f"{method} scores below Random: it left the target out for {left_out} of "
            f"{len(users)} users, and a target left out scores 0 (the paper's rule)."
        )
    pop = _row(ndcg, "Pop")
    if pop is not None:
        side = "above" if pop["mean"] > random_row["mean"] else "not above"
        decided = pop["low"] > random_row["high"] or pop["high"] < random_row["low"]
        text.append(
            f"Pop ({_fmt(pop['mean'])}) is {side} Random; their intervals "
            + ("do not overlap." if decided else "overlap, so this n does not separate them.")
        )
    return " ".join(text)


def expect_hits(
    hits: pd.DataFrame, conversations: pd.DataFrame, max_turns: int, chance: float, k: int = 5
) -> str:
    """What the conversation table shows: each method's Hit@K and AT@K, chance, leaks.

    Args:
        hits: ``method, rule, hit, hit_low, hit_high, at, at_low, at_high, n``.
        conversations: One row per conversation (``method, leaks, regenerations``).
        max_turns: K.
        chance: Hit@K of an agent showing random items (:func:`hit_chance`).
        k: Items shown a turn.
    """
    texts = {
        (row["method"], row["rule"]): (
            f"Hit@{max_turns} {interval_text(row['hit'], row['hit_low'], row['hit_high'], n)}, "
            f"AT@{max_turns} {interval_text(row['at'], row['at_low'], row['at_high'], n)}"
        )
        for _, row in hits.iterrows()
        for n in [int(row["n"])]
    }
    if len(texts) > 1 and len(set(texts.values())) == 1:
        rows = ", ".join(f"{method} by {rule}" for method, rule in texts)
        parts = [f"every row ({rows}) has {next(iter(texts.values()))}"]
    else:
        parts = [f"{method} by {rule}: {text}" for (method, rule), text in texts.items()]
    above = hits[hits["hit_low"] > chance]
    verdict = (
        "no row's interval lies above chance"
        if above.empty
        else "above chance by interval: "
        + ", ".join(f"{m} ({r})" for m, r in zip(above["method"], above["rule"], strict=True))
    )
    leaks = int(conversations["leaks"].sum())
    regenerated = int(conversations["regenerations"].sum())
    return (
        f"{LEAD} {'; '.join(parts)}. Chance ({k} random items a turn for {max_turns} turns) is "
        f"{chance:.4f}; {verdict}. AT@{max_turns} counts a miss as {max_turns + 1}. The "
        f"simulated users leaked the target's title in {leaks} message(s) after "
        f"{regenerated} regeneration(s)."
    )


def expect_one_turn(rows: pd.DataFrame, n_items: int, n_candidates: int, k: int = 5) -> str:
    """What the one-turn table and figure show: the best row of each task against chance.

    Args:
        rows: ``method, metric, mean, low, high, n`` (``recall`` and ``ndcg``).
        n_items: Items in the catalogue (Recall@k's chance is ``k / n_items``).
        n_candidates: Candidates of the ranking task.
        k: The retrieval list's length.
    """
    chances = {"recall": k / n_items, "ndcg": random_ndcg(n_candidates)}
    names = {"recall": f"Recall@{k}", "ndcg": "ranking NDCG"}
    parts = []
    for metric, part in rows.groupby("metric", sort=False):
        chance = chances.get(str(metric))
        best = part.loc[part["mean"].idxmax()]
        line = (
            f"{names.get(str(metric), str(metric))}: the highest row is {best['method']}, "
            f"{interval_text(best['mean'], best['low'], best['high'], int(best['n']))}"
        )
        if chance is not None:
            above = part[part["low"] > chance]["method"].tolist()
            line += f"; chance is {chance:.3g} (dotted line); " + (
                "no interval lies above it"
                if not above
                else "intervals above it: " + ", ".join(map(str, above))
            )
        parts.append(line)
    return f"{LEAD} " + ". ".join(parts) + "."


def expect_cost(costs: pd.DataFrame, per_turn: float, n_turns: int) -> str:
    """What the cost table shows: calls, failures, tokens and the gpt-4 price, from its rows."""
    total = costs.loc["total"]
    price = [c for c in costs.columns if str(c).startswith("usd_at_")]
    priced = f", ${float(total[price[0]]):.2f} at gpt-4's listed rate" if price else ""
    phases = [p for p in costs.index if p != "total"]
    biggest = max(phases, key=lambda p: float(costs.loc[p, "calls"])) if phases else "none"
    return (
        f"{LEAD} {int(total['calls'])} calls, {int(total['failed'])} failed, "
        f"{int(total['prompt_tokens']):,} prompt and {int(total['completion_tokens']):,} "
        f"completion tokens{priced}; the most calls went to {biggest} "
        f"({int(costs.loc[biggest, 'calls'])}). The model's agent made {per_turn:.2f} calls per "
        f"turn over {n_turns} turns."
    )


def paper_side_table(values: Mapping[str, float], metric: str, source: str) -> pd.DataFrame:
    """The paper's values as a side table, each with its metric and source.

    Args:
        values: Our method name -> the paper's value.
        metric: The paper's metric and setting (e.g. ``"Hit@5, within 5 turns"``).
        source: The paper's table, dataset and model.
    """
    return pd.DataFrame(
        [
            {"method": method, "paper value": value, "paper's metric": metric, "source": source}
            for method, value in values.items()
        ]
    ).set_index("method")
