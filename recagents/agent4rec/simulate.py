"""Agent4Rec's simulator: generative user agents that browse recommendations page by page.

Zhang et al., *On Generative Agents in Recommendation*, SIGIR 2024 (arXiv 2310.10108). Each
agent is built from a real user: three social traits computed from the data
(:func:`recagents.agent4rec.analysis.compute_traits`), a taste persona the LLM writes from
the user's ratings, and a memory. A recommender's ranked list is shown a page at a time; on
each page the agent judges every item, watches some, rates them with a feeling, then decides
to leave or to turn the page; after leaving it is interviewed about its satisfaction.

Everything the LLM returns is structured and refers to items by their number on the page,
never by title; every unusable reply is counted. Calls run page by page *across* agents, so
independent agents' calls go out together (concurrently on a multi-slot endpoint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, RATING, TITLE, USER, YEAR
from recagents.data import Dataset, DatasetError, Split, readable_title
from recagents.llm.client import ChatRequest, ChatResult, LLMClient, get_client

__all__ = [
    "Agent",
    "Agent4RecConfig",
    "SimulationLog",
    "build_agents",
    "exit_messages",
    "exit_schema",
    "interview_messages",
    "interview_schema",
    "item_lines",
    "page_messages",
    "page_schema",
    "parse_page",
    "persona_messages",
    "persona_schema",
    "persona_text",
    "random_split",
    "reflection_messages",
    "simulate",
    "RECOMMENDERS",
    "exposure_mask",
    "feedback_rounds",
    "offline_accuracy",
    "feedback_interactions",
    "rank_for_agents",
    "random_ranking",
    "with_feedback",
    "taste_probe",
    "taste_probe_sets",
    "taste_schema",
]

TRAITS = ("activity", "conformity", "diversity")


@dataclass(frozen=True)
class Agent4RecConfig:
    """Settings of a simulation; the defaults are the paper's (the released runs').

    Attributes:
        items_per_page: Items on one page (4).
        max_pages: Most pages an agent sees (5).
        like_threshold: A watched item counts as liked when rated above this (3).
        persona_items: Most training ratings the persona is written from (25).
        memory_top_k: Memories retrieved into each page and exit prompt (5).
        reflect_after: Pages after which the agent condenses its memory into a
            satisfaction sentence (the official code: every 4 memory writes, i.e. after
            pages 2 and 4).
        temperature: Sampling temperature of every call (0.2).
        domain: The noun prompts use for an item.
        seed: Seeds sampling (the official code uses 101).
    """

    items_per_page: int = 4
    max_pages: int = 5
    like_threshold: float = 3.0
    persona_items: int = 25
    memory_top_k: int = 5
    reflect_after: tuple[int, ...] = (2, 4)
    temperature: float = 0.2
    domain: str = "movie"
    seed: int = 101

    def __post_init__(self) -> None:
        checks = {
            "items_per_page": self.items_per_page >= 1,
            "max_pages": self.max_pages >= 1,
            "persona_items": self.persona_items >= 1,
            "memory_top_k": self.memory_top_k >= 0,
            "temperature": 0 <= self.temperature <= 2,
        }
        bad = {name: getattr(self, name) for name, ok in checks.items() if not ok}
        if bad:
            raise ValueError(f"invalid Agent4Rec settings: {bad}")

    @property
    def list_length(self) -> int:
        """Items a recommender must rank per agent (pages x items per page)."""
        return self.items_per_page * self.max_pages


# --------------------------------------------------------------------------- data


def random_split(
    dataset: Dataset,
    n_users: int | None = 1000,
    min_positives: int = 20,
    positive_above: float = 3.0,
    fractions: tuple[float, float, float] = (0.4, 0.3, 0.3),
    seed: int = 101,
) -> Split:
    """The paper's data: users with enough liked items, each split at random 40/30/30.

    Users with at least ``min_positives`` ratings above ``positive_above`` are eligible;
    ``n_users`` of them are drawn (all for ``None``) with *all* their ratings. Each user's
    ratings are split at random (not by time) into train, valid and test; valid and test
    keep only items that occur in train, so every recommender can score them.

    Raises:
        DatasetError: Too few eligible users, or no rating column.
    """
    frame = dataset.interactions
    if RATING not in frame:
        raise DatasetError("Agent4Rec needs ratings: the interactions have no rating column")
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    positives = frame[frame[RATING] > positive_above].groupby(USER).size()
    eligible = np.array(sorted(positives[positives >= min_positives].index))
    wanted = len(eligible) if n_users is None else n_users
    if wanted > len(eligible):
        raise DatasetError(
            f"{dataset.name}: {len(eligible)} users have {min_positives}+ ratings above "
            f"{positive_above:g}; asked for {wanted}"
        )
    rng = np.random.default_rng(seed)
    users = set(rng.choice(eligible, size=wanted, replace=False))
    rows = frame[frame[USER].isin(users)].reset_index(drop=True)
    draw = rng.random(len(rows))
    part = np.where(draw < fractions[0], 0, np.where(draw < fractions[0] + fractions[1], 1, 2))
    train = rows[part == 0]
    known = set(train[ITEM])
    valid = rows[(part == 1) & rows[ITEM].isin(known)]
    test = rows[(part == 2) & rows[ITEM].isin(known)]
    return Split(
        train=train.reset_index(drop=True),
        valid=valid.reset_index(drop=True),
        test=test.reset_index(drop=True),
        name=f"a4r-random-{wanted}-s{seed}",
    )


def item_lines(dataset: Dataset, split: Split, describe: str = "genres") -> dict[str, str]:
    """One line per item as an agent sees it: title (year), the crowd's rating, and genres.

    The paper shows title, year, the item's mean rating ("history rating") and a one-sentence
    LLM-written summary that is not released; MovieLens has no summary, so ``describe``
    picks ``"genres"`` (default, a documented deviation) or ``"none"``.
    """
    if describe not in ("genres", "none"):
        raise ValueError(f"describe must be 'genres' or 'none', got {describe!r}")
    everything = pd.concat([split.train, split.valid, split.test])
    mean = dataset.interactions.groupby(ITEM)[RATING].mean()
    items = dataset.items.set_index(ITEM) if dataset.items is not None else None
    lines = {}
    for item in sorted(set(everything[ITEM]) | set(mean.index)):
        title = f"item {item}"
        genres: Sequence[str] = ()
        if items is not None and item in items.index:
            row = items.loc[item]
            title = readable_title(str(row[TITLE]))
            if YEAR in items and pd.notna(row[YEAR]):
                title += f" ({int(row[YEAR])})"
            genres = row[GENRES] if GENRES in items else ()
        text = f"{title}; rated {mean.get(item, float('nan')):.2f} on average"
        if describe == "genres" and len(genres):
            text += f"; {', '.join(genres)}"
        lines[item] = text
    return lines


# --------------------------------------------------------------------------- agents


@dataclass
class Agent:
    """One generative agent: who it is, and what it remembers.

    Attributes:
        user_id: The real user it is built from.
        traits: ``{"activity": 1-3, "conformity": 1-3, "diversity": 1-3}``.
        persona: The taste persona (tastes with reasons, and what it rates highly).
        memory: Factual and emotional memories, oldest first.
    """

    user_id: str
    traits: dict[str, int]
    persona: str
    memory: list[str] = field(default_factory=list)


def persona_schema() -> dict[str, Any]:
    """The persona reply: up to four tastes with reasons, and the rating tendencies."""
    text = {"type": "string", "maxLength": 150}
    return {
        "type": "object",
        "properties": {
            "tastes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"taste": text, "reason": text},
                    "required": ["taste", "reason"],
                },
                "minItems": 1,
                "maxItems": 4,
            },
            "rates_high": text,
            "rates_low": text,
        },
        "required": ["tastes", "rates_high", "rates_low"],
    }


def persona_messages(rated: Sequence[tuple[str, float]], domain: str = "movie") -> list:
    """Ask for a taste persona from ``(item line, rating)`` pairs, grouped by star value."""
    groups: dict[int, list[str]] = {}
    for line, rating in rated:
        groups.setdefault(int(round(rating)), []).append(line)
    listed = "\n".join(
        f"Rated {stars}/5: " + " | ".join(groups[stars]) for stars in sorted(groups, reverse=True)
    )
    return [
        {
            "role": "system",
            "content": f"You describe a viewer's taste in {domain}s from their ratings.",
        },
        {
            "role": "user",
            "content": (
                f"A viewer rated these {domain}s:\n{listed}\n"
                f"Describe their taste in up to four short points, each with the reason the "
                f"ratings suggest, then say in one sentence which {domain}s they rate highly "
                f'and in one which they rate low. Reply in JSON with "tastes" (a list of '
                f'{{"taste", "reason"}}), "rates_high" and "rates_low".'
            ),
        },
    ]


def persona_text(data: Any) -> str | None:
    """The persona as the simulator uses it (tastes and what is rated highly), or ``None``."""
    if not isinstance(data, dict) or not isinstance(data.get("tastes"), list):
        return None
    tastes = []
    for taste in data["tastes"]:
        if not isinstance(taste, dict) or not isinstance(taste.get("taste"), str):
            continue
        reason = taste.get("reason") if isinstance(taste.get("reason"), str) else ""
        if taste["taste"].strip():
            tastes.append(
                f"- {taste['taste'].strip()}" + (f" ({reason.strip()})" if reason.strip() else "")
            )
    if not tastes:
        return None
    high = data.get("rates_high") if isinstance(data.get("rates_high"), str) else ""
    return "My tastes:\n" + "\n".join(tastes) + (f"\nI rate highly: {high.strip()}" if high else "")


def build_agents(
    split: Split,
    traits: pd.DataFrame,
    lines: dict[str, str],
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: SimulationLog | None = None,
) -> dict[str, Agent]:
    """Make one agent per user of the split: traits from the data, persona from the LLM.

    The persona comes from at most ``persona_items`` of the user's training ratings (a
    seeded draw). A failed persona call leaves a neutral one, and is counted in ``log``.
    """
    config = config or Agent4RecConfig()
    client = client or get_client()
    trait_rows = traits.set_index(USER)
    users = sorted(split.train[USER].unique())
    requests = []
    for user in users:
        rated = split.train[split.train[USER] == user]
        if len(rated) > config.persona_items:
            rated = rated.sample(config.persona_items, random_state=config.seed)
        pairs = [(lines[i], r) for i, r in rated[[ITEM, RATING]].itertuples(index=False)]
        requests.append(
            ChatRequest(
                messages=persona_messages(pairs, config.domain),
                schema=persona_schema(),
                temperature=config.temperature,
                max_tokens=600,
                tag=user,
            )
        )
    results = client.map(requests, desc="personas")
    if log is not None:
        log.add_calls("persona", results)
    agents = {}
    for user, result in zip(users, results, strict=True):
        persona = persona_text(result.data) if result.ok else None
        if persona is None and log is not None:
            log.count("persona_unusable")
        level = trait_rows.loc[user] if user in trait_rows.index else None
        agents[user] = Agent(
            user_id=user,
            traits={t: int(level[t]) if level is not None else 2 for t in TRAITS},
            persona=persona or f"I watch all kinds of {config.domain}s.",
        )
    return agents


# --------------------------------------------------------------------------- prompts


def _role(agent: Agent, sentences: dict[str, dict[int, str]], domain: str) -> str:
    traits = " ".join(sentences[t][agent.traits[t]] for t in TRAITS)
    return (
        f"You play a user of a {domain} recommendation website. Stay in character.\n"
        f"Your habits: {traits}\n{agent.persona}"
    )


def _memories(recalled: Sequence[str]) -> str:
    if not recalled:
        return ""
    return "\nWhat you remember of this visit:\n" + "\n".join(f"- {m}" for m in recalled)


def page_schema(n: int) -> dict[str, Any]:
    """A page reaction: one judgement per shown item, in page order."""
    return {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "aligned": {"type": "boolean"},
                        "watch": {"type": "boolean"},
                        "rating": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
                        "feeling": {"type": "string", "maxLength": 200},
                    },
                    "required": ["aligned", "watch", "rating", "feeling"],
                },
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["items"],
    }


def page_messages(
    agent: Agent,
    page: int,
    shown: Sequence[str],
    recalled: Sequence[str],
    sentences: dict[str, dict[int, str]],
    domain: str = "movie",
) -> list:
    """The page reaction: judge each item, pick what to watch, rate it with a feeling."""
    listed = "\n".join(f"{k}. {line}" for k, line in enumerate(shown, start=1))
    user = (
        f"Page {page} of your recommendations:\n{listed}\n"
        f"For every {domain}, in this order: say whether it matches your taste (aligned), "
        f"whether you watch it (watch) — how many you watch should follow your habits — and, "
        f"if you watch it, rate it 1-5 as if seeing it for the first time, in the way your "
        f"habits say you rate, with a one-sentence feeling. For a {domain} you do not watch, "
        f'give rating 1 and an empty feeling. Reply in JSON: "items", one object per {domain}.'
    )
    return [
        {"role": "system", "content": _role(agent, sentences, domain) + _memories(recalled)},
        {"role": "user", "content": user},
    ]


def parse_page(data: Any, n: int) -> list[dict[str, Any]] | None:
    """Per shown item: aligned, watched, rating (None unless watched) and feeling.

    Returns ``None`` when the reply does not judge exactly ``n`` items.
    """
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        return None
    judged = data["items"]
    if len(judged) != n or not all(isinstance(j, dict) for j in judged):
        return None
    out = []
    for entry in judged:
        watched = entry.get("watch") is True
        rating = entry.get("rating")
        valid_rating = isinstance(rating, int) and not isinstance(rating, bool)
        valid_rating = valid_rating and 1 <= rating <= 5
        out.append(
            {
                "aligned": entry.get("aligned") if isinstance(entry.get("aligned"), bool) else None,
                "watched": watched,
                "rating": float(rating) if watched and valid_rating else None,
                "feeling": str(entry.get("feeling") or "") if watched else "",
            }
        )
    return out


def exit_schema() -> dict[str, Any]:
    """The exit decision: how the agent feels, and whether it leaves."""
    return {
        "type": "object",
        "properties": {
            "feeling": {"type": "string", "enum": ["positive", "negative"]},
            "decision": {"type": "string", "enum": ["next", "exit"]},
            "reason": {"type": "string", "maxLength": 300},
        },
        "required": ["feeling", "decision", "reason"],
    }


_FATIGUE = {1: "", 2: "", 3: " You are getting a little tired.", 4: " You are quite tired."}


def exit_messages(
    agent: Agent,
    page: int,
    recalled: Sequence[str],
    sentences: dict[str, dict[int, str]],
    domain: str = "movie",
) -> list:
    """Leave or turn the page: the activity habit, fatigue by page, and recent memories."""
    fatigue = _FATIGUE.get(page, " You are very tired.")
    system = (
        f"You play a user of a {domain} recommendation website. "
        f"{sentences['activity'][agent.traits['activity']]}" + _memories(recalled)
    )
    user = (
        f"You have just looked at page {page} of recommendations.{fatigue} How do you feel "
        f"about the recommendations so far, and do you turn to the next page or leave? Reply "
        f'in JSON: "feeling" (positive or negative), "decision" (next or exit), "reason".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def interview_schema() -> dict[str, Any]:
    """The satisfaction interview: 1-10 and why."""
    return {
        "type": "object",
        "properties": {
            "satisfaction": {"type": "integer", "enum": list(range(1, 11))},
            "reason": {"type": "string", "maxLength": 400},
        },
        "required": ["satisfaction", "reason"],
    }


def interview_messages(
    agent: Agent, sentences: dict[str, dict[int, str]], domain: str = "movie"
) -> list:
    """After leaving: rate the recommender 1-10 from the whole memory of the visit."""
    system = _role(agent, sentences, domain) + _memories(agent.memory)
    user = (
        "You have left the website. How satisfied are you with its recommendations, from 1 "
        '(not at all) to 10 (completely)? Reply in JSON: "satisfaction" and "reason".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def reflection_messages(agent: Agent, domain: str = "movie") -> list:
    """Condense the visit so far into one sentence on how satisfied the agent is, and why."""
    listed = "\n".join(f"- {m}" for m in agent.memory[-4:])
    return [
        {"role": "system", "content": f"You play a user of a {domain} recommendation website."},
        {
            "role": "user",
            "content": (
                f"What happened in your visit so far:\n{listed}\nIn one sentence, are you "
                f'satisfied or unsatisfied with the recommendations, and why? JSON key "sentence".'
            ),
        },
    ]


_SENTENCE_SCHEMA = {
    "type": "object",
    "properties": {"sentence": {"type": "string", "maxLength": 300}},
    "required": ["sentence"],
}


# --------------------------------------------------------------------------- the loop


@dataclass
class SimulationLog:
    """Every call (for cost) and every counted problem (for the invalid-output rate)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    problems: dict[str, int] = field(default_factory=dict)

    def add_calls(self, phase: str, results: Sequence[ChatResult]) -> None:
        """Account for one batch of results."""
        for r in results:
            self.calls.append(
                {
                    "phase": phase,
                    "ok": r.ok,
                    "failure": r.failure,
                    "cached": r.cached,
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "latency_s": r.latency_s,
                    "reasks": r.reasks,
                }
            )

    def count(self, problem: str, n: int = 1) -> None:
        """Count a problem (e.g. an unusable page reply)."""
        self.problems[problem] = self.problems.get(problem, 0) + n

    def calls_frame(self) -> pd.DataFrame:
        """The calls as a frame (the columns :func:`recagents.llm.runlog.cost_table` reads)."""
        return pd.DataFrame(self.calls)


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
        ``(exposures, sessions)`` in the format of :mod:`recagents.agent4rec.analysis`.
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


# --------------------------------------------------------------------------- taste probe


def taste_schema(n: int) -> dict[str, Any]:
    """The taste probe: watch yes/no for each of ``n`` numbered items, in order."""
    return {
        "type": "object",
        "properties": {
            "watch": {"type": "array", "items": {"type": "boolean"}, "minItems": n, "maxItems": n}
        },
        "required": ["watch"],
    }


def taste_probe_sets(
    split: Split,
    dataset: Dataset,
    ratio: int,
    total: int = 20,
    seed: int = 101,
    users: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Items each agent judges at 1:``ratio``: ``total // (ratio + 1)`` positives, the rest not.

    Positives come from the user's valid and test items (any rating), negatives from items
    the user never rated (as the official code draws them: 10+10, 6+12, 5+15, 2+18), among
    the split's training items. ``users`` restricts the probe to some users (default: all).

    Returns:
        ``[user_id, item_id, label, position]`` with a seeded shuffled order.
    """
    if ratio < 1:
        raise ValueError(f"ratio must be at least 1, got {ratio}")
    rng = np.random.default_rng(seed + ratio)
    held_out = pd.concat([split.valid, split.test]).groupby(USER)[ITEM].agg(list)
    rated = dataset.interactions.groupby(USER)[ITEM].agg(set)
    catalogue = np.array(sorted(set(split.train[ITEM])))
    rows = []
    for user in sorted(users if users is not None else split.train[USER].unique()):
        pool = sorted(set(held_out.get(user, [])))
        n_pos = min(len(pool), total // (ratio + 1))
        if n_pos == 0:
            continue
        positives = list(rng.choice(pool, size=n_pos, replace=False))
        unseen = catalogue[~np.isin(catalogue, list(rated.get(user, set())))]
        negatives = list(rng.choice(unseen, size=ratio * n_pos, replace=False))
        items = positives + negatives
        labels = [1] * n_pos + [0] * len(negatives)
        for position, index in enumerate(rng.permutation(len(items))):
            rows.append((user, items[index], labels[index], position))
    return pd.DataFrame(rows, columns=[USER, ITEM, "label", "position"])


def taste_probe(
    agents: dict[str, Agent],
    probe: pd.DataFrame,
    lines: dict[str, str],
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: SimulationLog | None = None,
    phase: str = "taste",
) -> pd.DataFrame:
    """Ask each agent, from its persona alone, which of its probe items it would watch.

    Returns:
        ``probe`` with a ``predicted`` column (1 watch, 0 not, NA when the reply failed).
    """
    config = config or Agent4RecConfig()
    client = client or get_client()
    users, requests = [], []
    for user, group in probe.sort_values([USER, "position"]).groupby(USER):
        listed = "\n".join(f"{k}. {lines[i]}" for k, i in enumerate(group[ITEM], start=1))
        messages = [
            {
                "role": "system",
                "content": f"You are a {config.domain} viewer.\n{agents[user].persona}",
            },
            {
                "role": "user",
                "content": (
                    f"{config.domain.capitalize()}s:\n{listed}\nFor each one, in order, would "
                    f'you watch it given your taste? Reply in JSON: "watch", one true or false '
                    f"per {config.domain}."
                ),
            },
        ]
        users.append(user)
        requests.append(
            ChatRequest(
                messages=messages,
                schema=taste_schema(len(group)),
                temperature=config.temperature,
                max_tokens=8 * len(group) + 30,
                tag=user,
            )
        )
    results = client.map(requests, desc=f"taste probe ({phase})")
    if log is not None:
        log.add_calls(phase, results)
    answers = {}
    for user, result in zip(users, results, strict=True):
        watch = result.data.get("watch") if result.ok else None
        answers[user] = watch if isinstance(watch, list) else None
        if answers[user] is None and log is not None:
            log.count("taste_unusable")
    out = probe.sort_values([USER, "position"]).reset_index(drop=True)
    rank_in_user = out.groupby(USER).cumcount()
    out["predicted"] = pd.array(
        [
            int(bool(answers[u][k])) if answers[u] is not None and k < len(answers[u]) else None
            for u, k in zip(out[USER], rank_in_user, strict=True)
        ],
        dtype="Int64",
    )
    return out


# --------------------------------------------------------------------------- recommenders

#: The recommenders the paper compares, by our name -> RecBole model (None: no training).
RECOMMENDERS = {
    "Random": None,
    "Pop": "Pop",
    "MF": "BPR",
    "MultVAE": "MultiVAE",
    "LightGCN": "LightGCN",
}


def exposure_mask(split: Split) -> pd.DataFrame:
    """What a recommender must not show: each user's train and test items.

    Valid items stay eligible: they are the ground truth the paper's simulation uses.
    """
    return pd.concat([split.train, split.test])[[USER, ITEM]].drop_duplicates()


def random_ranking(split: Split, users: Sequence[str], k: int, seed: int = 101) -> pd.DataFrame:
    """The Random recommender: ``k`` items per user, uniformly among the eligible ones."""
    rng = np.random.default_rng(seed)
    catalogue = np.array(sorted(set(split.train[ITEM])))
    banned = exposure_mask(split).groupby(USER)[ITEM].agg(set)
    frames = []
    for user in users:
        allowed = catalogue[~np.isin(catalogue, list(banned.get(user, set())))]
        picked = rng.choice(allowed, size=min(k, len(allowed)), replace=False)
        frames.append(
            pd.DataFrame(
                {USER: user, ITEM: picked, "score": 0.0, "rank": np.arange(1, len(picked) + 1)}
            )
        )
    return pd.concat(frames, ignore_index=True)


def rank_for_agents(
    name: str,
    split: Split,
    users: Sequence[str],
    k: int,
    train: Any = None,
    seed: int = 101,
) -> tuple[pd.DataFrame, Any]:
    """The ranked list each agent will browse, from one of :data:`RECOMMENDERS`.

    Models are trained (or loaded from the cache) by :func:`recagents.baselines.train_baseline`
    on ``split`` with early stopping on *valid* (the official code selects the checkpoint on
    the test split; that quirk is not reproduced).

    Returns:
        ``(ranked, model)``; ``model`` is ``None`` for Random.
    """
    from recagents import baselines

    if name not in RECOMMENDERS:
        raise ValueError(f"recommender must be one of {list(RECOMMENDERS)}, got {name!r}")
    if RECOMMENDERS[name] is None:
        return random_ranking(split, users, k, seed), None
    model = baselines.train_baseline(RECOMMENDERS[name], split, train, progress=False)
    return model.top_k(list(users), k, exclude=exposure_mask(split), seed=seed), model


def feedback_interactions(
    exposures: pd.DataFrame, kind: str = "viewed", seed: int = 101
) -> pd.DataFrame:
    """Simulated feedback to add to the training data (page-by-page enhancement).

    ``viewed``: items the agents watched (what the released run fed back); ``unviewed``:
    items shown but not watched; ``random``: as many shown items as were viewed, drawn at
    random. Returns ``[user_id, item_id]``.
    """
    if kind == "viewed":
        chosen = exposures[exposures["watched"]]
    elif kind == "unviewed":
        chosen = exposures[~exposures["watched"]]
    elif kind == "random":
        n = int(exposures["watched"].sum())
        chosen = exposures.sample(n=min(n, len(exposures)), random_state=seed)
    else:
        raise ValueError(f"kind must be 'viewed', 'unviewed' or 'random', got {kind!r}")
    return chosen[[USER, ITEM]].drop_duplicates().reset_index(drop=True)


def with_feedback(split: Split, feedback: pd.DataFrame, label: str) -> Split:
    """``split`` with ``feedback`` appended to train (valid and test unchanged)."""
    added = feedback.assign(**{c: np.nan for c in split.train.columns if c not in feedback})
    train = pd.concat([split.train, added[split.train.columns]], ignore_index=True)
    train = train.drop_duplicates([USER, ITEM], keep="first").reset_index(drop=True)
    return Split(train=train, valid=split.valid, test=split.test, name=f"{split.name}+{label}")


def offline_accuracy(
    model: Any,
    split: Split,
    users: Sequence[str],
    k: int = 20,
    seed: int = 101,
    n_boot: int = 1000,
) -> pd.DataFrame:
    """Recall@k and NDCG@k of a recommender on the test split (the paper's offline check).

    Each user's list excludes their train and valid items; ``model=None`` is Random.

    Returns:
        ``[metric, mean, low, high, n]`` with 95% bootstrap intervals over users.
    """
    from recagents import metrics

    if model is None:
        ranked = random_ranking(split, users, k, seed=seed)
    else:
        seen = pd.concat([split.train, split.valid])[[USER, ITEM]]
        ranked = model.top_k(list(users), k, exclude=seen, seed=seed)
    per_user = metrics.ranking_metrics(
        ranked, split.test[[USER, ITEM]], ks=(k,), metrics=("recall", "ndcg")
    )
    return metrics.summarize(per_user, n_boot=n_boot, seed=seed)


def feedback_rounds(
    name: str,
    split: Split,
    agents: dict[str, Agent],
    exposures: pd.DataFrame,
    ranked: pd.DataFrame,
    rounds: int,
    lines: dict[str, str],
    sentences: dict[str, dict[int, str]],
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: SimulationLog | None = None,
    train: Any = None,
) -> pd.DataFrame:
    """The filter-bubble loop: add what the agents viewed, retrain, recommend, simulate again.

    Args:
        name: The recommender (one of :data:`RECOMMENDERS`).
        split: The original split.
        agents: The agents.
        exposures: Round 0's exposures of this recommender.
        ranked: Round 0's lists.
        rounds: Retraining rounds after round 0.
        lines: Item text by id.
        sentences: Trait sentences.
        config: Settings.
        client: LLM client.
        log: Where calls are counted.
        train: Training settings of the recommender.

    Returns:
        Every round's lists, ``[user_id, item_id, score, rank, round]``.
    """
    config = config or Agent4RecConfig()
    users = sorted(ranked[USER].unique())
    recommended = [ranked.assign(round=0)]
    current, shown = split, exposures
    for round_index in range(1, rounds + 1):
        extra = feedback_interactions(shown, "viewed", seed=config.seed)
        current = with_feedback(current, extra, f"bubble{round_index}")
        lists, _ = rank_for_agents(name, current, users, config.list_length, train, config.seed)
        recommended.append(lists.assign(round=round_index))
        if round_index < rounds:
            shown, _ = simulate(
                agents, lists, lines, sentences, f"{name} round {round_index}", config, client, log
            )
    return pd.concat(recommended, ignore_index=True)
