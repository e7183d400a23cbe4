"""Where a plan loses the target, and how the embedded model's planner replies fail.

Why: a miss says nothing about its cause. :func:`target_fate` replays a turn's final plan on
a fresh bus and follows the held-out target step by step: filtered out by the SQL of a hard
filter, not retrieved by the soft filter (or candidate store), cut by rank (unwanted, or
beyond the 100 it keeps), ranked below the k that map_titles shows, or a hit.
:func:`turn_fates` does it for every turn of a conversation run (scripted or the embedded
model's). :data:`PLANNER_FAILURES` are the ways a planner reply goes wrong, as
:class:`~recagents.failures.FailureMode` detectors over :class:`PlannerReply` units
(:func:`planner_replies`), for :func:`recagents.failures.classify`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.failures import FailureMode, has_placeholder
from recagents.papers.interecagent.conversations import ConversationRun
from recagents.papers.interecagent.demos import DEMOS
from recagents.papers.interecagent.plans import ExecutionTrack, PlanStep, execute_step, parse_plan
from recagents.papers.interecagent.session import AgentSession, Attempt
from recagents.papers.interecagent.toolbox import ToolContext

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: A turn's fate for its target, from best to worst; the last two ran no plan.
FATES = (
    "hit (among the k shown)",
    "ranked below the k shown",
    "cut by rank",
    "not retrieved (soft filter / store)",
    "filtered out by SQL (hard filter)",
    "plan invalid or failed",
    "answered without tools",
)

#: The tool at which the target leaves the bus -> the fate it gives.
_LOST_AT = {
    "hard_filter": FATES[4],
    "soft_filter": FATES[3],
    "candidate_store": FATES[3],
    "rank": FATES[2],
    "map_titles": FATES[1],
}


def target_fate(plan: Sequence[dict] | None, ctx: ToolContext, target: str) -> tuple[str, int]:
    """Replay ``plan`` on a fresh bus and say where the target is lost: ``(fate, step)``.

    The plan runs as the executor runs it (map_titles appended when missing, each step on
    the bus the previous left); after each step the target's presence on the bus is
    checked. ``step`` is the 1-based step that lost it (0 for a hit).

    Raises:
        ValueError: A step fails on replay (the plan did not run as recorded).
    """
    steps = parse_plan(list(plan or []))
    if not any(s.tool_name == "map_titles" for s in steps):
        steps.append(PlanStep("map_titles", ctx.map_n))
    own = AgentSession.start("fate", ctx).ctx
    track = ExecutionTrack()
    for number, step in enumerate(steps, 1):
        record = execute_step(own, step, track)
        if record.error is not None:
            raise ValueError(f"step {number} ({step.tool_name}) failed on replay: {record.error}")
        if step.tool_name == "map_titles":
            return (FATES[0], 0) if target in track.recommended_ids else (FATES[1], number)
        if target not in own.bus.ids:
            return _LOST_AT[step.tool_name], number
    raise AssertionError("unreachable: the replayed plan ends with map_titles")


def turn_fates(run: ConversationRun) -> pd.DataFrame:
    """One row per agent turn of ``run``: ``[user_id, turn, kind, fate, step, tool]``.

    The final attempt of each turn counts: a plan is replayed (:func:`target_fate`), a
    failed attempt is "plan invalid or failed", a direct answer "answered without tools".
    """
    rows = []
    for user, session in run.agents.items():
        target = run.specs[user].target
        for turn, result in enumerate(session.turns, 1):
            final = result.attempts[-1] if result.attempts else None
            if final is None or final.kind == "failed":
                fate, step, tool = FATES[5], 0, ""
            elif final.kind == "answer":
                fate, step, tool = FATES[6], 0, ""
            else:
                fate, step = target_fate(final.plan, session.ctx, target)
                plan = parse_plan(list(final.plan or [])) if step else []
                tool = plan[step - 1].tool_name if 0 < step <= len(plan) else (
                    "map_titles" if step else "")  # fmt: skip
            rows.append({USER: user, "turn": turn, "kind": result.kind, "fate": fate,
                         "step": step, "tool": tool})  # fmt: skip
    return pd.DataFrame(rows, columns=[USER, "turn", "kind", "fate", "step", "tool"])


def fate_shares(fates: pd.DataFrame) -> pd.Series:
    """The share of turns of each fate, in :data:`FATES` order (absent fates: 0)."""
    counts = fates["fate"].value_counts().reindex(list(FATES), fill_value=0)
    return counts / max(int(counts.sum()), 1)


# --------------------------------------------------------------------------- failure modes


@dataclass(frozen=True)
class PlannerReply:
    """One planner attempt of the embedded model, as the failure detectors read it.

    Attributes:
        user: The conversation.
        turn: The turn (1-based).
        kind: ``"answer"``, ``"plan"`` or ``"failed"`` (:class:`Attempt.kind`).
        text: The reply's content: the answer, the plan as JSON, or the problems.
        problems: Why the attempt failed (validation, a tool error, an unusable reply).
        llm_failure: The client's error when no usable reply came.
        recommended: How many items the executed plan recommended.
    """

    user: str
    turn: int
    kind: str
    text: str
    problems: tuple[str, ...] = ()
    llm_failure: str | None = None
    recommended: int = 0


def _reply_text(attempt: Attempt) -> str:
    if attempt.kind == "answer":
        return attempt.reply
    if attempt.kind == "plan":
        return json.dumps(attempt.plan, ensure_ascii=False)
    return "; ".join(attempt.problems) or (attempt.llm_failure or "")


def planner_replies(run: ConversationRun) -> list[PlannerReply]:
    """Every planner attempt (re-plans included) of every turn of ``run``, in order."""
    out = []
    for user, session in run.agents.items():
        for turn, result in enumerate(session.turns, 1):
            for attempt in result.attempts:
                recommended = len(attempt.track.recommended_ids) if attempt.track else 0
                out.append(PlannerReply(user, turn, attempt.kind, _reply_text(attempt),
                                        tuple(attempt.problems), attempt.llm_failure,
                                        recommended))  # fmt: skip
    return out


def _sql_failed(reply: PlannerReply) -> bool:
    return any(("(hard_filter)" in p or "(lookup)" in p or "SQL" in p) and "unknown tool" not in p
               for p in reply.problems)  # fmt: skip


def _invalid_plan(reply: PlannerReply) -> bool:
    """An unusable or empty plan, or one the validator refuses for a reason other than SQL."""
    if reply.llm_failure is not None:
        return True
    return reply.kind == "failed" and not _sql_failed(reply) and not _unknown_tool(reply)


def _unknown_tool(reply: PlannerReply) -> bool:
    return any("unknown tool" in p for p in reply.problems)


#: The replies of the demonstrations, as :func:`planner_replies` writes a reply's text.
_DEMO_TEXTS = frozenset(
    d.reply["answer"] if d.reply["kind"] == "answer" else json.dumps(d.reply["plan"],
                                                                       ensure_ascii=False)
    for d in DEMOS
)  # fmt: skip


def _copies_demo(reply: PlannerReply) -> bool:
    return reply.kind in ("answer", "plan") and reply.text.strip() in _DEMO_TEXTS


#: How the embedded model's planner replies fail (a reply may show several).
PLANNER_FAILURES: tuple[FailureMode[PlannerReply], ...] = (
    FailureMode(
        "placeholder", "copies a template placeholder in angle brackets",
        "the prompt shows the reply format with placeholders in angle brackets; a 135M model "
        "continues the most likely text, and the format it just read is the most likely text.",
        lambda r: has_placeholder(r.text),
    ),
    FailureMode(
        "invalid_plan", "emits an empty or invalid plan (the validator refuses it)",
        "the schema fixes the JSON's shape but not its sense; a 135M model fills the slots "
        "without tracking the bus rules or what each tool's input must be.",
        _invalid_plan,
    ),
    FailureMode(
        "unknown_tool", "calls a tool that does not exist",
        "names it saw elsewhere in the prompt look as plausible as the six tools to a small "
        "model (the schema's list of tool names prevents most of these).",
        _unknown_tool,
    ),
    FailureMode(
        "sql_fails", "writes SQL that fails (wrong column, syntax, or not selecting id)",
        "SQL needs exact column names and syntax; a 135M model has seen little SQL and "
        "copies fragments of the table description instead.",
        _sql_failed,
    ),
    FailureMode(
        "no_candidates", "runs a plan that recommends nothing (no candidate left)",
        "conditions made up rather than read from the request easily contradict each other "
        "or the table, so the hard filter leaves no item.",
        lambda r: r.kind == "plan" and r.recommended == 0,
    ),
    FailureMode(
        "copies_demo", "copies a demonstration's reply word for word",
        "the worked examples in the prompt are the nearest text to continue; a 135M model "
        "repeats one instead of adapting it to the user's message.",
        _copies_demo,
    ),
    FailureMode(
        "no_tools", "answers directly instead of searching",
        "every simulated user asks for a movie with conditions; answering in words is the "
        "easier continuation for a small chat model, and it recommends no item.",
        lambda r: r.kind == "answer",
    ),
)  # fmt: skip


def reply_example(reply: PlannerReply) -> str:
    """How one planner reply is shown in the failure table: turn, kind and its content."""
    return f"[{reply.user}, turn {reply.turn}, {reply.kind}] {reply.text}"


# --------------------------------------------------------------------------- the fates, shown

#: One colour per fate (hits green, losses from late to early in warm to cold tones).
FATE_COLORS = ("#1a9850", "#fdae61", "#f46d43", "#9e76b4", "#4575b4", "#878787", "#d9d9d9")


def plot_fates(ax: Axes, fates: Mapping[str, pd.DataFrame]) -> None:
    """One horizontal bar per run (label): the share of its turns of each fate, stacked.

    Each bar is labelled with its number of turns; the first label is drawn at the top.
    """
    labels = list(fates)
    left = np.zeros(len(labels))
    shares = pd.DataFrame({label: fate_shares(frame) for label, frame in fates.items()})
    y = np.arange(len(labels))[::-1]
    for fate, color in zip(FATES, FATE_COLORS, strict=True):
        values = shares.loc[fate, labels].to_numpy(dtype=float)
        ax.barh(y, values, left=left, color=color, label=fate, edgecolor="white", linewidth=0.5)
        left += values
    ax.set_yticks(y, [f"{label}\n({len(fates[label])} turns)" for label in labels])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of agent turns: where the final plan leaves the target")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)


def describe_fates(fates: Mapping[str, pd.DataFrame]) -> str:
    """Where each run's plans lost the target, in words made from the counts."""
    parts = []
    for label, frame in fates.items():
        counts = frame["fate"].value_counts().reindex(list(FATES), fill_value=0)
        seen = [f"{int(n)} {fate}" for fate, n in counts.items() if n]
        parts.append(f"{label}: of {len(frame)} turns, " + (", ".join(seen) or "none") + ".")
    return " ".join(parts)
