"""Reply schemas that more than one paper's agents ask for, and their validation.

Why: a simulated user's yes-or-no verdict with a stated reason is asked by AFL's user agent
(``reason`` / ``decision``) and by Rec4Agentverse's simulated user (``comment`` /
``satisfied``); one builder keeps the two shapes the same (the reason first, so a model
writes it before it commits to the verdict). :func:`validate_json` checks every structured
reply: ``jsonschema.validate`` re-checks the schema against its meta-schema on each call,
which cost more than the rest of a 7,000-reply replay together, so each distinct schema is
checked and compiled once.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from recagents.resources import import_jsonschema

__all__ = ["list_schema", "validate_json", "verdict_schema"]


@functools.lru_cache(maxsize=512)
def _validator(schema_text: str) -> Any:
    """The checked, compiled validator of one schema (given as canonical JSON text)."""
    jsonschema = import_jsonschema()  # here: plain chat never needs it
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_json(instance: Any, schema: dict[str, Any]) -> None:
    """``jsonschema.validate(instance, schema)``, with the schema checked once per process.

    The same validator class, meta-schema check and error (the best match) as
    ``jsonschema.validate``; only the repeated work on the schema is saved.

    Taught in: not shown in a notebook (used by recagents.llm.client and
        recagents.llm.scripted for every structured reply).

    Raises:
        jsonschema.ValidationError: ``instance`` does not match.
        jsonschema.SchemaError: ``schema`` is not a valid JSON Schema.
    """
    validator = _validator(json.dumps(schema, sort_keys=True, separators=(",", ":")))
    error = import_jsonschema().exceptions.best_match(validator.iter_errors(instance))
    if error is not None:
        raise error


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
