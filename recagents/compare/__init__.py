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

Its modules, one line each, are in MODULES.md (generated from their docstrings).

Deviations, each deliberate and documented at its paper's ``rank``: AgentCF trains on the last
``n_targets + 2`` interactions before each shared user's test item (the paper's window) and
may train on fewer steps (its config's ``steps``); AFL's frame is its proposal first, then the tool
model's order; InteRecAgent's one-turn evaluation reports only the target's rank, so its frame
places the other candidates in display order around it.
"""
