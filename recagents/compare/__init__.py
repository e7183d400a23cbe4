"""One leaderboard for every method: the same split, the same 1 + 19 candidates, the same users.

The logic behind the cross-paper notebook (``notebooks/06_cross_paper.ipynb``). Every method
of the paper packages (the classic RecBole baselines, a zero-shot LLM ranker, AgentCF B / B+H
/ B+R, the AFL recommendation agent alone and in its feedback loop, InteRecAgent in one-turn
mode) is run on one :class:`Protocol` and turned into the project's long frame
``[user_id, item_id, score, rank]`` over exactly the protocol's candidates, with the calls it
made (a :class:`~recagents.llm.runlog.RunLog`), its wall time and, per user, whether its reply
was usable. Unusable replies are counted in :attr:`Ranking.status`, never dropped: the user
keeps a ranking (the repair rule of :func:`recagents.protocol.ranking_frame`) and is scored.

Modules, in the order a run uses them:

- ``protocol``: :func:`shared_protocol`, the single leave-one-out split, saved candidate sets
  and user sample every method ranks (:class:`Protocol`); :class:`Ranking`,
  :func:`check_frame` and :func:`status_table`.
- ``adapters``: one per method, :func:`run_baseline`, :func:`run_llm_ranker`,
  :func:`run_agentcf` (with :func:`agentcf_subset`), :func:`run_afl` (with the pure
  :func:`afl_frame`), :func:`run_interecagent` (with the pure :func:`target_rank_frame`).
  The paper methods are composed in each paper's entry module
  (``recagents.papers.<paper>.entry.rank``, on the protocol's dataset, split and
  candidates); the adapters only call those and wrap the result, so the comparison never
  reaches into a paper's internals.
- ``leaderboard``: :func:`leaderboard`, NDCG@k / HR@k with bootstrap intervals and paired
  tests against a reference method.
- ``bias``: :func:`popularity_bias` (average popularity, coverage and Gini of the top-k
  against the ground truth) and :func:`position_sensitivity` (the same candidates shown in
  another order, :func:`reorder_candidates`, :func:`shared_rankers`).
- ``cost``: :func:`cost_per_user`, :func:`cost_scaling`, :func:`scaling_runner` and
  :func:`scaling_figure`.

Deviations, each deliberate and documented at its adapter: AgentCF trains on the last
``n_targets + 2`` interactions before each shared user's test item (the paper's window) and
may train on fewer steps (``train_steps``); AFL's frame is its proposal first, then the tool
model's order; InteRecAgent's one-turn evaluation reports only the target's rank, so its frame
places the other candidates in display order around it.
"""

from recagents.compare.adapters import (
    agentcf_subset,
    run_afl,
    run_agentcf,
    run_baseline,
    run_interecagent,
    run_llm_ranker,
)
from recagents.compare.bias import (
    ORDERS,
    gini,
    popularity_bias,
    position_sensitivity,
    reorder_candidates,
    shared_rankers,
)
from recagents.compare.cost import (
    COST_QUANTITIES,
    cost_per_user,
    cost_scaling,
    scaling_figure,
    scaling_runner,
)
from recagents.compare.leaderboard import leaderboard
from recagents.compare.protocol import (
    CLASSIC,
    Protocol,
    check_frame,
    shared_protocol,
    status_table,
)
from recagents.papers.afl.entry import afl_frame
from recagents.papers.interecagent.entry import target_rank_frame
from recagents.protocol import STATUSES, Ranking

__all__ = [
    "CLASSIC",
    "COST_QUANTITIES",
    "ORDERS",
    "STATUSES",
    "Ranking",
    "Protocol",
    "afl_frame",
    "agentcf_subset",
    "check_frame",
    "cost_per_user",
    "cost_scaling",
    "gini",
    "leaderboard",
    "popularity_bias",
    "position_sensitivity",
    "reorder_candidates",
    "run_afl",
    "run_agentcf",
    "run_baseline",
    "run_interecagent",
    "run_llm_ranker",
    "scaling_figure",
    "scaling_runner",
    "shared_protocol",
    "shared_rankers",
    "status_table",
    "target_rank_frame",
]
