"""InteRecAgent's language-model side: planner, critic, step-by-step agent, summariser, memory.

Huang et al., *Recommender AI Agent: Integrating Large Language Models for Interactive
Recommendations* (arXiv 2308.16505). The LLM is the "brain" and the recommender components
of :mod:`~recagents.papers.interecagent.toolbox` are its tools. One agent turn, as the
paper's code runs it:

1. *Planner* (T=0): reads the role, the request types, the item table's description, the
   tools, the candidate-bus rules, a few demonstrations, the dialogue so far, any reviewer's
   advice and the user's message; replies with a direct answer or a whole tool plan
   ("plan-first"). Our reply is one JSON object (:func:`planner_schema`) so that a small model
   can be constrained; an invalid plan is a counted *plan failure*, with its problems kept.
2. *Executor* (no LLM): :func:`~recagents.papers.interecagent.plans.execute_plan` runs the plan on
   the session's candidate bus.
3. *Critic* (reflection, T=0): judges the request, the execution track and the reply; on
   "no" its advice goes back to the planner, at most ``max_reflections`` times.
4. *Summariser* (optional, T=1.0): writes the user-facing reply from the track. Off by
   default, as in the paper's simulator evaluation, where the executor's output is the reply.

``plan_mode="react"`` replaces 1-2 by a step-by-step loop (one tool per LLM call, at most five
calls), the paper's "w/o plan-first" ablation. :func:`run_turns` runs one turn for many
sessions at once, stage by stage (all planners in one :meth:`LLMClient.map`, then execution,
then all critics, then the re-plans...), and :func:`llm_only_turns` is the "LLM without tools"
baseline that names five titles and grounds them to ids.

Deviations from the released code, each deliberate:

- Replies are JSON under a schema instead of ``Final Answer:`` / ``Action: ToolExecutor`` text.
- A plan that fails validation (or stops at a tool error) is fed back to the planner with the
  validator's messages as advice (no critic call; it counts as a reflection), when
  ``replan_on_failure`` and reflection are on. The paper's critic sees such failures only
  through the track.
- The critic judges the executor's reply, before any summariser rewrites it.

This module holds the turn loop (:func:`run_turns`, :func:`llm_only_turns`); the settings
are in :mod:`~recagents.papers.interecagent.config`, the demonstrations in
:mod:`~recagents.papers.interecagent.demos`, the prompts in
:mod:`~recagents.papers.interecagent.prompts` and the session state in
:mod:`~recagents.papers.interecagent.session`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagents.llm.client import ChatRequest, ChatResult, LLMClient
from recagents.llm.runlog import RunContext, RunLog, ask
from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.config import APOLOGY, InteRecConfig
from recagents.papers.interecagent.demos import DEMOS, Demo, select_many
from recagents.papers.interecagent.plans import (
    ExecutionTrack,
    PlanStep,
    StepRecord,
    execute_plan,
    execute_step,
    validate_plan,
)
from recagents.papers.interecagent.prompts import (
    critic_messages,
    critic_schema,
    llm_only_messages,
    llm_only_schema,
    merge_profile,
    parse_critic_reply,
    parse_llm_only_reply,
    parse_planner_reply,
    parse_profile_reply,
    parse_react_reply,
    planner_messages,
    planner_schema,
    profile_messages,
    profile_schema,
    react_messages,
    react_schema,
    summariser_messages,
    summariser_schema,
)
from recagents.papers.interecagent.session import AgentSession, Attempt, ProfileUpdate, TurnResult
from recagents.papers.interecagent.toolbox import ToolContext


def _prompt_record(
    role: str, messages: Sequence[dict[str, str]], result: ChatResult
) -> tuple[str, str, str]:
    """A kept prompt: ``(role, the messages as text, the reply or why there is none)``."""
    prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
    return role, prompt, result.text or f"(no reply: {result.error})"


class _Turn:
    """The working state of one session's turn inside :func:`run_turns`."""

    def __init__(
        self, session: AgentSession, text: str, demos: list[Demo], keep: bool, persistent: bool
    ) -> None:
        self.session = session
        self.text = text
        self.demos = demos
        self.keep = keep
        self.advice: str | None = None
        self.attempts: list[Attempt] = []
        self.calls = 0
        self.plan_failures = 0
        self.reflections = 0
        self.critic_failures = 0
        self.prompts: list[tuple[str, str, str]] = []
        self.bus_start = copy.deepcopy(session.ctx.bus) if persistent else None
        self.memory = list(session.dialogue)
        self.profile: str | None = None
        self.profile_failures = 0
        self.profile_update: ProfileUpdate | None = None

    def with_profile(self, plan: Sequence[dict[str, Any]], config: InteRecConfig) -> list[dict]:
        """The plan with the session's remembered profile merged in (profile memory only)."""
        if not config.profile_memory:
            return [dict(step) for step in plan]
        likes, dislikes = self.session.profile_titles()
        return merge_profile(plan, likes, dislikes)

    @property
    def ctx(self) -> ToolContext:
        return self.session.ctx

    def restore_bus(self) -> None:
        """Start an attempt from the turn's bus: the kept one (persistent bus), or all items."""
        if self.bus_start is not None:
            self.session.ctx.bus = copy.deepcopy(self.bus_start)
        else:
            self.session.ctx.bus.reset()

    def record(self, role: str, messages: list[dict[str, str]], result: ChatResult) -> None:
        """Count one call of this turn; keep its prompt and reply if the turn keeps them."""
        self.calls += 1
        if self.keep:
            self.prompts.append(_prompt_record(role, messages, result))


def _executor_reply(track: ExecutionTrack) -> str:
    """The reply without a summariser: lookup results, then map_titles' text."""
    parts = [s.observation for s in track.steps if s.tool == "lookup" and s.observation is not None]
    if track.reply:
        parts.append(track.reply)
    elif not parts:
        parts.append("No candidate is left to recommend.")
    return "\n".join(parts)


def _track_for_critic(attempt: Attempt) -> str:
    if attempt.track is None:
        return "No tools were used; the assistant answered directly."
    return attempt.track.as_text()


@dataclass(frozen=True)
class _Stage:
    """Where one stage's calls go: the agent's settings and the run (client, log, phase)."""

    config: InteRecConfig
    run: RunContext

    def ask(
        self,
        kind: str,
        turns: Sequence[_Turn],
        messages: Sequence[list[dict[str, str]]],
        schema: dict[str, Any],
        temperature: float,
        max_tokens: int,
    ) -> list[ChatResult]:
        """Send one request per turn in one batch; log every call and keep it on its turn."""
        tags = [t.session.session_id for t in turns]
        results = self.run.ask(kind, tags, messages, schema, temperature=temperature,
                               max_tokens=max_tokens, seed=self.config.seed,
                               desc=f"{self.run.phase}: {kind}")  # fmt: skip
        for turn, sent, result in zip(turns, messages, results, strict=True):
            turn.record(kind, sent, result)
        return results


def _describer() -> Callable[[ItemTable], str]:
    """:meth:`ItemTable.describe`, computed once per table within one stage."""
    seen: dict[int, str] = {}

    def describe(table: ItemTable) -> str:
        if id(table) not in seen:
            seen[id(table)] = table.describe()
        return seen[id(table)]

    return describe


def _plan_first_round(turns: Sequence[_Turn], notes: dict[str, str], stage: _Stage) -> None:
    """One planner call per turn (one batch), then each plan runs on its session's bus."""
    config = stage.config
    describe = _describer()
    messages = [
        planner_messages(
            t.text,
            describe(t.ctx.table),
            config,
            t.demos,
            t.memory,
            t.advice,
            notes.get(t.session.session_id),
            t.profile,
        )
        for t in turns
    ]
    results = stage.ask("planner", turns, messages, planner_schema(config),
                        config.planner_temperature, config.planner_max_tokens)  # fmt: skip
    for turn, result in zip(turns, results, strict=True):
        turn.attempts.append(_plan_attempt(turn, result, config))


def _plan_attempt(turn: _Turn, result: ChatResult, config: InteRecConfig) -> Attempt:
    """What one planner reply gives: a direct answer, an executed plan, or a failure.

    A plan runs on the turn's bus (restored first); an unusable reply, an invalid plan and
    a plan stopped by a tool error are counted plan failures, with their problems kept.
    """
    if not result.ok:
        turn.plan_failures += 1
        return Attempt("failed", problems=[f"unusable planner reply: {result.error}"],
                       llm_failure=result.error, advice_in=turn.advice)  # fmt: skip
    parsed = parse_planner_reply(result.data, turn.ctx.table)
    if parsed.kind == "answer":
        return Attempt("answer", reply=parsed.answer, advice_in=turn.advice)
    if parsed.kind == "failed":
        turn.plan_failures += 1
        return Attempt("failed", problems=list(parsed.problems), advice_in=turn.advice)
    turn.restore_bus()
    plan = turn.with_profile(parsed.plan, config)
    track = execute_plan(plan, turn.ctx, reset_bus=False)
    attempt = Attempt("plan", plan=plan, track=track, advice_in=turn.advice)
    attempt.bus_after = list(turn.ctx.bus.ids)
    if track.stopped:
        turn.plan_failures += 1
        attempt.kind = "failed"
        attempt.problems = [
            f"step {n} ({s.tool}): {s.error}"
            for n, s in enumerate(track.steps, 1)
            if s.error is not None
        ]
    else:
        attempt.reply = _executor_reply(track)
    return attempt


@dataclass
class _ReactRun:
    """One turn's step-by-step attempt in ReAct mode (see :func:`_react_round`)."""

    track: ExecutionTrack = field(default_factory=ExecutionTrack)
    steps: list[dict[str, Any]] = field(default_factory=list)
    seen: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    answer: str | None = None
    failure: str | None = None


def _react_step(turn: _Turn, run: _ReactRun, result: ChatResult, config: InteRecConfig) -> bool:
    """Act on one ReAct reply: check and run its step; whether the turn takes another step.

    An unusable reply, an unknown action, ``finish`` and a successful map_titles end the
    turn; an invalid or failing step is shown to the model as an ``ERROR:`` observation.
    """
    if not result.ok:
        turn.plan_failures += 1
        run.failure = result.error
        return False
    action, value, thought = parse_react_reply(result.data)
    run.thoughts.append(thought)
    if action is None:
        turn.plan_failures += 1
        run.failure = "the step names no known action"
        return False
    if action == "finish":
        run.answer = value if isinstance(value, str) else json.dumps(value)
        return False
    step = turn.with_profile([{"tool_name": action, "input": value}], config)[0]
    action, value = step["tool_name"], step["input"]
    number = len(run.steps) + 1
    problems = [
        p
        for p in validate_plan([*run.steps, step], turn.ctx.table)
        if p.startswith(f"step {number} ")
    ]
    if problems:
        turn.plan_failures += 1
        size = len(turn.ctx.bus)
        run.track.steps.append(StepRecord(action, value, size, size, error="; ".join(problems)))
        run.seen.append((step, "ERROR: " + "; ".join(problems)))
        return True
    record = execute_step(turn.ctx, PlanStep(action, value), run.track)
    if record.error is not None:
        turn.plan_failures += 1
        run.seen.append((step, "ERROR: " + record.error))
        return True
    run.steps.append(step)
    run.seen.append((step, record.observation or ""))
    return action != "map_titles"


def _react_attempt(turn: _Turn, run: _ReactRun, config: InteRecConfig) -> Attempt:
    """The attempt a finished ReAct loop made: a plan (tools ran), an answer, or a failure.

    When tools ran, map_titles is added if the model did not call it, so the reply is the
    tools' output as in plan-first mode.
    """
    track = run.track
    if any(s.error is None for s in track.steps):
        if not any(s.tool == "map_titles" for s in track.steps if s.error is None):
            record = execute_step(turn.ctx, PlanStep("map_titles", turn.ctx.map_n), track)
            record.added = True
            track.map_added = True
        attempt = Attempt("plan", plan=list(run.steps), track=track,
                          reply=_executor_reply(track), advice_in=turn.advice)  # fmt: skip
        attempt.bus_after = list(turn.ctx.bus.ids)
    elif run.answer is not None and run.answer.strip():
        attempt = Attempt("answer", reply=run.answer.strip(), advice_in=turn.advice)
        if track.steps:
            attempt.track = track
    else:
        problems = [f"unusable step: {run.failure}"] if run.failure else []
        problems += [f"{s.tool}: {s.error}" for s in track.steps if s.error]
        if not problems:
            limit = config.react_max_iterations
            problems = [f"no tool ran and no answer came in {limit} steps"]
        if run.failure is None and not track.steps:
            turn.plan_failures += 1
        attempt = Attempt("failed", problems=problems, llm_failure=run.failure,
                          track=track if track.steps else None,
                          advice_in=turn.advice)  # fmt: skip
    attempt.thoughts = list(run.thoughts)
    return attempt


def _react_round(turns: Sequence[_Turn], notes: dict[str, str], stage: _Stage) -> None:
    """Step-by-step attempts for every turn, one batched LLM call per iteration.

    Each step is validated with the steps before it (an invalid one is not run; its problems
    are the observation) and run on the bus as it is. A turn ends at ``finish``, after
    map_titles, on an unusable reply or after ``react_max_iterations`` steps. When tools ran,
    the reply is their output (map_titles is added if missing), as in plan-first mode;
    otherwise the ``finish`` text is a direct answer. With profile memory, the remembered
    likes and dislikes join every rank step's input before it is checked and run.
    """
    config = stage.config
    schema = react_schema(config)
    runs: dict[int, _ReactRun] = {}
    for turn in turns:
        turn.restore_bus()
        runs[id(turn)] = _ReactRun()
    active = list(turns)
    describe = _describer()
    for _ in range(config.react_max_iterations):
        if not active:
            break
        messages = [
            react_messages(t.text, describe(t.ctx.table), config, runs[id(t)].seen, t.demos,
                           t.memory, t.advice, notes.get(t.session.session_id), t.profile)
            for t in active
        ]  # fmt: skip
        results = stage.ask("react", active, messages, schema, config.planner_temperature,
                            config.react_max_tokens)  # fmt: skip
        active = [
            turn
            for turn, result in zip(active, results, strict=True)
            if _react_step(turn, runs[id(turn)], result, config)
        ]
    for turn in turns:
        turn.attempts.append(_react_attempt(turn, runs[id(turn)], config))


def _critic_round(turns: Sequence[_Turn], stage: _Stage) -> list[_Turn]:
    """Review every turn's latest attempt in one batch; return those the critic rejected."""
    if not turns:
        return []
    config = stage.config
    messages = [
        critic_messages(
            t.text,
            _track_for_critic(t.attempts[-1]),
            t.attempts[-1].reply,
            t.memory,
            config,
            t.profile,
        )  # fmt: skip
        for t in turns
    ]
    results = stage.ask("critic", turns, messages, critic_schema(config),
                        config.critic_temperature, config.critic_max_tokens)  # fmt: skip
    rejected = []
    for turn, result in zip(turns, results, strict=True):
        attempt = turn.attempts[-1]
        verdict, advice = parse_critic_reply(result.data) if result.ok else (None, "")
        attempt.verdict, attempt.advice = verdict, advice or None
        if verdict is None:
            turn.critic_failures += 1
        elif not verdict:
            turn.advice = advice or "The reply does not serve the request; try a different plan."
            turn.reflections += 1
            rejected.append(turn)
    return rejected


def _summarise(turns: Sequence[_Turn], stage: _Stage) -> None:
    tracks = [
        (t, a.track) for t in turns if (a := t.attempts[-1]).kind == "plan" and a.track is not None
    ]
    chosen = [t for t, _ in tracks]
    if not chosen:
        return
    config = stage.config
    messages = [summariser_messages(t.text, k.as_text(), t.memory, config) for t, k in tracks]
    results = stage.ask("summariser", chosen, messages, summariser_schema(config),
                        config.summariser_temperature, config.summariser_max_tokens)  # fmt: skip
    for turn, result in zip(chosen, results, strict=True):
        reply = result.data.get("reply") if result.ok and isinstance(result.data, dict) else None
        if isinstance(reply, str) and reply.strip():
            turn.attempts[-1].reply = reply.strip()


def _profile_round(turns: Sequence[_Turn], stage: _Stage) -> None:
    """One profile extraction per turn (one batch) before planning; update each session.

    An unusable reply is a counted profile failure and leaves the profile as it was; the
    turn goes on with what was remembered before.
    """
    config = stage.config
    messages = [profile_messages(t.text, t.memory, t.session.profile_text(), config) for t in turns]
    results = stage.ask("profile", turns, messages, profile_schema(config), 0.0,
                        config.profile_max_tokens)  # fmt: skip
    for turn, result in zip(turns, results, strict=True):
        parsed = parse_profile_reply(result.data) if result.ok else None
        if parsed is None:
            turn.profile_failures += 1
        else:
            turn.profile_update = turn.session.update_profile(*parsed)
        turn.profile = turn.session.profile_text()


def _keep_set(keep_prompts: bool | Collection[str]) -> Callable[[str], bool]:
    if isinstance(keep_prompts, bool):
        return lambda _: keep_prompts
    wanted = set(keep_prompts)
    return lambda session_id: session_id in wanted


def run_turns(
    sessions: Sequence[AgentSession],
    user_texts: Sequence[str],
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    phase: str = "InteRecAgent",
    keep_prompts: bool | Collection[str] = False,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    notes: dict[str, str] | None = None,
) -> list[TurnResult]:
    """One agent turn for many sessions at once, stage by stage.

    Stages: all planners in one :meth:`LLMClient.map` (or, in ReAct mode, one map per
    step), execution without an LLM, all critics in one map, then the re-plans of the
    sessions the critic rejected (or whose plan failed), and so on, at most
    ``config.max_reflections`` times; then the summaries. With ``config.profile_memory`` a
    profile extraction batch comes first. A planner reply that cannot be used
    even after the client's bounded re-asks is a counted plan failure and the turn replies
    with :data:`APOLOGY`; an unusable critic reply keeps the attempt. Every call is added to
    ``log`` (kinds ``profile``, ``planner``, ``react``, ``critic``, ``summariser``) and each
    session's dialogue memory gets the message and the reply.

    Args:
        sessions: The sessions (each with its own bus; see :meth:`AgentSession.start`).
        user_texts: Each session's new user message.
        config: The agent's settings.
        client: The LLM client.
        log: Receives one row per call.
        phase: Label of these calls in the log.
        keep_prompts: ``True`` (all), ``False`` (none) or the session ids whose prompts and
            replies are kept in :attr:`TurnResult.prompts`.
        embed: Embedding function for dynamic demonstrations (default: offline MiniLM).
        notes: Extra planner instructions per session id (e.g. the one-turn ranking task).

    Returns:
        One :class:`TurnResult` per session, in order.
    """
    turns = _start_turns(sessions, user_texts, config, keep_prompts, embed)
    stage = _Stage(config, RunContext(client, log, phase))
    if config.profile_memory:
        _profile_round(turns, stage)
    planning = _react_round if config.plan_mode == "react" else _plan_first_round
    notes = dict(notes or {})
    pending = list(turns)
    while pending:
        planning(pending, notes, stage)
        rerun, review = _triage(pending, config)
        rerun += _critic_round(review, stage)
        pending = [t for t in turns if t in rerun]
    if config.summariser:
        _summarise(turns, stage)
    return [_finish_turn(turn, config) for turn in turns]


def _start_turns(
    sessions: Sequence[AgentSession],
    user_texts: Sequence[str],
    config: InteRecConfig,
    keep_prompts: bool | Collection[str],
    embed: Callable[[Sequence[str]], np.ndarray] | None,
) -> list[_Turn]:
    """Check the batch and open one :class:`_Turn` per session, with its demonstrations."""
    if len(sessions) != len(user_texts):
        raise ValueError(f"{len(sessions)} sessions but {len(user_texts)} user messages")
    ids = [s.session_id for s in sessions]
    if len(set(ids)) != len(ids):
        raise ValueError("run_turns: a session appears more than once")
    keep = _keep_set(keep_prompts)
    texts = [str(t) for t in user_texts]
    demos = select_many(texts, config.num_demos, config.demo_mode, embed, DEMOS)
    return [
        _Turn(s, t, d, keep(s.session_id), config.persistent_bus)
        for s, t, d in zip(sessions, texts, demos, strict=True)
    ]


def _triage(pending: Sequence[_Turn], config: InteRecConfig) -> tuple[list[_Turn], list[_Turn]]:
    """After a planning round: ``(turns re-planned at once, turns the critic reviews)``.

    A failed plan goes straight back to the planner with the validator's problems as advice
    (``replan_on_failure``; not after an unusable LLM reply); a usable attempt is reviewed
    while reflections are left. Each counts as one reflection.
    """
    rerun, review = [], []
    for turn in pending:
        attempt = turn.attempts[-1]
        can_retry = config.reflection and turn.reflections < config.max_reflections
        if attempt.kind == "failed":
            if can_retry and config.replan_on_failure and attempt.llm_failure is None:
                attempt.advice = "Your last plan could not be run: " + "; ".join(attempt.problems)
                turn.advice = attempt.advice[: config.advice_chars]
                turn.reflections += 1
                rerun.append(turn)
        elif can_retry:
            review.append(turn)
    return rerun, review


def _finish_turn(turn: _Turn, config: InteRecConfig) -> TurnResult:
    """Close one turn: the final attempt's reply (or the apology), the bus, the memory."""
    final = turn.attempts[-1]
    if final.kind == "failed":
        final.reply = APOLOGY.format(domain=config.domain)
    if turn.bus_start is None:
        turn.session.ctx.bus.reset()
    elif final.kind != "plan":
        turn.session.ctx.bus = copy.deepcopy(turn.bus_start)
    planned = final.kind == "plan"
    result = TurnResult(
        session_id=turn.session.session_id,
        user_text=turn.text,
        reply=final.reply,
        kind=final.kind,
        plan=final.plan if planned else None,
        recommended_ids=list(final.track.recommended_ids)
        if planned and final.track is not None
        else [],
        n_calls=turn.calls,
        plan_failures=turn.plan_failures,
        reflections=turn.reflections,
        critic_failures=turn.critic_failures,
        attempts=turn.attempts,
        prompts=turn.prompts,
        profile_failures=turn.profile_failures,
        profile_update=turn.profile_update,
    )
    turn.session.remember(result)
    return result


def llm_only_turns(
    sessions: Sequence[AgentSession],
    user_texts: Sequence[str],
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    phase: str = "LLM only",
    keep_prompts: bool | Collection[str] = False,
    n: int | None = None,
) -> list[TurnResult]:
    """The "LLM without tools" baseline: the same LLM names ``n`` titles, grounded to ids.

    Each title is matched with :meth:`ItemTable.match_title`; titles that match nothing are
    counted in :attr:`TurnResult.unmatched`. The reply is the titles as the model wrote them
    (so the paper's fuzzy rule judges the model's own words). Temperature:
    ``config.llm_only_temperature`` (the paper's 0.8).
    """
    if len(sessions) != len(user_texts):
        raise ValueError(f"{len(sessions)} sessions but {len(user_texts)} user messages")
    count = config.map_n if n is None else n
    keep = _keep_set(keep_prompts)
    schema = llm_only_schema(count)
    requests = [
        ChatRequest(
            messages=llm_only_messages(text, s.dialogue, config, count),
            schema=schema,
            temperature=config.llm_only_temperature,
            max_tokens=config.llm_only_max_tokens,
            seed=config.seed,
            tag=s.session_id,
        )
        for s, text in zip(sessions, user_texts, strict=True)
    ]
    results = ask(client, log, phase, "llm_only", requests, desc=f"{phase}: recommend")
    return [
        _llm_only_result(
            session,
            str(text),
            result,
            config,
            _prompt_record("llm_only", request.messages, result)
            if keep(session.session_id)
            else None,
        )
        for session, text, request, result in zip(
            sessions, user_texts, requests, results, strict=True
        )
    ]


def _ground_titles(titles: Sequence[str], session: AgentSession) -> tuple[list[str], int]:
    """The item ids the titles match (first match kept, in order) and how many matched none."""
    ids: list[str] = []
    unmatched = 0
    for title in titles:
        match = session.ctx.table.match_title(title, session.ctx.title_min_score)
        if match.item_id is None:
            unmatched += 1
        elif match.item_id not in ids:
            ids.append(match.item_id)
    return ids, unmatched


def _llm_only_result(
    session: AgentSession,
    text: str,
    result: ChatResult,
    config: InteRecConfig,
    kept: tuple[str, str, str] | None,
) -> TurnResult:
    """One LLM-only answer as a :class:`TurnResult`, remembered in the session's dialogue."""
    titles = parse_llm_only_reply(result.data) if result.ok else None
    ids, unmatched = _ground_titles(titles or [], session)
    if titles:
        reply = "Here are recommendations: " + "; ".join(
            f"{k}. {t}" for k, t in enumerate(titles, 1)
        )
    else:
        reply = APOLOGY.format(domain=config.domain)
    turn = TurnResult(
        session_id=session.session_id,
        user_text=text,
        reply=reply,
        kind="llm_only",
        recommended_ids=ids,
        n_calls=1,
        plan_failures=0 if titles else 1,
        unmatched=unmatched,
        titles=list(titles or []),
    )
    if kept is not None:
        turn.prompts.append(kept)
    session.remember(turn)
    return turn
