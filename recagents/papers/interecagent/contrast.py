"""Sentences that set the embedded model's rows beside the scripted players' rows.

Why: notebook 04's conversation and one-turn figures show the methods the embedded model
plays (all 0 by id in the default run) next to the scripted players of
:mod:`~recagents.papers.interecagent.scripted` on the same users. These functions turn the
plotted rows (``method, mean, low, high, n``) and the turns of the run into the sentences
printed under the figures, so the words follow the numbers of whichever run made them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

#: The start of every scripted row's method name (:func:`scripted.scripted_label`).
SCRIPTED = "scripted"

#: What an agent turn of each ``kind`` (``ConversationRun.turns``) did, for the sentences.
TURN_KINDS = {
    "answer": "answered in words without calling a tool",
    "failed": "wrote a plan that could not run",
    "plan": "ran a tool plan",
    "llm_only": "named titles without tools (the LLM-only baseline)",
}


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _interval(row: pd.Series) -> str:
    """``0.8 [0.5, 1]``, or ``0 (no spread at n = 6)`` when the interval is a point."""
    if row["low"] == row["high"]:
        return f"{_fmt(row['mean'])} (no spread at n = {int(row['n'])})"
    return f"{_fmt(row['mean'])} [{_fmt(row['low'])}, {_fmt(row['high'])}]"


def _level(row: pd.Series) -> str:
    """``"skill 1"`` from the method ``"scripted, skill 1"``."""
    return str(row["method"]).removeprefix(f"{SCRIPTED}, ")


def _rows_text(rows: pd.DataFrame) -> str:
    """One run of rows: one shared value when they all have it, else each method's."""
    if len(rows) > 1 and rows[["mean", "low", "high"]].nunique().max() == 1:
        names = ", ".join(str(m) for m in rows["method"])
        return f"all {len(rows)} methods ({names}) score {_interval(rows.iloc[0])}"
    return "; ".join(f"{row['method']} {_interval(row)}" for _, row in rows.iterrows())


def split_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(model_rows, scripted_rows)``: the rows the model (or a fixed baseline) played first."""
    scripted = rows["method"].astype(str).str.startswith(SCRIPTED)
    return rows[~scripted], rows[scripted]


def turn_kinds(turns: pd.DataFrame) -> str:
    """What the model's agent turns did: counts by kind, and how many held the target."""
    counts = turns["kind"].value_counts()
    parts = [f"{int(counts[kind])} {TURN_KINDS.get(kind, kind)}" for kind in counts.index]
    recommended = int((turns["recommended"].map(len) > 0).sum())
    hits = int(turns["hit_id"].astype(bool).sum())
    held = "none of them the target" if hits == 0 else f"{hits} of them the target"
    return (
        f"Of the model's {len(turns)} turns in these conversations, {', '.join(parts)}; "
        f"{recommended} recommended at least one item, {held}."
    )


def describe_session_hits(
    rows: pd.DataFrame, turns: pd.DataFrame, max_turns: int, model: str
) -> str:
    """The conversation figure's sentence: the model's Hit@K rows, why, and the scripted rows.

    Args:
        rows: One row per method (``method, mean, low, high, n``), Hit@K by id.
        turns: The agent turns of the model's methods (``ConversationRun.turns``).
        max_turns: K.
        model: The model's name.
    """
    played, scripted = split_rows(rows)
    n = int(played["n"].max()) if len(played) else 0
    text = (
        f"With the embedded model ({model}), Hit@{max_turns} by id over {n} conversations "
        f"each: {_rows_text(played)}. {turn_kinds(turns)}"
    )
    if len(scripted):
        shown = " and ".join(
            f"{round(row['mean'] * row['n'])} of {int(row['n'])} at {_level(row)}, "
            f"Hit@{max_turns} = {_interval(row)}"
            for _, row in scripted.iterrows()
        )
        text += (
            " Through the same loop, tools and users, the scripted players (no LLM) hit the "
            f"target in {shown}."
        )
        best = scripted.loc[scripted["mean"].idxmax()]
        if best["low"] > played["high"].max():
            text += (
                f" The interval at {_level(best)} lies above every interval of the model's "
                "methods: the tools find the target once the plan carries the user's conditions."
            )
        else:
            text += " At this sample size no scripted interval lies above all of the model's."
    return text


def describe_one_turn(
    rows: pd.DataFrame, n_items: int, ranking: pd.DataFrame | None = None, k: int = 5
) -> str:
    """The one-turn figure's sentence: each task's rows, why the agent's are low, the scripted.

    Args:
        rows: ``method, metric, mean, low, high, n`` (``metric`` ``recall`` or ``ndcg``).
        n_items: Items in the catalogue; Recall@k's chance is ``k / n_items`` a user.
        ranking: The ranking task's rows of the model's run (``method, status``), to count
            the users whose agent ranked nothing (a target left out scores 0).
        k: The retrieval list's length.
    """
    sentences = []
    names = {"recall": f"Recall@{k}", "ndcg": "Ranking NDCG"}
    for metric, part in rows.groupby("metric", sort=False):
        played, scripted = split_rows(part)
        users = int(part["n"].max())
        line = f"{names.get(str(metric), str(metric))} over {users} users: {_rows_text(played)}"
        if len(scripted):
            line += "; " + "; ".join(f"{row['method']} {_interval(row)}"
                                     for _, row in scripted.iterrows())  # fmt: skip
        line += "."
        if metric == "recall":
            chance = k / n_items
            line += (
                f" A random list of {k} of {n_items} items holds a given target with "
                f"probability {chance:.2g}, so {users} users expect {chance * users:.2g} hits"
                " by chance."
            )
        if metric == "ndcg" and ranking is not None:
            agent = ranking[ranking["method"] == "InteRecAgent"]
            nothing = int((agent["status"] == "failed").sum())
            line += (
                f" The model's agent ranked nothing for {nothing} of {len(agent)} users (no "
                "usable plan; a target left out scores 0)."
            )
        sentences.append(line)
    return " ".join(sentences)


def method_order(methods: Sequence[str], rows: pd.DataFrame) -> list[str]:
    """``methods`` first, then the scripted rows' methods in their order (for plots)."""
    _, scripted = split_rows(rows)
    extra = [m for m in dict.fromkeys(scripted["method"]) if m not in methods]
    return [*methods, *extra]
