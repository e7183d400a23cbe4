"""One InteRecAgent conversation's state, and the record of each turn and attempt.

:class:`AgentSession` owns a candidate bus and the dialogue memory (and, with profile
memory, the remembered likes and dislikes); :class:`TurnResult` and :class:`Attempt` record
what a turn did, and :class:`ProfileUpdate` what one message added to the profile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from recagents.papers.interecagent.bus import CandidateBus
from recagents.papers.interecagent.plans import ExecutionTrack
from recagents.papers.interecagent.toolbox import ToolContext


@dataclass
class Attempt:
    """One try at a turn: the planner's reply, what ran, and the critic's verdict.

    Attributes:
        kind: ``"answer"``, ``"plan"`` or ``"failed"``.
        reply: What the agent would say (the answer, the executor's output or the apology).
        plan: The steps that ran (``None`` for an answer).
        problems: Why it failed (validation problems, a tool error, an unusable LLM reply).
        track: The execution track (plan or ReAct steps), or ``None``.
        llm_failure: The client's error when the planner's reply was unusable.
        advice_in: The advice this attempt was planned with.
        verdict: The critic's verdict (``None``: not reviewed, or an unusable review).
        advice: The critic's advice, or the validator's when the plan failed.
        bus_after: Candidate ids on the bus after the plan ran (before it is cleared).
        thoughts: ReAct thoughts, one per step.
    """

    kind: Literal["answer", "plan", "failed"]
    reply: str = ""
    plan: list[dict[str, Any]] | None = None
    problems: list[str] = field(default_factory=list)
    track: ExecutionTrack | None = None
    llm_failure: str | None = None
    advice_in: str | None = None
    verdict: bool | None = None
    advice: str | None = None
    bus_after: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)


@dataclass
class TurnResult:
    """What one agent turn did.

    Attributes:
        session_id: The session.
        user_text: The user's message.
        reply: The agent's reply to the user.
        kind: ``"answer"``, ``"plan"``, ``"failed"`` (apology) or ``"llm_only"``.
        plan: The final plan's steps (``None`` without one).
        recommended_ids: Ids recommended this turn (map_titles, or the grounded titles).
        n_calls: LLM requests made for this turn (planner, critic, summariser, ReAct steps).
        plan_failures: Plans (or ReAct steps) that were invalid, failed, or unusable replies.
        reflections: Re-plans after a critic's "no" or a failed plan.
        critic_failures: Critic replies that could not be used (the attempt was kept).
        attempts: Every :class:`Attempt`, in order; the last is the final one.
        unmatched: LLM-only titles that matched no item.
        titles: LLM-only titles as written.
        prompts: Kept ``(role, prompt, reply)`` triples for a teaching trace.
        profile_failures: Profile extraction replies that could not be used (the profile
            stayed as it was).
        profile_update: What this turn's message added to the profile (profile memory).
    """

    session_id: str
    user_text: str
    reply: str
    kind: Literal["answer", "plan", "failed", "llm_only"]
    plan: list[dict[str, Any]] | None = None
    recommended_ids: list[str] = field(default_factory=list)
    n_calls: int = 0
    plan_failures: int = 0
    reflections: int = 0
    critic_failures: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    unmatched: int = 0
    titles: list[str] = field(default_factory=list)
    prompts: list[tuple[str, str, str]] = field(default_factory=list)
    profile_failures: int = 0
    profile_update: ProfileUpdate | None = None

    @property
    def tracks(self) -> list[ExecutionTrack]:
        """The execution tracks of every attempt that ran tools."""
        return [a.track for a in self.attempts if a.track is not None]

    @property
    def track(self) -> ExecutionTrack | None:
        """The final attempt's track, or ``None``."""
        return self.attempts[-1].track if self.attempts else None

    @property
    def bus_after(self) -> list[str]:
        """Candidates left after the final plan ran (empty without one)."""
        return self.attempts[-1].bus_after if self.attempts else []


@dataclass(frozen=True)
class ProfileUpdate:
    """What one message changed in the remembered profile.

    Attributes:
        likes: Ids newly remembered as liked.
        dislikes: Ids newly remembered as not wanted.
        unmatched: Titles the extractor wrote that matched no item (not remembered).
    """

    likes: tuple[str, ...] = ()
    dislikes: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()


@dataclass
class AgentSession:
    """One conversation's agent state: its own candidate bus and its dialogue memory.

    Attributes:
        session_id: A label (e.g. the user id).
        ctx: The tool context; its bus belongs to this session (the table, ItemCF and
            ranker are shared with every other session).
        dialogue: ``(speaker, text)`` messages so far, speaker ``"user"`` or ``"agent"``.
        turns: The :class:`TurnResult` of every turn.
        likes: Ids the user said they like, oldest first (profile memory).
        dislikes: Ids the user said they do not want, oldest first (profile memory).
    """

    session_id: str
    ctx: ToolContext
    dialogue: list[tuple[str, str]] = field(default_factory=list)
    turns: list[TurnResult] = field(default_factory=list)
    likes: list[str] = field(default_factory=list)
    dislikes: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, session_id: str, ctx: ToolContext, map_n: int | None = None) -> AgentSession:
        """A new session on a copy of ``ctx`` with a fresh bus of all items.

        Args:
            session_id: The label.
            ctx: The shared context (table, ItemCF, ranker, embedding function).
            map_n: Recommendations per turn when a plan does not say (default ``ctx.map_n``).
        """
        bus = CandidateBus(ctx.table.ids, cap=ctx.bus.cap, seed=ctx.bus.seed)
        own = dataclasses.replace(ctx, bus=bus, map_n=ctx.map_n if map_n is None else map_n)
        own._item_vectors = ctx._item_vectors  # not an init field: share the computed vectors
        return cls(session_id=session_id, ctx=own)

    def remember(self, result: TurnResult) -> None:
        """Add a finished turn to the dialogue memory and the turn list."""
        self.dialogue += [("user", result.user_text), ("agent", result.reply)]
        self.turns.append(result)

    def update_profile(self, likes: Sequence[str], dislikes: Sequence[str]) -> ProfileUpdate:
        """Ground stated likes and dislikes to item ids and remember them.

        Titles are matched with :meth:`ItemTable.match_titles` (the context's threshold);
        what matches nothing is reported, not remembered. The latest statement wins: a
        title liked now leaves the dislikes, and the other way round.
        """
        added: dict[str, list[str]] = {"likes": [], "dislikes": []}
        unmatched: list[str] = []
        for key, titles, other in (
            ("likes", likes, self.dislikes),
            ("dislikes", dislikes, self.likes),
        ):
            kept: list[str] = getattr(self, key)
            for match in self.ctx.table.match_titles(list(titles), self.ctx.title_min_score):
                if match.item_id is None:
                    unmatched.append(match.query)
                    continue
                if match.item_id in other:
                    other.remove(match.item_id)
                if match.item_id not in kept:
                    kept.append(match.item_id)
                    added[key].append(match.item_id)
        return ProfileUpdate(tuple(added["likes"]), tuple(added["dislikes"]), tuple(unmatched))

    def profile_titles(self) -> tuple[list[str], list[str]]:
        """The remembered likes and dislikes as display titles (``"Fargo (1996)"``)."""
        table = self.ctx.table
        return (
            [table.display_title(i) for i in self.likes],
            [table.display_title(i) for i in self.dislikes],
        )

    def profile_text(self) -> str | None:
        """The profile as prompt lines, or ``None`` while it is empty."""
        likes, dislikes = self.profile_titles()
        if not likes and not dislikes:
            return None
        lines = ["What the user has said about their taste so far:"]
        lines.append("- likes: " + ("; ".join(likes) if likes else "(nothing named)"))
        lines.append("- does not want: " + ("; ".join(dislikes) if dislikes else "(nothing named)"))
        return "\n".join(lines)
