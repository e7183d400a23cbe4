"""InteRecAgent's multi-turn evaluation: simulated conversations and Hit@5 / AT@5.

:func:`run_sessions` runs the conversations of one method (the agent or the LLM without
tools) turn by turn across all open sessions, judging each reply by id and by the paper's
fuzzy rule; :func:`conversation_metrics` turns a :class:`ConversationRun` into Hit@K and
AT@K with bootstrap intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.interecagent.agent import llm_only_turns, run_turns
from recagents.papers.interecagent.config import InteRecConfig, SimulatorConfig
from recagents.papers.interecagent.scoring import fuzzy_hit, hit_at_k_and_at
from recagents.papers.interecagent.session import AgentSession, TurnResult
from recagents.papers.interecagent.simulator import (
    SessionSet,
    SessionSpec,
    SimMessage,
    simulate_turn,
)
from recagents.papers.interecagent.toolbox import ToolContext


@dataclass
class ConversationRun:
    """The conversations of one method.

    Attributes:
        method: ``"InteRecAgent"`` or ``"LLM only"``.
        sessions: One row per conversation: ``[method, user_id, target, turns, hit_id,
            turn_id, hit_fuzzy, turn_fuzzy, ended_by, leaks, regenerations, calls,
            sim_calls, plan_failures, reflections, profile_failures, unmatched, dropped]``.
        turns: One row per turn: ``[method, user_id, turn, user_text, leaked,
            regenerations, reply, kind, recommended, hit_id, hit_fuzzy, calls,
            plan_failures, reflections]``.
        agents: The agent session of each user (dialogue and every :class:`TurnResult`).
        simulator: Each user's :class:`SimMessage` per turn.
        specs: Each user's :class:`SessionSpec`.
        sim: The simulator settings the run used.
    """

    method: str
    sessions: pd.DataFrame
    turns: pd.DataFrame
    agents: dict[str, AgentSession] = field(default_factory=dict)
    simulator: dict[str, list[SimMessage]] = field(default_factory=dict)
    specs: dict[str, SessionSpec] = field(default_factory=dict)
    sim: SimulatorConfig = field(default_factory=SimulatorConfig)


def agent_turns(
    run: RunContext,
    sessions: Sequence[AgentSession],
    texts: Sequence[str],
    config: InteRecConfig,
    keep_prompts: bool | Collection[str] = False,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> list[TurnResult]:
    """One turn of the method named by ``run.phase`` (``InteRecAgent`` or ``LLM only``)."""
    method = run.phase
    if method == "InteRecAgent":
        return run_turns(sessions, texts, config, run.client, run.log, phase=method,
                         keep_prompts=keep_prompts, embed=embed)  # fmt: skip
    if method == "LLM only":
        return llm_only_turns(sessions, texts, config, run.client, run.log, phase=method,
                              keep_prompts=keep_prompts)  # fmt: skip
    raise ValueError(f"method must be 'InteRecAgent' or 'LLM only' here, got {method!r}")


def _stops(stop_on: str, id_turn: int | None, fuzzy_turn: int | None) -> bool:
    if stop_on == "both":
        return id_turn is not None and fuzzy_turn is not None
    if stop_on == "either":
        return id_turn is not None or fuzzy_turn is not None
    return (id_turn if stop_on == "id" else fuzzy_turn) is not None


def run_sessions(
    sessions: SessionSet | Sequence[SessionSpec],
    ctx: ToolContext,
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    max_turns: int = 5,
    method: str = "InteRecAgent",
    sim: SimulatorConfig | None = None,
    keep_prompts: bool | Collection[str] = False,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> ConversationRun:
    """Simulated conversations, turn by turn across all open sessions.

    Each turn: every open session's simulator speaks (one batch, leak-checked); sessions
    whose user wrote ``<END>`` close; the agent answers the rest (one :func:`run_turns` or
    :func:`llm_only_turns` call); each reply is judged by id (the target among the ids
    recommended this turn) and by the paper's fuzzy rule (:func:`fuzzy_hit` over the reply);
    sessions close per ``sim.stop_on`` or after ``max_turns``.

    Args:
        sessions: The simulated users (:func:`make_sessions`).
        ctx: The shared tool context (table, ItemCF, ranker); each session gets its own bus.
        config: The agent's settings.
        client: The LLM client (agent and simulator).
        log: Receives every call (phase = method for the agent, ``simulator`` for the user).
        max_turns: Most turns per conversation (paper: 5).
        method: ``"InteRecAgent"`` or ``"LLM only"``.
        sim: The simulator settings.
        keep_prompts: Keep the agent's prompts (``True``, ``False`` or user ids) for traces.
        embed: Embedding function for dynamic demonstrations.
    """
    sim = sim or SimulatorConfig()
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    specs = list(sessions)
    if len({s.user for s in specs}) != len(specs):
        raise ValueError("run_sessions: a user appears more than once")
    run = _Conversations(method, specs, ctx, config.map_n, sim)
    answering = RunContext(client, log, method)
    open_specs = specs
    for turn in range(1, max_turns + 1):
        if not open_specs:
            break
        messages = simulate_turn(open_specs, run.dialogues, sim, client, log, config.domain)
        talking, texts = run.users_speak(open_specs, messages, turn)
        agents = [run.agents[s.user] for s in talking]
        results = agent_turns(answering, agents, texts, config, keep_prompts, embed)
        open_specs = run.judge(talking, texts, results, turn, max_turns)
    return run.finish()


#: The columns of :attr:`ConversationRun.turns`.
_TURN_COLUMNS = ["method", USER, "turn", "user_text", "leaked", "regenerations", "reply",
                 "kind", "recommended", "hit_id", "hit_fuzzy", "calls", "plan_failures",
                 "reflections"]  # fmt: skip


class _Conversations:
    """The state of one :func:`run_sessions` call: each user's dialogue, messages and hits."""

    def __init__(
        self,
        method: str,
        specs: Sequence[SessionSpec],
        ctx: ToolContext,
        map_n: int,
        sim: SimulatorConfig,
    ) -> None:
        self.method = method
        self.specs = list(specs)
        self.sim = sim
        self.agents = {s.user: AgentSession.start(s.user, ctx, map_n=map_n) for s in specs}
        self.dialogues: dict[str, list[tuple[str, str]]] = {s.user: [] for s in specs}
        self.said: dict[str, list[SimMessage]] = {s.user: [] for s in specs}
        self.state: dict[str, dict[str, Any]] = {
            s.user: {"id": None, "fuzzy": None, "ended_by": None} for s in specs
        }
        self.turn_rows: list[dict[str, Any]] = []

    def users_speak(
        self, open_specs: Sequence[SessionSpec], messages: Sequence[SimMessage], turn: int
    ) -> tuple[list[SessionSpec], list[str]]:
        """Record the simulator's messages; ``(users the agent answers, their messages)``.

        A failed simulator, a user's ``<END>`` after turn 1 and (with ``drop_leaking``) a
        leaking message close the conversation.
        """
        talking, texts = [], []
        for spec, message in zip(open_specs, messages, strict=True):
            self.said[spec.user].append(message)
            if not message.ok:
                self.state[spec.user]["ended_by"] = "simulator_failed"
            elif message.ended and turn > 1:
                self.state[spec.user]["ended_by"] = "user"
            elif message.leaked and self.sim.drop_leaking:
                self.state[spec.user]["ended_by"] = "leak"
            else:
                talking.append(spec)
                texts.append(message.text)
            if message.ok:
                self.dialogues[spec.user].append(("user", message.text))
        return talking, texts

    def judge(
        self,
        talking: Sequence[SessionSpec],
        texts: Sequence[str],
        results: Sequence[TurnResult],
        turn: int,
        max_turns: int,
    ) -> list[SessionSpec]:
        """Judge each reply by id and by the fuzzy rule; return the conversations going on."""
        still = []
        for spec, text, result in zip(talking, texts, results, strict=True):
            self.dialogues[spec.user].append(("agent", result.reply))
            hit_id = spec.target in result.recommended_ids
            hit_fz = fuzzy_hit(result.reply, spec.target_title, self.sim.hit_threshold)
            st = self.state[spec.user]
            if hit_id and st["id"] is None:
                st["id"] = turn
            if hit_fz and st["fuzzy"] is None:
                st["fuzzy"] = turn
            message = self.said[spec.user][-1]
            self.turn_rows.append(
                {
                    "method": self.method, USER: spec.user, "turn": turn, "user_text": text,
                    "leaked": message.leaked, "regenerations": message.regenerations,
                    "reply": result.reply, "kind": result.kind,
                    "recommended": list(result.recommended_ids), "hit_id": hit_id,
                    "hit_fuzzy": hit_fz, "calls": result.n_calls,
                    "plan_failures": result.plan_failures, "reflections": result.reflections,
                }
            )  # fmt: skip
            if _stops(self.sim.stop_on, st["id"], st["fuzzy"]):
                st["ended_by"] = "hit"
            elif turn < max_turns:
                still.append(spec)
            else:
                st["ended_by"] = "max_turns"
        return still

    def _session_row(self, spec: SessionSpec) -> dict[str, Any]:
        """One conversation's row of :attr:`ConversationRun.sessions`."""
        st = self.state[spec.user]
        mine = [r for r in self.turn_rows if r[USER] == spec.user]
        messages = self.said[spec.user]
        turns = self.agents[spec.user].turns
        return {
            "method": self.method, USER: spec.user, "target": spec.target, "turns": len(mine),
            "hit_id": st["id"] is not None, "turn_id": st["id"],
            "hit_fuzzy": st["fuzzy"] is not None, "turn_fuzzy": st["fuzzy"],
            "ended_by": st["ended_by"] or "max_turns",
            "leaks": sum(m.leaked for m in messages),
            "regenerations": sum(m.regenerations for m in messages),
            "calls": sum(r.n_calls for r in turns),
            "sim_calls": sum(m.calls for m in messages),
            "plan_failures": sum(r.plan_failures for r in turns),
            "reflections": sum(r.reflections for r in turns),
            "profile_failures": sum(r.profile_failures for r in turns),
            "unmatched": sum(r.unmatched for r in turns),
            "dropped": st["ended_by"] == "leak",
        }  # fmt: skip

    def finish(self) -> ConversationRun:
        """The :class:`ConversationRun` of these conversations."""
        rows = [self._session_row(spec) for spec in self.specs]
        sessions = pd.DataFrame(rows).astype({"turn_id": "Int64", "turn_fuzzy": "Int64"})
        return ConversationRun(
            method=self.method,
            sessions=sessions,
            turns=pd.DataFrame(self.turn_rows, columns=_TURN_COLUMNS),
            agents=self.agents,
            simulator=self.said,
            specs={s.user: s for s in self.specs},
            sim=self.sim,
        )


def conversation_metrics(
    frame: pd.DataFrame,
    max_turns: int = 5,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Hit@K and AT@K (a miss counts ``max_turns + 1``) by id and by the fuzzy rule.

    Args:
        frame: :attr:`ConversationRun.sessions` (one or several methods); rows with
            ``dropped`` (a leaking conversation under ``drop_leaking``) are left out.
        max_turns: K.
        n_boot: Bootstrap resamples.
        ci: Confidence level.
        seed: Seed of the resampling.

    Returns:
        ``[method, rule, hit, hit_low, hit_high, at, at_low, at_high, n, dropped]``, with
        rule ``"id"`` or ``"fuzzy"``.
    """
    rows = []
    for method, group in frame.groupby("method", sort=False):
        dropped = group["dropped"].astype(bool) if "dropped" in group else False
        kept = group[~dropped]
        for rule, column in (("id", "turn_id"), ("fuzzy", "turn_fuzzy")):
            if kept.empty:
                continue
            turns = [None if pd.isna(t) else int(t) for t in kept[column]]
            m = hit_at_k_and_at(turns, max_turns=max_turns, n_boot=n_boot, ci=ci, seed=seed)
            rows.append(
                {"method": method, "rule": rule, "hit": m.hit, "hit_low": m.hit_low,
                 "hit_high": m.hit_high, "at": m.at, "at_low": m.at_low, "at_high": m.at_high,
                 "n": m.n, "dropped": int(len(group) - len(kept))}
            )  # fmt: skip
    columns = ["method", "rule", "hit", "hit_low", "hit_high", "at", "at_low", "at_high", "n",
               "dropped"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)
