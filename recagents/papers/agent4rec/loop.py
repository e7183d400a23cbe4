"""Agent4Rec's page-by-page loop: agents browse a ranked list, react, leave, are interviewed.

:func:`simulate` shows each agent its list a page at a time. Calls run page by page *across*
agents, so independent agents' calls go out together; every unusable reply is counted in the
:class:`~recagents.papers.agent4rec.simlog.SimulationLog`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.llm.client import ChatRequest, LLMClient, get_client
from recagents.papers.agent4rec.agents import Agent
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.papers.agent4rec.prompts import (
    _SENTENCE_SCHEMA,
    exit_messages,
    exit_schema,
    interview_messages,
    interview_schema,
    page_messages,
    page_schema,
    parse_page,
    reflection_messages,
)
from recagents.papers.agent4rec.simlog import SimulationLog

__all__ = ["simulate"]


def _recall(agent: Agent, query: str, k: int, embed: Any) -> list[str]:
    """The ``k`` memories nearest to ``query`` (all of them when there are at most ``k``)."""
    if len(agent.memory) <= k:
        return list(agent.memory)
    vectors = embed([query, *agent.memory])
    nearest = np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")[:k]
    return [agent.memory[i] for i in sorted(nearest)]


def simulate(
    agents: dict[str, Agent],
    ranked: pd.DataFrame,
    lines: dict[str, str],
    sentences: dict[str, dict[int, str]],
    recommender: str,
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: SimulationLog | None = None,
    embed: Any | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Show each agent its ranked list page by page; return what it saw, did and said.

    Pages are slices of one static ranking (as in the paper). On every page each active
    agent reacts (one call), then decides to leave or continue (one call); memories are
    written after each page and condensed after the pages in ``reflect_after``; after the
    last page or an exit, an interview (one call). An unusable page reply counts as "watched
    nothing" and is counted; an unusable exit reply counts as leaving.

    Taught in: notebook 02, section 3 "Comparing five recommenders (Table 2)".

    Args:
        agents: The agents (their memories are reset for this visit).
        ranked: ``[user_id, item_id, rank]``, at least ``list_length`` items per agent.
        lines: Item text by id.
        sentences: Trait level sentences (``analysis.TRAIT_SENTENCES``).
        recommender: Its name, copied into the frames.
        config: Settings.
        client: LLM client.
        log: Where calls and problems are counted.
        embed: Embedding function for memory retrieval (default: the offline MiniLM).

    Returns:
        ``(exposures, sessions)`` in the format of :mod:`recagents.papers.agent4rec.analysis`.
    """
    config = config or Agent4RecConfig()
    client = client or get_client()
    log = log if log is not None else SimulationLog()
    if embed is None:
        from recagents.llm import embed as embed_texts

        embed = embed_texts
    pages: dict[str, list[list[str]]] = {}
    for user, group in ranked.sort_values([USER, "rank"]).groupby(USER):
        items = group[ITEM].tolist()[: config.list_length]
        pages[user] = [
            items[i : i + config.items_per_page]
            for i in range(0, len(items), config.items_per_page)
        ]
    active = [u for u in sorted(agents) if u in pages]
    for user in active:
        agents[user].memory = []
    exposures, exit_page, exited = [], {}, {}
    for page in range(1, config.max_pages + 1):
        active = [u for u in active if len(pages[u]) >= page]
        if not active:
            break
        requests = []
        for user in active:
            shown = [lines[i] for i in pages[user][page - 1]]
            recalled = _recall(agents[user], "\n".join(shown), config.memory_top_k, embed)
            requests.append(
                ChatRequest(
                    messages=page_messages(
                        agents[user], page, shown, recalled, sentences, config.domain
                    ),
                    schema=page_schema(len(shown)),
                    temperature=config.temperature,
                    max_tokens=120 * len(shown) + 40,
                    tag=user,
                )
            )
        results = client.map(requests, desc=f"{recommender} page {page}")
        log.add_calls("page", results)
        for user, result in zip(active, results, strict=True):
            items = pages[user][page - 1]
            judged = parse_page(result.data, len(items)) if result.ok else None
            if judged is None:
                log.count("page_unusable")
                judged = [{"aligned": None, "watched": False, "rating": None, "feeling": ""}] * len(
                    items
                )
            for position, (item, j) in enumerate(zip(items, judged, strict=True)):
                exposures.append(
                    {
                        USER: user,
                        "recommender": recommender,
                        "page": page,
                        "position": position,
                        ITEM: item,
                        "aligned": j["aligned"],
                        "watched": j["watched"],
                        "rating": j["rating"],
                        "feeling": j["feeling"],
                    }
                )
            watched = [
                f"{lines[i]} (rated {j['rating']:g})" if j["rating"] else lines[i]
                for i, j in zip(items, judged, strict=True)
                if j["watched"]
            ]
            agents[user].memory.append(
                f"On page {page} I was shown: " + "; ".join(lines[i] for i in items) + "."
            )
            agents[user].memory.append(
                ("I watched: " + "; ".join(watched) + ". ") if watched else "I watched nothing. "
            )
        exit_requests = [
            ChatRequest(
                messages=exit_messages(
                    agents[u],
                    page,
                    _recall(agents[u], f"page {page}", config.memory_top_k, embed),
                    sentences,
                    config.domain,
                ),
                schema=exit_schema(),
                temperature=config.temperature,
                max_tokens=120,
                tag=u,
            )
            for u in active
        ]
        decisions = client.map(exit_requests, desc=f"{recommender} exit {page}")
        log.add_calls("exit", decisions)
        still = []
        for user, result in zip(active, decisions, strict=True):
            decision = result.data.get("decision") if result.ok else None
            if decision not in ("next", "exit"):
                log.count("exit_unusable")
                decision = "exit"
            exit_page[user] = page
            leaving = decision == "exit" or page == config.max_pages or len(pages[user]) == page
            exited[user] = decision == "exit"
            agents[user].memory[-1] += "I decided to leave." if leaving else "I turned the page."
            if not leaving:
                still.append(user)
        if page in config.reflect_after and still:
            reflections = client.map(
                [
                    ChatRequest(
                        messages=reflection_messages(agents[u], config.domain),
                        schema=_SENTENCE_SCHEMA,
                        temperature=config.temperature,
                        max_tokens=100,
                        tag=u,
                    )
                    for u in still
                ],
                desc=f"{recommender} reflect {page}",
            )
            log.add_calls("reflection", reflections)
            for user, result in zip(still, reflections, strict=True):
                sentence = result.data.get("sentence") if result.ok else None
                if isinstance(sentence, str) and sentence.strip():
                    agents[user].memory.append(sentence.strip())
                else:
                    log.count("reflection_unusable")
        active = still
    users = sorted(exit_page)
    interviews = client.map(
        [
            ChatRequest(
                messages=interview_messages(agents[u], sentences, config.domain),
                schema=interview_schema(),
                temperature=config.temperature,
                max_tokens=160,
                tag=u,
            )
            for u in users
        ],
        desc=f"{recommender} interviews",
    )
    log.add_calls("interview", interviews)
    sessions = []
    for user, result in zip(users, interviews, strict=True):
        score = result.data.get("satisfaction") if result.ok else None
        if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 10:
            log.count("interview_unusable")
            score = None
        sessions.append(
            {
                USER: user,
                "recommender": recommender,
                "exit_page": exit_page[user],
                "exited": exited[user],
                "satisfaction": float(score) if score else np.nan,
            }
        )
    exposure_frame = pd.DataFrame(exposures)
    if len(exposure_frame):
        exposure_frame["aligned"] = exposure_frame["aligned"].astype("boolean")
        exposure_frame["rating"] = exposure_frame["rating"].astype(float)
    return exposure_frame, pd.DataFrame(sessions)
