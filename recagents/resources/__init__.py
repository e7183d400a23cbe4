"""The project's data files (JSON package data) and the one validated way to read them.

This package holds the tables that are data, not code: the report's claims, notebook
descriptions, verdict rules and paper numbers, and the papers' hand-written tables
(``interecagent_demos.json``, ``rec4agentverse_agents.json``, ``agent4rec_traits.json``).
:func:`resource` names a packaged file; :func:`read_resource` reads one and checks it against
its JSON schema (draft 2020-12), kept in code next to the caller that turns the JSON into
Python values. A file that cannot be read, is not JSON, or has a field that is missing,
unknown or of the wrong type raises a :class:`ResourceError` naming the file and the field,
e.g. ``.../interecagent_demos.json: demos[3].plan: missing (required)``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import ModuleType
from typing import Any


class ResourceError(ValueError):
    """A resource file that is not JSON, or does not match its schema."""


def resource(name: str) -> Traversable:
    """The packaged file ``recagents/resources/<name>``."""
    return resources.files("recagents").joinpath("resources", name)


def _where(path: Any) -> str:
    """``claims[3].ours.key`` from a JSON path (a sequence of keys and indices)."""
    where = ""
    for part in path:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where or "(the top level)"


def _sort_key(path: Any) -> list[tuple[int, int, str]]:
    """Errors in document order: indices numerically, names alphabetically."""
    return [(0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in path]


def _problem(error: Any) -> str:
    """One schema error as ``field: what is wrong``; a missing field is named in the path."""
    path = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [name for name in error.validator_value if name not in error.instance]
        if missing:
            return f"{_where([*path, missing[0]])}: missing (required)"
    return f"{_where(path)}: {error.message}"


def import_jsonschema() -> ModuleType:
    """``jsonschema``, imported without its optional IRI format checks (``rfc3987-syntax``).

    Why: Jupyter asks for ``jsonschema[format-nongpl]``, whose ``rfc3987-syntax`` compiles a
    grammar when jsonschema is imported: 2 of the 2.2 s the import costs every notebook
    kernel (measured 2026-12-07). recagents never checks a ``format``, so those checks are
    left out of this process's ``jsonschema.FormatChecker``; a process that imported
    jsonschema before keeps it as it is, and ``rfc3987_syntax`` itself stays importable.
    """
    if "jsonschema" in sys.modules:
        return sys.modules["jsonschema"]
    blocked = "rfc3987_syntax" not in sys.modules
    if blocked:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # an ImportError
    try:
        import jsonschema
    finally:
        if blocked and sys.modules.get("rfc3987_syntax", 0) is None:
            del sys.modules["rfc3987_syntax"]
    return jsonschema


def read_resource(path: Path | Traversable, schema: Mapping[str, Any]) -> Any:
    """Read a JSON file and check it against ``schema``.

    Args:
        path: The file.
        schema: Its JSON schema (draft 2020-12).

    Returns:
        The parsed JSON.

    Raises:
        ResourceError: The file cannot be read, is not JSON, or does not match ``schema``;
            the message names the file and every field at fault (the first 10).
    """
    jsonschema = import_jsonschema()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ResourceError(f"{path}: cannot be read: {error}") from None
    except json.JSONDecodeError as error:
        raise ResourceError(
            f"{path}: not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
        ) from None
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: _sort_key(e.absolute_path))
    if errors:
        problems = [_problem(error) for error in errors]
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        lines = "\n".join(f"  {problem}" for problem in problems[:10])
        raise ResourceError(f"{path} does not match its schema:\n{lines}{more}")
    return data
