"""Reply schemas that more than one paper's agents ask for, and their validation.

Why: a simulated user's yes-or-no verdict with a stated reason is asked by AFL's user agent
(``reason`` / ``decision``) and by Rec4Agentverse's simulated user (``comment`` /
``satisfied``); one builder keeps the two shapes the same (the reason first, so a model
writes it before it commits to the verdict). :func:`validate_json` checks every structured
reply: ``jsonschema.validate`` re-checks the schema against its meta-schema on each call,
which cost more than the rest of a 7,000-reply replay together, so each distinct schema is
checked and compiled once. :func:`parse_json_bounded` parses every structured reply within
fixed bounds (nesting depth, number length, total size), so that a hostile or broken reply
is a counted malformed reply instead of a ``RecursionError`` that stops a whole batch.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

from recagents.resources import import_jsonschema

#: Deepest nesting of arrays and objects a parsed reply may have. The papers' replies nest
#: a few levels deep; Python's JSON decoder recurses once per level and fails
#: with ``RecursionError`` near 1,000, so the bound is checked before it decodes.
MAX_JSON_DEPTH = 64
#: Longest JSON text parsed (characters): far beyond any reply under the ``max_tokens`` the
#: papers ask for (around a thousand tokens at most); the worst text within all three bounds
#: parses in about 0.2 s and 20 MiB.
MAX_JSON_CHARS = 1_000_000
#: Longest number literal (characters). Python refuses integers over 4,300 digits with a
#: ``ValueError``; no score, rank or id a model writes needs more than a few dozen.
MAX_JSON_NUMBER_CHARS = 100

# A JSON string literal (escapes included), or an unterminated one running to the end.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class ReplyTooComplex(ValueError):
    """A JSON text outside the parsing bounds (too deep, too long, or an absurd number).

    A ``ValueError``, like ``json.JSONDecodeError``; its message is one short reason.
    """


def _nesting_depth(text: str, limit: int) -> int:
    """Deepest bracket nesting of ``text`` outside string literals, counted up to ``limit + 1``.

    A cheap scan: strings are cut out, then only brackets are walked, and the walk stops as
    soon as ``limit`` is passed.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for bracket in brackets:
        if bracket in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def parse_json_bounded(
    text: str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_chars: int = MAX_JSON_CHARS,
    max_number_chars: int = MAX_JSON_NUMBER_CHARS,
    strict: bool = True,
) -> Any:
    """``json.loads(text)``, refusing texts outside the bounds before they cost anything.

    Why: a model's reply is untrusted text. ``json.loads`` of 1,000 nested ``[`` raises
    ``RecursionError`` and of a 5,000-digit integer a bare ``ValueError``; either escaped
    the client and stopped a whole batch. Here the size is checked first, the nesting depth
    by a scan that ignores brackets inside strings (so no recursion happens), and numbers
    through the decoder's hooks: longer than ``max_number_chars``, ``NaN``, ``Infinity`` or
    overflowing to infinity (``1e400``) are refused.

    Args:
        text: The JSON text.
        max_depth: Deepest nesting of arrays and objects.
        max_chars: Longest text.
        max_number_chars: Longest number literal.
        strict: As for ``json.loads`` (``False`` allows raw control characters in strings).

    Raises:
        ReplyTooComplex: The text is outside a bound (the message says which).
        json.JSONDecodeError: The text is not JSON.
    """
    if len(text) > max_chars:
        raise ReplyTooComplex(f"reply too long: {len(text):,} characters, at most {max_chars:,}")
    depth = _nesting_depth(text, max_depth)
    if depth > max_depth:
        raise ReplyTooComplex(f"reply nested deeper than {max_depth} levels")

    def number(literal: str, convert: Any) -> Any:
        if len(literal) > max_number_chars:
            raise ReplyTooComplex(
                f"number of {len(literal):,} characters, at most {max_number_chars}"
            )
        value = convert(literal)
        if isinstance(value, float) and not math.isfinite(value):
            raise ReplyTooComplex(f"number {literal} is out of range")
        return value

    def constant(name: str) -> Any:
        raise ReplyTooComplex(f"{name} is not a JSON number")

    return json.loads(
        text,
        strict=strict,
        parse_int=lambda literal: number(literal, int),
        parse_float=lambda literal: number(literal, float),
        parse_constant=constant,
    )


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

    Raises:
        ValueError: ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"list_schema: n must not be negative, got {n}")
    array = {"type": "array", "items": items, "minItems": n, "maxItems": n}
    return {"type": "object", "properties": {key: array}, "required": [key]}
