"""Agent4Rec analyses computed from simulation logs, without an LLM.

Zhang et al., *On Generative Agents in Recommendation*, SIGIR 2024. Everything here reads
tidy frames, either produced by :func:`recagents.papers.agent4rec.simulate.simulate` or converted
from the authors' released 1,000-agent run by :func:`load_official_run`:

* ``exposures``: one row per item shown: ``user_id`` (str), ``recommender`` (str), ``page``
  (1-based), ``position`` (0-based within the page), ``item_id`` (str), ``aligned``
  (nullable boolean), ``watched`` (bool), ``rating`` (1-5, NaN when not watched) and
  ``feeling`` (str, ``""`` when none).
* ``sessions``: one row per agent session: ``user_id``, ``recommender``, ``exit_page`` (last
  page seen), ``exited`` (the agent chose to leave) and ``satisfaction`` (1-10, NaN when the
  interview failed).
* ``traits``: ``user_id``, the levels ``activity``, ``conformity``, ``diversity`` (1..3) and
  the raw statistics ``n_ratings``, ``conformity_mse``, ``n_top_genres``.

The analyses are the paper's: social traits (:func:`compute_traits`), engagement per
recommender (:func:`engagement`), agent vs real rating histograms
(:func:`rating_distribution`), behaviour by trait level with ANOVA (:func:`trait_anova`),
the filter bubble (:func:`genre_concentration`) and causal discovery with DirectLiNGAM
(:func:`causal_discovery`). Importing this module loads no data and starts nothing.

This module is the analyses' one namespace (notebook 02 imports it as ``analysis``); the
code lives in :mod:`~recagents.papers.agent4rec.frames` (log columns and checks),
:mod:`~recagents.papers.agent4rec.traits`, :mod:`~recagents.papers.agent4rec.engagement`,
:mod:`~recagents.papers.agent4rec.bubble`, :mod:`~recagents.papers.agent4rec.causal` and
:mod:`~recagents.papers.agent4rec.recorded` (the official recorded run) and
:mod:`~recagents.papers.agent4rec.replay` (its decisions replayed through our loop).
"""

from __future__ import annotations

from recagents.papers.agent4rec.bubble import bubble_figure, genre_concentration
from recagents.papers.agent4rec.causal import (
    CAUSAL_COLUMNS,
    causal_discovery,
    causal_figure,
    item_causal_table,
)
from recagents.papers.agent4rec.config import TRAIT_CUTS, TRAITS
from recagents.papers.agent4rec.engagement import (
    engagement,
    engagement_summary,
    rating_distribution,
    rating_figure,
    satisfaction_by,
)
from recagents.papers.agent4rec.frames import EXPOSURE_COLUMNS, SESSION_COLUMNS
from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES
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
from recagents.papers.agent4rec.traits import (
    TRAIT_MEASURES,
    compute_traits,
    trait_anova,
    trait_behaviour,
    trait_figure,
)

__all__ = [
    "CAUSAL_COLUMNS",
    "EXPOSURE_COLUMNS",
    "OFFICIAL_ENV",
    "SESSION_COLUMNS",
    "TRAITS",
    "TRAIT_CUTS",
    "TRAIT_MEASURES",
    "TRAIT_SENTENCES",
    "OfficialRun",
    "UnsafePickleError",
    "bubble_figure",
    "causal_discovery",
    "causal_figure",
    "compute_traits",
    "engagement",
    "engagement_summary",
    "genre_concentration",
    "item_causal_table",
    "load_official_pickle",
    "load_official_run",
    "official_run_dir",
    "parse_satisfaction",
    "rating_distribution",
    "rating_figure",
    "satisfaction_by",
    "trait_anova",
    "trait_behaviour",
    "trait_figure",
    "RECORDED_NAME",
    "ReplayResult",
    "official_metrics",
    "read_metrics_txt",
    "read_recorded_visits",
    "recorded_client",
    "replay_official",
]
