"""InteRecAgent's evaluation: a simulated user in multi-turn chats, and the one-turn tasks.

The paper's main protocol lets an LLM play a user who wants one held-out item (the
*target*): it knows its history and the target's title and attributes, speaks first,
describes the target without naming it (at most two hints at a time), turns other items down
and ends with ``<END>`` once the target is recommended. A conversation has at most five
turns; **Hit@5** is the share of conversations in which the agent recommended the target and
**AT@5** the mean turn of that hit (a miss counts 6, lower is better). The one-turn tasks ask
for five recommendations from the simulator's first message (**Recall@5**) and for a
ranking of the target among 19 random unseen items (**NDCG** ``1/log2(rank+1)``).

Where each part lives, in the order a run uses it:

- :class:`~recagents.papers.interecagent.config.SimulatorConfig` and
  :func:`~recagents.papers.interecagent.simulator.make_sessions`: the simulated users (per
  user the last 10 known titles and the held-out test item of a leave-one-out split,
  ratings >= 3).
- :func:`~recagents.papers.interecagent.simulator.simulate_turn`: the user simulator, with
  the paper's leak check (a message too close to the target title is regenerated up to five
  times, then used anyway and *counted*; optionally the conversation is dropped).
- :func:`~recagents.papers.interecagent.conversations.run_sessions` and
  :func:`~recagents.papers.interecagent.conversations.conversation_metrics`: the
  conversations, and Hit@5 and AT@5 with bootstrap intervals, by id and by the paper's fuzzy
  rule.
- Here: :func:`one_turn_retrieval`, :func:`one_turn_ranking` and :func:`one_turn_metrics`,
  the one-turn tasks for the agent, the LLM-only baseline, Random and Pop.

Deviations, each deliberate: hits are judged by id (the target among the ids the agent
recommended that turn) *and* by the paper's fuzzy rule over the reply; a conversation goes on
until both rules have hit (``stop_on="both"``), so each rule's hit turn is what it would be if
it alone ended the conversation. The one-turn dialogue is the simulator's first message (the
paper's GPT-4 dialogue-generation prompt is not released).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION, Split
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.runlog import RunContext, RunLog, ask
from recagents.metrics import bootstrap_ci
from recagents.papers.interecagent.agent import run_turns
from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.config import METHODS, InteRecConfig, SimulatorConfig
from recagents.papers.interecagent.conversations import agent_turns
from recagents.papers.interecagent.scoring import (
    fuzzy_hit,
    popular_recommend,
    random_recommend,
    ranking_ndcg,
    recall_at_k,
)
from recagents.papers.interecagent.session import AgentSession
from recagents.papers.interecagent.simulator import (
    SessionSet,
    SessionSpec,
    SimMessage,
    simulate_turn,
)
from recagents.papers.interecagent.toolbox import ToolContext
from recagents.protocol import RankingParse, parse_ranking, ranking_schema


def _first_messages(
    specs: Sequence[SessionSpec], sim: SimulatorConfig, client: LLMClient, log: RunLog, domain: str
) -> list[SimMessage]:
    """Each user's opening message (the same request as turn 1 of :func:`run_sessions`)."""
    return simulate_turn(specs, {s.user: [] for s in specs}, sim, client, log, domain)


def _check_methods(methods: Sequence[str]) -> None:
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; use {METHODS}")


def _openings(
    specs: Sequence[SessionSpec],
    methods: Sequence[str],
    sim: SimulatorConfig,
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
) -> list[SimMessage]:
    """The simulator's first messages, when a method that reads them (an LLM) is run."""
    if not any(m in ("InteRecAgent", "LLM only") for m in methods):
        return []
    return _first_messages(specs, sim, client, log, config.domain)


def _known(split: Split, users: Collection[str]) -> dict[str, set[str]]:
    known = split.history("test")
    known = known[known[USER].isin(set(users))]
    return known.groupby(USER)[ITEM].agg(set).to_dict()


def one_turn_retrieval(
    sessions: SessionSet,
    ctx: ToolContext,
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    methods: Sequence[str] = METHODS,
    sim: SimulatorConfig | None = None,
    k: int = 5,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> pd.DataFrame:
    """One-turn retrieval: the simulator's first message, one answer, Recall@k by id.

    The agent and the LLM-only baseline answer the message once (a fresh session each);
    Random and Pop recommend ``k`` items the user has not interacted with (seeded per user;
    Pop by training popularity). A failed simulator message counts as a miss for the LLM
    methods (its request is empty).

    Returns:
        ``[method, user_id, recall, hit_fuzzy, calls, plan_failures, unmatched]``.
    """
    sim = sim or SimulatorConfig()
    specs = list(sessions)
    _check_methods(methods)
    rows = []
    first = _openings(specs, methods, sim, config, client, log)
    known = _known(sessions.split, [s.user for s in specs])
    for method in methods:
        if method in ("Random", "Pop"):
            for n, spec in enumerate(specs):
                seen = known.get(spec.user, set())
                ids = (
                    random_recommend(sessions.table, k, seed=sim.seed + n, exclude=seen)
                    if method == "Random"
                    else popular_recommend(sessions.table, k, exclude=seen)
                )
                rows.append({"method": method, USER: spec.user,
                             "recall": recall_at_k(ids, spec.target, k), "hit_fuzzy": None,
                             "calls": 0, "plan_failures": 0, "unmatched": 0})  # fmt: skip
            continue
        agents = [AgentSession.start(s.user, ctx, map_n=k) for s in specs]
        answering = RunContext(client, log, method)
        texts = [m.text for m in first]
        results = agent_turns(answering, agents, texts, replace(config, map_n=k), embed=embed)
        for spec, result in zip(specs, results, strict=True):
            rows.append(
                {"method": method, USER: spec.user,
                 "recall": recall_at_k(result.recommended_ids, spec.target, k),
                 "hit_fuzzy": fuzzy_hit(result.reply, spec.target_title, sim.hit_threshold),
                 "calls": result.n_calls, "plan_failures": result.plan_failures,
                 "unmatched": result.unmatched}
            )  # fmt: skip
    return pd.DataFrame(rows)


def ranking_task_messages(
    request: str, candidate_titles: Sequence[str], domain: str = "movie"
) -> list[dict[str, str]]:
    """The LLM-only ranking prompt: the user's message and numbered candidates to order."""
    n = len(candidate_titles)
    numbered = "\n".join(f"{k}. {t}" for k, t in enumerate(candidate_titles, 1))
    system = (
        f"You are {'an' if domain[:1] in 'aeiou' else 'a'} {domain} recommendation assistant. "
        f"Rank candidate {domain}s for a user by how well they fit what the user asks for."
    )
    user = (
        f"The user's message: {request}\n\nCandidates:\n{numbered}\n\nRank all {n} candidates "
        f'from best to worst. Reply with JSON: {{"ranking": [candidate numbers, each from 1 '
        f"to {n} exactly once]}}."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _ranking_note(candidate_titles: Sequence[str], domain: str) -> str:
    listed = "; ".join(candidate_titles)
    return (
        f"Task: the user wants these {len(candidate_titles)} candidate {domain}s ordered, "
        f"best first. They are already the candidates (do not use candidate_store); filter "
        f"or rank them, and end with map_titles {len(candidate_titles)}. The candidates: "
        f"{listed}."
    )


def _target_rank(
    parse: RankingParse, target_index: int, missing: str, rng: np.random.Generator
) -> int | None:
    """1-based rank of the target; a target left out is ``None`` (paper) or placed at random."""
    if target_index in parse.order:
        return parse.order.index(target_index) + 1
    if missing == "zero" or parse.status == "failed":
        return None
    slots = len(parse.order) + len(parse.missing)
    return int(rng.integers(len(parse.order) + 1, slots + 1))


def one_turn_ranking(
    sessions: SessionSet,
    candidates: pd.DataFrame,
    ctx: ToolContext,
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    methods: Sequence[str] = METHODS,
    sim: SimulatorConfig | None = None,
    seed: int = 0,
    missing: Literal["zero", "random"] = "zero",
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> pd.DataFrame:
    """One-turn ranking of each user's target among the same number of other candidates.

    ``candidates`` is ``[user_id, item_id, label, position]`` (e.g. the saved
    :func:`recagents.data.datasets.candidate_sets`, shared with every method), shown in display
    order; each user's positive must be its session's target. The request is the simulator's
    first message.

    - InteRecAgent: the candidates are put on the session's bus, the planner is told to order
      them (filters, rank, map_titles), and the order is the bus after the plan; a direct
      answer or a failed plan ranks nothing.
    - LLM only: the same LLM orders the numbered candidates under a JSON schema.
    - Random: a seeded permutation; Pop: training popularity.

    Every ranking is checked with :func:`recagents.protocol.parse_ranking` (a permutation of
    the candidate numbers; duplicates and strangers dropped and counted). NDCG is
    ``1/log2(rank+1)``; a target left out scores 0 (the paper's rule, ``missing="zero"``) or
    is placed at random after the ranked ones (``"random"``).

    Returns:
        ``[method, user_id, rank, ndcg, status, duplicates, out_of_range, n_missing, calls]``.
    """
    sim = sim or SimulatorConfig()
    if missing not in ("zero", "random"):
        raise ValueError(f"missing must be 'zero' or 'random', got {missing!r}")
    _check_methods(methods)
    specs = list(sessions)
    shown, n = _ranking_candidates(candidates, specs)
    first = _openings(specs, methods, sim, config, client, log)
    task = _RankingTask(specs, first, shown, sessions.table, n, seed)
    rows = []
    for method in methods:
        if method == "Random":
            orders, calls = _random_orders(task), [0] * len(specs)
        elif method == "Pop":
            orders, calls = _pop_orders(task), [0] * len(specs)
        elif method == "LLM only":
            orders, calls = _llm_only_orders(task, config, client, log), [1] * len(specs)
        else:
            orders, calls = _agent_orders(task, ctx, config, client, log, embed)
        rows += _ranking_rows(task, method, orders, calls, missing)
    out = pd.DataFrame(rows)
    return out.astype({"rank": "Int64"}) if len(out) else out


@dataclass(frozen=True)
class _RankingTask:
    """The one-turn ranking task of :func:`one_turn_ranking`, shared by every method.

    Attributes:
        specs: The simulated users.
        first: Each user's opening message (empty when no LLM method runs).
        candidates: User -> candidate item ids in display order (the target among them).
        table: The item table (titles and popularity).
        n: Candidates per user.
        seed: Seed of the random orders and of placing a missing target.
    """

    specs: list[SessionSpec]
    first: list[SimMessage]
    candidates: dict[str, list[str]]
    table: ItemTable
    n: int
    seed: int

    def titles(self, user: str) -> list[str]:
        """The user's candidates as the prompts show them."""
        return [self.table.display_title(i) for i in self.candidates[user]]


def _ranking_candidates(
    candidates: pd.DataFrame, specs: Sequence[SessionSpec]
) -> tuple[dict[str, list[str]], int]:
    """Each user's candidates in display order, and how many each has.

    Raises:
        ValueError: A user without candidates, a positive that is not the user's target, or
            users with different numbers of candidates.
    """
    frame = candidates[candidates[USER].isin({s.user for s in specs})]
    frame = frame.sort_values([USER, POSITION], kind="stable")
    shown = {u: g[ITEM].astype(str).tolist() for u, g in frame.groupby(USER, sort=False)}
    positives = frame[frame[LABEL] == 1].set_index(USER)[ITEM].astype(str).to_dict()
    for spec in specs:
        if positives.get(spec.user) != spec.target:
            raise ValueError(f"user {spec.user}: the candidate set's positive is not the target")
    sizes = {len(items) for items in shown.values()}
    if len(sizes) != 1:
        raise ValueError(f"every user needs the same number of candidates, got {sorted(sizes)}")
    return shown, sizes.pop()


def _random_orders(task: _RankingTask) -> list[list[int]]:
    """Random: a permutation of the candidate numbers, seeded per user."""
    orders = []
    for k, _ in enumerate(task.specs):
        perm = np.random.default_rng(task.seed + k).permutation(task.n)
        orders.append([int(i) + 1 for i in perm])
    return orders


def _pop_orders(task: _RankingTask) -> list[list[int]]:
    """Pop: the candidate numbers by training popularity, most popular first."""
    orders = []
    for spec in task.specs:
        pop = task.table.popularity(task.candidates[spec.user])
        orders.append([int(i) + 1 for i in np.argsort(-pop, kind="stable")])
    return orders


def _llm_only_orders(
    task: _RankingTask, config: InteRecConfig, client: LLMClient, log: RunLog
) -> list[list[int]]:
    """LLM only: the model orders the numbered candidates under a JSON schema (one batch)."""
    schema = ranking_schema(task.n)
    requests = [
        ChatRequest(
            messages=ranking_task_messages(m.text, task.titles(s.user), config.domain),
            schema=schema, temperature=config.llm_only_temperature,
            max_tokens=config.llm_only_max_tokens, seed=config.seed, tag=s.user,
        )
        for s, m in zip(task.specs, task.first, strict=True)
    ]  # fmt: skip
    results = ask(client, log, "LLM only", "ranking", requests, "LLM only: rank")
    return [list(r.data.get("ranking", [])) if r.ok else [] for r in results]


def _agent_orders(
    task: _RankingTask,
    ctx: ToolContext,
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    embed: Callable[[Sequence[str]], np.ndarray] | None,
) -> tuple[list[list[int]], list[int]]:
    """InteRecAgent: ``(orders, calls)``, the planner told to order the candidates on its bus.

    The order is the bus after the plan; a direct answer or a failed plan ranks nothing.
    """
    agents = []
    notes = {}
    for spec in task.specs:
        agent = AgentSession.start(spec.user, ctx, map_n=task.n)
        agent.ctx.bus.set(task.candidates[spec.user], "task", ordered=True)
        agents.append(agent)
        notes[spec.user] = _ranking_note(task.titles(spec.user), config.domain)
    ranked_config = replace(config, persistent_bus=True, map_n=task.n)
    results = run_turns(agents, [m.text for m in task.first], ranked_config, client, log,
                        phase="InteRecAgent", embed=embed, notes=notes)  # fmt: skip
    orders = []
    for spec, result in zip(task.specs, results, strict=True):
        number = {item: k + 1 for k, item in enumerate(task.candidates[spec.user])}
        order = result.bus_after if result.kind == "plan" else []
        orders.append([number[i] for i in order if i in number])
    return orders, [r.n_calls for r in results]


def _ranking_rows(
    task: _RankingTask,
    method: str,
    orders: Sequence[list[int]],
    calls: Sequence[int],
    missing: str,
) -> list[dict[str, Any]]:
    """Check each ranking and score the target: one row per user of ``method``."""
    rows = []
    for k, (spec, order) in enumerate(zip(task.specs, orders, strict=True)):
        parse = parse_ranking({"ranking": order} if order else None, task.n)
        target_index = task.candidates[spec.user].index(spec.target)
        rng = np.random.default_rng(task.seed + 7919 * (k + 1))
        target_rank = _target_rank(parse, target_index, missing, rng)
        rows.append(
            {"method": method, USER: spec.user, "rank": target_rank,
             "ndcg": ranking_ndcg(target_rank), "status": parse.status,
             "duplicates": parse.duplicates, "out_of_range": parse.out_of_range,
             "n_missing": len(parse.missing), "calls": calls[k]}
        )  # fmt: skip
    return rows


def one_turn_metrics(
    frame: pd.DataFrame, value: str, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Mean of ``value`` (``recall`` or ``ndcg``) per method with a bootstrap interval.

    Returns:
        ``[method, metric, mean, low, high, n]``.
    """
    rows = []
    for method, group in frame.groupby("method", sort=False):
        values = group[value].astype(float).to_numpy()
        mean, low, high = bootstrap_ci(values, n_boot=n_boot, ci=ci, seed=seed)
        rows.append({"method": method, "metric": value, "mean": mean, "low": low, "high": high,
                     "n": len(values)})  # fmt: skip
    return pd.DataFrame(rows, columns=["method", "metric", "mean", "low", "high", "n"])
