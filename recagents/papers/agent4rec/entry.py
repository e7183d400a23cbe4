"""Agent4Rec's entry point: the paper's recommender comparison by generative agents in one call.

:func:`run` is the one entry point every paper has, of the same shape
(``run(dataset, config, options)`` -> :class:`~recagents.protocol.PaperRun`, the shared
arguments in one :class:`~recagents.protocol.RunOptions`): the paper's random split, the
traits and personas of ``n_users`` agents, each recommender's list browsed page by page, and
the engagement of the agents with each recommender with 95% bootstrap intervals (the paper's
Table 2; notebook 02, sections 1 and 3). Agent4Rec ranks no shared candidates, so it has no
``rank``. Everything here composes the package's public functions; nothing changes their
behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.data.datasets import Dataset, Split
from recagents.llm.runlog import RunLog
from recagents.papers.agent4rec.agents import Agent, build_agents, item_lines, random_split
from recagents.papers.agent4rec.config import RECOMMENDERS, TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.engagement import engagement, engagement_summary
from recagents.papers.agent4rec.evaluate import rank_for_agents
from recagents.papers.agent4rec.loop import simulate
from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES
from recagents.papers.agent4rec.traits import compute_traits
from recagents.protocol import PaperRun, RunOptions, metric_rows

PAPER = "Agent4Rec"

#: The recommenders :func:`run` compares (the paper's five).
METHODS = tuple(RECOMMENDERS)

#: Agents when :attr:`RunOptions.n_users` is ``None`` (notebook 02's default profile; the
#: paper: 1,000).
DEFAULT_USERS = 6

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`.
TABLES = ("agents", "rankings", "exposures", "sessions", "engagement", "problems")


def run(
    dataset: Dataset,
    config: Agent4RecConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """Agent4Rec's recommender comparison in one call (the paper's Table 2).

    :func:`random_split` of every eligible user (seeded by ``config.seed``); the traits of
    every user (:func:`compute_traits`) and ``options.n_users`` agents drawn among the
    training users with their personas (:func:`build_agents`); each recommender ranks for the
    agents (:func:`rank_for_agents`, trained with ``options.training``) and every agent
    browses its list page by page (:func:`simulate`); view, like, exit page and satisfaction
    per agent (:func:`engagement`) summarised per recommender (:func:`engagement_summary`).

    Args:
        dataset: The dataset (with ratings).
        config: The paper's settings (default: the paper's).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`); here
            ``n_users`` (agents) defaults to :data:`DEFAULT_USERS`, ``methods`` are
            recommenders of :data:`METHODS` (default: all five), ``training`` is the
            recommenders' (default: RecBole's, early stopping) and ``progress`` is unused
            (the simulator shows the client's progress).

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and
        ``<measure>/<recommender>`` for ``p_view``, ``n_like``, ``p_like``, ``exit_page``
        and ``satisfaction``. Unusable replies are counted in the ``problems`` table.
    """
    started = time.perf_counter()
    config = config or Agent4RecConfig()
    options = options or RunOptions()
    recommenders = options.chosen_methods(PAPER, METHODS)
    n_users = DEFAULT_USERS if options.n_users is None else options.n_users
    client = options.resolved_client()
    split = random_split(dataset, n_users=None, seed=config.seed)
    traits = compute_traits(dataset)
    lines = item_lines(dataset, split)
    users = sorted(split.train[USER].unique())
    drawn = np.random.default_rng(config.seed).choice(users, n_users, replace=False)
    agent_users = sorted(drawn)
    own = RunLog()
    agents = build_agents(_restricted(split, agent_users), traits, lines, config, client, own)
    exposures, sessions, rankings = [], [], []
    for name in recommenders:
        ranked, _ = rank_for_agents(
            name, split, agent_users, config.list_length, options.training, seed=config.seed
        )
        shown, visits = simulate(agents, ranked, lines, TRAIT_SENTENCES, name, config, client,
                                 own)  # fmt: skip
        exposures.append(shown)
        sessions.append(visits)
        rankings.append(ranked.assign(recommender=name))
    options.record(own)
    exposure_frame = pd.concat(exposures, ignore_index=True)
    session_frame = pd.concat(sessions, ignore_index=True)
    per_agent = engagement(exposure_frame, session_frame, like_threshold=config.like_threshold)
    summary = engagement_summary(per_agent, n_boot=options.n_boot, seed=config.seed)
    tables = {
        "agents": _agent_table(agents),
        "rankings": pd.concat(rankings, ignore_index=True),
        "exposures": exposure_frame,
        "sessions": session_frame,
        "engagement": per_agent,
        "problems": pd.DataFrame(sorted(own.problems.items()), columns=["problem", "count"]),
    }
    wall = time.perf_counter() - started
    return PaperRun(PAPER, config, tables, metric_rows(summary, ("recommender",)), own, wall)


def _restricted(split: Split, users: Sequence[str]) -> Split:
    """The split kept to ``users`` (the agents are built from their training ratings only)."""
    keep = set(users)
    return Split(
        train=split.train[split.train[USER].isin(keep)],
        valid=split.valid[split.valid[USER].isin(keep)],
        test=split.test[split.test[USER].isin(keep)],
        name=split.name,
    )


def _agent_table(agents: dict[str, Agent]) -> pd.DataFrame:
    """``[user_id, activity, conformity, diversity, persona, memories]``, one row per agent."""
    rows = [
        {USER: user, **{t: agent.traits.get(t) for t in TRAITS}, "persona": agent.persona,
         "memories": len(agent.memory)}
        for user, agent in sorted(agents.items())
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=[USER, *TRAITS, "persona", "memories"])
