"""AFL: a recommendation agent and a user agent in a feedback loop.

Cai et al., *Agentic Feedback Loop Modeling Improves Recommendation and User Simulation*,
SIGIR 2025 (arXiv 2410.20027).

A recommendation agent sees a user's recent history and 20 candidates (plus, in the first
round, a sequential recommender's top pick) and proposes one item with a reason. A user
agent, playing that user, accepts it or rejects it with a reason. Each rejection goes into
both agents' memories and the recommendation agent tries again, until the user agent accepts
or a round limit is reached; the prediction is the last proposal. One round alone is the
*single recommendation agent*. The dialogue memory also makes the user agent a better *user
simulator* (like / dislike judgements).

Modules, in the order a run uses them:

- :mod:`~recagents.papers.afl.config`: :class:`AFLConfig` (every setting, the paper's as
  defaults; where the paper and its code disagree, an option), :data:`STOPS`,
  :func:`ratio_name`.
- :mod:`~recagents.papers.afl.samples`: :class:`Sample`, :func:`recent_histories`,
  :func:`tool_scores`, :func:`make_samples` (20 candidates per test user with the tool
  model's (SASRec's) top pick, focus list and raw scores).
- :mod:`~recagents.papers.afl.prompts`: pure prompt builders (``*_messages``), schemas and
  parsers, :class:`RoundMemory`; every choice is an index into the candidate list (or, with
  ``faithful_parsing``, the paper's exact-title match).
- :mod:`~recagents.papers.afl.loop`: :func:`feedback_loop`, the loop itself, batched over
  samples, every call accounted.
- :mod:`~recagents.papers.afl.user_simulation`: :func:`user_sim_split`,
  :func:`user_sim_sets`, :func:`step1_candidates` (a held-out window of 10 items per user;
  positives and negatives at 1:1, 1:3 and 1:9) and :func:`simulate_users`.
- :mod:`~recagents.papers.afl.evaluate`: :func:`predictions`, :func:`hits_by_round`,
  :func:`hit_rate_table`, :func:`stop_counts`, :func:`simulation_metrics`,
  :func:`always_yes_metrics`, :func:`relative_gain`.
- :mod:`~recagents.papers.afl.scripted`: :func:`scripted_user_client`, a scripted user agent
  (accepts only the target, rejects with a genre reason) for demonstrations, never an LLM
  result.
- :mod:`~recagents.papers.afl.seeds`: :func:`paired_over_seeds`, AFL against the single agent
  pooled over several seeds with a paired interval and detectable effect.
- :mod:`~recagents.papers.afl.analysis`: :func:`chosen_items`, :func:`bias_measures`,
  :func:`bias_tests`, :func:`bias_figure`, :func:`rounds_curve_figure`,
  :func:`dialogue_trace`: what the notebook reports.

The package re-exports all their public names (``from recagents.papers import afl`` is all
notebook 03 needs). Importing it runs nothing.

The same entry point in all five papers: :mod:`~recagents.papers.afl.entry` holds
:func:`run`, the paper's experiment as a :class:`~recagents.protocol.PaperRun` and
:func:`rank`, its ranking of shared candidates.
"""

from recagents.papers.afl import entry
from recagents.papers.afl.analysis import (
    bias_figure,
    bias_measures,
    bias_tests,
    chosen_items,
    dialogue_trace,
    rounds_curve_figure,
)
from recagents.papers.afl.config import STOPS, AFLConfig, ratio_name
from recagents.papers.afl.evaluate import (
    always_yes_metrics,
    hit_rate_table,
    hits_by_round,
    predictions,
    relative_gain,
    simulation_metrics,
    stop_counts,
)
from recagents.papers.afl.loop import awaiting_verdict, feedback_loop, propose, user_verdicts
from recagents.papers.afl.prompts import (
    RoundMemory,
    decision_schema,
    judge_messages,
    parse_decision,
    parse_recommendation,
    recommend_messages,
    recommend_schema,
    user_loop_messages,
)
from recagents.papers.afl.samples import (
    Sample,
    make_samples,
    recent_histories,
    released_samples,
    tool_scores,
)
from recagents.papers.afl.scripted import (
    genre_reason,
    item_genres,
    proposed_item,
    scripted_demo_text,
    scripted_user_client,
    scripted_user_policy,
)
from recagents.papers.afl.seeds import (
    SeedComparison,
    paired_over_seeds,
    paired_summary,
    seeded_samples,
    seeds_text,
)
from recagents.papers.afl.user_simulation import (
    UserSimSets,
    dialogue_memory,
    judge_history,
    simulate_users,
    step1_candidates,
    user_sim_sets,
    user_sim_split,
)

__all__ = [
    "entry",
    "SeedComparison",
    "awaiting_verdict",
    "genre_reason",
    "item_genres",
    "paired_over_seeds",
    "paired_summary",
    "propose",
    "proposed_item",
    "scripted_demo_text",
    "scripted_user_client",
    "scripted_user_policy",
    "seeded_samples",
    "seeds_text",
    "user_verdicts",
    "STOPS",
    "AFLConfig",
    "RoundMemory",
    "always_yes_metrics",
    "Sample",
    "UserSimSets",
    "bias_figure",
    "bias_measures",
    "bias_tests",
    "chosen_items",
    "decision_schema",
    "dialogue_memory",
    "dialogue_trace",
    "feedback_loop",
    "hit_rate_table",
    "hits_by_round",
    "judge_history",
    "judge_messages",
    "make_samples",
    "released_samples",
    "parse_decision",
    "parse_recommendation",
    "predictions",
    "ratio_name",
    "recent_histories",
    "recommend_messages",
    "recommend_schema",
    "relative_gain",
    "rounds_curve_figure",
    "simulate_users",
    "simulation_metrics",
    "step1_candidates",
    "stop_counts",
    "tool_scores",
    "user_loop_messages",
    "user_sim_sets",
    "user_sim_split",
]
