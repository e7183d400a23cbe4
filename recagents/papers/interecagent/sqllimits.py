"""The bounds of the planner's SQL, the table's name and columns, ToolError and clip_text.

Every limit that :mod:`~recagents.papers.interecagent.sqlguard` enforces is a named constant
here, with the reason for its value, so that tests and the notebook can quote it.
:class:`ToolError` (the error every tool raises for an input it cannot run) and
:func:`clip_text` (the character cap of every observation) live here too, because the SQL
text checks, the table and the tools all need them.
"""

from __future__ import annotations

import sqlite3

#: Name of the one table the SQL tools see.
TABLE = "items"
#: Columns of :data:`TABLE`, in order.
COLUMNS = ("id", "title", "release_year", "tags", "visited_num", "avg_rating")
#: Character budget of a :func:`lookup` answer (the paper trims to about 512 tokens).
LOOKUP_CHARS = 2000

#: Longest SQL text accepted, in characters. A planner's SELECT is a few hundred characters;
#: the check comes before tokenising, which runs outside the time limit.
SQL_MAX_CHARS = 4000
#: Longest string, blob or row SQLite may build (``SQLITE_LIMIT_LENGTH``), in bytes: ten
#: times an observation. It also bounds the slowest single step: a quadratic function such
#: as ``instr`` or ``replace`` over two such values takes about 1.5 ms (50 ms at 100 kB,
#: 8 s at 1 MB), and the time limit is only checked between steps.
SQL_VALUE_MAX_BYTES = 20_000
#: Most result columns, GROUP BY or ORDER BY terms (``SQLITE_LIMIT_COLUMN``).
SQL_MAX_COLUMNS = 32
#: Most SELECTs joined by UNION / INTERSECT / EXCEPT (``SQLITE_LIMIT_COMPOUND_SELECT``).
SQL_MAX_COMPOUND = 16
#: Deepest expression tree (``SQLITE_LIMIT_EXPR_DEPTH``); 30 ORed conditions need 31.
SQL_MAX_EXPR_DEPTH = 100
#: Most arguments of one function call (``SQLITE_LIMIT_FUNCTION_ARG``).
SQL_MAX_FUNCTION_ARGS = 16
#: Longest LIKE or GLOB pattern (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``); matching costs
#: pattern x value, about 6 ms at this length over the longest value.
SQL_MAX_LIKE_PATTERN = 100
#: Most instructions of one compiled statement (``SQLITE_LIMIT_VDBE_OP``); a long planner
#: query compiles to a few hundred.
SQL_MAX_PROGRAM_OPS = 25_000
#: Most ``?`` parameters (``SQLITE_LIMIT_VARIABLE_NUMBER``); planner SQL binds none.
SQL_MAX_VARIABLES = 8
#: SQLite's heap for running queries in the SQL worker process (``PRAGMA hard_heap_limit``
#: there, plus room for the table itself), in bytes. Sorts and temporary tables live on it
#: (``temp_store = MEMORY``): a query that would spill, or a prepare-time blow-up, fails
#: within about a second instead of writing or allocating gigabytes. A planner's queries
#: over a catalogue of thousands of items need a few MB.
SQL_HEAP_LIMIT_BYTES = 64 * 2**20
#: Virtual-machine steps between two checks of the time limit.
PROGRESS_OPS = 100
#: Most rows :meth:`ReadOnlyTable.run_select` keeps, whatever ``max_rows`` says.
SQL_MAX_ROWS = 10_000
#: Most characters of values :meth:`ReadOnlyTable.run_select` keeps (about 1 MB of text).
SQL_RESULT_MAX_CHARS = 1_000_000
#: Rows :meth:`ReadOnlyTable.select_ids` reads before it refuses the query (at least twice
#: the candidates): more rows than candidates only come from joins that repeat them.
FILTER_MAX_ROWS = 100_000
#: Longest text value kept or shown, in characters; longer ones are cut with a visible mark.
CELL_CHARS = 500
#: Longest message of a :class:`ToolError` raised here.
ERROR_CHARS = 600

#: Per-connection limits set on the connection of every :class:`ReadOnlyTable`.
SQL_LIMITS: dict[int, int] = {
    sqlite3.SQLITE_LIMIT_LENGTH: SQL_VALUE_MAX_BYTES,
    # Bytes, after grounding may lengthen table names; the character check comes first.
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 8 * SQL_MAX_CHARS,
    sqlite3.SQLITE_LIMIT_COLUMN: SQL_MAX_COLUMNS,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: SQL_MAX_COMPOUND,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: SQL_MAX_EXPR_DEPTH,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: SQL_MAX_FUNCTION_ARGS,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: SQL_MAX_LIKE_PATTERN,
    sqlite3.SQLITE_LIMIT_VDBE_OP: SQL_MAX_PROGRAM_OPS,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: SQL_MAX_VARIABLES,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}

#: SQL functions the planner's SQL may call; the authorizer refuses every other one, e.g.
#: ``randomblob``, ``zeroblob``, ``hex``, ``printf`` / ``format``, ``char``, ``load_extension``,
#: the JSON functions and ``trim`` (its character set makes one call quadratic). CAST, CASE,
#: IN, BETWEEN, ``||`` and the comparison operators are not functions and always work.
SQL_FUNCTIONS = frozenset(
    {
        # text
        "lower", "upper", "length", "substr", "substring", "instr", "replace", "like", "glob",
        # NULLs and conditions
        "coalesce", "ifnull", "nullif", "iif", "typeof",
        # numbers
        "abs", "round", "min", "max", "sign", "random", "ceil", "ceiling", "floor", "trunc",
        "sqrt", "pow", "power", "mod", "exp", "ln", "log", "log10", "log2", "pi",
        # aggregates
        "count", "sum", "total", "avg", "group_concat",
        # window functions
        "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag",
        "lead", "first_value", "last_value", "nth_value",
        # dates (release years against the current date)
        "date", "time", "datetime", "julianday", "strftime",
    }
)  # fmt: skip


class ToolError(ValueError):
    """A tool input that cannot be run, with a message the planner (and a reader) can act on."""


def clip_text(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, ending in a visible mark when cut.

    Observations go into later prompts, so every text a tool returns passes through here.
    """
    if len(text) <= limit:
        return text
    mark = f"...[cut: {len(text):,} chars]"
    if limit <= len(mark):
        return text[: max(limit, 0)]
    return text[: limit - len(mark)] + mark
