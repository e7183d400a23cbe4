"""AFL's prompts: pure builders of both agents' messages, their reply schemas and parsers.

Kept apart from the loop so every prompt can be read and tested without an LLM. Every choice
is an index into the candidate list (or, with ``faithful_parsing``, the paper's exact-title
match); :class:`RoundMemory` is an earlier round as the agents remember it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recagents.llm.schemas import verdict_schema
from recagents.papers.afl.config import AFLConfig

# --------------------------------------------------------------------------- prompts


@dataclass(frozen=True)
class RoundMemory:
    """One earlier round as the agents remember it.

    Attributes:
        round: 1-based round number.
        item: The recommended item's text.
        rec_reason: Why the recommendation agent chose it.
        user_reason: Why the user agent rejected (or accepted) it; ``None`` when withheld.
        accepted: Whether the user agent accepted it.
    """

    round: int
    item: str
    rec_reason: str
    user_reason: str | None
    accepted: bool = False


def _score_text(score: float | None, domain: str) -> str:
    """How a tool score is worded; an item the tool model never saw has none."""
    if score is None or not np.isfinite(score):
        return f"The reward model has no score for this {domain} (it has never seen it)."
    return f"Reward model score: {score:.3f}."


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"{i}. {text}" for i, text in enumerate(texts, start=1))


def _history_line(history: Sequence[str]) -> str:
    return "; ".join(history) if history else "(nothing yet)"


def recommend_messages(
    history: Sequence[str],
    candidates: Sequence[str],
    prior: str | None,
    memory: Sequence[RoundMemory],
    config: AFLConfig,
) -> list[dict[str, str]]:
    """The recommendation agent's prompt for one round.

    Round 1 shows the tool model's pick ("another recommender suggests ..."); later rounds
    (``memory`` not empty) say that the user turned the last pick down and list each earlier
    round: the item, the agent's own reason and, with ``feedback_text``, the user's reason.
    What is stable for a sample (role, history, candidates) comes first, for the local
    server's prompt cache.
    """
    d = config.domain
    pick = "the number of one candidate" if not config.faithful_parsing else "the exact title"
    system = (
        f"You are a {d} recommender. From a user's history, predict which one of the "
        f"candidate {d}s the user will choose next. Another recommender system may suggest a "
        f"candidate; you can follow its suggestion or not. First think about the user's "
        f"interests and give your reason, then choose exactly one {d} from the candidates."
    )
    lines = [
        f"The user's history, oldest first: {_history_line(history)}.",
        f"Candidates:\n{_numbered(candidates)}",
    ]
    if memory:
        lines.append(f"The user did not find your last recommendation the best {d} for them.")
        lines.append("Your earlier recommendations and the user's answers:")
        for entry in memory:
            answer = (
                f"the user said: {entry.user_reason}"
                if config.feedback_text and entry.user_reason
                else "the user rejected it"
            )
            lines.append(
                f"Round {entry.round}: you recommended {entry.item} because {entry.rec_reason}; "
                f"{answer}."
            )
    if prior is not None and (not memory or config.prior_every_round):
        lines.append(f"The other recommender system suggests: {prior}.")
    lines.append(
        f'Reply in JSON: "reason" explains your choice in a few sentences, "choice" is {pick}.'
        if not config.faithful_parsing
        else f'Reply in JSON: "reason" explains your choice in a few sentences, "item" is {pick} '
        f"of one candidate, written exactly as listed."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def recommend_schema(n_candidates: int, config: AFLConfig) -> dict[str, Any]:
    """The recommendation agent's reply: a reason, then a candidate number (or a title)."""
    reason = {"type": "string", "maxLength": config.reason_chars}
    choice: dict[str, Any] = (
        {"type": "string", "maxLength": 200}
        if config.faithful_parsing
        else {"type": "integer", "enum": list(range(1, n_candidates + 1))}
    )
    key = "item" if config.faithful_parsing else "choice"
    return {
        "type": "object",
        "properties": {"reason": reason, key: choice},
        "required": ["reason", key],
    }


def _normalise_title(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def parse_recommendation(
    data: Any, candidates: Sequence[str], faithful: bool = False
) -> tuple[int | None, str | None]:
    """The chosen candidate's 0-based position and the reason, or ``None`` if unusable.

    Default: ``choice`` must be an integer from 1 to ``len(candidates)``. With ``faithful``
    (the paper's parser): ``item`` must equal a candidate's text, ignoring case and runs of
    spaces; a decorated title (bold, quotes) is a miss, as in the paper's code.
    """
    if not isinstance(data, dict):
        return None, None
    reason = data.get("reason")
    reason = str(reason).strip() if isinstance(reason, str) else None
    if faithful:
        named = data.get("item")
        if not isinstance(named, str):
            return None, reason
        wanted = _normalise_title(named)
        for index, text in enumerate(candidates):
            if _normalise_title(text) == wanted:
                return index, reason
        return None, reason
    choice = data.get("choice")
    if isinstance(choice, bool) or not isinstance(choice, int):
        return None, reason
    if not 1 <= choice <= len(candidates):
        return None, reason
    return choice - 1, reason


def user_loop_messages(
    history: Sequence[str],
    candidates: Sequence[str],
    recommended: str,
    rec_reason: str,
    hint: str | None,
    focus: Sequence[str],
    score: float | None,
    memory: Sequence[RoundMemory],
    config: AFLConfig,
) -> list[dict[str, str]]:
    """The in-loop user agent's prompt: is the recommended item my favourite candidate?

    With ``user_signal="hint"`` (the code) the agent is told the tool's pick and sees its
    focus list; with ``"score"`` (the paper's f_u) it sees the tool's raw score of the
    recommended item. With ``user_memory_in_loop`` it also sees the earlier rounds.
    """
    d = config.domain
    system = (
        f"You are a user who enjoys {d}s. The {d}s in your history, oldest first: "
        f"{_history_line(history)}. "
    )
    if config.user_signal == "hint" and hint is not None:
        system += f"A recommender system thinks you might like: {hint}. "
    system += (
        f"A recommendation agent proposes one {d} from a list of candidates. Decide whether "
        f"it is the {d} you would most like next among all the candidates. First "
        f"sum up your interests and give your reason, then decide."
    )
    lines = [f"Candidates:\n{_numbered(candidates)}"]
    if config.user_signal == "hint" and focus:
        lines.append(f"The recommender system ranks these highest for you: {'; '.join(focus)}.")
    if config.user_memory_in_loop and memory:
        lines.append("Earlier rounds of this conversation:")
        for entry in memory:
            lines.append(
                f"Round {entry.round}: the agent recommended {entry.item} because "
                f"{entry.rec_reason}; you rejected it because {entry.user_reason or 'no reason'}."
            )
    lines.append(f"Now the agent recommends: {recommended}. Its reason: {rec_reason}")
    if config.user_signal == "score":
        lines.append(
            f"{_score_text(score, d)} The score can be negative and higher means a better "
            f"match; do not trust it blindly."
        )
    lines.append(
        'Reply in JSON: "reason" gives your reason in a few sentences, "decision" is "yes" if '
        f'it is the {d} you would most like next, otherwise "no".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def judge_messages(
    history: Sequence[str],
    item: str,
    score: float | None,
    dialogue: tuple[Sequence[str], Sequence[RoundMemory]] | None,
    config: AFLConfig,
) -> list[dict[str, str]]:
    """The user-simulation prompt: would I like this one item?

    The single user agent sees its history, the item and the tool's raw score (a "reward
    model" with the paper's caveats). The AFL user agent (``dialogue`` given: step 1's
    candidates and rounds) also sees its earlier conversation with the recommendation agent.
    The judged item and its score come last, so one user's judgements share a prompt prefix.
    """
    d = config.domain
    system = (
        f"You are a user who enjoys {d}s. The {d}s in your history, oldest first: "
        f"{_history_line(history)}. You will be shown one {d} and asked whether you would "
        f"like it. A reward model gives a score with it: the score can be negative, higher "
        f"means a better match, and it can be wrong, so do not trust it blindly."
    )
    lines = []
    if dialogue is not None:
        step_candidates, rounds = dialogue
        lines.append(
            f"Earlier, a recommendation agent offered you {d}s from these candidates: "
            f"{'; '.join(step_candidates)}."
        )
        lines.append("What was said:")
        for entry in rounds:
            verdict = "you accepted it" if entry.accepted else "you rejected it"
            lines.append(
                f"Round {entry.round}: it recommended {entry.item} because {entry.rec_reason}; "
                f"{verdict} because {entry.user_reason or 'no reason'}."
            )
    lines.append(f"The {d}: {item}. {_score_text(score, d)}")
    lines.append(
        'Reply in JSON: "reason" gives your reason in a few sentences, "decision" is "yes" if '
        f'you would like this {d}, otherwise "no".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def decision_schema(config: AFLConfig) -> dict[str, Any]:
    """The user agent's reply: a reason, then yes or no."""
    return verdict_schema("reason", config.reason_chars, "decision")


def parse_decision(data: Any) -> tuple[bool | None, str | None]:
    """``(accepted, reason)``; ``accepted`` is ``None`` unless the decision is yes or no."""
    if not isinstance(data, dict):
        return None, None
    reason = data.get("reason")
    reason = str(reason).strip() if isinstance(reason, str) else None
    decision = data.get("decision")
    if not isinstance(decision, str):
        return None, reason
    word = decision.strip().casefold()
    if word in ("yes", "no"):
        return word == "yes", reason
    return None, reason
