"""The planner's demonstrations and how they are chosen for a request.

:data:`DEMOS` are hand-written requests with the planner reply each should get (direct
answers and plans covering every tool; the tests validate and run every plan on ml-100k).
:func:`select_demos` picks the nearest ones by text embedding, the first ones, or none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from recagents.papers.interecagent.config import DEMO_MODES

__all__ = [
    "DEMOS",
    "Demo",
    "select_demos",
]


@dataclass(frozen=True)
class Demo:
    """One demonstration: a user request and the planner reply it should get.

    Attributes:
        request: What the user writes.
        reply: ``{"kind": "answer" | "plan", "answer": str, "plan": [steps]}``, exactly the
            shape of :func:`planner_schema`.
    """

    request: str
    reply: dict[str, Any]

    @property
    def is_plan(self) -> bool:
        """Whether the demonstration uses tools."""
        return self.reply["kind"] == "plan"


def _answer(text: str) -> dict[str, Any]:
    return {"kind": "answer", "answer": text, "plan": []}


def _plan(*steps: tuple[str, Any]) -> dict[str, Any]:
    return {"kind": "plan", "answer": "", "plan": [{"tool_name": t, "input": i} for t, i in steps]}


def _rank(schema: str = "popularity", prefer: Sequence[str] = (), unwanted: Sequence[str] = ()):
    return ("rank", {"schema": schema, "prefer": list(prefer), "unwanted": list(unwanted)})


#: Hand-written demonstrations (the project's own words): general ones first, then movie
#: requests covering every tool. Each plan is validated and run on ml-100k by the tests.
DEMOS: tuple[Demo, ...] = (
    Demo(
        "Hi! How are you doing today?",
        _answer("Hi, I'm great, thanks! What kind of movie would you like to watch?"),
    ),
    Demo(
        "I'm bored and want to watch something.",
        _answer(
            "Happy to help! What are you in the mood for: a genre, an era, or a movie you "
            "enjoyed lately that I could match?"
        ),
    ),
    Demo(
        "Thanks, that's all I needed.",
        _answer("You're welcome, enjoy the film! Come back whenever you want more ideas."),
    ),
    Demo(
        "When was Fargo released?",
        _plan(("lookup", "SELECT title, release_year FROM items WHERE title LIKE '%Fargo%'")),
    ),
    Demo(
        "What genres does Jurassic Park have?",
        _plan(("lookup", "SELECT title, tags FROM items WHERE title LIKE '%Jurassic Park%'")),
    ),
    Demo(
        "Can you suggest some comedies from the nineties?",
        _plan(
            (
                "hard_filter",
                "SELECT id FROM items WHERE tags LIKE '%Comedy%' "
                "AND release_year BETWEEN 1990 AND 1999",
            ),
            _rank("popularity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "I loved Star Wars. Anything similar?",
        _plan(("soft_filter", "Star Wars"), _rank("similarity"), ("map_titles", 5)),
    ),
    Demo(
        "I want a thriller made after 1990, something like The Silence of the Lambs.",
        _plan(
            (
                "hard_filter",
                "SELECT id FROM items WHERE tags LIKE '%Thriller%' AND release_year > 1990",
            ),
            ("soft_filter", "The Silence of the Lambs"),
            _rank("similarity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "I really enjoyed Toy Story and Babe. What should I watch next?",
        _plan(_rank("preference", prefer=["Toy Story", "Babe"]), ("map_titles", 5)),
    ),
    Demo(
        "Give me popular action movies, but not Die Hard, I've seen it.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Action%'"),
            _rank("popularity", unwanted=["Die Hard"]),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "Which one of Heat, Casino and Braveheart should I watch tonight?",
        _plan(
            ("candidate_store", "Heat;;Casino;;Braveheart"),
            _rank("popularity"),
            ("map_titles", 1),
        ),
    ),
    Demo(
        "Show me the best rated dramas.",
        _plan(
            (
                "hard_filter",
                "SELECT id FROM items WHERE tags LIKE '%Drama%' AND avg_rating >= 4 "
                "ORDER BY avg_rating DESC",
            ),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "How many horror movies do you have?",
        _plan(("lookup", "SELECT COUNT(*) AS horror_movies FROM items WHERE tags LIKE '%Horror%'")),
    ),
    Demo(
        "Something for my kids, like The Lion King.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Children%'"),
            ("soft_filter", "The Lion King"),
            _rank("similarity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "I'd like an old classic from before 1960.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE release_year < 1960"),
            _rank("popularity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "Three science fiction films like Twelve Monkeys, please.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Sci-Fi%'"),
            ("soft_filter", "Twelve Monkeys"),
            _rank("similarity"),
            ("map_titles", 3),
        ),
    ),
    Demo(
        "I liked Pulp Fiction and Fargo; I'd like a crime film, not Casino though.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Crime%'"),
            _rank("preference", prefer=["Pulp Fiction", "Fargo"], unwanted=["Casino"]),
            ("map_titles", 5),
        ),
    ),
)


def select_demos(
    request: str,
    k: int,
    mode: Literal["dynamic", "fixed", "zero"] = "dynamic",
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    demos: Sequence[Demo] = DEMOS,
) -> list[Demo]:
    """Pick the demonstrations shown to the planner for one request.

    Args:
        request: The user's message.
        k: How many.
        mode: ``dynamic``: the ``k`` whose requests are nearest to ``request`` by cosine
            similarity of text embeddings, nearest first (ties in list order); ``fixed``: the
            first ``k``; ``zero``: none.
        embed: Embedding function (rows L2-normalised or not); ``None`` uses
            :func:`recagents.llm.embed.embed` (offline MiniLM, cached).
        demos: The pool.
    """
    return _select_many([request], k, mode, embed, demos)[0]


def _select_many(
    requests: Sequence[str],
    k: int,
    mode: str,
    embed: Callable[[Sequence[str]], np.ndarray] | None,
    demos: Sequence[Demo],
) -> list[list[Demo]]:
    """:func:`select_demos` for many requests with one embedding call."""
    if mode not in DEMO_MODES:
        raise ValueError(f"demo mode must be one of {DEMO_MODES}, got {mode!r}")
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    if mode == "zero" or k == 0 or not demos:
        return [[] for _ in requests]
    if mode == "fixed":
        return [list(demos[:k]) for _ in requests]
    if embed is None:
        from recagents.llm.embed import embed as default_embed

        embed = default_embed
    if not requests:
        return []
    vectors = np.asarray(embed([d.request for d in demos] + list(requests)), dtype=float)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    pool, asked = vectors[: len(demos)], vectors[len(demos) :]
    chosen = []
    for row in asked @ pool.T:
        order = np.argsort(-row, kind="stable")[:k]
        chosen.append([demos[int(j)] for j in order])
    return chosen
