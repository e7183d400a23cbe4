"""InteRecAgent's plans: their JSON schema, parsing, validation and execution.

A plan is a list of ``{tool_name, input}`` steps. :func:`parse_plan` reads one,
:func:`validate_plan` lists every problem without running anything (SQL is only prepared),
and :func:`execute_plan` runs the steps in order on the bus as the paper's executor does,
recording an :class:`ExecutionTrack` for the critic prompt and for traces;
:func:`execute_step` is the step-by-step (ReAct) executor.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from recagents.llm.schemas import ReplyTooComplex, parse_json_bounded
from recagents.papers.interecagent.catalogue import ItemTable, split_titles
from recagents.papers.interecagent.config import OBSERVATION_CHARS, RANK_SCHEMAS, TOOL_NAMES
from recagents.papers.interecagent.sqllimits import TABLE, ToolError, clip_text
from recagents.papers.interecagent.sqltext import prepare_select, selects_id
from recagents.papers.interecagent.toolbox import (
    ToolContext,
    candidate_store,
    hard_filter,
    lookup,
    map_titles,
    parse_rank_input,
    rank,
    soft_filter,
)


class PlanError(ValueError):
    """A plan that cannot be executed; ``problems`` lists every reason, one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid plan: " + "; ".join(self.problems))


#: Tools that read or write the candidate bus (all but lookup).
_BUS_TOOLS = frozenset(TOOL_NAMES) - {"lookup"}


_INPUT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"type": "integer"},
        {
            "type": "object",
            "properties": {
                "schema": {"type": "string", "enum": list(RANK_SCHEMAS)},
                "prefer": {"type": "array", "items": {"type": "string"}},
                "unwanted": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["schema"],
            "additionalProperties": False,
        },
    ]
}

#: JSON schema of a plan (a list of steps) for constrained decoding and validation.
PLAN_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": 10,
    "items": {
        "type": "object",
        "properties": {
            "tool_name": {"type": "string", "enum": list(TOOL_NAMES)},
            "input": _INPUT_SCHEMA,
        },
        "required": ["tool_name", "input"],
        "additionalProperties": False,
    },
}

#: The same plan wrapped as ``{"plan": [...]}``, for endpoints whose JSON mode needs an object.
PLAN_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"plan": PLAN_SCHEMA},
    "required": ["plan"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan: a tool and the input the planner wrote for it."""

    tool_name: str
    input: Any


def _structure(plan: Any) -> tuple[list[PlanStep], list[str]]:
    """Steps that are well-formed, and a problem line for each that is not.

    A plan given as text is a model's reply: parsed within the bounds of
    :func:`recagents.llm.schemas.parse_json_bounded`, so a hostile one is a problem line.
    """
    if isinstance(plan, str):
        try:
            plan = parse_json_bounded(plan)
        except ReplyTooComplex as error:
            return [], [f"the plan is not usable JSON ({error})"]
        except json.JSONDecodeError as error:
            return [], [f"the plan is not JSON ({error.msg} at position {error.pos})"]
    if isinstance(plan, Mapping) and set(plan) == {"plan"}:
        plan = plan["plan"]
    if not isinstance(plan, list):
        return [], [f"a plan must be a JSON list of steps, got {type(plan).__name__}"]
    if not plan:
        return [], ["the plan has no steps"]
    steps, problems = [], []
    for number, step in enumerate(plan, 1):
        if isinstance(step, PlanStep):
            step = {"tool_name": step.tool_name, "input": step.input}
        if not isinstance(step, Mapping) or "tool_name" not in step or "input" not in step:
            problems.append(
                f"step {number} must be an object with tool_name and input, got {step!r}"
            )
            continue
        extra = set(step) - {"tool_name", "input"}
        if extra:
            problems.append(f"step {number} has unknown key(s) {sorted(extra)}")
            continue
        name = step["tool_name"]
        if name not in TOOL_NAMES:
            problems.append(
                f"step {number}: unknown tool {name!r}; valid tools: {', '.join(TOOL_NAMES)}"
            )
            continue
        steps.append(PlanStep(str(name), step["input"]))
    return steps, problems


def parse_plan(plan: Any) -> list[PlanStep]:
    """Read a plan (JSON text, a list of ``{tool_name, input}``, or ``{"plan": [...]}``).

    Raises:
        PlanError: Not a list, empty, a malformed step or an unknown tool (all listed).
    """
    steps, problems = _structure(plan)
    if problems:
        raise PlanError(problems)
    return steps


def _input_problem(step: PlanStep, table: ItemTable) -> str | None:
    """Why a step's input would fail, checked without running anything."""
    value = step.input
    try:
        if step.tool_name in ("candidate_store", "soft_filter"):
            if isinstance(value, Mapping) or not split_titles(value):
                return "needs at least one title (titles separated by ';;')"
        elif step.tool_name in ("lookup", "hard_filter"):
            if not isinstance(value, str):
                return f"needs one SQL SELECT as a string, got {type(value).__name__}"
            table.check_select(value)
            if step.tool_name == "hard_filter" and not selects_id(prepare_select(value).tokens):
                return f"the query must select the id column (SELECT id FROM {TABLE} WHERE ...)"
        elif step.tool_name == "rank":
            parse_rank_input(value)
        elif step.tool_name == "map_titles" and value not in (None, ""):
            if isinstance(value, bool) or int(value) < 1:
                return f"needs a positive number of items, got {value!r}"
    except ToolError as error:
        return str(error)
    except (TypeError, ValueError):
        return f"needs a positive number of items, got {value!r}"
    return None


def validate_plan(plan: Any, table: ItemTable) -> list[str]:
    """List every problem of a plan without executing it (an empty list: the plan is fine).

    Checks the structure (a list of ``{tool_name, input}`` with known tools), each input
    (SQL of lookup and hard_filter is prepared under the read-only authorizer via
    ``EXPLAIN`` but never run; rank's schema; map's count) and the bus rules of the paper's
    prompt: hard filters before the soft filter, candidate_store before any filter or
    ranking, and nothing that uses the candidates after map_titles (which ends the turn and
    clears the bus; so rank comes before map). A tool may appear more than once (the paper
    turns a plan into a dict, which silently keeps one step per tool; we keep the order and
    every step). A missing map_titles is not a problem: the executor adds it.

    Args:
        plan: The plan (see :func:`parse_plan`).
        table: The item table the SQL must run on.

    Returns:
        One line per problem, naming the step.
    """
    steps, problems = _structure(plan)
    if problems and not steps:
        return problems
    for number, step in enumerate(steps, 1):
        problem = _input_problem(step, table)
        if problem:
            problems.append(f"step {number} ({step.tool_name}): {problem}")
    first: dict[str, int] = {}
    for number, step in enumerate(steps, 1):
        name = step.tool_name
        if name == "hard_filter" and "soft_filter" in first:
            problems.append(
                f"step {number} (hard_filter) comes after soft_filter (step "
                f"{first['soft_filter']}): run hard filters before the soft filter"
            )
        if name == "candidate_store":
            earlier = [t for t in ("hard_filter", "soft_filter", "rank") if t in first]
            if earlier:
                problems.append(
                    f"step {number} (candidate_store) comes after {', '.join(earlier)}: it "
                    "replaces the candidates they selected; store titles first"
                )
        if name in _BUS_TOOLS and "map_titles" in first:
            problems.append(
                f"step {number} ({name}) comes after map_titles (step {first['map_titles']}), "
                "which ends the turn; rank and filter before map_titles"
            )
        first.setdefault(name, number)
    return problems


@dataclass
class StepRecord:
    """What one executed step did.

    Attributes:
        tool: Tool name.
        input: The input as the plan wrote it.
        size_before: Candidates before the step.
        size_after: Candidates after the step (before the executor clears the bus).
        observation: Text the tool returned, or ``None`` when it failed.
        error: The :class:`ToolError` message, or ``None``.
        added: Whether the executor added this step (a missing map_titles).
        seconds: Wall time of the step.
    """

    tool: str
    input: Any
    size_before: int
    size_after: int
    observation: str | None = None
    error: str | None = None
    added: bool = False
    seconds: float = 0.0


@dataclass
class ExecutionTrack:
    """The record of one executed plan, for the critic prompt and for a notebook trace.

    Attributes:
        steps: One :class:`StepRecord` per step that ran (or failed).
        recommended_ids: Ids from the last map_titles step (empty if none ran).
        stopped: Whether execution stopped at a failing step.
        map_added: Whether the executor appended map_titles.
    """

    steps: list[StepRecord] = field(default_factory=list)
    recommended_ids: list[str] = field(default_factory=list)
    stopped: bool = False
    map_added: bool = False

    @property
    def failed(self) -> bool:
        """Whether any step raised a :class:`ToolError`."""
        return any(s.error is not None for s in self.steps)

    @property
    def reply(self) -> str:
        """The last map_titles observation, or ``""``."""
        maps = [s.observation for s in self.steps if s.tool == "map_titles" and s.observation]
        return maps[-1] if maps else ""

    def as_text(self) -> str:
        """The track as numbered lines: tool, input, candidates before -> after, observation."""
        lines = [f"Tool execution track ({len(self.steps)} steps):"]
        for number, step in enumerate(self.steps, 1):
            shown = step.input if isinstance(step.input, str) else json.dumps(step.input)
            added = " [added by the executor]" if step.added else ""
            lines.append(f"{number}. {step.tool}({shown}){added}")
            lines.append(f"   candidates: {step.size_before:,} -> {step.size_after:,}")
            if step.error is not None:
                lines.append(f"   ERROR: {step.error}")
            else:
                lines.append("   " + (step.observation or "").replace("\n", "\n   "))
        if self.stopped:
            lines.append("Execution stopped at the failing step; nothing was recommended.")
        return "\n".join(lines)

    def as_frame(self) -> pd.DataFrame:
        """One row per step, for a notebook table."""
        return pd.DataFrame([vars(s) for s in self.steps])


def _run_step(ctx: ToolContext, step: PlanStep) -> tuple[str, list[str] | None]:
    """Run one step; return its observation and, for map_titles, the recommended ids."""
    name, value = step.tool_name, step.input
    if name == "candidate_store":
        return candidate_store(ctx, value), None
    if name == "lookup":
        return lookup(ctx, value), None
    if name == "hard_filter":
        return hard_filter(ctx, value), None
    if name == "soft_filter":
        return soft_filter(ctx, value), None
    if name == "rank":
        return rank(ctx, **parse_rank_input(value)), None
    if name == "map_titles":
        ids, text = map_titles(ctx, value)
        return text, ids
    raise ToolError(f"unknown tool {name!r}; valid tools: {', '.join(TOOL_NAMES)}")


def execute_step(ctx: ToolContext, step: PlanStep, track: ExecutionTrack) -> StepRecord:
    """Run one step on the bus as it is and append its record to ``track``.

    The step-by-step (ReAct) executor: unlike :func:`execute_plan` it neither adds
    map_titles nor resets the bus, and a failing step is recorded, not fatal, so the planner
    can read the error and try again. A map_titles step sets ``track.recommended_ids``.

    Args:
        ctx: The tool context; its bus is used and changed.
        step: The step (a tool :data:`TOOL_NAMES` names and its input).
        track: Receives the :class:`StepRecord`.

    Returns:
        The record (its ``error`` is set when the tool refused the input).
    """
    before = len(ctx.bus)
    started = time.perf_counter()
    record = StepRecord(step.tool_name, step.input, before, before)
    try:
        observation, ids = _run_step(ctx, step)
    except ToolError as error:
        record.error = clip_text(str(error), OBSERVATION_CHARS)
    else:
        record.observation = clip_text(observation, OBSERVATION_CHARS)
        if ids is not None:
            track.recommended_ids = ids
    record.size_after = len(ctx.bus)
    record.seconds = time.perf_counter() - started
    track.steps.append(record)
    return record


def execute_plan(
    plan: Any,
    ctx: ToolContext,
    stop_on_error: bool = True,
    reset_bus: bool = True,
) -> ExecutionTrack:
    """Run a plan's steps in order on the context's bus, as the paper's executor does.

    A map_titles step is appended when the plan has none. Steps keep their order and may
    repeat. A step whose input fails raises no exception: its :class:`ToolError` message is
    recorded; by default execution stops there (as the paper's does, so a failed plan
    recommends nothing), with ``stop_on_error=False`` the remaining steps run. The SQL tools
    turn every failure a query can cause (SQLite errors, MemoryError, ...) into a ToolError;
    other exceptions are bugs and propagate.

    Args:
        plan: The plan (see :func:`parse_plan`).
        ctx: The tool context; its bus is used as it is at the call.
        stop_on_error: Stop at the first failing step.
        reset_bus: Clear the bus when the plan ends (the paper starts every turn with all
            items); ``False`` keeps it, the "persistent bus" option.

    Returns:
        The :class:`ExecutionTrack`.

    Raises:
        PlanError: The plan is malformed or names an unknown tool (nothing ran).
    """
    steps = parse_plan(plan)
    track = ExecutionTrack()
    added = not any(s.tool_name == "map_titles" for s in steps)
    if added:
        steps = [*steps, PlanStep("map_titles", ctx.map_n)]
        track.map_added = True
    try:
        for number, step in enumerate(steps):
            record = execute_step(ctx, step, track)
            record.added = added and number == len(steps) - 1
            if record.error is not None and stop_on_error:
                track.stopped = True
                track.recommended_ids = []
                break
    finally:
        if reset_bus:
            ctx.bus.reset()
    return track
