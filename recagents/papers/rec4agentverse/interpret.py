"""Notebook 05's generated reading of its tables: what this run shows, made from its numbers.

Why: hand-written text about a run goes stale and contradicted the tables it sat beside
(issue #39). Every sentence here is built from the run's frames, next to the table it reads:
:func:`comparison_table` (intervals, a zero-width one said as "no spread at n = ..."),
:func:`stage_differences` (each later stage minus stage 1, paired over users: one bootstrap
gives the interval and the p-value), :func:`describe_stages`, :func:`manipulation_table`,
:func:`describe_manipulation` and :func:`describe_summary` (the closing section's bullets).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.metrics import paired_bootstrap
from recagents.papers.rec4agentverse.analysis import POINT, interval_text, mode_label
from recagents.papers.rec4agentverse.catalogue import Catalogue

#: The measures :func:`describe_stages` reads, with how a sentence names them.
STAGE_METRICS = {
    "pref_share": "films fitting the hidden taste",
    "profile_jaccard": "profile Jaccard",
    "era_match": "profile era correct",
}


def comparison_table(shown: pd.DataFrame) -> pd.DataFrame:
    """The stage comparison as text cells, one row per mode and stage, one column per metric."""
    cells = [
        interval_text(m, lo, hi, int(n))
        for m, lo, hi, n in shown[["mean", "low", "high", "n"]].to_numpy(float)
    ]
    return shown.assign(value=cells).pivot(
        index=["mode", "stage"], columns="metric", values="value"
    )


def stage_differences(
    sessions: pd.DataFrame,
    metrics: Sequence[str] = tuple(STAGE_METRICS),
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Each later stage minus stage 1, per mode and metric, paired over the same users.

    One paired bootstrap over users (:func:`recagents.metrics.paired_bootstrap`) gives the
    interval and the p-value, so the two cannot disagree.

    Returns:
        ``[mode, metric, stage, earlier, later, diff, low, high, p_value, n]``.
    """
    rows = []
    for mode, part in sessions.groupby("mode", sort=False):
        for metric in metrics:
            table = part.pivot_table(index=USER, columns="stage", values=metric, aggfunc="mean")
            if 1 not in table:
                continue
            for stage in [s for s in table.columns if s != 1]:
                both = table[[1, stage]].dropna()
                if both.empty:
                    continue
                a, b = both[stage].to_numpy(float), both[1].to_numpy(float)
                result = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
                rows.append({"mode": mode, "metric": metric, "stage": int(stage),
                             "earlier": round(float(b.mean()), 12),
                             "later": round(float(a.mean()), 12),
                             "diff": result.diff, "low": result.low, "high": result.high,
                             "p_value": result.p_value, "n": len(both)})  # fmt: skip
    columns = ["mode", "metric", "stage", "earlier", "later", "diff", "low", "high", "p_value", "n"]
    return pd.DataFrame(rows, columns=columns)


#: Below this many users a bootstrap interval is not reported as deciding anything.
MIN_USERS = 5


def _range(values: pd.Series) -> str:
    """``0.25\u20130.38``, or one value when they are all equal."""
    low, high = f"{values.min():.2f}", f"{values.max():.2f}"
    return low if low == high else f"{low}\u2013{high}"


def _change_text(row: pd.Series, n_boot: int) -> str:
    """One paired difference in words: its size, its interval and whether that decides it."""
    head = f"{row['earlier']:.2f} \u2192 {row['later']:.2f} at stage {int(row['stage'])}"
    if int(row["n"]) < MIN_USERS and abs(row["diff"]) > POINT:
        few = f"over n = {int(row['n'])} users: too few to decide"
        return f"{head} (difference {row['diff']:+.2f} {few})"
    if row["high"] - row["low"] <= POINT:
        if abs(row["diff"]) <= POINT:
            return f"{head} (no change for any user, n = {int(row['n'])})"
        return (
            f"{head} (difference {row['diff']:+.2f} for every user: no spread at "
            f"n = {int(row['n'])})"
        )
    decided = row["low"] > 0 or row["high"] < 0
    verdict = (
        ("a rise" if row["diff"] > 0 else "a drop") + " the interval decides"
        if decided
        else "the interval includes 0: not decided at this sample size"
    )
    p = _p_text(row["p_value"], n_boot)
    return (
        f"{head} (difference {row['diff']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}], "
        f"{p}; {verdict})"
    )


def _p_text(p_value: float, n_boot: int) -> str:
    """``p = 0.03``, or ``p <= 0.001`` at the smallest value the bootstrap can give."""
    floor = 1 / (n_boot + 1)
    if p_value <= floor + 1e-12:
        return f"p \u2264 {floor:.3f}, the smallest {n_boot} resamples can give"
    return f"p = {p_value:.3f}"


def _find(frame: pd.DataFrame, **where: object) -> pd.Series | None:
    """The one row of ``frame`` matching ``where``, or None."""
    mask = np.ones(len(frame), dtype=bool)
    for column, value in where.items():
        mask &= (frame[column] == value).to_numpy()
    rows = frame[mask]
    return rows.iloc[0] if len(rows) else None


def describe_stages(comparison: pd.DataFrame, differences: pd.DataFrame, n_boot: int = 1000) -> str:
    """What the stage table and figure show, in sentences made from this run's numbers.

    Args:
        comparison: :func:`~recagents.papers.rec4agentverse.analysis.stage_comparison` rows
            of every mode shown (LLM, template, scripted skill 0).
        differences: :func:`stage_differences` of the same sessions.
        n_boot: The bootstrap resamples (for the smallest attainable p-value).
    """
    lines = [
        "**What you should see** (generated from this run's values; each change is the later "
        "stage minus stage 1 on the same users, 95% paired bootstrap interval):"
    ]
    for mode in dict.fromkeys(differences["mode"]):
        rows = differences[differences["mode"] == mode]
        parts = []
        for metric, label in STAGE_METRICS.items():
            changes = rows[rows["metric"] == metric].sort_values("stage")
            if len(changes):
                texts = "; ".join(_change_text(r, n_boot) for _, r in changes.iterrows())
                parts.append(f"{label[:1].upper() + label[1:]} {texts}.")
        lines.append(f"- **{mode_label(mode)}**: " + " ".join(parts))
    notes = []
    drop = _find(differences, mode="llm", metric="profile_jaccard", stage=2)
    if drop is not None and drop["high"] < 0:
        notes.append(
            f"The LLM's profile Jaccard falls at stage 2 ({drop['earlier']:.2f} \u2192 "
            f"{drop['later']:.2f}) and its interval excludes 0, so it is not noise: after the "
            "opening request, the only thing that changes the profile is the agent's report, "
            "and section 8 counts the reports that name genres or an era the user never stated."
        )
    said = comparison[(comparison["mode"] == "llm") & (comparison["metric"] == "user_satisfied")]
    rule = comparison[(comparison["mode"] == "llm") & (comparison["metric"] == "pref_satisfied")]
    if len(said) and (said["low"] >= 1 - POINT).all() and len(rule):
        notes.append(
            f"The LLM user said it was satisfied in every session of every stage (1.00, no "
            f"spread at n = {int(said['n'].iloc[0])}) while the films met its hidden taste in "
            f"{_range(rule['mean'])} of the sessions: its verdict "
            "carries no information, which is why its turns needed stays near 1."
        )
    chance = comparison[comparison["mode"].astype(str).str.startswith("scripted")]
    share = chance[chance["metric"] == "pref_share"]
    if len(share):
        notes.append(
            f"The dashed scripted skill-0 rows are the no-information level: "
            f"{_range(share['mean'])} of the films fit the "
            "hidden taste when no message carries it."
        )
    return "\n".join(lines) + ("\n\n" + " ".join(notes) if notes else "")


def manipulation_table(attacks: pd.DataFrame, n_boot: int = 1000) -> pd.DataFrame:
    """Section 6's rates as text: interval or "no spread at n = ...", and the p-value."""
    rows = []
    for _, row in attacks.iterrows():
        rows.append({
            "recommender": row["recommender"],
            "channel": row["mode"],
            "condition": row["condition"],
            "share routed to the adversary": interval_text(
                row["rate"], row["low"], row["high"], int(row["n"])
            ),
            "paired p-value": (
                "" if pd.isna(row["p_value"]) else _p_text(row["p_value"], n_boot).split(",")[0]
            ),
            "unusable replies": int(row["failures"]),
        })  # fmt: skip
    return pd.DataFrame(rows).set_index(["recommender", "channel", "condition"])


def _routing(decisions: pd.DataFrame, recommender: str, mode: str, condition: str) -> str:
    """Where a recommender sent the users of one cell: ``a02 for 16 of 16``."""
    part = decisions[
        (decisions["recommender"] == recommender)
        & (decisions["mode"] == mode)
        & (decisions["condition"] == condition)
    ]
    counts = part["chosen"].dropna().value_counts()
    if counts.empty:
        return "no usable decision"
    if int(counts.iloc[0]) == len(part):
        return f"all {len(part)} to {counts.index[0]}"
    return f"most often to {counts.index[0]}, {int(counts.iloc[0])} of {len(part)}"


def describe_manipulation(
    attacks: pd.DataFrame, decisions: pd.DataFrame, catalogue: Catalogue, n_boot: int = 1000
) -> str:
    """What the manipulation table shows, in sentences made from this run's numbers."""
    adversary = catalogue.adversary
    card = catalogue.card(adversary) if adversary else None
    lines = ["**What you should see** (generated from this run's values):"]
    if card is not None:
        lines.append(
            f"The adversary is `{card.agent_id}`, \u201c{card.name}\u201d "
            f"({', '.join(card.genres)}, {card.years[0]}\u2013{card.years[1]})."
        )
    for (recommender, mode), part in attacks.groupby(["recommender", "mode"], sort=False):
        attack = _find(part, condition="attack")
        honest = _find(part, condition="honest")
        diff = _find(part, condition="attack - honest")
        if attack is None or honest is None or diff is None:
            continue
        head = (
            f"- **{recommender} recommender, {mode} channel**: the adversary gets "
            f"{attack['rate']:.2f} of the decisions after its attack and {honest['rate']:.2f} "
            "after an honest report"
        )
        if int(diff["n"]) < MIN_USERS:
            text = f"{head}; over n = {int(diff['n'])} users that is too few to decide"
        elif diff["high"] - diff["low"] <= POINT:
            routed = "; ".join(
                f"after the {c} report {_routing(decisions, str(recommender), str(mode), c)}"
                for c in ("attack", "honest")
            )
            text = (
                f"{head}; the difference {diff['rate']:+.2f} has no spread at "
                f"n = {int(diff['n'])}: every user had the same difference ({routed}), so "
                f"every resample gives it too (bootstrap {_p_text(diff['p_value'], n_boot)})"
            )
            if diff["rate"] < 0:
                text += (
                    "; the attack *lowered* the adversary's share, the opposite of what its "
                    "report asks, so this recommender answered the prompt, not the lie "
                    "(section 8 counts how it routes)"
                )
            elif abs(diff["rate"]) <= POINT:
                text += "; the report changed nothing in this recommender's choice"
        else:
            decided = diff["low"] > 0 or diff["high"] < 0
            text = (
                f"{head}; the paired difference is {diff['rate']:+.2f} [{diff['low']:+.2f}, "
                f"{diff['high']:+.2f}] ({_p_text(diff['p_value'], n_boot)}), "
                + ("an effect the interval decides" if decided else "not decided at this n")
            )
        lines.append(text + ".")
    classic = {m: _find(attacks, recommender="classic", mode=m, condition="attack - honest")
               for m in ("free_text", "schema")}  # fmt: skip
    if all(v is not None for v in classic.values()):
        free, schema = classic["free_text"], classic["schema"]
        assert free is not None and schema is not None
        same = abs(free["rate"] - schema["rate"]) <= POINT
        lines.append(
            "For the classic recommender the schema "
            + ("changes nothing: it reads only the parsed fields, and the lie fits them."
               if same else
               f"changes the gain from {free['rate']:+.2f} to {schema['rate']:+.2f}.")
        )  # fmt: skip
    return "\n".join(lines)


def describe_summary(
    comparison: pd.DataFrame,
    attacks: pd.DataFrame,
    detectable: Mapping[str, float | None],
) -> str:
    """The closing section's findings, as bullets made from this run's numbers.

    Args:
        comparison: The stage comparison of the LLM and template modes.
        attacks: :func:`~recagents.papers.rec4agentverse.manipulation.manipulation_summary`
            rows with a ``recommender`` column.
        detectable: Section 7's least detectable skill per effect (None: not detected).
    """
    bullets = ["**What this run shows** (generated from its values):"]
    share = comparison[comparison["metric"] == "pref_share"]
    for mode in ("template", "llm"):
        rows = share[share["mode"] == mode].sort_values("stage")
        if len(rows):
            values = ", ".join(
                f"stage {int(stage)} {interval_text(m, lo, hi, int(n))}"
                for stage, m, lo, hi, n in rows[["stage", "mean", "low", "high", "n"]].to_numpy()
            )
            bullets.append(f"- {mode_label(mode)}: films fitting the hidden taste {values}.")
    for effect, skill in detectable.items():
        bullets.append(
            f"- Section 7: the {effect} is detected with these users "
            + (f"from skill {skill:g} on." if skill is not None else "at no skill level.")
        )
    gains = attacks[attacks["condition"] == "attack - honest"]
    for _, row in gains.iterrows():
        bullets.append(
            f"- Manipulation, {row['recommender']} recommender, {row['mode']} channel: attack "
            f"minus honest {interval_text(row['rate'], row['low'], row['high'], int(row['n']))}."
        )
    return "\n".join(bullets)
