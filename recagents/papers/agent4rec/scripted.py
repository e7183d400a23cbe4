"""A scripted Agent4Rec user agent: a rule, not an LLM, so the whole page loop can be seen.

Why: with the embedded 135M model every agent leaves on page 1 with satisfaction 1, so the
later pages, the retrieved memories and the satisfaction reflection never appear. The
policy here plays the *agent* role deterministically (watch the items whose genres match the
user's top genres, rate them by a simple rule, keep browsing until ``exit_after``, score the
interview from what it liked) and runs through the paper's own loop
(:func:`recagents.papers.agent4rec.loop.simulate`) unchanged. Its results are named
``scripted:browsing-agent`` and are never an LLM result.

The request kind is read from the request's JSON schema (the property each step's schema
requires: ``items`` for a page, ``decision`` for an exit, ``sentence`` for a reflection,
``satisfaction`` for an interview); anything else (personas, the taste probe) is passed on
to the fallback client.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from recagents.columns import ITEM, RATING, USER
from recagents.llm.client import ChatRequest
from recagents.llm.scripted import PASS, ScriptedClient

#: The name of the scripted agent (its client's model is ``scripted:<name>``).
SCRIPTED_NAME = "browsing-agent"

#: The required property that tells each step's schema apart, and the step it belongs to.
_KINDS = {
    "items": "page",
    "decision": "exit",
    "sentence": "reflection",
    "satisfaction": "interview",
}

_LISTED = re.compile(r"^(\d+)\. (.*)$", re.MULTILINE)
_PAGE = re.compile(r"page (\d+)", re.IGNORECASE)
_RATED = re.compile(r"\(rated (\d)\)")


def request_kind(request: ChatRequest) -> str | None:
    """The Agent4Rec step a request belongs to (``page``, ``exit``, ...), or ``None``.

    Read from the schema's required properties, which every step's builder fixes, not from
    the prompt's wording (which may change).
    """
    schema = request.schema or {}
    for prop in schema.get("required", ()):
        if prop in _KINDS:
            return _KINDS[prop]
    return None


def top_genres(
    train: pd.DataFrame, item_genres: pd.Series, k: int = 3, positive_above: float = 3.0
) -> dict[str, set[str]]:
    """Each user's ``k`` most frequent genres among the items it rated above ``positive_above``.

    Without a ``rating`` column (``agent4rec-ml1m``'s released split has none) every
    training item counts as liked.

    Args:
        train: ``[user_id, item_id]`` training items, with ``rating`` when there are ratings.
        item_genres: Genres (a sequence of names) by item id.
        k: Genres kept per user.
        positive_above: A rating above this counts as liked.
    """
    liked = train[train[RATING] > positive_above] if RATING in train else train
    out: dict[str, set[str]] = {}
    for user, items in liked.groupby(USER)[ITEM]:
        counts = Counter(g for i in items if i in item_genres.index for g in item_genres[i])
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        out[str(user)] = {g for g, _ in ranked[:k]}
    return out


def _genres_of(line: str) -> set[str]:
    """The genres of an item line (its last ``;``-separated field, comma-separated)."""
    return {g.strip() for g in line.rsplit("; ", 1)[-1].split(",") if g.strip()}


def _text(request: ChatRequest, role: str) -> str:
    return "\n".join(m["content"] for m in request.messages if m.get("role") == role)


def _recalled(system: str) -> int:
    """How many memories were retrieved into a prompt (the lines of its memory section)."""
    _, found, rest = system.partition("What you remember of this visit:\n")
    return sum(line.startswith("- ") for line in rest.splitlines()) if found else 0


def _ratings_in(text: str) -> list[int]:
    return [int(r) for r in _RATED.findall(text)]


def browsing_policy(
    genres: dict[str, set[str]],
    exit_after: int = 3,
    line_genres: Mapping[str, set[str]] | None = None,
) -> Any:
    """The scripted agent's policy: one reply per request, built to the request's schema.

    * **page**: watch an item when its genres share one with the user's top genres; rate it
      5 when they share two or more, else 4; a skipped item gets rating 1 and no feeling.
    * **exit**: turn the page before page ``exit_after``, leave on it; the reason says how
      many memories were retrieved into the prompt (so their use is visible).
    * **reflection**: satisfied when the recalled memories hold a liked (4+) rating.
    * **interview**: satisfaction ``1 + min(9, liked)``, the liked (4+) ratings in its memory.

    Args:
        genres: Top genres by user id (the request's tag), e.g. from :func:`top_genres`.
        exit_after: The page on which the agent leaves.
        line_genres: An item's genres by the line the agent is shown, for lines that do not
            end in their genres (items described by a summary); other lines are read.

    Returns:
        A function ``request -> reply`` (or :data:`~recagents.llm.scripted.PASS`).
    """

    def policy(request: ChatRequest) -> Any:
        kind = request_kind(request)
        system, user = _text(request, "system"), _text(request, "user")
        recalled = _recalled(system)
        if kind == "page":
            mine = genres.get(request.tag, set())
            items = []
            for _, line in _LISTED.findall(user):
                known = line_genres.get(line) if line_genres is not None else None
                shared = (known if known is not None else _genres_of(line)) & mine
                if shared:
                    feeling = f"I like {', '.join(sorted(shared))} and this is one."
                    items.append(
                        {"aligned": True, "watch": True, "rating": 5 if len(shared) > 1 else 4,
                         "feeling": feeling}
                    )  # fmt: skip
                else:
                    items.append({"aligned": False, "watch": False, "rating": 1, "feeling": ""})
            return {"items": items}
        if kind == "exit":
            found = _PAGE.search(user)
            page = int(found.group(1)) if found else 1
            leave = page >= exit_after
            return {
                "feeling": "positive",
                "decision": "exit" if leave else "next",
                "reason": (
                    f"Scripted: page {page} of {exit_after}; "
                    f"{recalled} memories recalled into this prompt."
                ),
            }
        if kind == "reflection":
            liked = [r for r in _ratings_in(user) if r >= 4]
            if liked:
                sentence = f"I am satisfied: I watched {len(liked)} I liked so far."
            else:
                sentence = "I am unsatisfied: nothing I watched so far matched my taste."
            return {"sentence": sentence}
        if kind == "interview":
            n_liked = sum(r >= 4 for r in _ratings_in(system))
            score = 1 + min(9, n_liked)
            return {"satisfaction": score, "reason": f"Scripted: I liked {n_liked} items."}
        return PASS

    return policy


def browsing_client(
    genres: dict[str, set[str]],
    exit_after: int = 3,
    fallback: Any | None = None,
    line_genres: Mapping[str, set[str]] | None = None,
) -> ScriptedClient:
    """A :class:`~recagents.llm.scripted.ScriptedClient` playing the browsing agent.

    Args:
        genres: Top genres by user id (:func:`top_genres`).
        exit_after: The page on which every agent leaves.
        fallback: The client for requests that are not a step of the page loop.
        line_genres: An item's genres by its line (see :func:`browsing_policy`).
    """
    return ScriptedClient(browsing_policy(genres, exit_after, line_genres), SCRIPTED_NAME, fallback)
