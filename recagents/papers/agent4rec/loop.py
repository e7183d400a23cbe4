"""Agent4Rec's page-by-page loop: agents browse a ranked list, react, leave, are interviewed.

:func:`simulate` shows each agent its list a page at a time. Calls run page by page *across*
agents, so independent agents' calls go out together; every unusable reply is counted in the
:class:`~recagents.llm.runlog.RunLog`. A visit is the paper's steps, each callable by hand on
the :class:`Visit` that :func:`start_visit` makes: :func:`show_page` (each agent judges the
page's items, watches and rates some, with a feeling), :func:`decide_exit` (leave or turn the
page), :func:`reflect` (condense the memory after the pages in ``reflect_after``) and, once
every agent has left, :func:`interview` (satisfaction 1-10); :func:`visit_frames` returns the
logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.agent4rec.agents import Agent
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.papers.agent4rec.prompts import (
    SENTENCE_SCHEMA,
    exit_messages,
    exit_schema,
    interview_messages,
    interview_schema,
    page_messages,
    page_schema,
    parse_page,
    reflection_messages,
)

#: How an item of a page with an unusable reply is recorded: shown, not watched.
_NOTHING_WATCHED = {"aligned": None, "watched": False, "rating": None, "feeling": ""}


def recall(agent: Agent, query: str, k: int, embed: Any) -> list[str]:
    """The ``k`` memories nearest to ``query`` (all of them when there are at most ``k``)."""
    if len(agent.memory) <= k:
        return list(agent.memory)
    vectors = embed([query, *agent.memory])
    nearest = np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")[:k]
    return [agent.memory[i] for i in sorted(nearest)]


@dataclass
class Visit:
    """One recommender's visit in progress: what every step reads, and what it recorded.

    Attributes:
        agents: The agents (their memories grow during the visit).
        pages: Each visiting agent's list, cut into pages of item ids.
        lines: Item text by id.
        sentences: Trait level sentences.
        recommender: Its name, copied into the frames.
        config: Settings.
        embed: Embedding function for memory retrieval.
        exposures: One row per item shown so far.
        exit_page: The last page each agent has seen so far.
        exited: Whether each agent chose to leave (rather than ran out of pages).
        sessions: One row per interviewed agent.
    """

    agents: dict[str, Agent]
    pages: dict[str, list[list[str]]]
    lines: dict[str, str]
    sentences: dict[str, dict[int, str]]
    recommender: str
    config: Agent4RecConfig
    embed: Any
    exposures: list[dict[str, Any]] = field(default_factory=list)
    exit_page: dict[str, int] = field(default_factory=dict)
    exited: dict[str, bool] = field(default_factory=dict)
    sessions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def visitors(self) -> list[str]:
        """The agents that have a list to browse, sorted."""
        return [u for u in sorted(self.agents) if u in self.pages]


def start_visit(
    agents: dict[str, Agent],
    ranked: pd.DataFrame,
    lines: dict[str, str],
    sentences: dict[str, dict[int, str]],
    recommender: str,
    config: Agent4RecConfig,
    embed: Any,
) -> Visit:
    """Cut each agent's ranked list into pages and empty the visitors' memories.

    Pages are slices of one static ranking (as in the paper): the first ``list_length``
    items, ``items_per_page`` a page.
    """
    per_page = config.items_per_page
    pages: dict[str, list[list[str]]] = {}
    for user, group in ranked.sort_values([USER, "rank"]).groupby(USER):
        items = group[ITEM].tolist()[: config.list_length]
        pages[user] = [items[i : i + per_page] for i in range(0, len(items), per_page)]
    visit = Visit(agents, pages, lines, sentences, recommender, config, embed)
    for user in visit.visitors:
        agents[user].memory = []
    return visit


def show_page(ctx: RunContext, visit: Visit, users: list[str], page: int) -> None:
    """Page step: each agent judges every item of its page, watches some, rates them.

    The agent sees its page and the memories nearest to it; one request per agent (kind
    ``page``). Every item becomes an exposure row; the page and what was watched (with its
    rating) become the agent's memories. An unusable reply counts as "watched nothing" and
    is counted as ``page_unusable``.
    """
    config = visit.config
    shown = [[visit.lines[i] for i in visit.pages[u][page - 1]] for u in users]
    messages = []
    for user, texts in zip(users, shown, strict=True):
        agent = visit.agents[user]
        recalled = recall(agent, "\n".join(texts), config.memory_top_k, visit.embed)
        messages.append(page_messages(agent, page, texts, recalled, visit.sentences, config.domain))
    results = ctx.ask(
        "page", users, messages, [page_schema(len(t)) for t in shown],
        temperature=config.temperature, max_tokens=[120 * len(t) + 40 for t in shown],
        desc=f"{visit.recommender} page {page}",
    )  # fmt: skip
    for user, result in zip(users, results, strict=True):
        items = visit.pages[user][page - 1]
        judged = parse_page(result.data, len(items)) if result.ok else None
        if judged is None:
            ctx.log.count("page_unusable")
            judged = [_NOTHING_WATCHED] * len(items)
        _remember_page(visit, user, page, items, judged)


def _remember_page(
    visit: Visit, user: str, page: int, items: list[str], judged: list[dict[str, Any]]
) -> None:
    """Record one agent's page: an exposure row per item, and two factual memories."""
    for position, (item, j) in enumerate(zip(items, judged, strict=True)):
        visit.exposures.append(
            {
                USER: user,
                "recommender": visit.recommender,
                "page": page,
                "position": position,
                ITEM: item,
                "aligned": j["aligned"],
                "watched": j["watched"],
                "rating": j["rating"],
                "feeling": j["feeling"],
            }
        )
    lines = visit.lines
    watched = [
        f"{lines[i]} (rated {j['rating']:g})" if j["rating"] else lines[i]
        for i, j in zip(items, judged, strict=True)
        if j["watched"]
    ]
    memory = visit.agents[user].memory
    memory.append(f"On page {page} I was shown: " + "; ".join(lines[i] for i in items) + ".")
    memory.append(("I watched: " + "; ".join(watched) + ". ") if watched else "I watched nothing. ")


def decide_exit(ctx: RunContext, visit: Visit, users: list[str], page: int) -> list[str]:
    """Exit step: each agent leaves or turns the page (one request per agent, kind ``exit``).

    An unusable reply counts as leaving (``exit_unusable``); the last page of a list, or of
    the visit, is always left. The decision ends the agent's latest memory.

    Returns:
        The agents that turn the page, in order.
    """
    config = visit.config
    messages = [
        exit_messages(
            visit.agents[u],
            page,
            recall(visit.agents[u], f"page {page}", config.memory_top_k, visit.embed),
            visit.sentences,
            config.domain,
        )
        for u in users
    ]
    results = ctx.ask(
        "exit", users, messages, exit_schema(), temperature=config.temperature, max_tokens=120,
        desc=f"{visit.recommender} exit {page}",
    )  # fmt: skip
    still = []
    for user, result in zip(users, results, strict=True):
        decision = result.data.get("decision") if result.ok else None
        if decision not in ("next", "exit"):
            ctx.log.count("exit_unusable")
            decision = "exit"
        visit.exit_page[user] = page
        visit.exited[user] = decision == "exit"
        last = page == config.max_pages or len(visit.pages[user]) == page
        leaving = decision == "exit" or last
        visit.agents[user].memory[-1] += "I decided to leave." if leaving else "I turned the page."
        if not leaving:
            still.append(user)
    return still


def reflect(ctx: RunContext, visit: Visit, users: list[str], page: int) -> None:
    """Reflection step: each agent condenses its memory into one satisfaction sentence.

    One request per agent (kind ``reflection``); the sentence is a new memory, and an
    unusable reply is counted as ``reflection_unusable``.
    """
    config = visit.config
    messages = [reflection_messages(visit.agents[u], config.domain) for u in users]
    results = ctx.ask(
        "reflection", users, messages, SENTENCE_SCHEMA, temperature=config.temperature,
        max_tokens=100, desc=f"{visit.recommender} reflect {page}",
    )  # fmt: skip
    for user, result in zip(users, results, strict=True):
        sentence = result.data.get("sentence") if result.ok else None
        if isinstance(sentence, str) and sentence.strip():
            visit.agents[user].memory.append(sentence.strip())
        else:
            ctx.log.count("reflection_unusable")


def interview(ctx: RunContext, visit: Visit) -> None:
    """Interview step: every agent that saw a page rates its satisfaction from 1 to 10.

    One request per agent (kind ``interview``), from its whole memory; a score outside
    1-10 is missing and counted as ``interview_unusable``. Adds one session row per agent.
    """
    config = visit.config
    users = sorted(visit.exit_page)
    messages = [interview_messages(visit.agents[u], visit.sentences, config.domain) for u in users]
    results = ctx.ask(
        "interview", users, messages, interview_schema(), temperature=config.temperature,
        max_tokens=160, desc=f"{visit.recommender} interviews",
    )  # fmt: skip
    for user, result in zip(users, results, strict=True):
        score = result.data.get("satisfaction") if result.ok else None
        if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 10:
            ctx.log.count("interview_unusable")
            score = None
        visit.sessions.append(
            {
                USER: user,
                "recommender": visit.recommender,
                "exit_page": visit.exit_page[user],
                "exited": visit.exited[user],
                "satisfaction": float(score) if score else np.nan,
            }
        )


def visit_frames(visit: Visit) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The visit's ``(exposures, sessions)`` in the format of :mod:`~.frames`."""
    exposure_frame = pd.DataFrame(visit.exposures)
    if len(exposure_frame):
        exposure_frame["aligned"] = exposure_frame["aligned"].astype("boolean")
        exposure_frame["rating"] = exposure_frame["rating"].astype(float)
    return exposure_frame, pd.DataFrame(visit.sessions)


def simulate(
    agents: dict[str, Agent],
    ranked: pd.DataFrame,
    lines: dict[str, str],
    sentences: dict[str, dict[int, str]],
    recommender: str,
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: RunLog | None = None,
    embed: Any | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Show each agent its ranked list page by page; return what it saw, did and said.

    Pages are slices of one static ranking (as in the paper). On every page each active
    agent reacts (one call), then decides to leave or continue (one call); memories are
    written after each page and condensed after the pages in ``reflect_after``; after the
    last page or an exit, an interview (one call). An unusable page reply counts as "watched
    nothing" and is counted; an unusable exit reply counts as leaving. Each step's calls are
    accounted under the step's name as phase (``page``, ``exit``, ``reflection``,
    ``interview``).

    Args:
        agents: The agents (their memories are reset for this visit).
        ranked: ``[user_id, item_id, rank]``, at least ``list_length`` items per agent.
        lines: Item text by id.
        sentences: Trait level sentences (``prompts.TRAIT_SENTENCES``).
        recommender: Its name, copied into the frames.
        config: Settings.
        client: LLM client.
        log: Where calls and problems are counted.
        embed: Embedding function for memory retrieval (default: the offline MiniLM).

    Returns:
        ``(exposures, sessions)`` in the format of :mod:`recagents.papers.agent4rec.frames`.
    """
    config = config or Agent4RecConfig()
    ctx = RunContext(client or get_client(), log if log is not None else RunLog(), "page")
    if embed is None:
        from recagents.llm.embed import embed as embed_texts

        embed = embed_texts
    visit = start_visit(agents, ranked, lines, sentences, recommender, config, embed)
    active = visit.visitors
    for page in range(1, config.max_pages + 1):
        active = [u for u in active if len(visit.pages[u]) >= page]
        if not active:
            break
        show_page(ctx.at("page"), visit, active, page)
        active = decide_exit(ctx.at("exit"), visit, active, page)
        if page in config.reflect_after and active:
            reflect(ctx.at("reflection"), visit, active, page)
    interview(ctx.at("interview"), visit)
    return visit_frames(visit)
