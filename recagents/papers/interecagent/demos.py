"""The planner's demonstrations and how they are chosen for a request.

:data:`DEMOS` are hand-written requests with the planner reply each should get (direct
answers and plans covering every tool; the tests validate and run every plan on ml-100k).
:func:`select_demos` picks the nearest ones by text embedding, the first ones, or none.
The demonstrations are data, ``recagents/resources/interecagent_demos.json``, validated
against :data:`DEMOS_SCHEMA` by :func:`load_demos`; :data:`DEMOS` is read when this module is
imported (one small JSON file, validated with jsonschema, whose import takes about a second
once per process), since :func:`select_demos` takes it as its default pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from recagents.papers.interecagent.config import DEMO_MODES, RANK_SCHEMAS, TOOL_NAMES
from recagents.resources import read_resource, resource


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


_TEXT = {"type": "string", "minLength": 1}

_STEP = {
    "type": "object",
    "required": ["tool_name", "input"],
    "additionalProperties": False,
    "properties": {"tool_name": {"enum": list(TOOL_NAMES)}, "input": {}},
    "allOf": [
        {
            "if": {"properties": {"tool_name": {"const": "map_titles"}}},
            "then": {"properties": {"input": {"type": "integer", "minimum": 1}}},
        },
        {
            "if": {"properties": {"tool_name": {"const": "rank"}}},
            "then": {
                "properties": {
                    "input": {
                        "type": "object",
                        "required": ["schema", "prefer", "unwanted"],
                        "additionalProperties": False,
                        "properties": {
                            "schema": {"enum": list(RANK_SCHEMAS)},
                            "prefer": {"type": "array", "items": _TEXT},
                            "unwanted": {"type": "array", "items": _TEXT},
                        },
                    }
                }
            },
        },
        {
            "if": {"properties": {"tool_name": {"not": {"enum": ["map_titles", "rank"]}}}},
            "then": {"properties": {"input": _TEXT}},
        },
    ],
}

_REPLY = {
    "type": "object",
    "required": ["kind", "answer", "plan"],
    "additionalProperties": False,
    "properties": {
        "kind": {"enum": ["answer", "plan"]},
        "answer": {"type": "string"},
        "plan": {"type": "array", "items": _STEP},
    },
    "allOf": [
        # an answer says something and calls no tool; a plan calls tools and says nothing
        {
            "if": {"properties": {"kind": {"const": "answer"}}},
            "then": {"properties": {"answer": _TEXT, "plan": {"maxItems": 0}}},
        },
        {
            "if": {"properties": {"kind": {"const": "plan"}}},
            "then": {"properties": {"answer": {"maxLength": 0}, "plan": {"minItems": 1}}},
        },
    ],
}

#: Schema of ``interecagent_demos.json``: ``{"demos": [{"request", "reply"}, ...]}``, each
#: reply exactly the shape of :func:`planner_schema`.
DEMOS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["demos"],
    "additionalProperties": False,
    "properties": {
        "_about": {"type": "string"},
        "demos": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["request", "reply"],
                "additionalProperties": False,
                "properties": {"request": _TEXT, "reply": _REPLY},
            },
        },
    },
}


@cache
def load_demos(path: Path | Traversable | None = None) -> tuple[Demo, ...]:
    """The demonstrations in ``path``, in file order.

    Args:
        path: The file (default: the packaged ``interecagent_demos.json``).

    Raises:
        ResourceError: The file does not match :data:`DEMOS_SCHEMA`.
    """
    data = read_resource(path or resource("interecagent_demos.json"), DEMOS_SCHEMA)
    return tuple(Demo(entry["request"], entry["reply"]) for entry in data["demos"])


#: Hand-written demonstrations (the project's own words): general ones first, then movie
#: requests covering every tool. Each plan is validated and run on ml-100k by the tests.
#: Read from ``recagents/resources/interecagent_demos.json`` when this module is imported
#: (:func:`select_demos` takes them as its default pool).
DEMOS: tuple[Demo, ...] = load_demos()


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
    return select_many([request], k, mode, embed, demos)[0]


def select_many(
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
