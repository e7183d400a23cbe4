"""InteRecAgent's tools without a language model: item table, safe SQL, candidate bus, plans.

InteRecAgent lets a language model plan calls to classic recommender tools. The tools pass
item ids through a shared *candidate bus*, so item lists never enter the prompt. Everything
on this side runs without a model, so that the tool chain can be tested, traced and
scripted on its own. This module gathers it in one namespace (``tools.execute_plan``,
``tools.build_context``, ...); the code lives in the modules named below:

- :class:`ItemTable` (:mod:`~recagents.papers.interecagent.catalogue`): the catalogue as an
  in-memory SQLite table ``items``, with a :meth:`~ItemTable.describe` text for prompts and
  read-only SQL (:meth:`~ItemTable.run_select`) enforced by SQLite's authorizer, limits and
  a time limit, not by pattern matching alone (:mod:`recagents.papers.interecagent.sqlguard`).
  Every observation a tool returns is capped in characters (:data:`OBSERVATION_CHARS`;
  ``lookup_chars`` for the SQL tools).
- :class:`CandidateBus` (:mod:`~recagents.papers.interecagent.bus`): the current candidate
  ids (all items at the start of a turn), capped at 1,000 whenever a tool writes to it.
- The six tools (:mod:`~recagents.papers.interecagent.toolbox`): :func:`candidate_store`,
  :func:`lookup`, :func:`hard_filter`, :func:`soft_filter` (ItemCF,
  :mod:`~recagents.papers.interecagent.itemcf`), :func:`rank` and :func:`map_titles`. Each
  takes a :class:`ToolContext` and the input the planner wrote, updates the bus and returns
  a short text observation.
- Plans (:mod:`~recagents.papers.interecagent.plans`): :data:`PLAN_SCHEMA`,
  :func:`validate_plan` and :func:`execute_plan`, which returns an :class:`ExecutionTrack`
  for the critic prompt and for a notebook trace.
- Metrics of the multi-turn and one-turn protocols and the Random / Pop baselines
  (:mod:`~recagents.papers.interecagent.scoring`); the constants are in
  :mod:`~recagents.papers.interecagent.config`.

Deviations from the released code, each deliberate and documented where it happens:

- The bus starts with *all* items (the paper's starts at ids 1..N-1 and never holds the last).
- A plan keeps its order and may repeat a tool (the paper turns a plan into a dict, so a tool
  runs at most once).
- Unknown columns are reported with the real ones (the paper maps them to the nearest column).
- The executor stops at the first failing step, as the paper's does; ``stop_on_error=False``
  runs the remaining steps instead.
"""

from __future__ import annotations

from recagents.papers.interecagent.bus import BusEvent, CandidateBus
from recagents.papers.interecagent.catalogue import ItemRow, ItemTable, TitleMatch, split_titles
from recagents.papers.interecagent.config import (
    BUS_CAP,
    OBSERVATION_CHARS,
    RANK_KEEP,
    RANK_SCHEMAS,
    TITLE_SEPARATOR,
    TOOL_DESCRIPTIONS,
    TOOL_NAMES,
    TOP_RATIO_APP,
    TOP_RATIO_EVAL,
)
from recagents.papers.interecagent.itemcf import ItemCF
from recagents.papers.interecagent.plans import (
    PLAN_OBJECT_SCHEMA,
    PLAN_SCHEMA,
    ExecutionTrack,
    PlanError,
    PlanStep,
    StepRecord,
    execute_plan,
    execute_step,
    parse_plan,
    validate_plan,
)
from recagents.papers.interecagent.scoring import (
    ConversationMetrics,
    fuzzy_hit,
    hit_at_k_and_at,
    hit_by_id,
    leaks,
    popular_recommend,
    random_recommend,
    ranking_ndcg,
    recall_at_k,
)
from recagents.papers.interecagent.sqlguard import IdSelection, SelectResult
from recagents.papers.interecagent.sqllimits import COLUMNS, LOOKUP_CHARS, TABLE, ToolError
from recagents.papers.interecagent.toolbox import (
    ToolContext,
    build_context,
    candidate_store,
    hard_filter,
    lookup,
    map_titles,
    parse_rank_input,
    rank,
    soft_filter,
)

__all__ = [
    "BUS_CAP",
    "COLUMNS",
    "LOOKUP_CHARS",
    "OBSERVATION_CHARS",
    "PLAN_OBJECT_SCHEMA",
    "PLAN_SCHEMA",
    "RANK_KEEP",
    "RANK_SCHEMAS",
    "TABLE",
    "TITLE_SEPARATOR",
    "TOOL_DESCRIPTIONS",
    "TOOL_NAMES",
    "TOP_RATIO_APP",
    "TOP_RATIO_EVAL",
    "BusEvent",
    "CandidateBus",
    "ConversationMetrics",
    "ExecutionTrack",
    "IdSelection",
    "ItemCF",
    "ItemRow",
    "ItemTable",
    "PlanError",
    "PlanStep",
    "SelectResult",
    "StepRecord",
    "TitleMatch",
    "ToolContext",
    "ToolError",
    "build_context",
    "candidate_store",
    "execute_plan",
    "execute_step",
    "fuzzy_hit",
    "hard_filter",
    "hit_at_k_and_at",
    "hit_by_id",
    "leaks",
    "lookup",
    "map_titles",
    "parse_plan",
    "parse_rank_input",
    "popular_recommend",
    "random_recommend",
    "rank",
    "ranking_ndcg",
    "recall_at_k",
    "soft_filter",
    "split_titles",
    "validate_plan",
]
