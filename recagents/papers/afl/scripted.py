"""A scripted AFL user agent: a demonstration that makes the feedback loop run past round 1.

Why: the embedded 135M model accepts nearly every first proposal, so with it the loop ends in
round 1 and its memory never shows. :func:`scripted_user_policy` is a rule written in Python,
not a model: it answers only the in-loop user agent's requests, accepts a proposal only when
it is the sample's held-out target, and rejects every other one with a reason built from the
proposed item's genres against the user's history. Every other request (the recommendation
agent's, the user simulation's judgements) is passed on to a fallback client, so the
recommendation agent stays an LLM. Wrapped in
:class:`~recagents.llm.scripted.ScriptedClient` (:func:`scripted_user_client`), its results
are named ``scripted:<name>`` and are never an LLM result.

How a request is matched to what it judges: the request's ``tag`` is the sample's user id
(``RunContext.ask`` tags every request with its agent's id), and the proposed item is the
candidate whose text follows "Now the agent recommends: " in the prompt built by
:func:`~recagents.papers.afl.prompts.user_loop_messages`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import pandas as pd

from recagents.columns import GENRES, ITEM
from recagents.llm.client import ChatRequest
from recagents.llm.scripted import PASS, ScriptedClient
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.samples import Sample

#: The acceptance rules: only the target, or also any item of the history's top genre.
ACCEPT_RULES = ("target", "top_genre")

#: The sentence of the in-loop user prompt that names the proposal (prompts.user_loop_messages).
_PROPOSAL = "Now the agent recommends: "
_AFTER = ". Its reason:"


def item_genres(items: pd.DataFrame | None) -> dict[str, tuple[str, ...]]:
    """Item id → its genres (categories), from a dataset's items frame; empty without any."""
    if items is None or GENRES not in items.columns:
        return {}
    return {
        str(item): tuple(g for g in (genres or ()) if isinstance(g, str) and g)
        for item, genres in zip(items[ITEM], items[GENRES], strict=True)
    }


def proposed_item(request: ChatRequest, sample: Sample, titles: Mapping[str, str]) -> str | None:
    """The candidate an in-loop user request judges, or ``None`` if it is not such a request.

    The longest candidate text that follows "Now the agent recommends: " wins, so a title
    that is a prefix of another cannot be mistaken for it. Two candidates with the same text
    cannot be told apart (the user agent sees the same words); the target is preferred then.
    """
    text = request.messages[-1]["content"] if request.messages else ""
    start = text.rfind(_PROPOSAL)
    if start < 0:
        return None
    rest = text[start + len(_PROPOSAL) :]
    matches = [c for c in sample.candidates if rest.startswith(f"{titles[c]}{_AFTER}")]
    if not matches:
        return None
    longest = max(len(titles[c]) for c in matches)
    matches = [c for c in matches if len(titles[c]) == longest]
    return sample.target if sample.target in matches else matches[0]


def _top_genres(history: Sequence[str], genres: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The history's genres, most frequent first (ties by name, so the order is fixed)."""
    counts = Counter(g for item in history for g in genres.get(item, ()))
    return [g for g, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def genre_reason(
    item: str,
    history: Sequence[str],
    titles: Mapping[str, str],
    genres: Mapping[str, tuple[str, ...]],
    domain: str = "movie",
) -> str:
    """Why the scripted user rejects ``item``: its genres against those of the history.

    Deterministic: names the history's three most frequent genres with their counts and
    which of them the item shares (or that it shares none, or that it has no genres).
    """
    top = _top_genres(history, genres)[:3]
    counts = Counter(g for h in history for g in genres.get(h, ()))
    mine = ", ".join(f"{g} ({counts[g]} of {len(history)})" for g in top) or "no known genres"
    own = genres.get(item, ())
    title = titles.get(item, item)
    if not own:
        return f"No genres are known for {title}; my history is mostly {mine}."
    shared = [g for g in own if g in set(top)]
    if shared:
        return (
            f"{title} is {', '.join(own)}; it shares {', '.join(shared)} with my history "
            f"({mine}), but it is not the {domain} I want next."
        )
    return f"{title} is {', '.join(own)}, none of my usual genres: my history is mostly {mine}."


def scripted_user_policy(
    samples: Sequence[Sample],
    titles: Mapping[str, str],
    genres: Mapping[str, tuple[str, ...]],
    config: AFLConfig,
    accept: Literal["target", "top_genre"] = "target",
) -> Callable[[ChatRequest], Any]:
    """A :class:`~recagents.llm.scripted.ScriptedClient` policy for AFL's in-loop user agent.

    It answers a request only when it carries the user agent's schema (a ``decision``), its
    tag is one of ``samples``' users and its prompt names one of that sample's candidates;
    everything else is :data:`~recagents.llm.scripted.PASS` (to the fallback client). With
    ``accept="target"`` it says yes to the target only; with ``"top_genre"`` also to any
    item of the history's most frequent genre. Rejections carry :func:`genre_reason`.
    """
    if accept not in ACCEPT_RULES:
        raise ValueError(f"accept must be one of {ACCEPT_RULES}, got {accept!r}")
    by_user = {s.user: s for s in samples}

    def policy(request: ChatRequest) -> Any:
        properties = (request.schema or {}).get("properties", {})
        sample = by_user.get(request.tag)
        if "decision" not in properties or sample is None:
            return PASS
        item = proposed_item(request, sample, titles)
        if item is None:
            return PASS  # not an in-loop verdict (e.g. a user-simulation judgement)
        top = _top_genres(sample.history, genres)[:1]
        yes = item == sample.target or (
            accept == "top_genre" and bool(top) and top[0] in genres.get(item, ())
        )
        if yes:
            reason = f"{titles[item]} is the {config.domain} I want next."
        else:
            reason = genre_reason(item, sample.history, titles, genres, config.domain)
        return {"reason": reason[: config.reason_chars], "decision": "yes" if yes else "no"}

    return policy


def scripted_user_client(
    samples: Sequence[Sample],
    titles: Mapping[str, str],
    genres: Mapping[str, tuple[str, ...]],
    config: AFLConfig,
    fallback: Any,
    accept: Literal["target", "top_genre"] = "target",
) -> ScriptedClient:
    """A client whose user-agent replies are scripted and whose other replies are ``fallback``'s.

    Named ``scripted:afl-user-<accept>+<fallback model>`` so no table or log can take its
    results for an LLM's.
    """
    policy = scripted_user_policy(samples, titles, genres, config, accept)
    rest = getattr(fallback, "model", "fallback")
    return ScriptedClient(policy, f"afl-user-{accept}+{rest}", fallback=fallback)


def scripted_demo_text(rounds: pd.DataFrame, hits: pd.DataFrame, model: str) -> str:
    """What the scripted demonstration showed, generated from its rounds (never written ahead).

    Says how far the dialogues went, whether the recommendation agent re-proposed items
    the user had already rejected, and HR@1 at round limit 1 against the last limit.

    Args:
        rounds: :func:`~recagents.papers.afl.loop.feedback_loop`'s frame of the demonstration.
        hits: :func:`~recagents.papers.afl.evaluate.hits_by_round` of it.
        model: The client's name (``scripted:...``).
    """
    deepest = rounds.groupby("user_id")["round"].max()
    proposed = rounds.dropna(subset=[ITEM])
    repeats = int(proposed.duplicated(subset=["user_id", ITEM]).sum())
    later = int((proposed["round"] > 1).sum())
    by_limit = hits.groupby("limit")["hit"].mean()
    first, last = float(by_limit.iloc[0]), float(by_limit.iloc[-1])
    parts = [
        f"**Scripted demonstration, not an LLM result** ({model}, n={len(deepest)} dialogues): "
        f"the dialogues reached round {int(deepest.max())} at most; "
        f"{int((deepest > 1).sum())} of {len(deepest)} went past round 1.",
    ]
    if later:
        parts.append(
            f"Of the {later} proposals made after a rejection, {repeats} repeat an item the "
            f"same user had already rejected"
            + (" — the recommendation agent does not use its memory." if repeats else ".")
        )
    if last > first:
        parts.append(
            f"HR@1 rises from {first:.3f} (limit 1) to {last:.3f} (limit {len(by_limit)})."
        )
    elif last == first == 0:
        parts.append(
            "HR@1 stays 0 at every limit: the feedback is in the prompt, but the "
            "recommendation agent never moves to the target."
        )
    else:
        parts.append(f"HR@1 is {first:.3f} at limit 1 and {last:.3f} at limit {len(by_limit)}.")
    return " ".join(parts)
