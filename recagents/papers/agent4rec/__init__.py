"""Agent4Rec: generative user agents that browse recommendations (SIGIR 2024).

Zhang et al., *On Generative Agents in Recommendation*, SIGIR 2024 (arXiv 2310.10108).

One LLM agent per real user: three social traits computed from the data (activity,
conformity, diversity), a taste persona the LLM writes from the user's ratings, and a memory.
A recommender's ranked list is shown 4 items a page, at most 5 pages; on each page the agent
judges every item, watches some and rates them with a feeling, then leaves or turns the page;
afterwards it is interviewed about its satisfaction (1-10). The paper uses such simulations to
check that agents act like their users (taste discrimination, trait alignment), to compare
recommenders offline, to retrain on simulated feedback, to watch a filter bubble form and for
causal discovery.

Modules, from the settings to the analyses:

- :mod:`~recagents.papers.agent4rec.config`: :class:`Agent4RecConfig` (the paper's settings
  as defaults), the traits and their percentile cuts, the recommenders compared.
- :mod:`~recagents.papers.agent4rec.prompts`: pure prompt builders (``*_messages``), reply
  schemas and parsers, and the trait sentences of the role prompt.
- :mod:`~recagents.papers.agent4rec.agents`: the paper's random split, item lines, and
  :func:`build_agents` (traits and personas).
- :mod:`~recagents.papers.agent4rec.loop`: the page-by-page loop
  (:func:`recagents.papers.agent4rec.loop.simulate`).
- :mod:`~recagents.papers.agent4rec.evaluate`: the taste probe, the recommenders' lists and
  offline accuracy, feedback retraining and the filter-bubble rounds.
- :mod:`~recagents.papers.agent4rec.frames`: the log formats and their checks.
- :mod:`~recagents.papers.agent4rec.traits`: :func:`compute_traits` and trait alignment
  (behaviour by level, ANOVA, figure).
- :mod:`~recagents.papers.agent4rec.engagement`: engagement per recommender, satisfaction by
  trait level, rating distribution.
- :mod:`~recagents.papers.agent4rec.bubble`: genre concentration round by round.
- :mod:`~recagents.papers.agent4rec.causal`: the per-item table, DirectLiNGAM, the graph.
- :mod:`~recagents.papers.agent4rec.recorded`: the authors' recorded run (read only from a
  folder passed in or named by ``$RECAGENTS_AGENT4REC_RECORDED``) and its safe pickle loader.
- :mod:`~recagents.papers.agent4rec.replay`: the recorded run's decisions replayed through
  our loop, compared with the records agent by agent and with ``metrics.txt``.
- :mod:`~recagents.papers.agent4rec.scripted`: a scripted browsing agent (a rule, not an
  LLM) that keeps browsing, so later pages, retrieved memories and the reflection appear.
- :mod:`~recagents.papers.agent4rec.simulate` and :mod:`~recagents.papers.agent4rec.analysis`:
  the two namespaces notebook 02 uses (``sim`` and ``analysis``): everything with an LLM, and
  everything computed from the logs without one.

The package re-exports every public name of ``simulate`` and ``analysis`` except the function
``simulate``, whose name is the module's (``simulate.simulate``). Importing it runs nothing.

The same entry point in all five papers: :mod:`~recagents.papers.agent4rec.entry` holds
:func:`run`, the paper's experiment as a :class:`~recagents.protocol.PaperRun`.
"""

from recagents.papers.agent4rec import analysis, entry, simulate
from recagents.papers.agent4rec.agents import Agent, build_agents, item_lines, random_split
from recagents.papers.agent4rec.bubble import bubble_figure, genre_concentration
from recagents.papers.agent4rec.causal import (
    CAUSAL_COLUMNS,
    causal_discovery,
    causal_figure,
    item_causal_table,
)
from recagents.papers.agent4rec.config import RECOMMENDERS, TRAIT_CUTS, TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.engagement import (
    engagement,
    engagement_summary,
    rating_distribution,
    rating_figure,
    satisfaction_by,
)
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
from recagents.papers.agent4rec.frames import EXPOSURE_COLUMNS, SESSION_COLUMNS
from recagents.papers.agent4rec.prompts import (
    TRAIT_SENTENCES,
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
from recagents.papers.agent4rec.recorded import (
    OFFICIAL_ENV,
    OfficialRun,
    UnsafePickleError,
    load_official_pickle,
    load_official_run,
    official_run_dir,
    parse_satisfaction,
)
from recagents.papers.agent4rec.replay import (
    RECORDED_NAME,
    ReplayResult,
    official_metrics,
    read_metrics_txt,
    read_recorded_visits,
    recorded_client,
    replay_official,
)
from recagents.papers.agent4rec.scripted import (
    SCRIPTED_NAME,
    browsing_client,
    browsing_policy,
    exit_page_figure,
    request_kind,
    top_genres,
)
from recagents.papers.agent4rec.traits import (
    TRAIT_MEASURES,
    compute_traits,
    trait_anova,
    trait_behaviour,
    trait_figure,
)

__all__ = [
    "entry",
    "CAUSAL_COLUMNS",
    "EXPOSURE_COLUMNS",
    "OFFICIAL_ENV",
    "RECOMMENDERS",
    "SESSION_COLUMNS",
    "TRAITS",
    "TRAIT_CUTS",
    "TRAIT_MEASURES",
    "TRAIT_SENTENCES",
    "Agent",
    "Agent4RecConfig",
    "OfficialRun",
    "UnsafePickleError",
    "analysis",
    "bubble_figure",
    "build_agents",
    "causal_discovery",
    "causal_figure",
    "compute_traits",
    "engagement",
    "engagement_summary",
    "exit_messages",
    "exit_schema",
    "exposure_mask",
    "feedback_interactions",
    "feedback_rounds",
    "genre_concentration",
    "interview_messages",
    "interview_schema",
    "item_causal_table",
    "item_lines",
    "load_official_pickle",
    "load_official_run",
    "offline_accuracy",
    "official_run_dir",
    "page_messages",
    "page_schema",
    "parse_page",
    "parse_satisfaction",
    "persona_messages",
    "persona_schema",
    "persona_text",
    "random_ranking",
    "random_split",
    "rank_for_agents",
    "rating_distribution",
    "rating_figure",
    "reflection_messages",
    "satisfaction_by",
    "simulate",
    "taste_probe",
    "taste_probe_sets",
    "taste_schema",
    "trait_anova",
    "trait_behaviour",
    "trait_figure",
    "with_feedback",
    "SCRIPTED_NAME",
    "browsing_client",
    "browsing_policy",
    "exit_page_figure",
    "request_kind",
    "top_genres",
    "RECORDED_NAME",
    "ReplayResult",
    "official_metrics",
    "read_metrics_txt",
    "read_recorded_visits",
    "recorded_client",
    "replay_official",
]
