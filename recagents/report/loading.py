"""The report's tables, read from JSON package data and validated when they are read.

``recagents/resources/claims.json`` (:func:`load_claims`), ``notebooks.json``
(:func:`load_notebooks`) and ``verdict_rules.json`` (:func:`load_verdict_rules`) hold what
the report says: every claim and where its two values live, what each notebook deviates
from, and how a comparison turns into a verdict. Each file is read once, on first use, and
checked against its JSON schema (:data:`CLAIMS_SCHEMA`, :data:`NOTEBOOKS_SCHEMA`,
:data:`VERDICT_RULES_SCHEMA`); a file that is not JSON, or a field that is missing, unknown
or of the wrong type, raises a :class:`ResourceError` naming the file and the field, e.g.
``.../claims.json: claims[3].ours.key: missing (required)``.
:class:`ResourceError`, :func:`read_resource` and :func:`resource` live in
:mod:`recagents.resources` (the papers read their tables with them too) and are re-exported
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from recagents.report.claims import Claim, NotebookInfo, PaperRef, RecordRef
from recagents.resources import ResourceError, read_resource, resource

#: The rules a claim can name (``Claim.rule``); each has its text in ``verdict_rules.json``.
CLAIM_RULES = ("contains", "at_least", "greater", "above", "no_amplification", "matches")

_TEXT = {"type": "string"}
_NAME = {"type": "string", "minLength": 1}
_ROW = {"type": "object", "additionalProperties": {"type": "string"}}
_ABOUT = {"_about": _TEXT}

_RECORD_REF = {
    "type": "object",
    "required": ["key"],
    "additionalProperties": False,
    "properties": {"key": _NAME, "field": _NAME, "label": _TEXT},
}

_PAPER_REF = {
    "type": ["object", "null"],
    "required": ["table"],
    "additionalProperties": False,
    "properties": {
        "table": _NAME,
        "row": _ROW,
        "column": _NAME,
        "scale": {"type": "number", "exclusiveMinimum": 0},
        "versus_row": _ROW,
        "versus_column": _NAME,
        "quote": _TEXT,
    },
}

_CLAIM = {
    "type": "object",
    "required": ["id", "notebook", "description", "paper", "ours", "rule"],
    "additionalProperties": False,
    "properties": {
        "id": _NAME,
        "notebook": {"type": "string", "pattern": "^[0-9]{2}_[A-Za-z0-9_]+$"},
        "description": _NAME,
        "paper": _PAPER_REF,
        "ours": _RECORD_REF,
        "rule": {"enum": list(CLAIM_RULES)},
        "versus": _RECORD_REF,
        "threshold": {"type": "number"},
        "no_paper": _TEXT,
        "context": {"type": "array", "items": _NAME},
        "note": _TEXT,
        "llm": {"type": "boolean"},
        "chance": _RECORD_REF,
        "effect": {"type": "number", "exclusiveMinimum": 0},
        "effect_basis": _NAME,
        "min_n": {"type": "integer", "minimum": 1},
        "n_record": _NAME,
        "activity": {"type": "array", "minItems": 1, "items": _RECORD_REF},
        "datasets": {"type": "array", "minItems": 1, "items": _NAME},
        "model": _NAME,
    },
    "allOf": [
        # a 'contains' claim states the scale of its effect: a chance record or a tolerance
        {
            "if": {"required": ["rule"], "properties": {"rule": {"const": "contains"}}},
            "then": {"anyOf": [{"required": ["chance"]}, {"required": ["effect"]}]},
        },
        {"dependentRequired": {"effect": ["effect_basis"]}},
        # a comparison needs its second arm; a claim without a paper number says why
        {
            "if": {"required": ["rule"], "properties": {"rule": {"const": "greater"}}},
            "then": {"required": ["versus"]},
        },
        {
            "if": {"required": ["paper"], "properties": {"paper": {"type": "null"}}},
            "then": {"required": ["no_paper"], "properties": {"no_paper": _NAME}},
        },
    ],
}

#: Schema of ``claims.json``: ``{"claims": [claim, ...]}``, fields as :class:`Claim`.
CLAIMS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["claims"],
    "additionalProperties": False,
    "properties": {
        **_ABOUT,
        "claims": {"type": "array", "minItems": 1, "items": _CLAIM},
        "unreleased": {"type": "object", "additionalProperties": _NAME},
    },
}

#: Schema of ``notebooks.json``: ``{"notebooks": {stem: notebook, ...}}`` in reading order.
NOTEBOOKS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["notebooks"],
    "additionalProperties": False,
    "properties": {
        **_ABOUT,
        "notebooks": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": "^[0-9]{2}_[A-Za-z0-9_]+$"},
            "additionalProperties": {
                "type": "object",
                "required": ["title", "paper", "deviations"],
                "additionalProperties": False,
                "properties": {
                    "title": _NAME,
                    "paper": _NAME,
                    "deviations": {"type": "array", "items": _NAME},
                },
            },
        },
    },
}

#: Schema of ``verdict_rules.json``: ``{"rules": {rule: text, ...}}``, every claim rule included.
VERDICT_RULES_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["rules"],
    "additionalProperties": False,
    "properties": {
        **_ABOUT,
        "rules": {
            "type": "object",
            "required": list(CLAIM_RULES),
            "additionalProperties": _NAME,
        },
    },
}


def _paper_ref(entry: Mapping[str, Any] | None) -> PaperRef | None:
    if entry is None:
        return None
    fields = dict(entry)
    if "scale" in fields:
        fields["scale"] = float(fields["scale"])
    return PaperRef(**fields)


def _claim(entry: Mapping[str, Any], unreleased: Mapping[str, str]) -> Claim:
    fields = dict(entry)
    missing = [unreleased[name] for name in fields.get("datasets", ()) if name in unreleased]
    if missing and len(missing) == len(fields["datasets"]):
        fields["unreleased"] = "; ".join(dict.fromkeys(missing))
    fields["paper"] = _paper_ref(fields["paper"])
    for name in ("ours", "versus", "chance"):
        if name in fields:
            fields[name] = RecordRef(**fields[name])
    if "activity" in fields:
        fields["activity"] = tuple(RecordRef(**ref) for ref in fields["activity"])
    if "context" in fields:
        fields["context"] = tuple(fields["context"])
    if "datasets" in fields:
        fields["datasets"] = tuple(fields["datasets"])
    for name in ("threshold", "effect"):
        if name in fields:
            fields[name] = float(fields[name])
    return Claim(**fields)


@cache
def load_claims(path: Path | Traversable | None = None) -> tuple[Claim, ...]:
    """Every claim in the report, grouped by notebook in reading order.

    Args:
        path: The file (default: the packaged ``claims.json``).

    Raises:
        ResourceError: The file does not match :data:`CLAIMS_SCHEMA`, or two claims share
            an id.
    """
    path = path or resource("claims.json")
    table = read_resource(path, CLAIMS_SCHEMA)
    entries, unreleased = table["claims"], table.get("unreleased", {})
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        first = seen.setdefault(entry["id"], index)
        if first != index:
            raise ResourceError(
                f"{path}: claims[{index}].id: {entry['id']!r} is already the id of "
                f"claims[{first}]; ids must be unique"
            )
    return tuple(_claim(entry, unreleased) for entry in entries)


@cache
def load_notebooks(path: Path | Traversable | None = None) -> dict[str, NotebookInfo]:
    """Every notebook the report covers, by stem, in reading order.

    Args:
        path: The file (default: the packaged ``notebooks.json``).

    Raises:
        ResourceError: The file does not match :data:`NOTEBOOKS_SCHEMA`.
    """
    path = path or resource("notebooks.json")
    entries = read_resource(path, NOTEBOOKS_SCHEMA)["notebooks"]
    return {
        stem: NotebookInfo(entry["title"], entry["paper"], tuple(entry["deviations"]))
        for stem, entry in entries.items()
    }


@cache
def load_verdict_rules(path: Path | Traversable | None = None) -> dict[str, str]:
    """How each comparison turns into a verdict, in the order the report prints them.

    Args:
        path: The file (default: the packaged ``verdict_rules.json``).

    Raises:
        ResourceError: The file does not match :data:`VERDICT_RULES_SCHEMA`.
    """
    path = path or resource("verdict_rules.json")
    return dict(read_resource(path, VERDICT_RULES_SCHEMA)["rules"])
