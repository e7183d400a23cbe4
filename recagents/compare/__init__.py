"""One leaderboard for every method: the same split, the same 1 + 19 candidates, the same users.

The logic behind the cross-paper notebook (``notebooks/06_cross_paper.ipynb``). Every method
of the paper packages (the classic RecBole baselines, a zero-shot LLM ranker, AgentCF B / B+H
/ B+R, the AFL recommendation agent alone and in its feedback loop, InteRecAgent in one-turn
mode) is run on one ``Protocol`` and turned into the project's long frame
``[user_id, item_id, score, rank]`` over exactly the protocol's candidates, with the calls it
made (a :class:`~recagents.llm.runlog.RunLog`), its wall time and, per user, whether its reply
was usable. Unusable replies are counted in :attr:`recagents.protocol.Ranking.status`, never
dropped: the user keeps a ranking (the repair rule of :func:`recagents.protocol.ranking_frame`)
and is scored.

Modules, in the order a run uses them:

- ``protocol``: ``shared_protocol``, the single leave-one-out split, saved candidate sets
  and user sample every method ranks (``Protocol``), ``check_frame`` and ``status_table``.
- ``adapters``: ``run_baseline`` (the classic baselines) and ``run_paper``, which runs any
  paper's rankers through the registry's one call, ``rank(task, config, options)``: the
  comparison never reaches into a paper's internals, and a new paper needs nothing here.
- ``leaderboard``: :func:`leaderboard`, NDCG@k / HR@k with bootstrap intervals and paired
  tests against a reference method.
- ``bias``: :func:`popularity_bias` (average popularity, coverage and Gini of the top-k
  against the ground truth) and :func:`position_sensitivity` (the same candidates shown in
  another order, :func:`reorder_candidates`, :func:`shared_rankers`).
- ``cost``: :func:`cost_per_user`, :func:`cost_scaling`, :func:`scaling_runner` and
  :func:`scaling_figure`.

Deviations, each deliberate and documented at its paper's ``rank``: AgentCF trains on the last
``n_targets + 2`` interactions before each shared user's test item (the paper's window) and
may train on fewer steps (its config's ``steps``); AFL's frame is its proposal first, then the tool
model's order; InteRecAgent's one-turn evaluation reports only the target's rank, so its frame
places the other candidates in display order around it.
"""
