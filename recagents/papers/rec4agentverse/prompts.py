"""Pure prompt builders, reply schemas and parsers for every LLM role of a session.

The simulated user (opening, reaction), the agent item (reply, report of what it learned)
and the LLM recommender (routing) each have a ``*_messages`` builder, a schema and a
parser; builders are pure functions of their inputs, so prompts can be read and tested
without a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recagents.papers.rec4agentverse.catalogue import AgentCard, Catalogue
from recagents.papers.rec4agentverse.config import (
    ERAS,
    GENRE_NAMES,
    UNKNOWN_ERA,
    Rec4AConfig,
    join_words,
)
from recagents.papers.rec4agentverse.recommender import Instruction, Profile, profile_from_text
from recagents.papers.rec4agentverse.users import SimUser

# --------------------------------------------------------------------------- prompts


def _hidden_taste(user: SimUser) -> str:
    """The user simulator's private brief (only its own prompts contain it)."""
    dislike = (
        f" You do not enjoy {join_words(user.disliked_genres)} films."
        if user.disliked_genres
        else ""
    )
    low, high = ERAS[user.era]
    span = f"before {high + 1}" if user.era == "pre-1970" else f"from {low} to {min(high, 1998)}"
    return (
        "You are a movie fan on a platform where curator agents suggest films. Your taste, "
        f"which you describe in your own words: you love {join_words(user.favourite_genres)} "
        f"films, most of all those released {span} ({user.era}).{dislike}"
    )


def _to_simulated_user(user: SimUser, ask: str) -> list[dict[str, str]]:
    """The simulated user's prompt: its private brief (hidden taste), then what it is asked."""
    return [{"role": "system", "content": _hidden_taste(user)}, {"role": "user", "content": ask}]


def object_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """A reply schema: a JSON object with these properties, all required, in this order."""
    return {"type": "object", "properties": properties, "required": list(properties)}


def user_opening_messages(user: SimUser, config: Rec4AConfig) -> list[dict[str, str]]:
    """The simulated user's first request to the platform (it names no title)."""
    ask = (
        "Write your first message to the platform: what you would like to watch, in one or "
        'two sentences, without naming titles. Reply in JSON: "message" is your message.'
    )
    return _to_simulated_user(user, ask)


def opening_schema(config: Rec4AConfig) -> dict[str, Any]:
    """The user's opening: one message."""
    return object_schema(message={"type": "string", "maxLength": config.message_chars})


def parse_opening(data: Any) -> str | None:
    """The opening message, or ``None`` if unusable (missing or blank)."""
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        return None
    text = data["message"].strip()
    return text or None


def user_reaction_messages(
    user: SimUser,
    agent_name: str,
    agent_message: str,
    films: Sequence[str],
    config: Rec4AConfig,
) -> list[dict[str, str]]:
    """The simulated user judges one turn's suggestions (same private brief first)."""
    listed = "\n".join(f"{i}. {text}" for i, text in enumerate(films, start=1))
    ask = (
        f'The curator "{agent_name}" says: "{agent_message}"\nIt suggests:\n{listed}\n'
        'Do these suit your taste? Reply in JSON: "comment" says in one sentence what you '
        'would like instead (or what you like), "satisfied" is "yes" or "no".'
    )
    return _to_simulated_user(user, ask)


def reaction_schema(config: Rec4AConfig) -> dict[str, Any]:
    """The user's reaction: a comment, then yes or no."""
    return object_schema(
        comment={"type": "string", "maxLength": config.message_chars},
        satisfied={"type": "string", "enum": ["yes", "no"]},
    )


def parse_reaction(data: Any) -> tuple[bool | None, str]:
    """``(satisfied, comment)``; ``satisfied`` is ``None`` unless yes or no."""
    if not isinstance(data, dict):
        return None, ""
    comment = data.get("comment")
    comment = comment.strip() if isinstance(comment, str) else ""
    word = data.get("satisfied")
    if not isinstance(word, str) or word.strip().casefold() not in ("yes", "no"):
        return None, comment
    return word.strip().casefold() == "yes", comment


def _about(user: SimUser) -> str:
    d = user.demographics
    parts = [f"{k}: {d[k]}" for k in ("age", "gender", "occupation", "zip") if k in d]
    return "; ".join(parts) if parts else "nothing"


def agent_messages(
    card: AgentCard,
    films: Sequence[str],
    instruction: Instruction | None,
    user: SimUser,
    dialogue: Sequence[tuple[str, str]],
    config: Rec4AConfig,
) -> list[dict[str, str]]:
    """An agent item's prompt for one turn: persona, instruction, shortlist, conversation.

    What is stable for an agent and instruction comes first (the local server reuses the
    prompt prefix); the user's account details and the conversation come last.
    """
    system = _agent_system(card)
    lines = []
    if instruction is not None and not instruction.empty:
        lines.append(instruction.text())
    lines.append("Your films:\n" + "\n".join(f"{i}. {t}" for i, t in enumerate(films, start=1)))
    lines.append(f"The user's account: {_about(user)}.")
    lines.append("The conversation so far:")
    lines.extend(f"{who}: {text}" for who, text in dialogue)
    lines.append(
        f'Reply in JSON: "message" is a short reply to the user (you may ask a question), '
        f'"picks" are the numbers of {config.k} different films from your list.'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def genre_list(max_items: int) -> dict[str, Any]:
    """Schema of a list of at most ``max_items`` genres of the closed vocabulary."""
    return {
        "type": "array",
        "items": {"type": "string", "enum": list(GENRE_NAMES)},
        "maxItems": max_items,
    }


def agent_schema(n_films: int, config: Rec4AConfig) -> dict[str, Any]:
    """An agent item's reply to the user: a message and ``k`` film numbers.

    What it learned is asked separately, after the user's reaction (:func:`report_messages`).
    """
    return object_schema(
        message={"type": "string", "maxLength": config.message_chars},
        picks={
            "type": "array",
            "items": {"type": "integer", "enum": list(range(1, n_films + 1))},
            "minItems": min(config.k, n_films),
            "maxItems": min(config.k, n_films),
        },
    )


@dataclass(frozen=True)
class AgentReply:
    """One usable agent turn.

    Attributes:
        message: What the agent said to the user.
        picks: Chosen films (distinct, in the agent's order; at most ``k``).
    """

    message: str
    picks: tuple[str, ...]


def parse_agent_reply(data: Any, films: Sequence[str], k: int) -> AgentReply | None:
    """An agent reply, or ``None`` if no usable film number is in it.

    Numbers are 1-based into ``films``; out-of-range or repeated numbers are dropped (a
    reply with fewer than ``k`` distinct films is kept, and Hit@k sees the shorter list).
    """
    if not isinstance(data, dict) or not isinstance(data.get("picks"), list):
        return None
    picks: list[str] = []
    for number in data["picks"]:
        if isinstance(number, bool) or not isinstance(number, int):
            continue
        if 1 <= number <= len(films) and films[number - 1] not in picks:
            picks.append(films[number - 1])
    if not picks:
        return None
    message = data.get("message")
    return AgentReply(message.strip() if isinstance(message, str) else "", tuple(picks[:k]))


def _card_lines(catalogue: Catalogue) -> str:
    return "\n".join(f"- {c.agent_id}: {c.name}. {c.description}" for c in catalogue.cards)


def recommender_messages(
    catalogue: Catalogue,
    profile: Profile,
    config: Rec4AConfig,
    request: str | None = None,
    current: str | None = None,
    report: str | None = None,
) -> list[dict[str, str]]:
    """The LLM recommender's prompt: the agent cards first, then what it knows of the user.

    Args:
        catalogue: The agents (their cards are the stable prefix).
        profile: The recommender's profile of the user.
        config: Prompt options.
        request: The user's opening request (first routing).
        current: The agent now serving the user, whose last list did not satisfy them.
        report: That agent's report as rendered by :func:`render_report`.
    """
    system = (
        "You are the recommender of an agent platform: you route each user to the one "
        f"movie curator agent that suits them best. The agents:\n{_card_lines(catalogue)}"
    )
    lines = [f"Your profile of the user: {profile.text()}."]
    if request is not None:
        lines.append(f'The user\'s request: "{request}"')
    if current is not None:
        lines.append(
            f"The user is talking to agent {current}, and its last suggestions did not "
            f"satisfy them. You may keep it or route the user to another agent."
        )
    if report is not None:
        lines.append(report)
    lines.append('Reply in JSON: "agent" is the id of the agent that should serve the user.')
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def recommender_schema(catalogue: Catalogue) -> dict[str, Any]:
    """The LLM recommender's reply: one agent id from the catalogue."""
    return object_schema(agent={"type": "string", "enum": list(catalogue.ids)})


def parse_choice(data: Any, catalogue: Catalogue) -> str | None:
    """The chosen agent id, or ``None`` if it is not one of the catalogue's."""
    if not isinstance(data, dict):
        return None
    agent = data.get("agent")
    return agent if isinstance(agent, str) and agent in catalogue.ids else None


def _agent_system(card: AgentCard) -> str:
    return (
        f'You are "{card.name}", a movie curator agent. {card.description} '
        f"Learn the user's taste and suggest films from your list."
    )


def report_messages(
    card: AgentCard,
    user: SimUser,
    dialogue: Sequence[tuple[str, str]],
    config: Rec4AConfig,
) -> list[dict[str, str]]:
    """The agent item notes what it learned, after the user reacted: its report.

    Asked in every stage; from stage 2 on it is sent to the recommender, in stage 1 it stays
    in the agent's own notes. Same persona first as in :func:`agent_messages`; no film list.
    """
    learn = (
        '"liked_genres" and "disliked_genres" are genres the user has shown they like or '
        'dislike, "era" is the era they prefer (or "unknown")'
        if config.message_mode == "schema"
        else '"note" tells the platform in one or two sentences what you learned about the user'
    )
    lines = [
        "The conversation so far:",
        *(f"{who}: {text}" for who, text in dialogue),
        f"The user's account: {_about(user)}.",
        f"Now write down for the platform's recommender what you learned. Reply in JSON: {learn}.",
    ]
    return [
        {"role": "system", "content": _agent_system(card)},
        {"role": "user", "content": "\n".join(lines)},
    ]


def report_reply_schema(config: Rec4AConfig) -> dict[str, Any]:
    """An agent's report as the LLM writes it (the strict check is :func:`report_schema`)."""
    if config.message_mode == "schema":
        properties: dict[str, Any] = {
            "liked_genres": genre_list(3),
            "disliked_genres": genre_list(2),
            "era": {"type": "string", "enum": [*ERAS, UNKNOWN_ERA]},
        }
    else:
        properties = {"note": {"type": "string", "maxLength": config.message_chars}}
    return object_schema(**properties)


def _evidence(data: dict[str, Any]) -> Profile:
    """Closed-vocabulary evidence from a reply; off-list and contradictory genres dropped."""

    def genres(key: str) -> tuple[str, ...]:
        value = data.get(key)
        values = value if isinstance(value, list) else []
        return tuple(dict.fromkeys(g for g in values if g in GENRE_NAMES))

    liked, disliked = genres("liked_genres"), genres("disliked_genres")
    both = set(liked) & set(disliked)  # contradictory evidence counts as none
    era = data.get("era") if data.get("era") in ERAS else None
    return Profile(
        tuple(g for g in liked if g not in both), tuple(g for g in disliked if g not in both), era
    )


def parse_report_reply(data: Any) -> tuple[Profile, str] | None:
    """``(evidence, note)`` from an LLM-written report, or ``None`` if it has neither.

    A free-text note is read by keywords (:func:`profile_from_text`) for the evidence.
    """
    if not isinstance(data, dict):
        return None
    note = data.get("note")
    note = note.strip() if isinstance(note, str) else ""
    has_fields = any(k in data for k in ("liked_genres", "disliked_genres", "era"))
    if not note and not has_fields:
        return None
    evidence = _evidence(data)
    if note and evidence.empty:
        evidence = profile_from_text(note)
    return evidence, note
