"""Agent4Rec's prompts: pure builders of every message an agent gets, reply schemas, parsers.

Kept apart from the loop so each prompt can be read and tested without an LLM: the persona
prompt, the page reaction, the exit decision, the reflection, the interview and the taste
probe's schema, plus :data:`TRAIT_SENTENCES`, the trait wording of the agents' role prompt.
Every reply refers to items by their number on the page, never by title.
The trait wording is data, ``recagents/resources/agent4rec_traits.json``, validated against
:data:`TRAITS_SCHEMA` by :func:`load_trait_sentences` and read when this module is imported
(one small JSON file, validated with jsonschema, whose import takes about a second once per
process).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recagents.llm.schemas import list_schema
from recagents.papers.agent4rec.config import TRAITS
from recagents.resources import read_resource, resource

if TYPE_CHECKING:
    from recagents.papers.agent4rec.agents import Agent


#: The trait levels a sentence is written for (as in :data:`TRAIT_CUTS`: 1 low, 3 high).
_LEVELS = ("1", "2", "3")

#: Schema of ``agent4rec_traits.json``: ``{"traits": {trait: {level: sentence}}}``, one
#: sentence for every level of every trait in :data:`TRAITS`.
TRAITS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["traits"],
    "additionalProperties": False,
    "properties": {
        "_about": {"type": "string"},
        "traits": {
            "type": "object",
            "required": list(TRAITS),
            "additionalProperties": False,
            "properties": {
                trait: {
                    "type": "object",
                    "required": list(_LEVELS),
                    "additionalProperties": False,
                    "properties": {level: {"type": "string", "minLength": 1} for level in _LEVELS},
                }
                for trait in TRAITS
            },
        },
    },
}


@cache
def load_trait_sentences(path: Path | Traversable | None = None) -> dict[str, dict[int, str]]:
    """Trait -> level -> sentence from ``path``, levels as ints, in file order.

    Args:
        path: The file (default: the packaged ``agent4rec_traits.json``).

    Raises:
        ResourceError: The file does not match :data:`TRAITS_SCHEMA`.
    """
    data = read_resource(path or resource("agent4rec_traits.json"), TRAITS_SCHEMA)
    return {
        trait: {int(level): text for level, text in levels.items()}
        for trait, levels in data["traits"].items()
    }


TRAIT_SENTENCES: dict[str, dict[int, str]] = load_trait_sentences()
"""Trait -> level -> one behaviour sentence for the agent's role prompt (our own wording).

Read from ``recagents/resources/agent4rec_traits.json`` when this module is imported."""


def persona_schema() -> dict[str, Any]:
    """The persona reply: up to four tastes with reasons, and the rating tendencies."""
    text = {"type": "string", "maxLength": 150}
    return {
        "type": "object",
        "properties": {
            "tastes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"taste": text, "reason": text},
                    "required": ["taste", "reason"],
                },
                "minItems": 1,
                "maxItems": 4,
            },
            "rates_high": text,
            "rates_low": text,
        },
        "required": ["tastes", "rates_high", "rates_low"],
    }


def persona_messages(rated: Sequence[tuple[str, float]], domain: str = "movie") -> list:
    """Ask for a taste persona from ``(item line, rating)`` pairs, grouped by star value."""
    groups: dict[int, list[str]] = {}
    for line, rating in rated:
        groups.setdefault(int(round(rating)), []).append(line)
    listed = "\n".join(
        f"Rated {stars}/5: " + " | ".join(groups[stars]) for stars in sorted(groups, reverse=True)
    )
    return [
        {
            "role": "system",
            "content": f"You describe a viewer's taste in {domain}s from their ratings.",
        },
        {
            "role": "user",
            "content": (
                f"A viewer rated these {domain}s:\n{listed}\n"
                f"Describe their taste in up to four short points, each with the reason the "
                f"ratings suggest, then say in one sentence which {domain}s they rate highly "
                f'and in one which they rate low. Reply in JSON with "tastes" (a list of '
                f'{{"taste", "reason"}}), "rates_high" and "rates_low".'
            ),
        },
    ]


def persona_text(data: Any) -> str | None:
    """The persona as the simulator uses it (tastes and what is rated highly), or ``None``."""
    if not isinstance(data, dict) or not isinstance(data.get("tastes"), list):
        return None
    tastes = []
    for taste in data["tastes"]:
        if not isinstance(taste, dict) or not isinstance(taste.get("taste"), str):
            continue
        reason = taste.get("reason")
        reason = reason if isinstance(reason, str) else ""
        if taste["taste"].strip():
            tastes.append(
                f"- {taste['taste'].strip()}" + (f" ({reason.strip()})" if reason.strip() else "")
            )
    if not tastes:
        return None
    high = data.get("rates_high") if isinstance(data.get("rates_high"), str) else ""
    return "My tastes:\n" + "\n".join(tastes) + (f"\nI rate highly: {high.strip()}" if high else "")


def _role(agent: Agent, sentences: dict[str, dict[int, str]], domain: str) -> str:
    traits = " ".join(sentences[t][agent.traits[t]] for t in TRAITS)
    return (
        f"You play a user of a {domain} recommendation website. Stay in character.\n"
        f"Your habits: {traits}\n{agent.persona}"
    )


def _memories(recalled: Sequence[str]) -> str:
    if not recalled:
        return ""
    return "\nWhat you remember of this visit:\n" + "\n".join(f"- {m}" for m in recalled)


def page_schema(n: int) -> dict[str, Any]:
    """A page reaction: one judgement per shown item, in page order."""
    judgement = {
        "type": "object",
        "properties": {
            "aligned": {"type": "boolean"},
            "watch": {"type": "boolean"},
            "rating": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
            "feeling": {"type": "string", "maxLength": 200},
        },
        "required": ["aligned", "watch", "rating", "feeling"],
    }
    return list_schema("items", judgement, n)


def page_messages(
    agent: Agent,
    page: int,
    shown: Sequence[str],
    recalled: Sequence[str],
    sentences: dict[str, dict[int, str]],
    domain: str = "movie",
) -> list:
    """The page reaction: judge each item, pick what to watch, rate it with a feeling."""
    listed = "\n".join(f"{k}. {line}" for k, line in enumerate(shown, start=1))
    user = (
        f"Page {page} of your recommendations:\n{listed}\n"
        f"For every {domain}, in this order: say whether it matches your taste (aligned), "
        f"whether you watch it (watch) — pick only among those that match your taste, as "
        f"many as your habits say — and, "
        f"if you watch it, rate it 1-5 as if seeing it for the first time, in the way your "
        f"habits say you rate, with a one-sentence feeling. For a {domain} you do not watch, "
        f'give rating 1 and an empty feeling. Reply in JSON: "items", one object per {domain}.'
    )
    return [
        {"role": "system", "content": _role(agent, sentences, domain) + _memories(recalled)},
        {"role": "user", "content": user},
    ]


def parse_page(data: Any, n: int) -> list[dict[str, Any]] | None:
    """Per shown item: aligned, watched, rating (None unless watched) and feeling.

    Returns ``None`` when the reply does not judge exactly ``n`` items.
    """
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        return None
    judged = data["items"]
    if len(judged) != n or not all(isinstance(j, dict) for j in judged):
        return None
    out = []
    for entry in judged:
        watched = entry.get("watch") is True
        rating = entry.get("rating")
        valid_rating = isinstance(rating, int) and not isinstance(rating, bool)
        valid_rating = valid_rating and 1 <= rating <= 5
        out.append(
            {
                "aligned": entry.get("aligned") if isinstance(entry.get("aligned"), bool) else None,
                "watched": watched,
                "rating": float(rating) if watched and valid_rating else None,
                "feeling": str(entry.get("feeling") or "") if watched else "",
            }
        )
    return out


def exit_schema() -> dict[str, Any]:
    """The exit decision: how the agent feels, and whether it leaves."""
    return {
        "type": "object",
        "properties": {
            "feeling": {"type": "string", "enum": ["positive", "negative"]},
            "decision": {"type": "string", "enum": ["next", "exit"]},
            "reason": {"type": "string", "maxLength": 300},
        },
        "required": ["feeling", "decision", "reason"],
    }


#: Fatigue by page, as the authors' exit prompt grades it: fresh on pages 1-2, a little tired
#: on pages 3-4, very tired from page 5.
_FATIGUE = {
    1: "",
    2: "",
    3: " You are getting a little tired.",
    4: " You are getting a little tired.",
}


def exit_messages(
    agent: Agent,
    page: int,
    recalled: Sequence[str],
    sentences: dict[str, dict[int, str]],
    domain: str = "movie",
) -> list:
    """Leave or turn the page: the activity habit, fatigue by page, and recent memories."""
    fatigue = _FATIGUE.get(page, " You are very tired.")
    system = (
        f"You play a user of a {domain} recommendation website. "
        f"{sentences['activity'][agent.traits['activity']]}" + _memories(recalled)
    )
    user = (
        f"You have just looked at page {page} of recommendations.{fatigue} How do you feel "
        f"about the recommendations so far, and do you turn to the next page or leave? You "
        f"leave when you feel negative or have had enough, the sooner the less active you are. "
        f'Reply in JSON: "feeling" (positive or negative), "decision" (next or exit), "reason".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def interview_schema() -> dict[str, Any]:
    """The satisfaction interview: 1-10 and why."""
    return {
        "type": "object",
        "properties": {
            "satisfaction": {"type": "integer", "enum": list(range(1, 11))},
            "reason": {"type": "string", "maxLength": 400},
        },
        "required": ["satisfaction", "reason"],
    }


def interview_messages(
    agent: Agent, sentences: dict[str, dict[int, str]], domain: str = "movie"
) -> list:
    """After leaving: rate the recommender 1-10 from the whole memory of the visit."""
    system = _role(agent, sentences, domain) + _memories(agent.memory)
    user = (
        "You have left the website. How satisfied are you with its recommendations, from 1 "
        '(not at all) to 10 (completely)? Reply in JSON: "satisfaction" and "reason".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def reflection_messages(agent: Agent, domain: str = "movie") -> list:
    """Condense the visit so far into one sentence on how satisfied the agent is, and why."""
    listed = "\n".join(f"- {m}" for m in agent.memory[-4:])
    return [
        {"role": "system", "content": f"You play a user of a {domain} recommendation website."},
        {
            "role": "user",
            "content": (
                f"What happened in your visit so far:\n{listed}\nIn one sentence, are you "
                f'satisfied or unsatisfied with the recommendations, and why? JSON key "sentence".'
            ),
        },
    ]


SENTENCE_SCHEMA = {
    "type": "object",
    "properties": {"sentence": {"type": "string", "maxLength": 300}},
    "required": ["sentence"],
}


def taste_schema(n: int) -> dict[str, Any]:
    """The taste probe: watch yes/no for each of ``n`` numbered items, in order."""
    return list_schema("watch", {"type": "boolean"}, n)


def taste_messages(agent: Agent, shown: Sequence[str], domain: str = "movie") -> list:
    """The taste probe: from its persona alone, would the agent watch each numbered item?"""
    listed = "\n".join(f"{k}. {line}" for k, line in enumerate(shown, start=1))
    system = f"You are a {domain} viewer.\n{agent.persona}"
    user = (
        f"{domain.capitalize()}s:\n{listed}\nFor each one, in order, would you watch it given "
        f'your taste? Reply in JSON: "watch", one true or false per {domain}.'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
