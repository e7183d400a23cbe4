"""Rec4Agentverse: a recommender that routes users to agent items and talks with them.

Zhang et al., *Prospect Personalized Recommendation on Large Language Model-based Agent
Platform* (arXiv 2402.18240; CACM 2025). A perspective paper with no code and no numbers:
when the items of a platform are LLM agents ("agent items"), the recommender ("Agent
Recommender") not only picks an agent for a user but also exchanges information with it.
Three stages add flows: (1) user <-> agent item, the user talks to the recommended agent over
several turns; (2) agent item <-> recommender, the agent reports the preferences it learned,
and the recommender updates its profile of the user and instructs the agent or switches to a
better one; (3) agent items <-> agent items, the recommender brokers a consultation, the
current agent receives shortlists from other agents and its final list merges them.
Everything measured here is our own demonstration protocol on MovieLens-100K, not the paper's.

Modules, in the order a run uses them:

- ``config``: :class:`Rec4AConfig` (every setting, with our defaults; the paper gives none),
  the genre and era vocabularies, the consent field groups, :func:`era_of_year`.
- ``catalogue``: :data:`AGENT_SPECS` / :data:`ADVERSARY_SPEC`, :class:`AgentCard`,
  :class:`Catalogue` and :func:`build_catalogue` (about ten curator agent items over genre x
  era slices of the films, optionally one adversarial agent).
- ``users``: :class:`SimUser` and :func:`make_users` (hidden preferences from real ml-100k
  ratings; held-out films are the targets).
- ``recommender``: :class:`Profile`, :func:`update_profile`, :func:`profile_from_text`,
  :class:`Instruction`, :func:`instruction_for`, :func:`shortlist`,
  :func:`merge_shortlists`, :func:`score_agents`, :func:`choose_agent` (the recommender's
  view of a user, what it tells agents, its classic scorer).
- ``prompts``: pure prompt builders (``*_messages``), reply schemas and parsers.
- ``reports``: reports and consent (:func:`report_schema`, :func:`validate_report`,
  :func:`gate_report`, :func:`render_report`, :func:`detect_leaks`, ...).
- ``templates``: the template (rule-based, no LLM) user and agent policies, a named baseline.
- ``session``: :class:`SessionRun`, per-session state, the trace recorder and the batched
  steps of a turn, every call accounted in a :class:`~recagents.llm.runlog.RunLog`.
- ``stages``: :func:`run_sessions` / :func:`run_stages`, the protocol of the three stages.
- ``manipulation``: :func:`manipulation_experiment` and :func:`manipulation_summary` (an
  adversarial agent tries to get itself recommended through a free-text or a schema-checked
  report).
- ``evaluate``: :func:`hit_at_k`, :func:`preference_share`, :func:`turns_needed`,
  :func:`jaccard`, :func:`profile_match`.
- ``analysis``: :func:`stage_comparison`, :func:`stage_figure`, :func:`exposure_summary` and
  :func:`session_trace` for the notebook.

The same entry point in all five papers: :mod:`~recagents.papers.rec4agentverse.entry` holds
:func:`run`, the paper's experiment as a :class:`~recagents.protocol.PaperRun`.
"""

from __future__ import annotations

from recagents.papers.rec4agentverse import entry
from recagents.papers.rec4agentverse.analysis import (
    exposure_summary,
    session_trace,
    stage_comparison,
    stage_figure,
)
from recagents.papers.rec4agentverse.catalogue import (
    ADVERSARY_SPEC,
    AGENT_SPECS,
    AgentCard,
    AgentSpec,
    Catalogue,
    build_catalogue,
)
from recagents.papers.rec4agentverse.config import (
    ERAS,
    GENRE_NAMES,
    METRICS,
    SENSITIVE_FIELDS,
    SHARE_FIELDS,
    STAGES,
    Rec4AConfig,
    era_of_year,
)
from recagents.papers.rec4agentverse.evaluate import (
    hit_at_k,
    jaccard,
    preference_share,
    profile_match,
    turns_needed,
)
from recagents.papers.rec4agentverse.manipulation import (
    manipulation_experiment,
    manipulation_summary,
)
from recagents.papers.rec4agentverse.prompts import (
    AgentReply,
    agent_messages,
    agent_schema,
    opening_schema,
    parse_agent_reply,
    parse_choice,
    parse_opening,
    parse_reaction,
    parse_report_reply,
    reaction_schema,
    recommender_messages,
    recommender_schema,
    report_messages,
    report_reply_schema,
    user_opening_messages,
    user_reaction_messages,
)
from recagents.papers.rec4agentverse.recommender import (
    Instruction,
    Profile,
    choose_agent,
    instruction_for,
    merge_shortlists,
    profile_from_text,
    score_agents,
    shortlist,
    update_profile,
)
from recagents.papers.rec4agentverse.reports import (
    adversarial_report,
    build_report,
    detect_leaks,
    gate_report,
    honest_report,
    render_report,
    report_schema,
    validate_report,
)
from recagents.papers.rec4agentverse.session import SessionRun
from recagents.papers.rec4agentverse.stages import run_sessions, run_stages
from recagents.papers.rec4agentverse.templates import (
    template_agent_reply,
    template_opening,
    template_reaction,
    template_report,
)
from recagents.papers.rec4agentverse.users import SimUser, make_users

__all__ = [
    "entry",
    "ADVERSARY_SPEC",
    "AGENT_SPECS",
    "ERAS",
    "GENRE_NAMES",
    "METRICS",
    "SENSITIVE_FIELDS",
    "SHARE_FIELDS",
    "STAGES",
    "AgentCard",
    "AgentReply",
    "AgentSpec",
    "Catalogue",
    "Instruction",
    "Profile",
    "Rec4AConfig",
    "SessionRun",
    "SimUser",
    "adversarial_report",
    "agent_messages",
    "agent_schema",
    "build_catalogue",
    "build_report",
    "choose_agent",
    "detect_leaks",
    "era_of_year",
    "exposure_summary",
    "gate_report",
    "hit_at_k",
    "honest_report",
    "instruction_for",
    "jaccard",
    "make_users",
    "manipulation_experiment",
    "manipulation_summary",
    "merge_shortlists",
    "opening_schema",
    "parse_agent_reply",
    "parse_choice",
    "parse_opening",
    "parse_reaction",
    "parse_report_reply",
    "preference_share",
    "profile_from_text",
    "profile_match",
    "reaction_schema",
    "recommender_messages",
    "recommender_schema",
    "render_report",
    "report_messages",
    "report_reply_schema",
    "report_schema",
    "run_sessions",
    "run_stages",
    "score_agents",
    "session_trace",
    "shortlist",
    "stage_comparison",
    "stage_figure",
    "template_agent_reply",
    "template_opening",
    "template_reaction",
    "template_report",
    "turns_needed",
    "update_profile",
    "user_opening_messages",
    "user_reaction_messages",
    "validate_report",
]
