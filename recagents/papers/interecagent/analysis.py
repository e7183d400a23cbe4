"""Reading an InteRecAgent run: one conversation as readable text, for teaching.

:func:`session_trace` prints, turn by turn, the simulated user's message, every agent
attempt (plan, tool calls with the bus size before and after, critic verdict), the reply,
the recommended items and whether each hit rule hit.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from recagents.columns import USER
from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.conversations import ConversationRun
from recagents.papers.interecagent.scoring import fuzzy_hit
from recagents.papers.interecagent.session import Attempt, TurnResult
from recagents.papers.interecagent.simulator import SessionSpec, SimMessage


def _indent(text: str, prefix: str = "    ") -> str:
    return textwrap.indent(str(text), prefix)


def _short_input(value: Any, width: int) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def _profile_line(result: TurnResult, table: ItemTable) -> str:
    """What a turn's profile extraction remembered, for the trace."""
    update = result.profile_update
    if update is None:
        return "extraction failed; the profile is unchanged"
    parts = [
        f"+ likes {'; '.join(table.display_title(i) for i in update.likes) or '-'}",
        f"+ does not want {'; '.join(table.display_title(i) for i in update.dislikes) or '-'}",
    ]
    if update.unmatched:
        parts.append(f"not found: {'; '.join(update.unmatched)}")
    return ", ".join(parts)


def _user_line(message: SimMessage, width: int) -> str:
    """The simulated user's message, with leak, regeneration and end notes."""
    notes = []
    if message.regenerations:
        notes.append(f"regenerated {message.regenerations}x")
    if message.leaked:
        notes.append("STILL LEAKS the target")
    if message.ended:
        notes.append("user ended")
    suffix = f"  [{', '.join(notes)}]" if notes else ""
    return textwrap.fill(f"user: {message.text or '(simulator failed)'}{suffix}", width)


def _prompt_lines(result: TurnResult, shown_roles: set[str]) -> list[str]:
    """The turn's kept prompts and replies, each role only the first time it appears."""
    out = []
    for role, prompt, reply in result.prompts:
        if role in shown_roles:
            continue
        shown_roles.add(role)
        out.append(f"  [{role} prompt, shown once]")
        out.append(_indent(prompt, "    | "))
        out.append(_indent(f"reply: {reply}", "    | "))
    return out


def _attempt_lines(k: int, attempt: Attempt, width: int) -> list[str]:
    """One attempt: its kind, each tool call with the bus sizes, problems, critic verdict."""
    advice = f" (with advice: {attempt.advice_in})" if attempt.advice_in else ""
    out = [f"  attempt {k}: {attempt.kind}{advice}"]
    if attempt.kind == "answer" and attempt.track is None:
        out.append(_indent(textwrap.fill(attempt.reply, width - 6)))
    if attempt.track is not None:
        for j, step in enumerate(attempt.track.steps, 1):
            added = " [added]" if step.added else ""
            out.append(
                f"    {j}. {step.tool}({_short_input(step.input, width - 30)}){added}  "
                f"candidates {step.size_before:,} -> {step.size_after:,}"
            )
            seen = step.error if step.error is not None else step.observation
            label = "ERROR: " if step.error is not None else ""
            out.append(_indent(textwrap.fill(f"{label}{seen}", width - 8), "       "))
    out += [f"    problem: {problem}" for problem in attempt.problems]
    if attempt.verdict is not None:
        verdict = "yes" if attempt.verdict else "no"
        out.append(f"    critic: {verdict}" + (f" - {attempt.advice}" if attempt.advice else ""))
    return out


def _turn_lines(
    result: TurnResult, run: ConversationRun, spec: SessionSpec, table: ItemTable, width: int
) -> list[str]:
    """The agent's side of one turn: profile memory, attempts, reply, items, hits."""
    out = []
    if result.profile_update is not None or result.profile_failures:
        out.append(f"  profile memory: {_profile_line(result, table)}")
    for k, attempt in enumerate(result.attempts, 1):
        out += _attempt_lines(k, attempt, width)
    out.append(textwrap.fill(f"  reply: {result.reply}", width, subsequent_indent="    "))
    titles = [table.display_title(i) for i in result.recommended_ids]
    out.append(f"  recommended: {'; '.join(titles) or '(nothing)'}")
    hit_id = spec.target in result.recommended_ids
    hit_fz = fuzzy_hit(result.reply, spec.target_title, run.sim.hit_threshold)
    out.append(
        f"  hit by id: {'YES' if hit_id else 'no'}; fuzzy hit: {'YES' if hit_fz else 'no'}; "
        f"calls {result.n_calls}, plan failures {result.plan_failures}, "
        f"reflections {result.reflections}"
    )
    return out


def session_trace(run: ConversationRun, user: str, width: int = 96, prompts: bool = True) -> str:
    """One conversation as readable text.

    Per turn: the simulated user's message (with leak and regeneration notes), every agent
    attempt (its plan, each tool call with the bus size before and after and the
    observation, the critic's verdict and advice), the reply, the recommended items and
    whether each hit rule hit. Kept prompts are shown in full the first time each role
    appears.
    """
    if user not in run.specs:
        raise KeyError(f"no conversation for user {user!r}")
    spec = run.specs[user]
    agent = run.agents[user]
    table = agent.ctx.table
    row = run.sessions.set_index(USER).loc[user]
    out = [
        f"=== {run.method}: user {user}; target {spec.target_display} [{spec.target}] "
        f"({spec.target_attributes})",
        f"history: {'; '.join(spec.history_titles)}",
    ]
    shown_roles: set[str] = set()
    for number, message in enumerate(run.simulator.get(user, []), 1):
        out.append(f"--- turn {number}")
        out.append(_user_line(message, width))
        if number > len(agent.turns):
            break
        result = agent.turns[number - 1]
        if prompts:
            out += _prompt_lines(result, shown_roles)
        out += _turn_lines(result, run, spec, table, width)
    out.append(
        f"=== ended by {row['ended_by']}; hit by id: {bool(row['hit_id'])} "
        f"(turn {row['turn_id']}); fuzzy: {bool(row['hit_fuzzy'])} (turn {row['turn_fuzzy']})"
    )
    return "\n".join(out)
