"""The text-level check of the planner's SQL: one short SELECT, table names grounded.

:func:`prepare_select` is the first guard a statement meets (see
:mod:`~recagents.papers.interecagent.sqlguard`): the length is checked before anything else
reads the text, then the text is tokenised, must hold one statement starting with SELECT or
WITH, and any table name after FROM or JOIN is grounded to ``items`` with a note.
:func:`has_order_by` and :func:`selects_id` read the tokens for the table and for plan
validation. SQLite's authorizer and limits, not this module, are what guarantee that a
statement can only read.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from recagents.papers.interecagent.sqllimits import SQL_MAX_CHARS, TABLE, ToolError, clip_text

# Only private helpers: the table (sqlguard) and plan validation (plans) import them.


_SQL_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    |(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
    |(?P<string>'(?:[^']|'')*(?:'|\Z))
    |(?P<quoted>"(?:[^"]|"")*(?:"|\Z)|`[^`]*(?:`|\Z)|\[[^\]]*(?:\]|\Z))
    |(?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

#: Leading keywords of statements that change data, schema or connection state.
_MODIFYING = {
    "INSERT": "inserts rows",
    "UPDATE": "changes rows",
    "DELETE": "deletes rows",
    "REPLACE": "replaces rows",
    "UPSERT": "changes rows",
    "DROP": "drops a table",
    "CREATE": "creates a table, view, index or trigger",
    "ALTER": "changes the schema",
    "ATTACH": "attaches a database",
    "DETACH": "detaches a database",
    "PRAGMA": "changes or reads database settings",
    "VACUUM": "rewrites the database",
    "REINDEX": "rebuilds indexes",
    "ANALYZE": "writes statistics tables",
    "BEGIN": "starts a transaction",
    "COMMIT": "ends a transaction",
    "END": "ends a transaction",
    "ROLLBACK": "ends a transaction",
    "SAVEPOINT": "starts a transaction",
    "RELEASE": "ends a transaction",
}


class _Token(NamedTuple):
    kind: str
    text: str


def _tokenize(sql: str) -> list[_Token]:
    """Split SQL into tokens (strings, identifiers, words, comments, punctuation, space)."""
    return [_Token(m.lastgroup or "other", m.group()) for m in _SQL_TOKEN.finditer(sql)]


def _significant(tokens: Iterable[_Token]) -> list[_Token]:
    return [t for t in tokens if t.kind not in ("space", "comment")]


def _is_word(token: _Token, *words: str) -> bool:
    return token.kind == "word" and token.text.upper() in words


def _identifier(token: _Token) -> str:
    """The name an identifier token stands for, without quotes."""
    if token.kind == "quoted":
        return token.text[1:-1]
    return token.text


def _cte_names(tokens: list[_Token]) -> set[str]:
    """Names defined by a leading ``WITH`` clause (lower case)."""
    sig = _significant(tokens)
    if not sig or not _is_word(sig[0], "WITH"):
        return set()
    names: set[str] = set()
    depth, expect_name = 0, True
    for token in sig[1:]:
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth -= 1
        elif depth == 0:
            if _is_word(token, "RECURSIVE"):
                continue
            if expect_name and token.kind in ("word", "quoted"):
                names.add(_identifier(token).lower())
                expect_name = False
            elif token.text == ",":
                expect_name = True
            elif _is_word(token, "SELECT", "VALUES", "INSERT", "UPDATE", "DELETE", "REPLACE"):
                break
    return names


def _ground_tables(tokens: list[_Token]) -> tuple[list[_Token], list[str]]:
    """Force every table named after FROM or JOIN to :data:`TABLE`, as the paper's grounding.

    Subqueries and names defined by ``WITH`` are left alone; ``IS [NOT] DISTINCT FROM`` is
    not a table reference. Returns the new tokens and one note per rewrite.
    """
    ctes = _cte_names(tokens)
    out = list(tokens)
    notes: list[str] = []
    positions = [i for i, t in enumerate(out) if t.kind not in ("space", "comment")]
    for n, index in enumerate(positions):
        token = out[index]
        if not _is_word(token, "FROM", "JOIN") or n + 1 >= len(positions):
            continue
        if _is_word(token, "FROM") and n >= 1 and _is_word(out[positions[n - 1]], "DISTINCT"):
            if n >= 2 and _is_word(out[positions[n - 2]], "IS", "NOT"):
                continue
        first = n + 1
        if out[positions[first]].kind not in ("word", "quoted"):
            continue  # a subquery or something SQLite will reject on its own
        last = first
        while (
            last + 2 < len(positions)
            and out[positions[last + 1]].text == "."
            and out[positions[last + 2]].kind in ("word", "quoted")
        ):
            last += 2
        start, stop = positions[first], positions[last]
        written = clip_text("".join(t.text for t in out[start : stop + 1]), 80)
        name = _identifier(out[stop]).lower()
        if last == first and (name == TABLE or name in ctes):
            continue
        out[start : stop + 1] = [_Token("word", TABLE)] + [_Token("space", "")] * (stop - start)
        notes.append(f"table {written!r} does not exist; used {TABLE!r} instead")
    return out, notes


def has_order_by(tokens: list[_Token]) -> bool:
    """Whether the outermost query ends with an ORDER BY."""
    sig = _significant(tokens)
    depth = 0
    for i, token in enumerate(sig):
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth -= 1
        elif depth == 0 and _is_word(token, "ORDER") and i + 1 < len(sig):
            if _is_word(sig[i + 1], "BY"):
                return True
    return False


def selects_id(tokens: list[_Token]) -> bool:
    """Whether the outermost SELECT list plausibly holds the ``id`` column (or ``*``)."""
    sig = _significant(tokens)
    depth, inside = 0, False
    for token in sig:
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth -= 1
        elif depth == 0 and _is_word(token, "SELECT"):
            inside = True
        elif depth == 0 and inside and _is_word(token, "FROM"):
            return False
        elif inside and depth == 0 and (token.text == "*" or _identifier(token).lower() == "id"):
            return True
    return False


@dataclass(frozen=True)
class _PreparedSQL:
    sql: str
    tokens: list[_Token]
    notes: list[str]


def prepare_select(sql: Any) -> _PreparedSQL:
    """Check that ``sql`` is one short SELECT statement and ground its table names.

    This is the text-level layer; the authorizer and the limits of :class:`ReadOnlyTable`
    are what guarantee that nothing but bounded reading can happen. The length is checked
    first: everything after it (tokenising included) runs outside the time limit.

    Raises:
        ToolError: Not a string, too long, empty, unterminated, several statements, or not a
            SELECT.
    """
    if not isinstance(sql, str):
        raise ToolError(f"the SQL input must be a string, got {type(sql).__name__}")
    if len(sql) > SQL_MAX_CHARS:
        raise ToolError(
            f"the SQL is {len(sql):,} characters long; at most {SQL_MAX_CHARS:,} are allowed "
            "(write one short SELECT statement)"
        )
    text = sql.strip()
    if not text:
        raise ToolError("the SQL input is empty; write one SELECT statement on the items table")
    if not sqlite3.complete_statement(text + "\n;"):
        raise ToolError("the SQL is incomplete (an unterminated string, quote or comment?)")
    tokens = _tokenize(text)
    statements: list[list[_Token]] = [[]]
    for token in tokens:
        if token.text == ";" and token.kind == "other":
            statements.append([])
        else:
            statements[-1].append(token)
    statements = [s for s in statements if _significant(s)]
    if not statements:
        raise ToolError("the SQL input holds no statement")
    if len(statements) > 1:
        raise ToolError(
            f"the SQL holds {len(statements)} statements; only one SELECT is allowed per call"
        )
    tokens = statements[0]
    first = _significant(tokens)[0]
    keyword = first.text.upper()
    if first.kind == "word" and keyword in _MODIFYING:
        raise ToolError(
            f"refused: a {keyword} statement {_MODIFYING[keyword]}; the table is read-only "
            "and only one SELECT statement is allowed"
        )
    if not (_is_word(first, "SELECT", "WITH")):
        start = clip_text(first.text, 40)
        raise ToolError(f"refused: the SQL starts with {start!r}; only SELECT is allowed")
    tokens, notes = _ground_tables(tokens)
    rebuilt = "".join(" " if t.kind == "comment" else t.text for t in tokens).strip()
    return _PreparedSQL(sql=rebuilt, tokens=tokens, notes=notes)
