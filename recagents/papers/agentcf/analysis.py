"""Reading an AgentCF run: learning curve, memory traces, the paper table and figure.

Everything here reads a finished run's event log or result tables; nothing calls a model.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from recagents.columns import ITEM, USER
from recagents.metrics import format_interval
from recagents.papers.agentcf.config import NEGATIVE, POSITIVE, STEP

# --------------------------------------------------------------------------- reading a run


def forward_accuracy(events: pd.DataFrame) -> pd.DataFrame:
    """Pairwise accuracy of the forward choices per training step and round.

    The learning curve of a run: round 0 of a step is asked before any reflection on that
    step's pairs, round 1 after one.

    Returns:
        ``[step, round, pairs, answered, accuracy]``.
    """
    forward = events[events["kind"] == "forward"]
    if forward.empty:
        return pd.DataFrame(columns=[STEP, "round", "pairs", "answered", "accuracy"])
    answered = forward[forward["ok"]]
    table = forward.groupby([STEP, "round"]).agg(pairs=("ok", "size"), answered=("ok", "sum"))
    table["accuracy"] = answered.groupby([STEP, "round"])["correct"].mean().astype(float)
    return table.reset_index()


def _short(text: str | None, width: int) -> str:
    import textwrap

    return textwrap.fill(str(text or ""), width=width, initial_indent="    ",
                         subsequent_indent="    ")  # fmt: skip


def user_trace(events: pd.DataFrame, user: str, titles: dict[str, str], width: int = 96) -> str:
    """One user's training as readable text: each choice, then the memory it led to."""
    rows = events[events[USER] == user]
    lines = [f"User {user}"]
    for row in rows.itertuples(index=False):
        row = row._asdict()
        head = f"[step {row[STEP]} round {row['round']}]"
        if row["kind"] == "forward":
            if not row["ok"]:
                lines.append(f"{head} choice failed (recorded, no reflection)")
                continue
            pos, neg = titles[row[POSITIVE]], titles[row[NEGATIVE]]
            chose = pos if row["correct"] else neg
            verdict = "RIGHT" if row["correct"] else "WRONG"
            lines.append(f"{head} {pos!r} (real) vs {neg!r}: chose {chose!r} -> {verdict}")
            lines.append(_short(f"because: {row['explanation']}", width))
        elif row["kind"] == "user_reflection":
            changed = "rewrote" if row["ok"] else "reflection failed, kept"
            lines.append(f"{head} self-description {changed}:")
            lines.append(_short(f"before: {row['before']}", width))
            lines.append(_short(f"after:  {row['after']}", width))
    return "\n".join(lines)


def item_trace(events: pd.DataFrame, item: str, titles: dict[str, str], width: int = 96) -> str:
    """One item's memory as readable text: every rewrite, who caused it and whether it stuck."""
    rows = events[(events["kind"] == "item_reflection") & (events.get(ITEM) == item)]
    lines = [f"Item {item}: {titles[item]}"]
    for row in rows.itertuples(index=False):
        row = row._asdict()
        role = "the real choice" if row["role"] == POSITIVE else "the negative"
        if not row["ok"]:
            status = "reflection failed"
        else:
            status = "stored" if row["stored"] else "not stored (only the positive is)"
        lines.append(
            f"[step {row[STEP]} round {row['round']}] user {row[USER]}, as {role}: {status}"
        )
        lines.append(_short(f"before: {row['before']}", width))
        if row["ok"]:
            lines.append(_short(f"after:  {row['after']}", width))
    return "\n".join(lines)


#: Which reported AgentCF row each of our methods sits beside.
PAPER_METHOD = {"AgentCF B": "AgentCF_B", "AgentCF B+H": "AgentCF_B+H",
                "AgentCF B+R": "AgentCF_B+R"}  # fmt: skip


def paper_dataset(paper_subset: str) -> str:
    """Our dataset name for one of the paper's subsets (``"CDs-dense"`` -> ``"cds-dense"``).

    Only the CDs subsets were released, so only they have a name we can run on; the Office
    subsets map to ``"office-dense"``/``"office-sparse"``, which no loader provides.
    """
    return paper_subset.strip().lower()


def _by_kind(datasets: str | Mapping[str, str]) -> dict[str, str]:
    """Subset kind -> the dataset it ran on; one name means both kinds ran on it."""
    if isinstance(datasets, str):
        return {"dense": datasets, "sparse": datasets}
    return dict(datasets)


def _applies(paper_subset: str, datasets: dict[str, str]) -> bool:
    """Whether the paper's subset (``"CDs-dense"``) is the data our subset of its kind ran on."""
    kind = paper_subset.rsplit("-", 1)[-1].lower()
    return datasets.get(kind) == paper_dataset(paper_subset)


def paper_values(
    reported: pd.DataFrame, datasets: str | Mapping[str, str], metric: str = "ndcg@10"
) -> dict:
    """The paper's ``metric`` per (our method, subset kind), only for rows on our data.

    A paper value is compared only with ours on the same dataset and setting: on MovieLens
    (or any data the paper did not use) this is empty, and callers say so.

    Args:
        reported: :func:`recagents.paper_numbers.table` of ``"AgentCF-T2"``.
        datasets: The dataset of each of our subsets (``{"dense": "cds-dense", "sparse":
            "cds-sparse"}``), or one name for every subset.
        metric: The column.

    Returns:
        ``{(method, kind): value}`` where ``kind`` is the subset kind (``"dense"`` or
        ``"sparse"``, the suffix of the paper's subset).
    """
    by_kind = _by_kind(datasets)
    values = {}
    for method, paper_method in PAPER_METHOD.items():
        rows = reported[reported["method"] == paper_method]
        for row in rows.to_dict("records"):
            if not _applies(row["subset"], by_kind) or row[metric] == "unknown":
                continue
            values[(method, row["subset"].rsplit("-", 1)[-1].lower())] = float(row[metric])
    return values


def paper_side_by_side(
    summary: pd.DataFrame, reported: pd.DataFrame, datasets: str | Mapping[str, str]
) -> pd.DataFrame:
    """Our NDCG@1/5/10 (mean [95% CI]) per subset beside the paper's, on the same data only.

    Args:
        summary: ``[subset, method, metric, mean, low, high]`` for our runs.
        reported: :func:`recagents.paper_numbers.table` of ``"AgentCF-T2"``.
        datasets: The dataset of each of our subsets (``{"dense": "cds-dense", ...}``), or
            one name for every subset (e.g. ``"ml-100k"``).

    Returns:
        One row per method; our columns per subset and metric, then ``paper`` (the reported
        values on ``dataset`` with their tag; otherwise which datasets the paper reports it on,
        saying they are not comparable).
    """
    shown = summary[summary["metric"].isin(["ndcg@1", "ndcg@5", "ndcg@10"])]
    shown = shown.assign(value=format_interval(shown))
    table = shown.pivot_table(
        index="method", columns=["subset", "metric"], values="value", aggfunc="first", sort=False
    )
    table.columns = [f"ours {subset} {metric}" for subset, metric in table.columns]
    by_kind = _by_kind(datasets)
    ours = ", ".join(dict.fromkeys(by_kind[k] for k in summary["subset"].unique() if k in by_kind))
    paper = []
    for method in table.index:
        rows = reported[reported["method"] == PAPER_METHOD.get(method, "")].to_dict("records")
        same = [r for r in rows if _applies(r["subset"], by_kind)]
        if same:
            cells = [
                f"{r['subset']}: {r['ndcg@1']} / {r['ndcg@5']} / {r['ndcg@10']} {r['tag']}"
                for r in same
            ]
            paper.append("; ".join(cells))
        elif rows:
            others = ", ".join(sorted({r["subset"] for r in rows}))
            paper.append(f"no value for {ours} (reported on {others} only: not comparable)")
        else:
            paper.append("not reported")
    table["paper N@1 / N@5 / N@10 (gpt-3.5)"] = paper
    return table
