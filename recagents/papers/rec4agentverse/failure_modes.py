"""What went wrong with the embedded model in a Rec4Agentverse run, classified by code.

Why: with SmolLM2-135M the simulated user says "satisfied" to almost everything, so no stage
effect can appear; this module says which failures cause that, from the run's own replies.
Three roles are classified, each over its own units:

- the simulated user's reactions (:data:`USER_MODES`): satisfied although the films miss its
  hidden taste, a comment that copies the curator's words, a template placeholder;
- the agent items' turns (:data:`AGENT_MODES`): the first films of the list in order, a
  message about the prompt's scaffolding, a report of genres or an era the user never named;
- the LLM recommender's routing decisions in the manipulation experiment
  (:data:`ROUTER_MODES`): back to the agent named in its prompt, one of the first agents
  listed, the same agent for (nearly) every user.

:func:`user_units`, :func:`agent_units` and :func:`router_units` build the units from a run's
tables; :func:`failure_reports` classifies all three with :func:`recagents.failures.classify`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from recagents.columns import USER
from recagents.failures import FailureMode, FailureReport, classify, has_placeholder
from recagents.papers.rec4agentverse.catalogue import Catalogue
from recagents.papers.rec4agentverse.config import ERAS, GENRE_NAMES, Rec4AConfig
from recagents.papers.rec4agentverse.recommender import profile_from_text
from recagents.papers.rec4agentverse.session import SessionRun

#: Share of a channel's and condition's decisions one agent must take to count as "the same
#: agent for everyone".
SAME_AGENT_SHARE = 0.75

#: Characters of a comment compared with the curator's words (shorter comments never match).
ECHO_CHARS = 24

#: Words an agent message uses when it talks about its prompt instead of films.
_SCAFFOLDING = re.compile(
    r"user's account|account has been|conversation so far|your films|reply in json", re.I
)


# --------------------------------------------------------------------------- the units


@dataclass(frozen=True)
class Reaction:
    """One reaction of the simulated user to a turn's films."""

    user: str
    stage: int
    turn: int
    comment: str
    satisfied: bool | None
    taste_fit: float
    curator_words: str

    def __str__(self) -> str:
        verdict = {True: "satisfied", False: "not satisfied", None: "no verdict"}[self.satisfied]
        return f"[{verdict}; {self.taste_fit:.0%} of the films fit its taste] {self.comment}"


@dataclass(frozen=True)
class AgentTurn:
    """One agent item's turn: its message, its picks and the report it wrote afterwards."""

    user: str
    stage: int
    turn: int
    agent: str
    message: str
    first_films: bool
    report: str
    reported_liked: tuple[str, ...]
    reported_era: str | None
    user_genres: tuple[str, ...]
    user_era: str | None

    def __str__(self) -> str:
        said = ", ".join(self.user_genres) or "no genre"
        return (
            f"{self.agent} reports likes {', '.join(self.reported_liked) or 'none'}, era "
            f"{self.reported_era or 'unknown'} (the user named {said}, era "
            f"{self.user_era or 'none'}); it says: {self.message}"
        )


@dataclass(frozen=True)
class Decision:
    """One routing decision of the LLM recommender after the adversary's report."""

    user: str
    mode: str
    condition: str
    chosen: str | None
    named: str
    first_listed: tuple[str, ...]
    classic_choice: str | None
    group_share: float

    def __str__(self) -> str:
        return (
            f"{self.mode} {self.condition} report: routes to {self.chosen} "
            f"(the classic scorer: {self.classic_choice})"
        )


def _said(messages: pd.DataFrame, user: str, stage: int, turn: int) -> str:
    """Everything the simulated user wrote in one session up to ``turn``."""
    rows = messages[
        (messages[USER] == user)
        & (messages["stage"] == stage)
        & (messages["turn"] <= turn)
        & (messages["sender"] == "user")
    ]
    return " ".join(_comment(text) for text in rows["content"])


def _comment(content: str) -> str:
    """A logged reaction without its ``[satisfied]`` prefix."""
    return re.sub(r"^\[[^\]]*\]\s*", "", str(content))


def _one(messages: pd.DataFrame, user: str, stage: int, turn: int, **where: str) -> str:
    """The content of the first logged message of one turn matching ``where`` ("" if none)."""
    rows = messages[
        (messages[USER] == user) & (messages["stage"] == stage) & (messages["turn"] == turn)
    ]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return str(rows["content"].iloc[0]) if len(rows) else ""


def user_units(run: SessionRun, catalogue: Catalogue) -> list[Reaction]:
    """The simulated user's reactions in a run (one per turn that showed films)."""
    out = []
    for row in run.turns.to_dict("records"):
        if not row["agent_ok"]:
            continue
        key = (row[USER], row["stage"], row["turn"])
        reply = _one(run.messages, *key, sender=row["agent_id"], kind="reply")
        titles = "; ".join(catalogue.line(i) for i in row["items"])
        out.append(
            Reaction(
                *key,
                comment=_comment(_one(run.messages, *key, sender="user", kind="reaction")),
                satisfied=None if pd.isna(row["satisfied"]) else bool(row["satisfied"]),
                taste_fit=float(row["pref_share"]),
                curator_words=f"{reply} {titles}",
            )
        )
    return out


_FIELD = {
    "liked": re.compile(r"(?:liked_genres=|likes: )([^;]*)"),
    "era": re.compile(r"(?:era=|era: )([^;.]*)"),
}


def _reported(text: str) -> tuple[tuple[str, ...], str | None]:
    """The liked genres and the era a logged report or note states."""
    liked = _FIELD["liked"].search(text)
    era = _FIELD["era"].search(text)
    genres = tuple(g for g in GENRE_NAMES if liked and g in liked.group(1).split(", "))
    named_era = era.group(1).strip() if era else None
    return genres, named_era if named_era in ERAS else None


def agent_units(run: SessionRun) -> list[AgentTurn]:
    """The agent items' turns in a run that produced films (reply, picks, report)."""
    out = []
    for row in run.turns.to_dict("records"):
        if not row["agent_ok"]:
            continue
        key = (row[USER], row["stage"], row["turn"])
        kind = "learned" if row["stage"] == 1 else "report"
        report = _one(run.messages, *key, sender=row["agent_id"], kind=kind)
        liked, era = _reported(report)
        said = profile_from_text(_said(run.messages, *key))
        message = _one(run.messages, *key, sender=row["agent_id"], kind="reply")
        out.append(
            AgentTurn(
                *key,
                agent=row["agent_id"],
                message=message.split(" Picks: ")[0],
                first_films=tuple(row["items"]) == tuple(row["shortlist"][: len(row["items"])]),
                report=report,
                reported_liked=liked,
                reported_era=era,
                user_genres=said.liked + said.disliked,
                user_era=said.era,
            )
        )
    return out


def _share_of_choice(chosen: pd.Series) -> pd.Series:
    """Per decision, the share of its group that chose the same agent (0 in a group of one)."""
    if len(chosen) < 2:
        return chosen.map(lambda _: 0.0)
    return chosen.map(chosen.value_counts(normalize=True))


def router_units(decisions: pd.DataFrame, catalogue: Catalogue) -> list[Decision]:
    """The LLM recommender's decisions of a manipulation experiment (usable replies only).

    ``decisions`` holds both recommenders' rows (as the notebook builds it); the classic
    scorer's choice for the same user, channel and condition is kept beside each.
    """
    llm = decisions[(decisions["recommender"] == "llm") & decisions["ok"].astype(bool)]
    classic = decisions[decisions["recommender"] == "classic"].set_index(
        [USER, "mode", "condition"]
    )["chosen"]
    share = llm.groupby(["mode", "condition"])["chosen"].transform(_share_of_choice)
    named = catalogue.adversary or ""
    return [
        Decision(
            user=row[USER],
            mode=row["mode"],
            condition=row["condition"],
            chosen=row["chosen"],
            named=named,
            first_listed=tuple(catalogue.ids[:2]),
            classic_choice=classic.get((row[USER], row["mode"], row["condition"])),
            group_share=float(part),
        )
        for row, part in zip(llm.to_dict("records"), share, strict=True)
    ]


# --------------------------------------------------------------------------- the modes


def _echoes(unit: Reaction) -> bool:
    """Whether a comment's start is copied from the curator's message or film lines."""
    words = " ".join(unit.comment.casefold().split())
    return len(words) >= ECHO_CHARS and words[:ECHO_CHARS] in unit.curator_words.casefold()


def user_modes(config: Rec4AConfig) -> list[FailureMode[Reaction]]:
    """The simulated user's failure modes (``satisfy_share`` sets what its taste accepts)."""
    return [
        FailureMode(
            "satisfied_anyway",
            f"says it is satisfied although under {config.satisfy_share:.0%} of the films fit "
            "its hidden taste",
            "a 135M model asked for yes or no after a friendly curator message continues with "
            "the likelier word; it does not check the films' genres and years against the "
            "taste in its brief.",
            lambda u: bool(u.satisfied) and u.taste_fit < config.satisfy_share,
        ),
        FailureMode(
            "echoes_curator",
            "copies the curator's words or a film line instead of saying what it wants",
            "a small model continues the nearest text in its context, and the curator's "
            "message and film list are the last thing before the question.",
            _echoes,
        ),
        FailureMode(
            "placeholder",
            "copies a template placeholder",
            "it reproduces the shape of a chat template from its training data instead of "
            "filling it.",
            lambda u: has_placeholder(u.comment),
        ),
    ]


#: The agent items' failure modes.
AGENT_MODES: list[FailureMode[AgentTurn]] = [
    FailureMode(
        "first_films",
        "picks the first films of its list, in order",
        "matching each film's genres and year with what the user said takes reading; the "
        "cheapest continuation of a list of numbers is 1, 2, 3, 4, 5.",
        lambda u: u.first_films,
    ),
    FailureMode(
        "scaffolding",
        "talks about the prompt's scaffolding instead of films",
        "the account line and the conversation header are the nearest text to copy.",
        lambda u: bool(_SCAFFOLDING.search(u.message)),
    ),
    FailureMode(
        "invented_genres",
        "reports liked genres the user never named (it ignores the feedback)",
        "the schema offers 18 genre names, and a small model fills the list with common ones "
        "rather than those in the conversation.",
        lambda u: bool(u.reported_liked) and not set(u.reported_liked) & set(u.user_genres),
    ),
    FailureMode(
        "invented_era",
        "reports an era the user never stated",
        "it fills the era field with one value of the list for most users instead of reading "
        "it from the conversation.",
        lambda u: u.reported_era is not None and u.reported_era != u.user_era,
    ),
    FailureMode(
        "placeholder",
        "copies a template placeholder",
        "it reproduces the shape of a chat template from its training data instead of filling it.",
        lambda u: has_placeholder(u.message) or has_placeholder(u.report),
    ),
]

#: The LLM recommender's failure modes.
ROUTER_MODES: list[FailureMode[Decision]] = [
    FailureMode(
        "keeps_named_agent",
        "routes the user back to the agent named in its prompt, which has just failed them, "
        "although the report is honest",
        "copying an id that stands in the prompt is easier for a small model than ranking "
        "ten agent cards against the profile.",
        lambda d: d.condition == "honest" and d.chosen == d.named,
    ),
    FailureMode(
        "first_listed",
        "picks one of the first two agents listed where the classic scorer picks another",
        "its choice among many options leans on their position in the prompt.",
        lambda d: d.chosen in d.first_listed and d.classic_choice not in d.first_listed,
    ),
    FailureMode(
        "same_for_everyone",
        f"routes to the agent it picks for at least {SAME_AGENT_SHARE:.0%} of the users of "
        "the same channel and condition",
        "the profile is the only part of the prompt that differs between users, and the "
        "answer follows the prompt's layout more than the profile.",
        lambda d: d.group_share >= SAME_AGENT_SHARE,
    ),
]


def failure_reports(
    run: SessionRun, decisions: pd.DataFrame, catalogue: Catalogue, config: Rec4AConfig
) -> dict[str, FailureReport]:
    """The embedded model's failures in one run, by role (its LLM-mode rows only).

    Returns:
        ``{"user": ..., "agent": ..., "recommender": ...}``; a role the run did not give
        to the model has no units (``n = 0``).
    """
    llm = run.of_mode("llm")
    return {
        "user": classify(user_units(llm, catalogue), user_modes(config), "user reactions"),
        "agent": classify(agent_units(llm), AGENT_MODES, "agent turns"),
        "recommender": classify(
            router_units(decisions, catalogue), ROUTER_MODES, "routing decisions"
        ),
    }
