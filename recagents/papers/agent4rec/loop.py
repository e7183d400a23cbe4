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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.llm.client import ChatRequest, ChatResult, LLMClient, get_client
from recagents.llm.runlog import RunContext, RunLog, ask
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
from recagents.papers.agent4rec.released_prompts import (
    ItemFacts,
    PageReading,
    agent_slots,
    memory_block,
    page_items_text,
    page_memory_slots,
    parse_exit_reply,
    parse_interview_reply,
    parse_page_reply,
    persona_parts,
    released_prompts,
    render_released,
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
        facts: Title, mean rating and summary by item id (the released prompts' page).
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
    facts: Mapping[str, ItemFacts] = field(default_factory=dict)

    @property
    def released(self) -> bool:
        """Whether the visit sends the authors' prompts (``config.prompts == "released"``)."""
        return self.config.prompts == "released"

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
    facts: Mapping[str, ItemFacts] | None = None,
) -> Visit:
    """Cut each agent's ranked list into pages and empty the visitors' memories.

    Pages are slices of one static ranking (as in the paper): the first ``list_length``
    items, ``items_per_page`` a page.

    Raises:
        ValueError: The released prompts are asked for without ``facts`` for every item.
    """
    per_page = config.items_per_page
    pages: dict[str, list[list[str]]] = {}
    for user, group in ranked.sort_values([USER, "rank"]).groupby(USER):
        items = group[ITEM].tolist()[: config.list_length]
        pages[user] = [items[i : i + per_page] for i in range(0, len(items), per_page)]
    visit = Visit(agents, pages, lines, sentences, recommender, config, embed, facts=facts or {})
    missing = {i for p in pages.values() for page in p for i in page} - set(visit.facts)
    if visit.released and missing:
        raise ValueError(
            f"prompts='released' needs item facts (title, mean rating, summary) for every "
            f"ranked item; {len(missing)} have none (pass facts=released_prompts.item_facts(...))"
        )
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
    if visit.released:
        _show_released_page(ctx, visit, users, page)
        return
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
    _record_exposures(visit, user, page, items, judged)
    lines = visit.lines
    watched = [
        f"{lines[i]} (rated {j['rating']:g})" if j["rating"] else lines[i]
        for i, j in zip(items, judged, strict=True)
        if j["watched"]
    ]
    memory = visit.agents[user].memory
    memory.append(f"On page {page} I was shown: " + "; ".join(lines[i] for i in items) + ".")
    memory.append(("I watched: " + "; ".join(watched) + ". ") if watched else "I watched nothing. ")


def _record_exposures(
    visit: Visit, user: str, page: int, items: list[str], judged: list[dict[str, Any]]
) -> None:
    """One exposure row per item shown on the page."""
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


def decision_note(leaving: bool) -> str:
    """How our exit decision ends the page's last memory."""
    return "I decided to leave." if leaving else "I turned the page."


def decide_exit(ctx: RunContext, visit: Visit, users: list[str], page: int) -> list[str]:
    """Exit step: each agent leaves or turns the page (one request per agent, kind ``exit``).

    An unusable reply counts as leaving (``exit_unusable``); the last page of a list, or of
    the visit, is always left. The decision ends the agent's latest memory.

    Returns:
        The agents that turn the page, in order.
    """
    config = visit.config
    if visit.released:
        return _decide_released_exit(ctx, visit, users, page)
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
        visit.agents[user].memory[-1] += decision_note(leaving)
        if not leaving:
            still.append(user)
    return still


def reflect(ctx: RunContext, visit: Visit, users: list[str], page: int) -> None:
    """Reflection step: each agent condenses its memory into one satisfaction sentence.

    One request per agent (kind ``reflection``); the sentence is a new memory, and an
    unusable reply is counted as ``reflection_unusable``.
    """
    config = visit.config
    if visit.released:
        _reflect_released(ctx, visit, users, page)
        return
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
    if visit.released:
        scores = _interview_released(ctx, visit, users)
    else:
        messages = [
            interview_messages(visit.agents[u], visit.sentences, config.domain) for u in users
        ]
        results = ctx.ask(
            "interview", users, messages, interview_schema(), temperature=config.temperature,
            max_tokens=160, desc=f"{visit.recommender} interviews",
        )  # fmt: skip
        scores = [result.data.get("satisfaction") if result.ok else None for result in results]
    for user, score in zip(users, scores, strict=True):
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
    facts: Mapping[str, ItemFacts] | None = None,
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
        facts: Title, mean rating and summary of every ranked item; needed (only) with
            ``config.prompts == "released"`` (:func:`.released_prompts.item_facts`).

    Returns:
        ``(exposures, sessions)`` in the format of :mod:`recagents.papers.agent4rec.frames`.
    """
    config = config or Agent4RecConfig()
    ctx = RunContext(client or get_client(), log if log is not None else RunLog(), "page")
    if embed is None:
        from recagents.llm.embed import embed as embed_texts

        embed = embed_texts
    visit = start_visit(agents, ranked, lines, sentences, recommender, config, embed, facts)
    active = visit.visitors
    for page in range(1, config.max_pages + 1):
        active = [u for u in active if len(visit.pages[u]) >= page]
        if not active:
            break
        show_page(ctx.at("page"), visit, active, page)
        browsed = active
        active = decide_exit(ctx.at("exit"), visit, active, page)
        # The authors reflect on every 4th memory, also of an agent that has just left.
        reflecting = browsed if visit.released else active
        if page in config.reflect_after and reflecting:
            reflect(ctx.at("reflection"), visit, reflecting, page)
    interview(ctx.at("interview"), visit)
    return visit_frames(visit)


# --------------------------------------------------------------------------- released prompts
# With ``config.prompts == "released"`` each step sends the authors' prompt (read from their
# release, :mod:`.released_prompts`) with no JSON schema, reads the free-text reply with our
# parser, and writes the authors' memory sentences; an unusable reply is counted as in ours.


def _ask_text(
    ctx: RunContext, kind: str, visit: Visit, users: list[str], messages: list, max_tokens: int,
    desc: str,
) -> list[ChatResult]:  # fmt: skip
    """One free-text request per agent (no schema), accounted like :meth:`RunContext.ask`."""
    requests = [
        ChatRequest(messages=m, schema=None, temperature=visit.config.temperature,
                    max_tokens=max_tokens, seed=0, tag=u)
        for u, m in zip(users, messages, strict=True)
    ]  # fmt: skip
    return ask(ctx.client, ctx.log, ctx.phase, kind, requests, desc=desc) if requests else []


def _slots(visit: Visit, user: str) -> dict[str, str]:
    """The released slots one agent's prompts share (traits, tastes, rating tendency)."""
    agent = visit.agents[user]
    tastes, high = persona_parts(agent.persona)
    return agent_slots(agent.traits, tastes, high, user)


def _show_released_page(ctx: RunContext, visit: Visit, users: list[str], page: int) -> None:
    """:func:`show_page` with the authors' page prompt and their page memory."""
    config = visit.config
    facts = [[visit.facts[i] for i in visit.pages[u][page - 1]] for u in users]
    messages = []
    for user, shown in zip(users, facts, strict=True):
        recalled = recall(visit.agents[user], "\n".join(f.title for f in shown),
                          config.memory_top_k, visit.embed)  # fmt: skip
        slots = {**_slots(visit, user), "current_page": str(page),
                 "recommended_items_str": page_items_text(shown),
                 "formated_relevant_memories": memory_block(recalled)}  # fmt: skip
        messages.append(render_released("page", slots))
    results = _ask_text(ctx, "page", visit, users, messages, 250 * config.items_per_page + 100,
                        f"{visit.recommender} page {page}")  # fmt: skip
    memory = released_prompts().memories["page"]
    for user, shown, result in zip(users, facts, results, strict=True):
        items = visit.pages[user][page - 1]
        titles = [f.title for f in shown]
        reading = parse_page_reply(result.text or "", titles) if result.ok else None
        for problem in reading.problems if reading else ():
            ctx.log.count(f"page_reply_{problem}")
        if reading is None or "no_align" in reading.problems:
            ctx.log.count("page_unusable")
            reading = PageReading([dict(_NOTHING_WATCHED) for _ in items])
        judged = [{**j, "rating": None if j["rating"] is None else float(j["rating"])}  # type: ignore[arg-type]
                  for j in reading.items]  # fmt: skip
        _record_exposures(visit, user, page, items, judged)
        visit.agents[user].memory.append(memory.render(page_memory_slots(page, titles, reading)))


def _decide_released_exit(ctx: RunContext, visit: Visit, users: list[str], page: int) -> list[str]:
    """:func:`decide_exit` with the authors' exit prompt; the decision is a new memory."""
    config = visit.config
    messages = []
    for user in users:
        recalled = recall(visit.agents[user], f"page {page}", config.memory_top_k, visit.embed)
        slots = {**_slots(visit, user), "current_page": str(page),
                 "formated_relevant_memories": memory_block(recalled)}  # fmt: skip
        messages.append(render_released("exit", slots))
    results = _ask_text(ctx, "exit", visit, users, messages, 300,
                        f"{visit.recommender} exit {page}")  # fmt: skip
    memories = released_prompts().memories
    still = []
    for user, result in zip(users, results, strict=True):
        decision = parse_exit_reply(result.text or "").decision if result.ok else None
        if decision is None:
            ctx.log.count("exit_unusable")
            decision = "exit"
        visit.exit_page[user] = page
        visit.exited[user] = decision == "exit"
        last = page == config.max_pages or len(visit.pages[user]) == page
        sentence = memories["exit" if decision == "exit" else "next"]
        visit.agents[user].memory.append(
            sentence.render({"current_page": str(page), "current_page + 1": str(page + 1)})
        )
        if decision != "exit" and not last:
            still.append(user)
    return still


def _reflect_released(ctx: RunContext, visit: Visit, users: list[str], page: int) -> None:
    """:func:`reflect` with the authors' satisfaction reflection (one user message)."""
    config = visit.config
    messages = [
        render_released("reflection", {"observation_str": memory_block(recall(
            visit.agents[u], "interaction history with each page", config.memory_top_k,
            visit.embed))})
        for u in users
    ]  # fmt: skip
    results = _ask_text(ctx, "reflection", visit, users, messages, 150,
                        f"{visit.recommender} reflect {page}")  # fmt: skip
    for user, result in zip(users, results, strict=True):
        sentence = (result.text or "").strip() if result.ok else ""
        if sentence:
            visit.agents[user].memory.append(sentence)
        else:
            ctx.log.count("reflection_unusable")


def _interview_released(ctx: RunContext, visit: Visit, users: list[str]) -> list[int | None]:
    """The interview scores from the authors' interview prompt (whole memory, in order)."""
    messages = []
    for user in users:
        memories = memory_block(visit.agents[user].memory)
        slots = {**_slots(visit, user), "formated_relevant_memories": memories}
        messages.append(render_released("interview", slots))
    results = _ask_text(ctx, "interview", visit, users, messages, 400,
                        f"{visit.recommender} interviews")  # fmt: skip
    scores: list[int | None] = []
    for result in results:
        reading = parse_interview_reply(result.text or "") if result.ok else None
        for problem in reading.problems if reading else ():
            ctx.log.count(f"interview_reply_{problem}")
        scores.append(reading.rating if reading else None)
    return scores
