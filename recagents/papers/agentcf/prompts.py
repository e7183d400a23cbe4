"""AgentCF's prompts, reply schemas and parsers: pure functions, no model calls.

The forward choice, the user and item reflections, and the rankers (B / B+H / B+R and the
LLMRank-style zero-shot one) each have a message builder and, where the reply is structured,
a JSON schema; every structured reply chooses items by index. The ranking reply's schema and
parser are shared by all papers (:mod:`recagents.protocol`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# --------------------------------------------------------------------------- domain wording


@dataclass(frozen=True)
class DomainWording:
    """How the prompts speak of one domain's items: the noun, the verb, the first description.

    Attributes:
        noun: What an item is called ("movie", "CD"); plurals add an "s".
        verb: What a user does with one ("watch", "listen to").
        past: The verb's past participle ("watched", "listened to").
        first_description: The paper's initial item description for this domain, a template
            with ``{noun}``, ``{title}`` and ``{category}``, or ``None`` for the genre sentence.
    """

    noun: str
    verb: str = "try"
    past: str = "tried"
    first_description: str | None = None


#: The wording of the domains the project's datasets have; any other noun gets the defaults.
DOMAIN_WORDING = {
    "movie": DomainWording("movie", "watch", "watched"),
    "CD": DomainWording(
        "CD",
        "listen to",
        "listened to",
        "The CD is called '{title}'. The category of this CD is: '{category}'.",
    ),
}


def domain_wording(domain: str | None) -> DomainWording:
    """The wording for a domain noun (``None``: movies, the default domain)."""
    domain = domain or "movie"
    return DOMAIN_WORDING.get(domain, DomainWording(domain))


# --------------------------------------------------------------------------- prompts


def _words_to_chars(words: int) -> int:
    """A character cap that lets ``words`` words through (about 6 characters per word)."""
    return 8 * words


def choice_schema(explanation_chars: int = 600) -> dict[str, Any]:
    """The forward call's reply: which of the two items (1 or 2), and why."""
    return {
        "type": "object",
        "properties": {
            "choice": {"type": "integer", "enum": [1, 2]},
            "explanation": {"type": "string", "maxLength": explanation_chars},
        },
        "required": ["choice", "explanation"],
    }


def user_reflection_schema(words: int = 180) -> dict[str, Any]:
    """The user reflection's reply: a new self-description."""
    return {
        "type": "object",
        "properties": {"self_description": {"type": "string", "maxLength": _words_to_chars(words)}},
        "required": ["self_description"],
    }


def item_reflection_schema(words: int = 50) -> dict[str, Any]:
    """The item reflection's reply: new descriptions of the preferred and the other item."""
    text = {"type": "string", "maxLength": _words_to_chars(words)}
    return {
        "type": "object",
        "properties": {"preferred": text, "other": text},
        "required": ["preferred", "other"],
    }


def _pair_lines(first: str, second: str) -> str:
    return f"1. {first}\n2. {second}"


def forward_messages(
    user_memory: str, first: str, second: str, domain: str | None = "movie"
) -> list:
    """The user agent chooses one of two items and explains the choice.

    Stable content (the role and the self-description) comes first so that a local server
    can reuse its cache across a user's calls; the pair comes last.
    """
    words = domain_wording(domain)
    domain = words.noun
    system = (
        f"You are a {domain} enthusiast choosing what to {words.verb}. This is how you describe "
        f"your own taste:\n{user_memory}"
    )
    user = (
        f"You are offered two {domain}s:\n{_pair_lines(first, second)}\n"
        f"Pick exactly one of them. Decide only from the likes and dislikes in your "
        f"self-description and do not invent new ones; if it does not settle the choice, "
        f"fall back on common knowledge, such as how popular or well regarded each {domain} "
        f'is. Reply in JSON: "choice" is 1 or 2, "explanation" says in detail why you '
        f"prefer it to the other."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def user_reflection_messages(
    user_memory: str,
    first: str,
    second: str,
    preferred: int,
    chosen: int | None = None,
    explanation: str | None = None,
    domain: str | None = "movie",
    words: int = 180,
) -> list:
    """The user agent rewrites its self-description after a choice.

    Three cases: a wrong choice (the agent learns it actually preferred the other item), a
    right one (it reinforces what worked), or, without a choice (the "without autonomous
    interaction" ablation), the real preference alone.

    Args:
        user_memory: The current self-description.
        first: Text of item 1 as shown.
        second: Text of item 2 as shown.
        preferred: Which one (1 or 2) the real user chose.
        chosen: Which one the agent chose, or ``None`` without a forward step.
        explanation: The agent's explanation of its choice.
        domain: Item noun.
        words: Word limit of the new self-description.
    """
    other = 3 - preferred
    domain = domain_wording(domain).noun
    system = (
        f"You are a {domain} enthusiast who keeps a short self-description of your taste, "
        f"so that it helps you choose {domain}s well. Your current self-description:\n"
        f"{user_memory}"
    )
    lines = [f"You were offered two {domain}s:\n{_pair_lines(first, second)}"]
    if chosen is None:
        lines.append(f"You really preferred {domain} {preferred} to {domain} {other}.")
    else:
        lines.append(f'You chose {domain} {chosen} and explained: "{explanation or ""}"')
        if chosen == preferred:
            lines.append(
                "That was the right choice. Keep in your self-description what led you to it, "
                "and sharpen it."
            )
        else:
            lines.append(
                f"But in fact you preferred {domain} {preferred}, not {domain} {chosen}: your "
                f"self-description misled you. Think about what appeals to you in {domain} "
                f"{preferred} and what puts you off {domain} {other}."
            )
    lines.append(
        f"Write your updated self-description in at most {words} words: first the new likes "
        f"you found, then the earlier likes that still hold, then your dislikes. Leave out "
        f"anything that conflicts with this preference and do not mention this choice itself. "
        f'Reply in JSON with the key "self_description".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def item_reflection_messages(
    user_memory: str,
    first: str,
    second: str,
    preferred: int,
    chosen: int | None = None,
    explanation: str | None = None,
    domain: str | None = "movie",
    words: int = 50,
) -> list:
    """The two items rewrite their descriptions after a user's choice.

    The descriptions should speak of the *groups of users* each item suits, sharpen the
    contrast between the two, keep what was useful and stay true to the item. The user text
    is the self-description *after* that user's own reflection, as in the paper.
    """
    other = 3 - preferred
    domain = domain_wording(domain).noun
    system = (
        f"You keep the descriptions of {domain}s in a recommender system. A good description "
        f"says which kinds of users enjoy the {domain}, so that each user can pick the "
        f"{domain}s that suit them."
    )
    lines = [
        f"A user describes their taste like this:\n{user_memory}",
        f"They were offered two {domain}s:\n{_pair_lines(first, second)}",
    ]
    if chosen is None:
        lines.append(f"They really preferred {domain} {preferred}.")
    else:
        lines.append(f'They chose {domain} {chosen} and explained: "{explanation or ""}"')
        if chosen == preferred:
            lines.append("That was their real preference.")
        else:
            lines.append(
                f"But they really preferred {domain} {preferred}: the descriptions misled them."
            )
    lines.append(
        f"Rewrite both descriptions, at most {words} words each. Say which users would enjoy "
        f'each {domain} (for example "users who like ..."), make clear what sets the two '
        f"apart, keep what was useful in the old descriptions and stay true to each {domain}. "
        f'Reply in JSON: "preferred" for {domain} {preferred}, "other" for {domain} {other}.'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def ranking_messages(
    user_memory: str,
    candidates: Sequence[str],
    domain: str | None = "movie",
    history: Sequence[str] | None = None,
    retrieved: str | None = None,
) -> list:
    """The user agent's memory ranks numbered candidates (variants B, B+H and B+R).

    Args:
        user_memory: The self-description (B).
        candidates: One line of text per candidate, in display order.
        domain: Item noun.
        history: Recent history items, oldest first (B+H).
        retrieved: A past self-description retrieved for these candidates (B+R).
    """
    domain = domain_wording(domain).noun
    system = (
        f"You are a {domain} recommender system. You rank candidate {domain}s for one user, "
        f"using what the user says about their own taste."
    )
    parts = [f"The user describes their taste like this:\n{user_memory}"]
    if retrieved is not None:
        parts.append(f"Earlier, the user described it like this:\n{retrieved}")
    if history:
        parts.append(f"The {domain}s the user chose recently, oldest first:\n" + "\n".join(history))
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(parts) + "\n" + _rank_request(candidates, domain)},
    ]


def llmrank_messages(
    history: Sequence[str], candidates: Sequence[str], domain: str | None = "movie"
) -> list:
    """A zero-shot ranker given the user's history titles (LLMRank-style, no agents)."""
    domain = domain_wording(domain).noun
    system = f"You are a {domain} recommender system."
    listed = "\n".join(history) if history else "(none)"
    user = f"A user chose these {domain}s, oldest first:\n{listed}\n" + _rank_request(
        candidates, domain
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _rank_request(candidates: Sequence[str], domain: str) -> str:
    n = len(candidates)
    numbered = "\n".join(f"{k}. {text}" for k, text in enumerate(candidates, start=1))
    return (
        f"Candidate {domain}s:\n{numbered}\n"
        f"Rank all {n} candidates, from the one this user would like most to the one they "
        f'would like least. Reply in JSON: "ranking" lists the {n} candidate numbers in that '
        f"order, each number exactly once."
    )


# --------------------------------------------------------------------------- parsers


def parse_choice(data: Any) -> int | None:
    """The chosen index (1 or 2) of a forward reply, or ``None`` when it has none."""
    if not isinstance(data, dict):
        return None
    choice = data.get("choice")
    if isinstance(choice, bool):
        return None
    if isinstance(choice, str) and choice.strip() in ("1", "2"):
        return int(choice.strip())
    return choice if choice in (1, 2) else None


def text_field(data: Any, key: str) -> str | None:
    """A non-empty string field of a JSON reply, stripped, or ``None``."""
    if not isinstance(data, dict):
        return None
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()
