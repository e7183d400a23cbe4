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

- :mod:`~recagents.papers.interecagent.config`: :class:`InteRecConfig`,
  :class:`SimulatorConfig` and :class:`ExperimentConfig` (the paper's settings as defaults)
  and the constants (bus cap, tool names and descriptions, methods).
- :mod:`~recagents.papers.interecagent.sqllimits`, :mod:`~recagents.papers.interecagent.sqltext`,
  :mod:`~recagents.papers.interecagent.sqlguard` and
  :mod:`~recagents.papers.interecagent.sqlworker`: read-only, bounded SQL for the planner
  (the limits and :class:`ToolError`, the text check, :class:`ReadOnlyTable` and its worker).
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
- :mod:`~recagents.papers.interecagent.demos`: the planner's demonstrations and
  :func:`select_demos`.
- :mod:`~recagents.papers.interecagent.prompts`: pure prompt builders (``*_messages``), reply
  schemas and parsers of planner, ReAct agent, critic, summariser, profile extractor and the
  LLM-only baseline.
- :mod:`~recagents.papers.interecagent.session`: :class:`AgentSession`, :class:`TurnResult`,
  :class:`Attempt`.
- :mod:`~recagents.papers.interecagent.agent`: :func:`run_turns` (one batched turn of many
  sessions: plan, execute, criticise, re-plan) and :func:`llm_only_turns`.
- :mod:`~recagents.papers.interecagent.simulator`: the simulated user (:func:`make_sessions`,
  :func:`simulate_turn`).
- :mod:`~recagents.papers.interecagent.conversations`: :func:`run_sessions` and
  :func:`conversation_metrics` (Hit@K, AT@K).
- :mod:`~recagents.papers.interecagent.evaluate`: the one-turn tasks
  (:func:`one_turn_retrieval`, :func:`one_turn_ranking`, :func:`one_turn_metrics`).
- :mod:`~recagents.papers.interecagent.analysis`: :func:`session_trace`, one conversation as
  readable text.
- :mod:`~recagents.papers.interecagent.entry`: the plug-in: :data:`PROFILES`, :func:`run`
  (the notebook's experiment, from :func:`prepare` and :func:`experiment`) and :func:`rank`
  (the one-turn ranking of shared candidates).

Importing the package imports none of them.
"""
