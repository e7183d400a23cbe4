"""InteRecAgent's simulated user: who it is, what it wants, and what it says.

:func:`make_sessions` builds the simulated users (per user the last known titles and the
held-out test item, as a :class:`SessionSet`); :func:`simulator_messages` is its prompt and
:func:`simulate_turn` asks for the next message of every open session, with the paper's
leak check (a message too close to the target title is regenerated, then used and counted).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from recagents.columns import ITEM, USER
from recagents.data.datasets import Dataset, Split, chronological_order
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.runlog import RunLog, ask
from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.config import END, SimulatorConfig
from recagents.papers.interecagent.scoring import leaks

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
            (``recagents.data.datasets.leave_one_out(dataset, min_rating=3)``).
        dataset: The dataset (titles, years, genres).
        users: ``None`` (every test user), a number (a seeded sample of test users, see
            :func:`recagents.data.datasets.subsample_users`) or the user ids.
        seed: Seed of the user sample.
        history_length: Titles of history per user (paper: 10).
        include_valid: The history ends with the validation item (everything known before
            the target, as a test-time model sees it); ``False`` uses the training part only.
        table: The item table (default: built from ``dataset`` with popularity from the
            known interactions, ``split.history("test")``).
        domain: Item noun of a table built here.
    """
    from recagents.data.datasets import subsample_users

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
