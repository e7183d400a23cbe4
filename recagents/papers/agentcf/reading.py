"""Notebook 01's words about its own numbers: every sentence is built from a run's tables.

Hand-written prose can contradict the run it sits beside; these functions cannot, since each
comparison (above or below chance, which method is larger, whether an interval decides) is
computed from the values passed in. They also hold the statistics to one rule: a paired
difference's p-value comes from the same resampled means as its interval
(:func:`paired_interval`), and an interval with no spread is said as "no spread at n = ...".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from recagents.columns import LABEL, USER
from recagents.metrics import PairedBootstrapResult, paired_bootstrap

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Expected NDCG@10 of a random order of 1 + 9 candidates (one relevant item).
RANDOM_NDCG10 = sum(1 / np.log2(rank + 1) for rank in range(1, 11)) / 10


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def interval_text(mean: float, low: float, high: float, n: int, signed: bool = False) -> str:
    """``mean [low, high]``, or ``mean (no spread at n = ...)`` when the interval is a point."""
    form = "{:+.3f}" if signed else "{:.3f}"
    if high - low <= 1e-12:
        return f"{form.format(mean)} (no spread at n = {n})"
    return f"{form.format(mean)} [{form.format(low)}, {form.format(high)}]"


def paired_interval(
    a: npt.ArrayLike, b: npt.ArrayLike, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> PairedBootstrapResult:
    """Paired bootstrap over users (:func:`recagents.metrics.paired_bootstrap`).

    Its interval and p-value come from the same resamples, so they never disagree.
    """
    return paired_bootstrap(a, b, n_boot=n_boot, ci=ci, seed=seed)


def paired_against(
    per_user: Mapping[str, pd.DataFrame],
    reference: str,
    metric: str,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Every method minus ``reference`` on the same users (:func:`paired_interval`).

    Returns:
        ``method, diff, low, high, p_value, n``, one row per method other than the reference.
    """
    base = per_user[reference].set_index(USER)[metric]
    rows = []
    for name, frame in per_user.items():
        if name == reference:
            continue
        other = frame.set_index(USER)[metric].reindex(base.index)
        result = paired_interval(other.to_numpy(), base.to_numpy(), n_boot=n_boot, seed=seed)
        rows.append({"method": name, **result._asdict(), "n": len(base)})
    return pd.DataFrame(rows, columns=["method", "diff", "low", "high", "p_value", "n"])


def excludes_zero(low: float, high: float) -> bool:
    """Whether an interval lies clear of 0 (a bound within float noise of 0 touches it)."""
    return low > 1e-12 or high < -1e-12


def display_order_ndcg(candidates: pd.DataFrame) -> float:
    """Mean NDCG@10 of a ranker that returns the candidates in the order they were shown.

    A model that lists the numbers 1, 2, 3, ... scores this, whatever the memories say; on a
    few users it can lie well away from a random order's expectation.
    """
    test = candidates[candidates[LABEL] == 1]
    return float((1 / np.log2(test["position"].to_numpy(dtype=float) + 2)).mean())


def display_order_sentence(candidates: pd.DataFrame) -> str:
    """The display-order score of these lists beside chance, in words."""
    score = display_order_ndcg(candidates)
    side = "below" if score < RANDOM_NDCG10 else "above"
    return (
        f"On these {candidates[USER].nunique()} users' lists, a ranker that returns the "
        f"candidates in the order shown scores NDCG@10 {_fmt(score)}, {side} chance "
        f"({_fmt(RANDOM_NDCG10)}): where the test item happens to stand decides such a ranker's "
        "score (section 7c counts how often the LLM rankers did this)."
    )


def _side(low: float, high: float, value: float) -> str:
    if low > value:
        return "above"
    if high < value:
        return "below"
    return "around"


def ranking_reading(
    summary: pd.DataFrame,
    per_user: Mapping[str, pd.DataFrame],
    subset: str,
    model: str,
    n_boot: int = 1000,
    seed: int = 0,
    candidates: pd.DataFrame | None = None,
) -> str:
    """What section 5's NDCG@10 table and figure show, for one subset, in generated words.

    Says which methods' intervals lie above, below or around chance (a random order's
    expected NDCG@10), reads the Random row against its own expectation, sets Pop beside
    Random (paired over the same users), and names every NDCG@1 cell with no spread.
    """
    rows = summary[(summary["subset"] == subset)]
    at10 = rows[rows["metric"] == "ndcg@10"].set_index("method")
    n = int(at10["n"].iloc[0])
    groups: dict[str, list[str]] = {"above": [], "below": [], "around": []}
    for method, row in at10.iterrows():
        groups[_side(row["low"], row["high"], RANDOM_NDCG10)].append(str(method))
    lines = [
        f"**What you should see** (generated from this run's values; {model}, n = {n} users, "
        f"chance {_fmt(RANDOM_NDCG10)}, the dotted line of the figure):"
    ]
    for side, words in (
        ("above", "above chance"),
        ("below", "below chance"),
        ("around", "with chance inside the interval"),
    ):
        if groups[side]:
            lines.append(f"- NDCG@10 {words}: {', '.join(groups[side])}.")
    if "Random" in at10.index:
        row = at10.loc["Random"]
        text = interval_text(row["mean"], row["low"], row["high"], n)
        if row["low"] <= RANDOM_NDCG10 <= row["high"]:
            verdict = "contains its own expectation, as it should"
        else:
            verdict = (
                "excludes its own expectation: Random is one seeded random order per user, not "
                "its average, and a 95% interval over so few users misses the true mean about "
                "one time in twenty; read every row against the chance line, not against Random"
            )
        lines.append(f"- Random scores {text}: its interval {verdict}.")
    pop = next((m for m in at10.index if str(m).startswith("Pop")), None)
    if pop is not None and "Random" in at10.index and pop in per_user and "Random" in per_user:
        diff = paired_interval(
            per_user[pop]["ndcg@10"].to_numpy(),
            per_user["Random"]["ndcg@10"].to_numpy(),
            n_boot=n_boot,
            seed=seed,
        )
        order = "below" if diff.diff < 0 else "above" if diff.diff > 0 else "level with"
        decided = excludes_zero(diff.low, diff.high)
        sentence = (
            f"- {pop} lies {order} Random: paired over the same users, Pop − Random = "
            f"{interval_text(diff.diff, diff.low, diff.high, n, signed=True)}, p = "
            f"{diff.p_value:.2f}, so this sample {'does' if decided else 'does not'} tell them "
            "apart."
        )
        if diff.diff < 0:
            sentence += (
                " Pop ranks by how many users of the training data had an item; the paper's "
                "negatives are drawn at random, so when these users' test items are less "
                "popular than the negatives beside them, Pop puts them low, below what a random "
                "order does on average."
            )
        lines.append(sentence)
    if candidates is not None:
        lines.append(f"- {display_order_sentence(candidates)}")
    at1 = rows[rows["metric"] == "ndcg@1"]
    flat = at1[(at1["high"] - at1["low"]).abs() <= 1e-12]
    if len(flat):
        values = ", ".join(
            f"{m} {_fmt(v)}" for m, v in zip(flat["method"], flat["mean"], strict=True)
        )
        lines.append(
            f"- NDCG@1 has no spread at n = {n} for {values}: the same value for every user "
            "(0 means no user's test item was ranked first), which is a count, not a precise "
            "estimate."
        )
    return "\n".join(lines)


def paired_reading(table: pd.DataFrame, reference: str, model: str) -> str:
    """Which methods differ from ``reference`` in a :func:`paired_against` table, in words."""
    lines = [f"**What you should see** (generated; {model}, each row minus {reference}):"]
    for row in table.to_dict("records"):
        n = int(row["n"])
        text = interval_text(row["diff"], row["low"], row["high"], n, signed=True)
        if row["high"] - row["low"] <= 1e-12:
            verdict = "the same difference for every user"
        elif excludes_zero(row["low"], row["high"]):
            verdict = f"the interval excludes 0 (p = {row['p_value']:.3f})"
        else:
            verdict = f"the interval contains 0 (p = {row['p_value']:.2f})"
        lines.append(f"- {row['method']}: {text}: {verdict}.")
    decided = table[
        [excludes_zero(lo, hi) for lo, hi in zip(table["low"], table["high"], strict=True)]
    ]
    lines.append(
        f"{len(decided)} of {len(table)} differences exclude 0 at this sample size"
        + (f" ({', '.join(decided['method'])})." if len(decided) else ".")
    )
    return "\n".join(lines)


def learning_reading(learning: pd.DataFrame, events: pd.DataFrame) -> str:
    """Section 3's forward accuracy read beside how often the agents chose the first option."""
    answered = learning[learning["answered"] > 0]
    if answered.empty:
        return "No forward choice was answered in this run."
    low, high = answered["accuracy"].min(), answered["accuracy"].max()
    span = f"{_fmt(low)}" if low == high else f"from {_fmt(low)} to {_fmt(high)}"
    forward = events[(events["kind"] == "forward") & events["ok"].astype(bool)]
    first = float((forward["chosen"] == 1).mean())
    positive_first = float(forward["positive_first"].astype(bool).mean())
    return (
        f"**What you should see** (generated): forward accuracy {span} over "
        f"{len(answered)} step-and-round cells (chance 0.5). The agents took option 1 in "
        f"{first:.0%} of their {len(forward)} answered choices, and the real item stood first "
        f"in {positive_first:.0%} of them, so an agent that always took option 1 would score "
        f"{positive_first:.3f}: an accuracy equal to that reads the position, not the taste."
    )


def parse_reading(parse_table: pd.DataFrame, n_steps: int) -> str:
    """How the ranking replies parsed, and whether B+R had a past version to retrieve."""
    repaired = parse_table["repaired"].sum()
    failed = parse_table["failed"].sum()
    users = parse_table["users"].sum()
    text = (
        f"**What you should see** (generated): of {users} ranking replies, {repaired} were "
        f"repaired and {failed} failed."
    )
    rows = parse_table[[str(i[-1]).endswith("B+R") for i in parse_table.index]]
    if len(rows):
        fallbacks = int(rows["retrieval_fallbacks"].sum())
        total = int(rows["users"].sum())
        text += (
            f" B+R fell back on the initial self-description for {fallbacks} of {total} users: "
            f"with {n_steps} training step(s) a user saved {n_steps} long-term version(s), and "
            "the retrieval pool leaves out the first and the current one, so it "
            + ("is empty after one step." if n_steps <= 1 else "holds the earlier versions.")
        )
    return text


def ablation_reading(
    methods: Mapping[str, pd.DataFrame], full: str, n_boot: int = 1000, seed: int = 0
) -> str:
    """Each ablation minus the full method on NDCG@10 (paired, same users), and the claim."""
    table = paired_against(methods, full, "ndcg@10", n_boot=n_boot, seed=seed)
    n = int(table["n"].iloc[0]) if len(table) else 0
    lines = [f"**What you should see** (generated, NDCG@10, each ablation minus {full}):"]
    for row in table.to_dict("records"):
        text = interval_text(row["diff"], row["low"], row["high"], n, signed=True)
        decided = excludes_zero(row["low"], row["high"])
        lines.append(
            f"- {row['method']}: {text} (p = {row['p_value']:.2f}): the interval "
            + ("excludes 0." if decided else "contains 0.")
        )
    lower = int((table["diff"] < 0).sum())
    lines.append(
        f"The paper's claim is that every removal lowers the score: {lower} of {len(table)} "
        f"ablations score lower than the full method on these {n} users, "
        f"{int((table['high'] < -1e-12).sum())} with an interval below 0."
    )
    return "\n".join(lines)


def probe_reading(probe: pd.DataFrame, paper_retest: float | None) -> str:
    """Section 7's re-test accuracy per order, consistency, and the paper's value."""
    lines = ["**What you should see** (generated):"]
    for row in probe.to_dict("records"):
        lines.append(
            f"- {row['subset']}, {row['order']}: accuracy {_fmt(row['accuracy'])} over "
            f"{row['answered']} answered pairs, option 1 taken in {row['chose_first']:.0%}."
        )
    consistency = probe["consistency"].mean()
    lines.append(
        f"Consistency across the two orders is {_fmt(consistency)} (1: the same item both "
        "ways, as an agent reading the items would; 0: the same slot both ways)."
        + (
            f" The paper's re-test accuracy is {paper_retest:.2f} (Fig. 3)."
            if paper_retest is not None
            else ""
        )
    )
    return "\n".join(lines)


def mark_chance(fig: Figure, value: float = RANDOM_NDCG10, label: str = "chance") -> None:
    """Draw a random order's expected NDCG@10 on an interval plot, the legend outside it."""
    from recagents.plotting import reference_line

    ax = fig.axes[0]
    old = ax.get_legend()
    title = old.get_title().get_text() if old is not None else None
    reference_line(ax, value, f"{label} (random order)", style="baseline", axis="x")
    if fig.get_figwidth() < 9:  # interval_plot widens a figure whose legend sits outside
        fig.set_figwidth(fig.get_figwidth() + 2.6)
    ax.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    fig.tight_layout()
