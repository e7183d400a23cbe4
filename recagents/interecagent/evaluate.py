"""InteRecAgent's evaluation: a simulated user in multi-turn chats, and the one-turn tasks.

The paper's main protocol lets an LLM play a user who wants one held-out item (the
*target*): it knows its history and the target's title and attributes, speaks first,
describes the target without naming it (at most two hints at a time), turns other items down
and ends with ``<END>`` once the target is recommended. A conversation has at most five
turns; **Hit@5** is the share of conversations in which the agent recommended the target and
**AT@5** the mean turn of that hit (a miss counts 6, lower is better). The one-turn tasks ask
for five recommendations from the simulator's first message (**Recall@5**) and for a
ranking of the target among 19 random unseen items (**NDCG** ``1/log2(rank+1)``).

What is here, in the order a run uses it:

- :class:`SimulatorConfig`, :func:`make_sessions`: the simulated users (per user the last
  10 known titles and the held-out test item of a leave-one-out split, ratings >= 3).
- :func:`simulator_messages` and :func:`simulate_turn`: the user simulator, with the paper's
  leak check (a message too close to the target title is regenerated up to five times, then
  used anyway and *counted*; optionally the conversation is dropped).
- :func:`run_sessions`: the conversations, turn by turn across all open sessions.
- :func:`conversation_metrics`: Hit@5 and AT@5 with bootstrap intervals, by id and by the
  paper's fuzzy rule.
- :func:`one_turn_retrieval`, :func:`one_turn_ranking`, :func:`one_turn_metrics`: the
  one-turn tasks for the agent, the LLM-only baseline, Random and Pop.
- :func:`session_trace`: one conversation as readable text.

Deviations, each deliberate: hits are judged by id (the target among the ids the agent
recommended that turn) *and* by the paper's fuzzy rule over the reply; a conversation goes on
until both rules have hit (``stop_on="both"``), so each rule's hit turn is what it would be if
it alone ended the conversation. The one-turn dialogue is the simulator's first message (the
paper's GPT-4 dialogue-generation prompt is not released).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data import POSITION, Dataset, Split, candidate_sets, chronological_order
from recagents.interecagent.agent import (
    AgentSession,
    InteRecConfig,
    TurnResult,
    llm_only_turns,
    run_turns,
)
from recagents.interecagent.tools import (
    ItemTable,
    ToolContext,
    fuzzy_hit,
    hit_at_k_and_at,
    leaks,
    popular_recommend,
    random_recommend,
    ranking_ndcg,
    recall_at_k,
)
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.runlog import RunLog, ask
from recagents.metrics import bootstrap_ci
from recagents.protocol import RankingParse, parse_ranking, ranking_schema

__all__ = [
    "END",
    "METHODS",
    "ConversationRun",
    "SessionSet",
    "SessionSpec",
    "SimMessage",
    "SimulatorConfig",
    "conversation_metrics",
    "make_sessions",
    "one_turn_metrics",
    "one_turn_ranking",
    "one_turn_retrieval",
    "parse_simulator_reply",
    "ranking_task_messages",
    "run_sessions",
    "session_trace",
    "simulate_turn",
    "simulator_messages",
    "simulator_schema",
    "target_attributes",
]

#: The marker a simulated user writes when it got its item.
END = "<END>"
#: Methods of the evaluation: the agent, the LLM without tools, and (one-turn only) baselines.
METHODS = ("InteRecAgent", "LLM only", "Random", "Pop")


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class SimulatorConfig:
    """The user simulator and the hit rules; the defaults are the paper's.

    Attributes:
        temperature: Simulator sampling temperature (paper: 0.8).
        sees_title: The simulator is told the target's title (paper: yes, which is why its
            messages can leak it); ``False`` gives it the attributes only.
        max_regenerations: Regenerations of a leaking message (paper: 5), then it is used.
        leak_threshold: Fuzzy partial ratio at or above which a message leaks (paper: 60).
        hit_threshold: Fuzzy partial ratio above which a reply hits (paper: 80).
        drop_leaking: End a conversation whose message still leaks after the regenerations
            and leave it out of :func:`conversation_metrics` (paper: keep it).
        stop_on: When a conversation ends early: ``"both"`` (both hit rules have hit; each
            rule's hit turn is then unaffected by the other), ``"either"``, ``"id"`` or
            ``"fuzzy"`` (the paper's).
        max_hints: Most hints per message the simulator is told to give (paper: about 2).
        message_chars: Longest simulator message the schema allows.
        max_tokens: Most generated tokens per simulator message.
        seed: Sampling seed; regeneration *r* uses ``seed + r`` and cache sample index *r*.
    """

    temperature: float = 0.8
    sees_title: bool = True
    max_regenerations: int = 5
    leak_threshold: float = 60.0
    hit_threshold: float = 80.0
    drop_leaking: bool = False
    stop_on: Literal["both", "either", "id", "fuzzy"] = "both"
    max_hints: int = 2
    message_chars: int = 400
    max_tokens: int = 120
    seed: int = 0

    def __post_init__(self) -> None:
        if self.stop_on not in ("both", "either", "id", "fuzzy"):
            raise ValueError(f"stop_on must be both, either, id or fuzzy, got {self.stop_on!r}")
        if self.max_regenerations < 0:
            raise ValueError(f"max_regenerations must be >= 0, got {self.max_regenerations}")


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class SessionSpec:
    """One simulated user: what it has seen and the item it wants.

    Attributes:
        user: The user id.
        history: The last known item ids, oldest first.
        history_titles: Their titles with year.
        target: The held-out test item id.
        target_title: Its title without the year (what the hit and leak rules compare).
        target_display: Its title with the year.
        target_attributes: Its attributes in words (year, genres, popularity, rating).
    """

    user: str
    history: tuple[str, ...]
    history_titles: tuple[str, ...]
    target: str
    target_title: str
    target_display: str
    target_attributes: str


@dataclass(frozen=True)
class SessionSet:
    """The simulated users of one evaluation, the item table and the split they come from."""

    sessions: tuple[SessionSpec, ...]
    table: ItemTable
    split: Split

    def __len__(self) -> int:
        return len(self.sessions)

    def __iter__(self) -> Iterator[SessionSpec]:
        return iter(self.sessions)

    @property
    def users(self) -> list[str]:
        """The user ids, in order."""
        return [s.user for s in self.sessions]

    def frame(self) -> pd.DataFrame:
        """One row per session, for a notebook table."""
        return pd.DataFrame(
            [
                {USER: s.user, "target": s.target, "target_title": s.target_display,
                 "attributes": s.target_attributes, "history": "; ".join(s.history_titles)}
                for s in self.sessions
            ]
        )  # fmt: skip


def target_attributes(table: ItemTable, item_id: str) -> str:
    """An item's attributes in words: release year, genres, and how popular and liked it is."""
    row = table.rows[item_id]
    parts = []
    if row.release_year is not None:
        parts.append(f"released in {row.release_year}")
    if row.tags:
        parts.append(f"genres: {row.tags}")
    counts = table.popularity(table.ids)
    share = float((counts < row.visited_num).mean())
    parts.append("popular" if share >= 0.8 else "not very well known" if share < 0.5 else
                 "fairly well known")  # fmt: skip
    if row.avg_rating is not None:
        parts.append(f"average rating {row.avg_rating:.1f} of 5")
    return "; ".join(parts)


def make_sessions(
    split: Split,
    dataset: Dataset,
    users: int | Sequence[str] | None = None,
    seed: int = 0,
    history_length: int = 10,
    include_valid: bool = True,
    table: ItemTable | None = None,
    domain: str = "movie",
) -> SessionSet:
    """The simulated users: per user the last known titles and the held-out test item.

    Args:
        split: A leave-one-out split; the paper keeps ratings >= 3
            (``recagents.data.leave_one_out(dataset, min_rating=3)``).
        dataset: The dataset (titles, years, genres).
        users: ``None`` (every test user), a number (a seeded sample of test users, see
            :func:`recagents.data.subsample_users`) or the user ids.
        seed: Seed of the user sample.
        history_length: Titles of history per user (paper: 10).
        include_valid: The history ends with the validation item (everything known before
            the target, as a test-time model sees it); ``False`` uses the training part only.
        table: The item table (default: built from ``dataset`` with popularity from the
            known interactions, ``split.history("test")``).
        domain: Item noun of a table built here.
    """
    from recagents.data import subsample_users

    known = split.history("test") if include_valid else split.train
    table = table or ItemTable.from_dataset(dataset, split.history("test"), domain=domain)
    if users is None or isinstance(users, int):
        chosen = subsample_users(split, users, seed=seed)
    else:
        chosen = [str(u) for u in users]
    targets = split.test.set_index(USER)[ITEM]
    missing = [u for u in chosen if u not in targets.index]
    if missing:
        raise ValueError(f"{len(missing)} user(s) have no test item, e.g. {missing[:3]}")
    ordered = chronological_order(known[known[USER].isin(set(chosen))])
    histories = ordered.groupby(USER, sort=False)[ITEM].agg(list).to_dict()
    specs = []
    for user in chosen:
        history = tuple(str(i) for i in histories.get(user, [])[-history_length:])
        target = str(targets[user])
        specs.append(
            SessionSpec(
                user=user,
                history=history,
                history_titles=tuple(table.display_title(i) for i in history),
                target=target,
                target_title=table.rows[target].title,
                target_display=table.display_title(target),
                target_attributes=target_attributes(table, target),
            )
        )
    return SessionSet(sessions=tuple(specs), table=table, split=split)


# --------------------------------------------------------------------------- simulator


def simulator_schema(sim: SimulatorConfig | None = None) -> dict[str, Any]:
    """The simulator's reply: ``{"message": str}``."""
    sim = sim or SimulatorConfig()
    return {
        "type": "object",
        "properties": {"message": {"type": "string", "maxLength": sim.message_chars}},
        "required": ["message"],
        "additionalProperties": False,
    }


def simulator_messages(
    history_titles: Sequence[str],
    target_title: str,
    target_attributes: str,
    dialogue: Sequence[tuple[str, str]],
    sees_title: bool = True,
    domain: str = "movie",
    max_hints: int = 2,
) -> list[dict[str, str]]:
    """The user simulator's prompt for its next message.

    It plays a user who wants the target, knows its history, speaks first, describes the
    target by its attributes without naming it (at most ``max_hints`` hints at a time),
    turns down other items and writes ``<END>`` once the target is recommended.

    Args:
        history_titles: The user's history, oldest first.
        target_title: The target's title (shown only with ``sees_title``).
        target_attributes: The target's attributes in words.
        dialogue: ``(speaker, text)`` so far, speaker ``"user"`` (the simulator) or ``"agent"``.
        sees_title: Whether the simulator is told the title.
        domain: Item noun.
        max_hints: Most hints per message.
    """
    d = domain
    history = "; ".join(history_titles) if history_titles else "(none)"
    wanted = (
        f"Today you want to watch one particular {d}: {target_title} ({target_attributes}). "
        f"Never write its title or any part of it."
        if sees_title
        else f"Today you want a particular {d} with these attributes: {target_attributes}."
    )
    system = " ".join(
        [
            f"You play a user chatting with {d} recommendation assistant.",
            f"You have enjoyed these {d}s, oldest first: {history}.",
            wanted,
            f"Describe what you want by its attributes (genres, era, mood, how well known it "
            f"is), at most {max_hints} hints per message.",
            f"If the assistant recommends other {d}s, say they are not what you want and give "
            f"a new hint. If its recommendations include your {d}, thank it and end your "
            f"message with {END}.",
            'Write short messages (under 40 words). Reply with JSON: {"message": "<text>"}.',
        ]
    )
    if dialogue:
        lines = ["The conversation so far:"]
        for speaker, text in dialogue:
            who = "You" if speaker == "user" else "Assistant"
            lines.append(f"{who}: {' '.join(str(text).split())}")
        lines.append("Write your next message to the assistant.")
    else:
        lines = ["Write the first message you send to the assistant."]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def parse_simulator_reply(data: Any) -> tuple[str | None, bool]:
    """``(message without the end marker, ended)``; message ``None`` when unusable."""
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        return None, False
    text = data["message"]
    ended = END.lower() in text.lower()
    if ended:
        index = text.lower().index(END.lower())
        text = text[:index] + text[index + len(END) :]
    return " ".join(text.split()), ended


@dataclass
class SimMessage:
    """One simulated-user message.

    Attributes:
        text: The message (``""`` when the simulator failed).
        ended: The simulator wrote ``<END>``.
        leaked: The message used still leaks the target (after every regeneration).
        regenerations: How many times it was regenerated because it leaked.
        calls: Simulator requests made for it.
        ok: Whether a usable message came back.
    """

    text: str
    ended: bool = False
    leaked: bool = False
    regenerations: int = 0
    calls: int = 0
    ok: bool = True


def simulate_turn(
    specs: Sequence[SessionSpec],
    dialogues: dict[str, list[tuple[str, str]]],
    sim: SimulatorConfig,
    client: LLMClient,
    log: RunLog,
    domain: str = "movie",
    phase: str = "simulator",
) -> list[SimMessage]:
    """The next simulated-user message of every session, leak-checked and batched.

    A message whose fuzzy partial ratio with the target title is at least
    ``sim.leak_threshold`` is regenerated (all such sessions in one batch), at most
    ``sim.max_regenerations`` times; regeneration *r* uses cache sample *r* and seed
    ``sim.seed + r``, so each is a distinct request. A message still leaking is used anyway
    and flagged (the paper's behaviour).
    """
    schema = simulator_schema(sim)
    messages = {
        s.user: simulator_messages(
            s.history_titles,
            s.target_title,
            s.target_attributes,
            dialogues.get(s.user, []),
            sim.sees_title,
            domain,
            sim.max_hints,
        )  # fmt: skip
        for s in specs
    }
    out = {s.user: SimMessage(text="") for s in specs}
    todo = list(specs)
    for attempt in range(sim.max_regenerations + 1):
        if not todo:
            break
        requests = [
            ChatRequest(
                messages=messages[s.user],
                schema=schema,
                temperature=sim.temperature,
                max_tokens=sim.max_tokens,
                seed=sim.seed + attempt,
                sample=attempt,
                tag=s.user,
            )
            for s in todo
        ]
        results = ask(client, log, phase, "simulator", requests, desc=f"{phase}: user message")
        again = []
        for spec, result in zip(todo, results, strict=True):
            message = out[spec.user]
            message.calls += 1
            message.regenerations = attempt
            text, ended = parse_simulator_reply(result.data) if result.ok else (None, False)
            if text is None:
                message.text, message.ended, message.ok, message.leaked = "", False, False, False
                continue
            message.text, message.ended, message.ok = text, ended, True
            message.leaked = leaks(text, spec.target_title, sim.leak_threshold)
            if message.leaked and attempt < sim.max_regenerations:
                again.append(spec)
        todo = again
    return [out[s.user] for s in specs]


# --------------------------------------------------------------------------- conversations


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


def _agent_turns(
    method: str,
    sessions: Sequence[AgentSession],
    texts: Sequence[str],
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    keep_prompts: bool | Collection[str],
    embed: Callable[[Sequence[str]], np.ndarray] | None,
    notes: dict[str, str] | None = None,
) -> list[TurnResult]:
    if method == "InteRecAgent":
        return run_turns(sessions, texts, config, client, log, phase=method,
                         keep_prompts=keep_prompts, embed=embed, notes=notes)  # fmt: skip
    if method == "LLM only":
        return llm_only_turns(sessions, texts, config, client, log, phase=method,
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
    recommended this turn) and by the paper's fuzzy rule (``tools.fuzzy_hit`` over the
    reply); sessions close per ``sim.stop_on`` or after ``max_turns``.

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
    agents = {s.user: AgentSession.start(s.user, ctx, map_n=config.map_n) for s in specs}
    dialogues: dict[str, list[tuple[str, str]]] = {s.user: [] for s in specs}
    said: dict[str, list[SimMessage]] = {s.user: [] for s in specs}
    state = {s.user: {"id": None, "fuzzy": None, "ended_by": None} for s in specs}
    turn_rows: list[dict[str, Any]] = []
    open_specs = specs
    for turn in range(1, max_turns + 1):
        if not open_specs:
            break
        messages = simulate_turn(open_specs, dialogues, sim, client, log, config.domain)
        talking, texts = [], []
        for spec, message in zip(open_specs, messages, strict=True):
            said[spec.user].append(message)
            if not message.ok:
                state[spec.user]["ended_by"] = "simulator_failed"
            elif message.ended and turn > 1:
                state[spec.user]["ended_by"] = "user"
            elif message.leaked and sim.drop_leaking:
                state[spec.user]["ended_by"] = "leak"
            else:
                talking.append(spec)
                texts.append(message.text)
            if message.ok:
                dialogues[spec.user].append(("user", message.text))
        results = _agent_turns(method, [agents[s.user] for s in talking], texts, config,
                               client, log, keep_prompts, embed)  # fmt: skip
        still = []
        for spec, text, result in zip(talking, texts, results, strict=True):
            dialogues[spec.user].append(("agent", result.reply))
            hit_id = spec.target in result.recommended_ids
            hit_fz = fuzzy_hit(result.reply, spec.target_title, sim.hit_threshold)
            st = state[spec.user]
            if hit_id and st["id"] is None:
                st["id"] = turn
            if hit_fz and st["fuzzy"] is None:
                st["fuzzy"] = turn
            message = said[spec.user][-1]
            turn_rows.append(
                {
                    "method": method, USER: spec.user, "turn": turn, "user_text": text,
                    "leaked": message.leaked, "regenerations": message.regenerations,
                    "reply": result.reply, "kind": result.kind,
                    "recommended": list(result.recommended_ids), "hit_id": hit_id,
                    "hit_fuzzy": hit_fz, "calls": result.n_calls,
                    "plan_failures": result.plan_failures, "reflections": result.reflections,
                }
            )  # fmt: skip
            if _stops(sim.stop_on, st["id"], st["fuzzy"]):
                st["ended_by"] = "hit"
            elif turn < max_turns:
                still.append(spec)
            else:
                st["ended_by"] = "max_turns"
        open_specs = still
    rows = []
    for spec in specs:
        st = state[spec.user]
        mine = [r for r in turn_rows if r[USER] == spec.user]
        messages = said[spec.user]
        rows.append(
            {
                "method": method, USER: spec.user, "target": spec.target, "turns": len(mine),
                "hit_id": st["id"] is not None, "turn_id": st["id"],
                "hit_fuzzy": st["fuzzy"] is not None, "turn_fuzzy": st["fuzzy"],
                "ended_by": st["ended_by"] or "max_turns",
                "leaks": sum(m.leaked for m in messages),
                "regenerations": sum(m.regenerations for m in messages),
                "calls": sum(r.n_calls for r in agents[spec.user].turns),
                "sim_calls": sum(m.calls for m in messages),
                "plan_failures": sum(r.plan_failures for r in agents[spec.user].turns),
                "reflections": sum(r.reflections for r in agents[spec.user].turns),
                "profile_failures": sum(r.profile_failures for r in agents[spec.user].turns),
                "unmatched": sum(r.unmatched for r in agents[spec.user].turns),
                "dropped": st["ended_by"] == "leak",
            }
        )  # fmt: skip
    sessions_frame = pd.DataFrame(rows).astype({"turn_id": "Int64", "turn_fuzzy": "Int64"})
    turn_columns = ["method", USER, "turn", "user_text", "leaked", "regenerations", "reply",
                    "kind", "recommended", "hit_id", "hit_fuzzy", "calls", "plan_failures",
                    "reflections"]  # fmt: skip
    return ConversationRun(
        method=method,
        sessions=sessions_frame,
        turns=pd.DataFrame(turn_rows, columns=turn_columns),
        agents=agents,
        simulator=said,
        specs={s.user: s for s in specs},
        sim=sim,
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


# --------------------------------------------------------------------------- one turn


def _first_messages(
    specs: Sequence[SessionSpec], sim: SimulatorConfig, client: LLMClient, log: RunLog, domain: str
) -> list[SimMessage]:
    """Each user's opening message (the same request as turn 1 of :func:`run_sessions`)."""
    return simulate_turn(specs, {s.user: [] for s in specs}, sim, client, log, domain)


def _known(split: Split, users: Collection[str]) -> dict[str, set[str]]:
    known = split.history("test")
    known = known[known[USER].isin(set(users))]
    return known.groupby(USER)[ITEM].agg(set).to_dict()


def one_turn_retrieval(
    sessions: SessionSet,
    ctx: ToolContext,
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    methods: Sequence[str] = METHODS,
    sim: SimulatorConfig | None = None,
    k: int = 5,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> pd.DataFrame:
    """One-turn retrieval: the simulator's first message, one answer, Recall@k by id.

    The agent and the LLM-only baseline answer the message once (a fresh session each);
    Random and Pop recommend ``k`` items the user has not interacted with (seeded per user;
    Pop by training popularity). A failed simulator message counts as a miss for the LLM
    methods (its request is empty).

    Returns:
        ``[method, user_id, recall, hit_fuzzy, calls, plan_failures, unmatched]``.
    """
    sim = sim or SimulatorConfig()
    specs = list(sessions)
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; use {METHODS}")
    rows = []
    llm_methods = [m for m in methods if m in ("InteRecAgent", "LLM only")]
    first = _first_messages(specs, sim, client, log, config.domain) if llm_methods else []
    known = _known(sessions.split, [s.user for s in specs])
    for method in methods:
        if method in ("Random", "Pop"):
            for n, spec in enumerate(specs):
                seen = known.get(spec.user, set())
                ids = (
                    random_recommend(sessions.table, k, seed=sim.seed + n, exclude=seen)
                    if method == "Random"
                    else popular_recommend(sessions.table, k, exclude=seen)
                )
                rows.append({"method": method, USER: spec.user,
                             "recall": recall_at_k(ids, spec.target, k), "hit_fuzzy": None,
                             "calls": 0, "plan_failures": 0, "unmatched": 0})  # fmt: skip
            continue
        agents = [AgentSession.start(s.user, ctx, map_n=k) for s in specs]
        results = _agent_turns(method, agents, [m.text for m in first],
                               replace(config, map_n=k), client, log, False, embed)  # fmt: skip
        for spec, result in zip(specs, results, strict=True):
            rows.append(
                {"method": method, USER: spec.user,
                 "recall": recall_at_k(result.recommended_ids, spec.target, k),
                 "hit_fuzzy": fuzzy_hit(result.reply, spec.target_title, sim.hit_threshold),
                 "calls": result.n_calls, "plan_failures": result.plan_failures,
                 "unmatched": result.unmatched}
            )  # fmt: skip
    return pd.DataFrame(rows)


def ranking_task_messages(
    request: str, candidate_titles: Sequence[str], domain: str = "movie"
) -> list[dict[str, str]]:
    """The LLM-only ranking prompt: the user's message and numbered candidates to order."""
    n = len(candidate_titles)
    numbered = "\n".join(f"{k}. {t}" for k, t in enumerate(candidate_titles, 1))
    system = (
        f"You are {'an' if domain[:1] in 'aeiou' else 'a'} {domain} recommendation assistant. "
        f"Rank candidate {domain}s for a user by how well they fit what the user asks for."
    )
    user = (
        f"The user's message: {request}\n\nCandidates:\n{numbered}\n\nRank all {n} candidates "
        f'from best to worst. Reply with JSON: {{"ranking": [candidate numbers, each from 1 '
        f"to {n} exactly once]}}."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _ranking_note(candidate_titles: Sequence[str], domain: str) -> str:
    listed = "; ".join(candidate_titles)
    return (
        f"Task: the user wants these {len(candidate_titles)} candidate {domain}s ordered, "
        f"best first. They are already the candidates (do not use candidate_store); filter "
        f"or rank them, and end with map_titles {len(candidate_titles)}. The candidates: "
        f"{listed}."
    )


def _target_rank(
    parse: RankingParse, target_index: int, missing: str, rng: np.random.Generator
) -> int | None:
    """1-based rank of the target; a target left out is ``None`` (paper) or placed at random."""
    if target_index in parse.order:
        return parse.order.index(target_index) + 1
    if missing == "zero" or parse.status == "failed":
        return None
    slots = len(parse.order) + len(parse.missing)
    return int(rng.integers(len(parse.order) + 1, slots + 1))


def one_turn_ranking(
    sessions: SessionSet,
    ctx: ToolContext,
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    methods: Sequence[str] = METHODS,
    sim: SimulatorConfig | None = None,
    n_negatives: int = 19,
    seed: int = 0,
    missing: Literal["zero", "random"] = "zero",
    cache_dir: Path | None = None,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> pd.DataFrame:
    """One-turn ranking of the target among ``n_negatives`` random unseen items.

    The candidates come from :func:`recagents.data.candidate_sets` (saved, shared with every
    method) in their display order. The request is the simulator's first message.

    - InteRecAgent: the candidates are put on the session's bus, the planner is told to order
      them (filters, rank, map_titles), and the order is the bus after the plan; a direct
      answer or a failed plan ranks nothing.
    - LLM only: the same LLM orders the numbered candidates under a JSON schema.
    - Random: a seeded permutation; Pop: training popularity.

    Every ranking is checked with :func:`recagents.protocol.parse_ranking` (a permutation of
    the candidate numbers; duplicates and strangers dropped and counted). NDCG is
    ``1/log2(rank+1)``; a target left out scores 0 (the paper's rule, ``missing="zero"``) or
    is placed at random after the ranked ones (``"random"``).

    Returns:
        ``[method, user_id, rank, ndcg, status, duplicates, out_of_range, n_missing, calls]``.
    """
    sim = sim or SimulatorConfig()
    if missing not in ("zero", "random"):
        raise ValueError(f"missing must be 'zero' or 'random', got {missing!r}")
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; use {METHODS}")
    specs = list(sessions)
    users = [s.user for s in specs]
    frame = candidate_sets(sessions.split, n_negatives, seed=seed, cache_dir=cache_dir)
    frame = frame[frame[USER].isin(set(users))].sort_values([USER, POSITION], kind="stable")
    candidates = {u: g[ITEM].astype(str).tolist() for u, g in frame.groupby(USER, sort=False)}
    positives = frame[frame[LABEL] == 1].set_index(USER)[ITEM].astype(str).to_dict()
    for spec in specs:
        if positives.get(spec.user) != spec.target:
            raise ValueError(f"user {spec.user}: the candidate set's positive is not the target")
    table = sessions.table
    n = n_negatives + 1
    llm_methods = [m for m in methods if m in ("InteRecAgent", "LLM only")]
    first = _first_messages(specs, sim, client, log, config.domain) if llm_methods else []
    rows = []
    for method in methods:
        orders: list[list[int]] = []
        calls = [0] * len(specs)
        if method == "Random":
            for k, _ in enumerate(specs):
                perm = np.random.default_rng(seed + k).permutation(n)
                orders.append([int(i) + 1 for i in perm])
        elif method == "Pop":
            for spec in specs:
                pop = table.popularity(candidates[spec.user])
                orders.append([int(i) + 1 for i in np.argsort(-pop, kind="stable")])
        elif method == "LLM only":
            schema = ranking_schema(n)
            requests = [
                ChatRequest(
                    messages=ranking_task_messages(
                        m.text, [table.display_title(i) for i in candidates[s.user]],
                        config.domain),
                    schema=schema, temperature=config.llm_only_temperature,
                    max_tokens=config.llm_only_max_tokens, seed=config.seed, tag=s.user,
                )
                for s, m in zip(specs, first, strict=True)
            ]  # fmt: skip
            results = client.map(requests, desc="LLM only: rank")
            log.add_calls("LLM only", "ranking", results)
            calls = [1] * len(specs)
            orders = [list(r.data.get("ranking", [])) if r.ok else [] for r in results]
        else:
            agents = []
            notes = {}
            for spec in specs:
                agent = AgentSession.start(spec.user, ctx, map_n=n)
                agent.ctx.bus.set(candidates[spec.user], "task", ordered=True)
                agents.append(agent)
                titles = [table.display_title(i) for i in candidates[spec.user]]
                notes[spec.user] = _ranking_note(titles, config.domain)
            ranked_config = replace(config, persistent_bus=True, map_n=n)
            results = run_turns(agents, [m.text for m in first], ranked_config, client, log,
                                phase=method, embed=embed, notes=notes)  # fmt: skip
            calls = [r.n_calls for r in results]
            for spec, result in zip(specs, results, strict=True):
                number = {item: k + 1 for k, item in enumerate(candidates[spec.user])}
                order = result.bus_after if result.kind == "plan" else []
                orders.append([number[i] for i in order if i in number])
        for k, (spec, order) in enumerate(zip(specs, orders, strict=True)):
            parse = parse_ranking({"ranking": order} if order else None, n)
            target_index = candidates[spec.user].index(spec.target)
            rng = np.random.default_rng(seed + 7919 * (k + 1))
            target_rank = _target_rank(parse, target_index, missing, rng)
            rows.append(
                {"method": method, USER: spec.user, "rank": target_rank,
                 "ndcg": ranking_ndcg(target_rank), "status": parse.status,
                 "duplicates": parse.duplicates, "out_of_range": parse.out_of_range,
                 "n_missing": len(parse.missing), "calls": calls[k]}
            )  # fmt: skip
    out = pd.DataFrame(rows)
    return out.astype({"rank": "Int64"}) if len(out) else out


def one_turn_metrics(
    frame: pd.DataFrame, value: str, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Mean of ``value`` (``recall`` or ``ndcg``) per method with a bootstrap interval.

    Returns:
        ``[method, metric, mean, low, high, n]``.
    """
    rows = []
    for method, group in frame.groupby("method", sort=False):
        values = group[value].astype(float).to_numpy()
        mean, low, high = bootstrap_ci(values, n_boot=n_boot, ci=ci, seed=seed)
        rows.append({"method": method, "metric": value, "mean": mean, "low": low, "high": high,
                     "n": len(values)})  # fmt: skip
    return pd.DataFrame(rows, columns=["method", "metric", "mean", "low", "high", "n"])


# --------------------------------------------------------------------------- teaching


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
    messages = run.simulator.get(user, [])
    for number, message in enumerate(messages, 1):
        out.append(f"--- turn {number}")
        notes = []
        if message.regenerations:
            notes.append(f"regenerated {message.regenerations}x")
        if message.leaked:
            notes.append("STILL LEAKS the target")
        if message.ended:
            notes.append("user ended")
        suffix = f"  [{', '.join(notes)}]" if notes else ""
        out.append(textwrap.fill(f"user: {message.text or '(simulator failed)'}{suffix}", width))
        if number > len(agent.turns):
            break
        result = agent.turns[number - 1]
        if prompts:
            for role, prompt, reply in result.prompts:
                if role in shown_roles:
                    continue
                shown_roles.add(role)
                out.append(f"  [{role} prompt, shown once]")
                out.append(_indent(prompt, "    | "))
                out.append(_indent(f"reply: {reply}", "    | "))
        if result.profile_update is not None or result.profile_failures:
            out.append(f"  profile memory: {_profile_line(result, table)}")
        for k, attempt in enumerate(result.attempts, 1):
            advice = f" (with advice: {attempt.advice_in})" if attempt.advice_in else ""
            out.append(f"  attempt {k}: {attempt.kind}{advice}")
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
            for problem in attempt.problems:
                out.append(f"    problem: {problem}")
            if attempt.verdict is not None:
                verdict = "yes" if attempt.verdict else "no"
                out.append(f"    critic: {verdict}" + (f" - {attempt.advice}" if
                                                         attempt.advice else ""))  # fmt: skip
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
    out.append(
        f"=== ended by {row['ended_by']}; hit by id: {bool(row['hit_id'])} "
        f"(turn {row['turn_id']}); fuzzy: {bool(row['hit_fuzzy'])} (turn {row['turn_fuzzy']})"
    )
    return "\n".join(out)
