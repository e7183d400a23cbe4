"""Notebook 02's readings: the sentences that say what a run found, built from its numbers.

Hand-written text cannot follow a rerun; these functions can. Each takes the frame a cell
has just shown and returns Markdown in which every number, direction ("above", "overlap")
and verdict is computed. Two statistical rules hold throughout: an interval with no spread
(every unit gave the same value) is reported as "no spread at n = ...", never as precision;
and taste-probe intervals resample the independent unit, the agent, not its judgements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.metrics import CLASSIFICATION_METRICS
from recagents.skill import summarise_units

#: Below this width an interval counts as having no spread.
_NO_SPREAD = 1e-12


def fmt(value: float) -> str:
    """A number as the readings print it (three significant digits)."""
    return f"{value:.3g}"


def interval_text(mean: float, low: float, high: float, n: int) -> str:
    """``mean [low, high] (n = ...)``, or ``mean (no spread at n = ...)`` for a flat one."""
    if high - low <= _NO_SPREAD:
        return f"{fmt(mean)} (no spread at n = {int(n)}: every unit gave this value)"
    return f"{fmt(mean)} [{fmt(low)}, {fmt(high)}] (n = {int(n)})"


def side_of(low: float, high: float, null: float) -> str:
    """Where an interval lies against ``null``: ``above``, ``below``, ``contains`` or ``flat``.

    ``flat`` (no spread) decides nothing: every resample held the same value.
    """
    if high - low <= _NO_SPREAD:
        return "flat"
    return "above" if low > null else "below" if high < null else "contains"


def taste_by_agents(
    judged: pd.DataFrame, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """Taste-probe metrics pooled over judgements, with a bootstrap interval over *agents*.

    An agent's 20 judgements share its persona and its replies, so they are not independent:
    the interval resamples agents with replacement (each drawn agent brings all of its
    answered judgements) and recomputes the pooled accuracy, precision, recall and F1.

    Args:
        judged: :func:`~.evaluate.taste_probe` output (``user_id, label, predicted``);
            unanswered judgements (``predicted`` NA) are left out.
        n_boot: Resamples.
        seed: Seed of the resampling generator.
        ci: Confidence level.

    Returns:
        ``metric, mean, low, high, n`` (n: agents), plus ``judgements`` and ``prevalence``
        (the share of positives) and ``yes_rate`` (the share answered "watch").
    """
    answered = judged.dropna(subset=["predicted"])
    if answered.empty:
        raise ValueError("no answered judgement to summarise")
    truth = answered["label"].astype(bool)
    said = answered["predicted"].astype(int).astype(bool)
    per_agent = pd.DataFrame(
        {
            "tp": (truth & said).groupby(answered[USER]).sum(),
            "fp": (~truth & said).groupby(answered[USER]).sum(),
            "fn": (truth & ~said).groupby(answered[USER]).sum(),
            "correct": (truth == said).groupby(answered[USER]).sum(),
            "n": truth.groupby(answered[USER]).size(),
        }
    ).to_numpy(dtype=float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(per_agent), size=(n_boot, len(per_agent)))
    totals = np.concatenate([per_agent.sum(axis=0, keepdims=True), per_agent[draws].sum(axis=1)])
    tp, fp, fn, correct, n = totals.T

    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

    values = {
        "accuracy": ratio(correct, n),
        "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn),
        "f1": ratio(2 * tp, 2 * tp + fp + fn),
    }
    alpha = (1 - ci) / 2
    rows = []
    for metric in CLASSIFICATION_METRICS:
        low, high = np.quantile(values[metric][1:], [alpha, 1 - alpha])
        rows.append(
            {"metric": metric, "mean": float(values[metric][0]), "low": float(low),
             "high": float(high), "n": len(per_agent), "judgements": len(answered),
             "prevalence": float(truth.mean()), "yes_rate": float(said.mean())}
        )  # fmt: skip
    return pd.DataFrame(rows)


def share_by_agents(
    flags: pd.Series, agents: pd.Series, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> tuple[float, float, float, int]:
    """The share of True ``flags``, with a bootstrap interval over the ``agents`` they belong to.

    Used for shares of ratings: an agent's ratings share its persona and its replies, so the
    interval resamples agents (each drawn agent brings all of its values), not ratings.

    Returns:
        ``(share, low, high, n_agents)``.
    """
    if flags.empty:
        raise ValueError("no values to summarise")
    counts = pd.DataFrame({"hit": flags.astype(float), "agent": agents.to_numpy()})
    per_agent = counts.groupby("agent")["hit"].agg(["sum", "size"]).to_numpy(dtype=float)
    rng = np.random.default_rng(seed)
    draws = per_agent[rng.integers(0, len(per_agent), size=(n_boot, len(per_agent)))].sum(axis=1)
    shares = draws[:, 0] / draws[:, 1]
    low, high = np.quantile(shares, [(1 - ci) / 2, (1 + ci) / 2])
    share = float(per_agent[:, 0].sum() / per_agent[:, 1].sum())
    return share, float(low), float(high), len(per_agent)


def describe_taste(taste: pd.DataFrame) -> str:
    """Per ratio: precision against the prevalence (a taste-blind judge's precision).

    Args:
        taste: Rows of :func:`taste_by_agents` with a ``ratio`` column.
    """
    lines = []
    for ratio, rows in taste.groupby("ratio", sort=False):
        row = rows.set_index("metric").loc["precision"]
        recall = rows.set_index("metric").loc["recall"]
        prevalence = float(row["prevalence"])
        verdict = {
            "above": "above it: the answers carry taste",
            "below": "below it: the answers pick the agent's own items less often than chance",
            "contains": "containing it: this sample cannot tell the answers from a taste-blind "
            "judge",
            "flat": "with no spread to decide with: this sample cannot tell the answers from a "
            "taste-blind judge",
        }[side_of(row["low"], row["high"], prevalence)]
        shown = interval_text(row["mean"], row["low"], row["high"], int(row["n"]))
        lines.append(
            f"- **{ratio}**: precision {shown}, resampling agents "
            f"({int(row['judgements'])} judgements), against the prevalence "
            f"{fmt(prevalence)} (chance), {verdict}. The agents said yes to "
            f"{row['yes_rate']:.0%} of the items; a taste-blind judge's recall equals that "
            f"rate, and theirs is {fmt(recall['mean'])}."
        )
    return "\n".join(lines)


def no_spread_reading(
    label: str,
    interval: Sequence[float],
    n: int,
    model: str,
    *,
    recorded: float | None = None,
    recorded_source: str = "",
    why: str = "",
) -> str | None:
    """The reading of a flat interval, or None when the interval has spread.

    ``recagents.notebook.expectation`` reads an interval's half width as the smallest
    visible difference; when every unit gave the same value that width is 0, which says
    nothing about precision: the sample has no spread to measure. The notebook shows this
    text instead of ``expectation``'s when it is not None.
    """
    mean, low, high = (float(v) for v in interval[:3])
    if high - low > _NO_SPREAD:
        return None
    parts = [
        f"**What to compare: {label}.** Ours ({model}): all {n} agents gave {fmt(mean)}, so "
        f"there is no spread at n = {n}: the bootstrap interval [{fmt(low)}, {fmt(high)}] has "
        "zero width because every resample holds the same value, not because the estimate is "
        "precise; more agents, or a model whose replies vary, could give another mean."
    ]
    if recorded is not None:
        side = "above" if recorded > mean else "below" if recorded < mean else "equal to"
        source = f" ({recorded_source})" if recorded_source else ""
        parts.append(f"A capable model's recorded run gives {fmt(recorded)}{source}, {side} ours.")
    if why:
        parts.append(why.strip())
    return " ".join(parts)


#: The engagement metrics a reading names, with their words.
_ENGAGEMENT_LABELS = {
    "p_view": "viewing ratio",
    "p_like": "like ratio",
    "exit_page": "exit page",
    "satisfaction": "satisfaction",
}


def describe_engagement(
    summary: pd.DataFrame,
    per_agent: pd.DataFrame,
    recommenders: Sequence[str],
    n_boot: int = 1000,
    seed: int = 0,
) -> str:
    """Which recommender leads each engagement metric, and whether the sample can tell.

    Per metric: a flat metric (every agent the same value on every list) is said to have no
    spread; otherwise the highest and lowest recommender with their intervals, and the
    paired difference between them over the same agents (one bootstrap over agents, the
    procedure of the intervals). When Random leads a metric by a difference that excludes 0,
    a sentence says how that is possible.

    Args:
        summary: :func:`~.engagement.engagement_summary` (``recommender, metric, mean, low,
            high, n``).
        per_agent: :func:`~.engagement.engagement` (one row per agent and recommender).
        recommenders: The recommenders, in display order.
        n_boot: Resamples of the paired difference.
        seed: Its seed.
    """
    names = [r for r in recommenders if r in set(summary["recommender"])]
    lines = []
    for metric, label in _ENGAGEMENT_LABELS.items():
        rows = summary[(summary["metric"] == metric) & summary["recommender"].isin(names)]
        rows = rows.dropna(subset=["mean"])
        if rows.empty:
            continue
        if (rows["high"] - rows["low"]).max() <= _NO_SPREAD and rows["mean"].nunique() == 1:
            lines.append(
                f"- **{label}**: {fmt(rows['mean'].iloc[0])} for every agent on every "
                f"recommender: no spread at n = {int(rows['n'].max())}, so this metric cannot "
                "rank the recommenders in this run."
            )
            continue
        top = rows.loc[rows["mean"].idxmax()]
        bottom = rows.loc[rows["mean"].idxmin()]
        wide = per_agent.pivot_table(index=USER, columns="recommender", values=metric)
        gap = (wide[top["recommender"]] - wide[bottom["recommender"]]).dropna()
        text = (
            f"- **{label}**: highest {top['recommender']} "
            f"{interval_text(top['mean'], top['low'], top['high'], int(top['n']))}, lowest "
            f"{bottom['recommender']} "
            f"{interval_text(bottom['mean'], bottom['low'], bottom['high'], int(bottom['n']))}"
        )
        decides = False
        if len(gap):
            mean, low, high, n = summarise_units(gap.to_numpy(), n_boot=n_boot, seed=seed)
            side = side_of(low, high, 0.0)
            decides = side in ("above", "below")
            text += (
                f"; the difference on the same agents is {interval_text(mean, low, high, n)}"
                + {
                    "above": ", which excludes 0.",
                    "below": ", which excludes 0.",
                    "contains": ", which contains 0: not a difference this sample can show.",
                    "flat": ": the same for every agent, so no interval decides it.",
                }[side]
            )
        if top["recommender"] == "Random" and decides:
            text += (
                " Random, which ignores taste, leads here. For agents that judge taste a random "
                "list should not beat a trained one; agents that react to something else in "
                "the item lines (an item's average rating, the wording of its summary, its place "
                "on the page) can put a random list first. Section 2's probe and section 10d "
                "measure how taste-blind these agents are."
            )
        lines.append(text)
    return "\n".join(lines)


def describe_recorded(anova: Mapping[str, pd.DataFrame], shares: Mapping[str, pd.DataFrame]) -> str:
    """What the authors' recorded runs show in sections 3-5's analyses, from their tables.

    Args:
        anova: Run label -> :func:`~.traits.trait_anova` of the run.
        shares: Run label -> :func:`~.engagement.rating_distribution` of the run.
    """
    lines = []
    for label, table in anova.items():
        rising = []
        for row in table.itertuples():
            means = [row.mean_1, row.mean_2, row.mean_3]
            if not any(math.isnan(m) for m in means) and means[0] < means[1] < means[2]:
                rising.append(f"{row.measure} with {row.trait}")
        ratings = shares[label].set_index("rating")["share"]
        low_share = float(ratings.reindex([1, 2]).fillna(0).sum())
        top = int(ratings.idxmax())
        lines.append(
            f"- **{label}**: the level means rise from level 1 to 3 for "
            f"{len(rising)} of {len(table)} trait measures ({', '.join(rising) or 'none'}); "
            f"{top} stars is the most common rating and 1-2 stars are {low_share:.1%} of "
            "ratings."
        )
    return "\n".join(lines)
