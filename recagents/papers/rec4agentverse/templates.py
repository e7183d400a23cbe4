"""Template (rule-based, no LLM) user and agent policies: the named baseline of a run.

With ``agent_mode="template"`` these replace the LLM user simulator and agent items, so the
protocol runs with no model and gives the baseline the LLM runs are compared with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from recagents.papers.rec4agentverse.catalogue import AgentCard, Catalogue
from recagents.papers.rec4agentverse.config import (
    UNKNOWN_ERA,
    USER_ROLE,
    Rec4AConfig,
    era_of_year,
)
from recagents.papers.rec4agentverse.evaluate import preference_share
from recagents.papers.rec4agentverse.prompts import AgentReply
from recagents.papers.rec4agentverse.recommender import Profile, profile_from_text, update_profile
from recagents.papers.rec4agentverse.reports import report_text
from recagents.papers.rec4agentverse.users import SimUser

# --------------------------------------------------------------------------- template policies


def template_opening(user: SimUser) -> str:
    """The template user's opening: it names only its first favourite genre."""
    return f"Hi! I'm in the mood for a good {user.favourite_genres[0]} film tonight."


def template_reaction(
    user: SimUser, films: Sequence[str], catalogue: Catalogue, config: Rec4AConfig
) -> tuple[bool, str]:
    """The template user's verdict: satisfied when enough films fit its hidden taste.

    Satisfied iff :func:`preference_share` >= ``satisfy_share``. Otherwise it asks for the
    favourite genres least present in the list (the ones it has not seen yet first), for
    its era when under half of the films are from it, and to drop a disliked genre shown.
    """
    share = preference_share(
        films, user.favourite_genres, user.era, catalogue.genres, catalogue.years, config.k
    )
    if share >= config.satisfy_share:
        return True, "These look great, thanks!"
    present = Counter(g for i in films for g in catalogue.genres.get(i, ()))
    wanted = sorted(
        user.favourite_genres, key=lambda g: (present[g], user.favourite_genres.index(g))
    )
    parts = [f"I'd like more {' and '.join(wanted[:2])} films"]
    in_era = sum(era_of_year(catalogue.years.get(i)) == user.era for i in films)
    if in_era * 2 < max(len(films), 1):
        parts.append(f"from the {user.era} era")
    shown_bad = [g for g in user.disliked_genres if present[g]]
    text = " ".join(parts) + "."
    if shown_bad:
        text += f" No {' or '.join(shown_bad)}, please."
    return False, text


def template_report(dialogue: Sequence[tuple[str, str]]) -> tuple[Profile, str]:
    """The template agent's report: the user's messages read by keywords, later ones winning."""
    learned = Profile()
    for who, text in dialogue:
        if who == USER_ROLE:
            learned = update_profile(learned, profile_from_text(text))
    note = report_text(
        {
            "liked_genres": list(learned.liked),
            "disliked_genres": list(learned.disliked),
            "era": learned.era or UNKNOWN_ERA,
        }
    )
    return learned, note


def template_agent_reply(
    card: AgentCard,
    films: Sequence[str],
    dialogue: Sequence[tuple[str, str]],
    catalogue: Catalogue,
    config: Rec4AConfig,
) -> AgentReply:
    """The template agent: read the user by keywords, rank its list by fit, ask a question.

    What it learned: :func:`profile_from_text` over the user's messages, later ones
    winning. Picks: the ``k`` films of its list with the most liked-genre and era matches,
    without disliked genres first, ties by list order (popularity).
    """
    learned, _ = template_report(dialogue)
    disliked = set(learned.disliked)

    def key(indexed: tuple[int, str]) -> tuple[int, int, int]:
        position, item = indexed
        genres = set(catalogue.genres.get(item, ()))
        fit = len(genres & set(learned.liked))
        in_era = int(
            learned.era is not None and era_of_year(catalogue.years.get(item)) == learned.era
        )
        return (int(bool(genres & disliked)), -(fit + in_era), position)

    ranked = [item for _, item in sorted(enumerate(films), key=key)]
    picks = tuple(ranked[: config.k])
    question = "" if learned.era else " Which decade do you enjoy most?"
    message = f"Here are {len(picks)} picks from {card.name}.{question}"
    return AgentReply(message, picks)
