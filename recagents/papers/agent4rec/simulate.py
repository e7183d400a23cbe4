"""Agent4Rec's simulator: generative user agents that browse recommendations page by page.

Zhang et al., *On Generative Agents in Recommendation*, SIGIR 2024 (arXiv 2310.10108). Each
agent is built from a real user: three social traits computed from the data
(:func:`recagents.papers.agent4rec.analysis.compute_traits`), a taste persona the LLM writes
from the user's ratings, and a memory. A recommender's ranked list is shown a page at a time;
on each page the agent judges every item, watches some, rates them with a feeling, then
decides to leave or to turn the page; after leaving it is interviewed about its satisfaction.

Everything the LLM returns is structured and refers to items by their number on the page,
never by title; every unusable reply is counted. Calls run page by page *across* agents, so
independent agents' calls go out together (concurrently on a multi-slot endpoint).

This module is the simulator's one namespace (notebook 02 imports it as ``sim``); the code
lives in :mod:`~recagents.papers.agent4rec.config`, :mod:`~recagents.papers.agent4rec.agents`,
:mod:`~recagents.papers.agent4rec.prompts`, :mod:`~recagents.papers.agent4rec.loop` and
:mod:`~recagents.papers.agent4rec.evaluate`; calls and counted problems go to the shared
:class:`recagents.llm.runlog.RunLog`.
"""

from __future__ import annotations

from recagents.papers.agent4rec.agents import Agent, build_agents, item_lines, random_split
from recagents.papers.agent4rec.config import RECOMMENDERS, TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.evaluate import (
    exposure_mask,
    feedback_interactions,
    feedback_rounds,
    offline_accuracy,
    random_ranking,
    rank_for_agents,
    taste_probe,
    taste_probe_sets,
    with_feedback,
)
from recagents.papers.agent4rec.loop import (
    Visit,
    decide_exit,
    interview,
    reflect,
    show_page,
    simulate,
    start_visit,
    visit_frames,
)
from recagents.papers.agent4rec.loop import _recall as _recall
from recagents.papers.agent4rec.prompts import (
    exit_messages,
    exit_schema,
    interview_messages,
    interview_schema,
    page_messages,
    page_schema,
    parse_page,
    persona_messages,
    persona_schema,
    persona_text,
    reflection_messages,
    taste_schema,
)
from recagents.papers.agent4rec.scripted import (
    SCRIPTED_NAME,
    browsing_client,
    browsing_policy,
    exit_page_figure,
    request_kind,
    top_genres,
)

__all__ = [
    "TRAITS",
    "Agent",
    "Agent4RecConfig",
    "build_agents",
    "exit_messages",
    "exit_schema",
    "interview_messages",
    "interview_schema",
    "item_lines",
    "page_messages",
    "page_schema",
    "parse_page",
    "persona_messages",
    "persona_schema",
    "persona_text",
    "random_split",
    "reflection_messages",
    "simulate",
    "RECOMMENDERS",
    "exposure_mask",
    "feedback_rounds",
    "offline_accuracy",
    "feedback_interactions",
    "rank_for_agents",
    "random_ranking",
    "with_feedback",
    "taste_probe",
    "taste_probe_sets",
    "taste_schema",
    "SCRIPTED_NAME",
    "Visit",
    "browsing_client",
    "browsing_policy",
    "exit_page_figure",
    "decide_exit",
    "interview",
    "reflect",
    "request_kind",
    "show_page",
    "start_visit",
    "top_genres",
    "visit_frames",
]
