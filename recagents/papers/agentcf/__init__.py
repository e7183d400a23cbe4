"""AgentCF: user and item agents that learn by collaborative reflection.

Zhang et al., *AgentCF: Collaborative Learning with Autonomous Language Agents for
Recommender Systems*, WWW 2024 (arXiv 2310.09233).

Users *and* items are LLM agents whose only parameters are text memories. Training replays
real interactions as pairwise choices: the user agent picks between the real next item and a
popularity-sampled negative and says why; then both sides rewrite their memories
("collaborative reflection"). Item memories are shared, so what one user teaches an item
reaches every later user of it. At test time a user agent ranks 1 + 9 candidates, each shown
with its item memory. Every quirk of the official code is an option of
:class:`AgentCFConfig` whose default is the paper's behaviour; the option's docstring says
what the fix would be.

Modules, in the order a run uses them:

- :mod:`~recagents.papers.agentcf.config`: :class:`AgentCFConfig` (the paper's settings as
  defaults), :data:`VARIANTS`, :data:`ABLATIONS` and the column names of pairs and events.
- :mod:`~recagents.papers.agentcf.subsets`: the paper's data construction
  (:func:`make_subset`: 8 items per user, dense or sparse), :data:`RELEASED_SUBSETS`,
  :func:`subset_candidates`, :func:`training_pairs` and :func:`schedule`.
- :mod:`~recagents.papers.agentcf.prompts`: pure prompt builders (``*_messages``), reply
  schemas and :func:`parse_choice`.
- :mod:`~recagents.papers.agentcf.agents`: :class:`AgentState`, :func:`initial_state` and
  :func:`train`, the batched forward / reflection loop with the ablations as modes.
- :mod:`~recagents.papers.agentcf.evaluate`: :func:`pairwise_probe` (re-test and position
  bias) and :func:`rank_candidates` (B / B+H / B+R, LLMRank-style and history-user rankers).
- :mod:`~recagents.papers.agentcf.analysis`: reading a run: :func:`forward_accuracy`, the
  user and item traces, :func:`paper_side_by_side` and :func:`learning_figure`.
- :mod:`~recagents.papers.agentcf.pipeline`: :func:`run`, all of the above in one call.
- :mod:`~recagents.papers.agentcf.released_agents`: the authors' released gpt-3.5 agents as an
  :class:`AgentState` and :func:`memory_quality`: one ranker on the same candidates with
  untrained, the authors' and our memories, so memory quality is measured apart from the ranker.
- :mod:`~recagents.papers.agentcf.seeds`: :func:`variants_over_seeds`, B+R against B over
  several seeds, paired user by user and pooled.

The ranking contract (:func:`parse_ranking`, :func:`ranking_frame`, ...) and the call log
(:class:`RunLog`, :func:`cost_table`) are shared by all papers and re-exported here from
:mod:`recagents.protocol` and :mod:`recagents.llm.runlog`.

The same entry point in all five papers: :mod:`~recagents.papers.agentcf.entry` holds
:func:`run`, the paper's experiment as a :class:`~recagents.protocol.PaperRun` and
:func:`rank`, its ranking of shared candidates.
"""

from recagents.llm.runlog import RunLog, cost_table
from recagents.papers.agentcf import entry
from recagents.papers.agentcf.agents import (
    AgentState,
    apply_item_reflection,
    apply_user_reflection,
    forward_choices,
    initial_item_memory,
    initial_state,
    initial_user_memory,
    item_titles,
    pair_outcomes,
    positive_first,
    reflect_items,
    reflect_users,
    reflecting_pairs,
    train,
    train_batch,
    verbalised_history,
)
from recagents.papers.agentcf.analysis import (
    PAPER_METHOD,
    forward_accuracy,
    item_trace,
    learning_figure,
    paper_side_by_side,
    paper_values,
    user_trace,
)
from recagents.papers.agentcf.config import ABLATIONS, VARIANTS, AgentCFConfig
from recagents.papers.agentcf.evaluate import (
    RankOutcome,
    labelled,
    order_consistency,
    pairwise_probe,
    probe_summary,
    rank_candidates,
    retrieve_version,
)
from recagents.papers.agentcf.pipeline import AgentCFRun, run
from recagents.papers.agentcf.prompts import (
    choice_schema,
    forward_messages,
    item_reflection_messages,
    item_reflection_schema,
    llmrank_messages,
    parse_choice,
    ranking_messages,
    user_reflection_messages,
    user_reflection_schema,
)
from recagents.papers.agentcf.released_agents import (
    UNTRAINED,
    MemoryQuality,
    ReleasedAgents,
    first_description_check,
    fully_released_users,
    memory_quality,
    released_item_ids,
    released_state,
    released_subset,
    restrict_subset,
)
from recagents.papers.agentcf.seeds import VariantSeedComparison, variants_over_seeds
from recagents.papers.agentcf.subsets import (
    RELEASED_SUBSETS,
    Subset,
    make_subset,
    schedule,
    subset_candidates,
    subset_stats,
    training_pairs,
)
from recagents.protocol import (
    FAITHFUL_MISSING_RANK,
    RankingParse,
    parse_ranking,
    ranking_frame,
    ranking_schema,
)

__all__ = [
    "entry",
    "ABLATIONS",
    "RELEASED_SUBSETS",
    "VARIANTS",
    "AgentCFConfig",
    "AgentCFRun",
    "AgentState",
    "apply_item_reflection",
    "apply_user_reflection",
    "RankingParse",
    "RankOutcome",
    "RunLog",
    "Subset",
    "choice_schema",
    "cost_table",
    "forward_accuracy",
    "learning_figure",
    "forward_messages",
    "item_trace",
    "item_titles",
    "paper_side_by_side",
    "paper_values",
    "user_trace",
    "PAPER_METHOD",
    "FAITHFUL_MISSING_RANK",
    "labelled",
    "initial_item_memory",
    "initial_state",
    "initial_user_memory",
    "item_reflection_messages",
    "item_reflection_schema",
    "llmrank_messages",
    "make_subset",
    "pairwise_probe",
    "parse_choice",
    "parse_ranking",
    "order_consistency",
    "probe_summary",
    "rank_candidates",
    "ranking_frame",
    "ranking_messages",
    "ranking_schema",
    "reflecting_pairs",
    "retrieve_version",
    "run",
    "schedule",
    "subset_candidates",
    "subset_stats",
    "train",
    "training_pairs",
    "user_reflection_messages",
    "user_reflection_schema",
    "verbalised_history",
    "forward_choices",
    "pair_outcomes",
    "positive_first",
    "reflect_items",
    "reflect_users",
    "train_batch",
    "UNTRAINED",
    "MemoryQuality",
    "ReleasedAgents",
    "first_description_check",
    "fully_released_users",
    "memory_quality",
    "released_item_ids",
    "released_state",
    "released_subset",
    "restrict_subset",
    "VariantSeedComparison",
    "variants_over_seeds",
]
