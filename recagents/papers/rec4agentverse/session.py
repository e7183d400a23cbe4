"""Session state and the batched steps of one turn: routing, agent replies, user reactions.

:class:`SessionRun` is what a run returns (tidy frames); :class:`Session` is one user's
mutable state, :class:`Recorder` collects the message trace and the exposure rows,
:class:`RunState` carries what every step needs and sends each batch of structured requests,
accounted in the :class:`~recagents.llm.runlog.RunLog`. The loop that uses them is
:mod:`recagents.papers.rec4agentverse.stages`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from recagents.columns import USER
from recagents.llm.client import ChatResult
from recagents.llm.runlog import RunContext
from recagents.papers.rec4agentverse.catalogue import Catalogue
from recagents.papers.rec4agentverse.config import KEY_GROUP, SENSITIVE_FIELDS, Rec4AConfig
from recagents.papers.rec4agentverse.prompts import (
    AgentReply,
    agent_messages,
    agent_schema,
    parse_agent_reply,
    parse_choice,
    parse_reaction,
    reaction_schema,
    recommender_messages,
    recommender_schema,
    user_reaction_messages,
)
from recagents.papers.rec4agentverse.recommender import (
    Instruction,
    Profile,
    choose_agent,
    instruction_for,
    merge_shortlists,
    ranked_agents,
    shortlist,
)
from recagents.papers.rec4agentverse.templates import template_agent_reply, template_reaction
from recagents.papers.rec4agentverse.users import SimUser

# --------------------------------------------------------------------------- sessions


@dataclass
class Session:
    """One user's session in one stage (mutable while the protocol runs)."""

    user: SimUser
    stage: int
    agent: str = ""
    first_agent: str = ""
    profile: Profile = field(default_factory=Profile)
    instruction: Instruction | None = None
    dialogue: list[tuple[str, str]] = field(default_factory=list)
    items: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    unsatisfied: Counter = field(default_factory=Counter)
    satisfied_turn: int | None = None
    open: bool = True
    switches: int = 0
    reports_sent: int = 0
    reports_rejected: int = 0
    agent_failures: int = 0
    user_failures: int = 0
    router_failures: int = 0
    report_failures: int = 0
    turns: int = 0


#: The frames of a :class:`SessionRun`, by name (also tables of the paper's run).
FRAMES = ("sessions", "turns", "messages", "exposure")


@dataclass
class SessionRun:
    """What :func:`run_sessions` produced, as tidy frames; every row names its stage and mode.

    Attributes:
        sessions: One row per (user, stage): the final list and every session metric.
        turns: One row per turn held: agent, films, verdict, what was reported.
        messages: The trace: one row per message between user, agent items and recommender.
        exposure: One row per report field offered at the agent -> recommender boundary
            (crossed or withheld) and per field sent from the recommender to agents.
    """

    sessions: pd.DataFrame
    turns: pd.DataFrame
    messages: pd.DataFrame
    exposure: pd.DataFrame

    @staticmethod
    def concat(runs: Sequence[SessionRun]) -> SessionRun:
        """Stack several runs (e.g. stages or modes) into one."""
        return SessionRun(
            *(pd.concat([getattr(r, name) for r in runs], ignore_index=True) for name in FRAMES)
        )

    @staticmethod
    def from_tables(tables: Mapping[str, pd.DataFrame]) -> SessionRun:
        """The run held in a paper run's tables (:data:`FRAMES` by name)."""
        return SessionRun(*(tables[name] for name in FRAMES))

    def tables(self) -> dict[str, pd.DataFrame]:
        """The frames by name (:data:`FRAMES`)."""
        return {name: getattr(self, name) for name in FRAMES}

    def of_mode(self, mode: str) -> SessionRun:
        """Only the rows of one mode (``llm`` or ``template``)."""
        return SessionRun(
            *(
                frame[frame["mode"] == mode].reset_index(drop=True)
                for frame in self.tables().values()
            )
        )


class Recorder:
    """Collects the trace and the exposure rows of one run."""

    def __init__(self, config: Rec4AConfig) -> None:
        self.config = config
        self.messages: list[dict[str, Any]] = []
        self.exposure: list[dict[str, Any]] = []
        self.turns: list[dict[str, Any]] = []

    def say(
        self,
        s: Session,
        turn: int,
        sender: str,
        receiver: str,
        kind: str,
        content: str,
        fields: Sequence[str] = (),
    ) -> None:
        """Log one message from ``sender`` to ``receiver`` (``fields``: what it carries)."""
        self.messages.append(
            {
                USER: s.user.user_id,
                "stage": s.stage,
                "mode": self.config.agent_mode,
                "turn": turn,
                "sender": sender,
                "receiver": receiver,
                "kind": kind,
                "content": content,
                "fields": tuple(fields),
            }
        )

    def expose(
        self,
        s: Session,
        turn: int,
        boundary: str,
        key: str,
        crossed: bool,
        value: Any,
        channel: str,
    ) -> None:
        """Log one field offered at ``boundary``: crossed or withheld, consented, sensitive."""
        group = KEY_GROUP.get(key, key)
        self.exposure.append(
            {
                USER: s.user.user_id,
                "stage": s.stage,
                "mode": self.config.agent_mode,
                "turn": turn,
                "boundary": boundary,
                "field": key,
                "group": group,
                "crossed": crossed,
                "consented": group in self.config.share_fields,
                "sensitive": group in SENSITIVE_FIELDS,
                "channel": channel,
                "value": ", ".join(map(str, value)) if isinstance(value, list) else str(value),
            }
        )


@dataclass(frozen=True)
class RunState:
    """What every step of one run passes on: the settings, the agents, the trace, the LLM.

    ``llm`` (client, log and phase) is ``None`` when nothing is asked (template agents and
    the classic recommender); a step that asks needs it.
    """

    config: Rec4AConfig
    catalogue: Catalogue
    rec: Recorder
    llm: RunContext | None = None

    @property
    def phase(self) -> str:
        """The phase the calls are accounted under (``""`` without an LLM)."""
        return self.llm.phase if self.llm is not None else ""

    def ask(
        self,
        kind: str,
        sessions: Sequence[Session],
        messages: Sequence[list[dict[str, str]]],
        schema: dict[str, Any] | Sequence[dict[str, Any]],
        desc: str,
    ) -> list[ChatResult]:
        """One structured request per session (tagged with its user), in one ``client.map``."""
        assert self.llm is not None, "this step calls an LLM: the run needs a client"
        config = self.config
        return self.llm.ask(kind, [s.user.user_id for s in sessions], messages, schema,
                            temperature=config.temperature, max_tokens=config.max_tokens,
                            seed=config.seed, desc=desc)  # fmt: skip


def send_instruction(
    s: Session, turn: int, run: RunState, to: tuple[str, str], instruction: Instruction, text: str
) -> None:
    """Log one instruction from the recommender and each profile field it carries.

    ``to`` is ``(receiver, boundary)``: the session's agent (``recommender->agent``) or a
    consulted one (``recommender->consulted agent``).
    """
    receiver, boundary = to
    kind = "instruction" if boundary == "recommender->agent" else "consult"
    sent = [
        key for key, value in (("genres", instruction.genres), ("era", instruction.era)) if value
    ]
    run.rec.say(s, turn, "recommender", receiver, kind, text, sent)
    for key in sent:
        value = instruction.genres if key == "genres" else instruction.era
        shown = list(value) if isinstance(value, tuple) else value
        run.rec.expose(s, turn, boundary, key, True, shown, "instruction")


def route(
    sessions: Sequence[Session],
    run: RunState,
    reports: dict[int, str] | None,
    requests: dict[int, str] | None,
) -> list[tuple[str, bool]]:
    """The recommender's choice for each session: ``(agent id, made by the LLM)``.

    The classic scorer needs no call. The LLM recommender's unusable reply is counted and
    the classic choice is used instead (recorded as a routing failure, never silently).
    """
    catalogue, config = run.catalogue, run.config
    classic = [choose_agent(s.profile, catalogue, config, s.unsatisfied) for s in sessions]
    if config.recommender == "classic" or not sessions:
        return [(agent, False) for agent in classic]
    prompts = [
        recommender_messages(
            catalogue,
            s.profile,
            config,
            request=(requests or {}).get(k),
            current=s.agent or None,
            report=(reports or {}).get(k),
        )
        for k, s in enumerate(sessions)
    ]
    schema = recommender_schema(catalogue)
    results = run.ask("recommender", sessions, prompts, schema, f"{run.phase}: route")
    out = []
    for s, fallback, result in zip(sessions, classic, results, strict=True):
        agent = parse_choice(result.data, catalogue) if result.ok else None
        if agent is None:
            s.router_failures += 1
            out.append((fallback, False))
        else:
            out.append((agent, True))
    return out


def films_for_turn(s: Session, run: RunState, turn: int) -> tuple[list[str], list[str]]:
    """The current agent's shortlist this turn; in stage 3 merged with consulted agents'."""
    catalogue, config = run.catalogue, run.config
    own = shortlist(catalogue, s.agent, s.instruction, config.shortlist_size)
    if s.stage < 3 or config.n_consult == 0:
        return own, [s.agent] * len(own)
    consulted_ids = ranked_agents(s.profile, catalogue, config, exclude=[s.agent])
    consulted_ids = consulted_ids[: config.n_consult]
    instruction = instruction_for(s.profile)
    consulted = {
        a: shortlist(catalogue, a, instruction, config.shortlist_size) for a in consulted_ids
    }
    for a in consulted_ids:
        asks = f"Agent {s.agent} asks for films. {instruction.text() or 'No profile yet.'}"
        send_instruction(s, turn, run, (a, "recommender->consulted agent"), instruction, asks)
        films = "; ".join(catalogue.titles[i] for i in consulted[a][: config.consult_items])
        run.rec.say(s, turn, a, s.agent, "shortlist", films)
    return merge_shortlists(
        own, consulted, config.shortlist_size, config.consult_items, own_id=s.agent
    )


def agents_reply(
    active: Sequence[Session],
    films_of: dict[int, tuple[list[str], list[str]]],
    turn: int,
    run: RunState,
) -> dict[int, AgentReply | None]:
    """Every open session's agent picks ``k`` films from its shortlist (one batch)."""
    catalogue, config = run.catalogue, run.config
    if config.agent_mode == "template":
        return {
            id(s): template_agent_reply(
                catalogue.card(s.agent), films_of[id(s)][0], s.dialogue, catalogue, config
            )
            for s in active
        }
    prompts, schemas = [], []
    for s in active:
        films = films_of[id(s)][0]
        lines = [catalogue.line(i) for i in films]
        card = catalogue.card(s.agent)
        prompts.append(agent_messages(card, lines, s.instruction, s.user, s.dialogue, config))
        schemas.append(agent_schema(len(films), config))
    results = run.ask("agent", active, prompts, schemas, f"{run.phase} turn {turn}: agents")
    return {
        id(s): parse_agent_reply(r.data, films_of[id(s)][0], config.k) if r.ok else None
        for s, r in zip(active, results, strict=True)
    }


def users_react(
    active: Sequence[Session],
    replies: dict[int, AgentReply | None],
    turn: int,
    run: RunState,
) -> dict[int, tuple[bool | None, str]]:
    """The users who were shown films react (one batch); the others are not asked."""
    catalogue, config = run.catalogue, run.config
    shown = [(s, reply) for s in active if (reply := replies[id(s)]) is not None]
    if config.agent_mode == "template":
        return {
            id(s): template_reaction(s.user, reply.picks, catalogue, config) for s, reply in shown
        }
    prompts = [
        user_reaction_messages(
            s.user,
            catalogue.card(s.agent).name,
            reply.message,
            [catalogue.line(i) for i in reply.picks],
            config,
        )
        for s, reply in shown
    ]
    schema = reaction_schema(config)
    asked = [s for s, _ in shown]
    results = run.ask("user", asked, prompts, schema, f"{run.phase} turn {turn}: users")
    return {
        id(s): parse_reaction(r.data) if r.ok else (None, "")
        for (s, _), r in zip(shown, results, strict=True)
    }
