"""InteRecAgent: a language model that plans calls to recommender tools.

Huang et al., *Recommender AI Agent: Integrating Large Language Models for Interactive
Recommendations* (arXiv 2308.16505; ACM TOIS 2025).

The LLM is the "brain" of a conversational recommender and classic recommender components
are its tools: a read-only SQL look-up and hard filter over the item table, an ItemCF soft
filter, a popularity / similarity / SASRec ranker and a title mapper. The tools hand item ids
to each other through a shared *candidate bus*, so item lists never enter a prompt. Per user
message a planner writes a whole tool plan at once ("plan-first"; or one tool per call,
ReAct), the executor runs it, and a critic may send it back with advice (reflection); a
dialogue memory, optionally a profile of stated likes and dislikes, carries the
conversation. The paper evaluates it with an LLM that plays a user looking for one held-out
item (Hit@5, AT@5) and with one-turn retrieval and ranking tasks, against the same LLM
without tools and Random / Pop.

Modules, from the tools up to the evaluation:

- :mod:`~recagents.papers.interecagent.config`: :class:`InteRecConfig` and
  :class:`SimulatorConfig` (the paper's settings as defaults) and the constants (bus cap,
  tool names and descriptions, methods).
- :mod:`~recagents.papers.interecagent.sqllimits`, :mod:`~recagents.papers.interecagent.sqltext`
  and :mod:`~recagents.papers.interecagent.sqlguard`: read-only, bounded SQL for the planner
  (the limits and :class:`ToolError`, the text check, :class:`ReadOnlyTable`).
- :mod:`~recagents.papers.interecagent.catalogue`: :class:`ItemTable` (the catalogue as the
  SQL table ``items``) and title matching.
- :mod:`~recagents.papers.interecagent.bus`: :class:`CandidateBus`.
- :mod:`~recagents.papers.interecagent.itemcf`: :class:`ItemCF`, the soft filter's similarity.
- :mod:`~recagents.papers.interecagent.toolbox`: :class:`ToolContext`, :func:`build_context`
  and the six tools.
- :mod:`~recagents.papers.interecagent.plans`: :data:`PLAN_SCHEMA`, :func:`validate_plan`,
  :func:`execute_plan` and :class:`ExecutionTrack`.
- :mod:`~recagents.papers.interecagent.scoring`: Hit@K / AT@K, the fuzzy hit and leak rules,
  Recall@k, ranking NDCG, and the Random / Pop baselines.
- :mod:`~recagents.papers.interecagent.tools`: the whole tool side above in one namespace.
- :mod:`~recagents.papers.interecagent.demos`: the planner's demonstrations and
  :func:`select_demos`.
- :mod:`~recagents.papers.interecagent.prompts`: pure prompt builders (``*_messages``), reply
  schemas and parsers of planner, ReAct agent, critic, summariser, profile extractor and the
  LLM-only baseline.
- :mod:`~recagents.papers.interecagent.session`: :class:`AgentSession`, :class:`TurnResult`,
  :class:`Attempt`.
- :mod:`~recagents.papers.interecagent.agent`: :func:`run_turns` (one batched turn of many
  sessions: plan, execute, criticise, re-plan) and :func:`llm_only_turns`; it re-exports the
  agent side (config, demonstrations, prompts, sessions).
- :mod:`~recagents.papers.interecagent.simulator`: the simulated user (:func:`make_sessions`,
  :func:`simulate_turn`).
- :mod:`~recagents.papers.interecagent.conversations`: :func:`run_sessions` and
  :func:`conversation_metrics` (Hit@5, AT@5).
- :mod:`~recagents.papers.interecagent.evaluate`: the one-turn tasks
  (:func:`one_turn_retrieval`, :func:`one_turn_ranking`, :func:`one_turn_metrics`); it
  re-exports the whole evaluation (simulator, conversations, trace).
- :mod:`~recagents.papers.interecagent.analysis`: :func:`session_trace`, one conversation as
  readable text.

``tools``, ``sqlguard``, ``agent`` and ``evaluate`` keep the names of the modules the
notebooks use (``tools.build_context``, ``ira.InteRecConfig``, ``ev.run_sessions``); the
package re-exports all their public names too. Importing it runs nothing.

The same entry point in all five papers: :mod:`~recagents.papers.interecagent.entry` holds
:func:`run`, the paper's experiment as a :class:`~recagents.protocol.PaperRun` and
:func:`rank`, its ranking of shared candidates.
"""

from recagents.papers.interecagent import entry
from recagents.papers.interecagent.agent import (
    llm_only_turns,
    run_turns,
)
from recagents.papers.interecagent.analysis import (
    session_trace,
)
from recagents.papers.interecagent.bus import (
    BusEvent,
    CandidateBus,
)
from recagents.papers.interecagent.catalogue import (
    ItemRow,
    ItemTable,
    TitleMatch,
    split_titles,
)
from recagents.papers.interecagent.config import (
    APOLOGY,
    BUS_CAP,
    DEMO_MODES,
    END,
    METHODS,
    OBSERVATION_CHARS,
    PLAN_MODES,
    RANK_SCHEMAS,
    TOOL_DESCRIPTIONS,
    TOOL_NAMES,
    InteRecConfig,
    SimulatorConfig,
)
from recagents.papers.interecagent.conversations import (
    ConversationRun,
    conversation_metrics,
    run_sessions,
)
from recagents.papers.interecagent.demos import (
    DEMOS,
    Demo,
    select_demos,
)
from recagents.papers.interecagent.evaluate import (
    one_turn_metrics,
    one_turn_ranking,
    one_turn_retrieval,
    ranking_task_messages,
)
from recagents.papers.interecagent.itemcf import (
    ItemCF,
)
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
from recagents.papers.interecagent.prompts import (
    PlannerReply,
    critic_messages,
    critic_schema,
    llm_only_messages,
    llm_only_schema,
    merge_profile,
    parse_critic_reply,
    parse_llm_only_reply,
    parse_planner_reply,
    parse_profile_reply,
    parse_react_reply,
    planner_messages,
    planner_schema,
    profile_messages,
    profile_schema,
    react_messages,
    react_schema,
    summariser_messages,
    summariser_schema,
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
from recagents.papers.interecagent.session import (
    AgentSession,
    Attempt,
    ProfileUpdate,
    TurnResult,
)
from recagents.papers.interecagent.simulator import (
    SessionSet,
    SessionSpec,
    SimMessage,
    make_sessions,
    parse_simulator_reply,
    simulate_turn,
    simulator_messages,
    simulator_schema,
    target_attributes,
)
from recagents.papers.interecagent.sqlguard import (
    IdSelection,
    ReadOnlyTable,
    SelectResult,
)
from recagents.papers.interecagent.sqllimits import (
    CELL_CHARS,
    COLUMNS,
    ERROR_CHARS,
    FILTER_MAX_ROWS,
    LOOKUP_CHARS,
    PROGRESS_OPS,
    SQL_FUNCTIONS,
    SQL_HEAP_LIMIT_BYTES,
    SQL_LIMITS,
    SQL_MAX_CHARS,
    SQL_MAX_ROWS,
    SQL_RESULT_MAX_CHARS,
    SQL_VALUE_MAX_BYTES,
    TABLE,
    ToolError,
    clip_text,
)
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
    "entry",
    "APOLOGY",
    "BUS_CAP",
    "CELL_CHARS",
    "COLUMNS",
    "DEMOS",
    "DEMO_MODES",
    "END",
    "ERROR_CHARS",
    "FILTER_MAX_ROWS",
    "LOOKUP_CHARS",
    "METHODS",
    "OBSERVATION_CHARS",
    "PLAN_MODES",
    "PLAN_OBJECT_SCHEMA",
    "PLAN_SCHEMA",
    "PROGRESS_OPS",
    "RANK_SCHEMAS",
    "SQL_FUNCTIONS",
    "SQL_HEAP_LIMIT_BYTES",
    "SQL_LIMITS",
    "SQL_MAX_CHARS",
    "SQL_MAX_ROWS",
    "SQL_RESULT_MAX_CHARS",
    "SQL_VALUE_MAX_BYTES",
    "TABLE",
    "TOOL_DESCRIPTIONS",
    "TOOL_NAMES",
    "AgentSession",
    "Attempt",
    "BusEvent",
    "CandidateBus",
    "ConversationMetrics",
    "ConversationRun",
    "Demo",
    "ExecutionTrack",
    "IdSelection",
    "InteRecConfig",
    "ItemCF",
    "ItemRow",
    "ItemTable",
    "PlanError",
    "PlanStep",
    "PlannerReply",
    "ProfileUpdate",
    "ReadOnlyTable",
    "SelectResult",
    "SessionSet",
    "SessionSpec",
    "SimMessage",
    "SimulatorConfig",
    "StepRecord",
    "TitleMatch",
    "ToolContext",
    "ToolError",
    "TurnResult",
    "build_context",
    "candidate_store",
    "clip_text",
    "conversation_metrics",
    "critic_messages",
    "critic_schema",
    "execute_plan",
    "execute_step",
    "fuzzy_hit",
    "hard_filter",
    "hit_at_k_and_at",
    "hit_by_id",
    "leaks",
    "llm_only_messages",
    "llm_only_schema",
    "llm_only_turns",
    "lookup",
    "make_sessions",
    "map_titles",
    "merge_profile",
    "one_turn_metrics",
    "one_turn_ranking",
    "one_turn_retrieval",
    "parse_critic_reply",
    "parse_llm_only_reply",
    "parse_plan",
    "parse_planner_reply",
    "parse_profile_reply",
    "parse_rank_input",
    "parse_react_reply",
    "parse_simulator_reply",
    "planner_messages",
    "planner_schema",
    "popular_recommend",
    "profile_messages",
    "profile_schema",
    "random_recommend",
    "rank",
    "ranking_ndcg",
    "ranking_task_messages",
    "react_messages",
    "react_schema",
    "recall_at_k",
    "run_sessions",
    "run_turns",
    "select_demos",
    "session_trace",
    "simulate_turn",
    "simulator_messages",
    "simulator_schema",
    "soft_filter",
    "split_titles",
    "summariser_messages",
    "summariser_schema",
    "target_attributes",
    "validate_plan",
]
