"""Reply schemas that more than one paper's agents ask for.

Why: a simulated user's yes-or-no verdict with a stated reason is asked by AFL's user agent
(``reason`` / ``decision``) and by Rec4Agentverse's simulated user (``comment`` /
``satisfied``); one builder keeps the two shapes the same (the reason first, so a model
writes it before it commits to the verdict).
"""

from __future__ import annotations

from typing import Any

__all__ = ["list_schema", "verdict_schema"]


def verdict_schema(reason_key: str, reason_chars: int, verdict_key: str) -> dict[str, Any]:
    """A JSON object of a reason (at most ``reason_chars`` characters), then ``yes`` or ``no``.

    Taught in: not shown in a notebook (used by recagents.papers.afl.prompts.decision_schema).

    Args:
        reason_key: The name of the free-text reason.
        reason_chars: Its longest allowed length.
        verdict_key: The name of the ``"yes"`` / ``"no"`` verdict.

    Raises:
        ValueError: ``reason_chars`` is negative, or the two keys are the same.
    """
    if reason_chars < 0:
        raise ValueError(f"verdict_schema: reason_chars must not be negative, got {reason_chars}")
    if reason_key == verdict_key:
        raise ValueError(f"verdict_schema: reason_key and verdict_key are both {reason_key!r}")
    return {
        "type": "object",
        "properties": {
            reason_key: {"type": "string", "maxLength": reason_chars},
            verdict_key: {"type": "string", "enum": ["yes", "no"]},
        },
        "required": [reason_key, verdict_key],
    }


def list_schema(key: str, items: dict[str, Any], n: int) -> dict[str, Any]:
    """A JSON object holding exactly ``n`` entries, each matching ``items``, under ``key``.

    Taught in: not shown in a notebook (used by recagents.papers.agent4rec.prompts.page_schema
        and recagents.papers.agent4rec.prompts.taste_schema).

    Raises:
        ValueError: ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"list_schema: n must not be negative, got {n}")
    array = {"type": "array", "items": items, "minItems": n, "maxItems": n}
    return {"type": "object", "properties": {key: array}, "required": [key]}
