"""What went wrong with the embedded model in AFL's loop: its failure modes, found by code.

Why: with SmolLM2-135M every dialogue of the loop ends in round 1, and when a scripted user
keeps a dialogue going the model's recommendation agent proposes items it was just told the
user rejected. These are counted here, turn by turn, with
:func:`recagents.failures.classify`. A *turn* (:class:`Turn`) is one proposal of the
recommendation agent and, where the model also played the user, its verdict; the modes
(:func:`afl_failure_modes`) are read from the turn's own fields, never from an LLM.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION
from recagents.failures import FailureMode, has_placeholder
from recagents.papers.afl.config import ROUND
from recagents.papers.afl.samples import Sample


@dataclass(frozen=True)
class Turn:
    """One round of one dialogue: the model's proposal and, when the model judged, its verdict.

    Attributes:
        source: Which run it comes from ("AFL loop", "scripted-user demo").
        user: The sample's user id.
        round: 1-based round.
        item: The proposed item's text (``None``: the reply named no candidate).
        position: Its 1-based place in the displayed list (``None`` as ``item``).
        is_target: Whether it is the held-out target.
        is_tool_pick: Whether it is the tool's (SASRec's) round-1 pick.
        rejected_before: The items the user had rejected earlier in this dialogue.
        rec_reason: The recommendation agent's reason.
        accepted: The model user agent's verdict (``None``: no verdict, or not the model's).
        user_reason: The model user agent's reason (``None`` as ``accepted``).
    """

    source: str
    user: str
    round: int
    item: str | None
    position: int | None
    is_target: bool
    is_tool_pick: bool
    rejected_before: tuple[str, ...]
    rec_reason: str
    accepted: bool | None
    user_reason: str | None

    def text(self) -> str:
        """The turn as one line: where, what was proposed and why, and the verdict."""
        proposal = f"#{self.position} {self.item}" if self.item else "no usable candidate"
        line = (f"{self.source}, user {self.user}, round {self.round}: proposes {proposal} "
                f"because {self.rec_reason!r}")  # fmt: skip
        if self.rejected_before:
            line += f" (already rejected: {'; '.join(self.rejected_before)})"
        if self.accepted is not None:
            line += f"; user {'accepts' if self.accepted else 'rejects'}: {self.user_reason!r}"
        return line


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _verdict(value: object) -> bool | None:
    """A rounds-frame verdict as a bool; ``None`` and ``NaN`` (no verdict) as ``None``."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return bool(value)


def dialogue_turns(
    rounds: pd.DataFrame,
    samples: Sequence[Sample],
    titles: Mapping[str, str],
    source: str,
    model_judges: bool = True,
) -> list[Turn]:
    """The turns of a :func:`~recagents.papers.afl.loop.feedback_loop` frame, in order.

    Args:
        rounds: The loop's rounds.
        samples: Its samples (for the target and the tool's pick).
        titles: Item id → text.
        source: The run's name, shown with each example.
        model_judges: Whether the model played the user agent (False for a scripted user:
            its verdicts are then left out, as they are not the model's).
    """
    by_user = {s.user: s for s in samples}
    out: list[Turn] = []
    for user, group in rounds.groupby(USER, sort=False):
        sample = by_user[str(user)]
        rejected: list[str] = []
        for row in group.sort_values(ROUND).to_dict("records"):
            item = row[ITEM] if isinstance(row[ITEM], str) else None
            verdict = _verdict(row["accepted"])
            out.append(
                Turn(
                    source=source, user=str(user), round=int(row[ROUND]),
                    item=titles[item] if item else None,
                    position=int(row[POSITION]) + 1 if item else None,
                    is_target=bool(item and row[LABEL] == 1),
                    is_tool_pick=item == sample.prior,
                    rejected_before=tuple(rejected),
                    rec_reason=_text(row["rec_reason"]),
                    accepted=verdict if model_judges else None,
                    user_reason=_text(row["user_reason"]) if model_judges else None,
                )
            )  # fmt: skip
            if item and verdict is False:
                rejected.append(titles[item])
    return out


def most_common_position(turns: Sequence[Turn]) -> int | None:
    """The list position the model proposes most often (ties: the earlier; None: none)."""
    positions = pd.Series([t.position for t in turns if t.position is not None], dtype=float)
    if positions.empty:
        return None
    counts = positions.value_counts()
    return int(min(counts[counts == counts.max()].index))


def bare_title(text: str) -> str:
    """A title or a reason without quotes, outer punctuation, a trailing "(year)" and case."""
    flat = " ".join(str(text).split()).strip(" \"'`*.,;:!")
    return re.sub(r"\s*\(\d{4}\)$", "", flat).casefold()


def title_reason(known: Collection[str]) -> Callable[[str | None], bool]:
    """Whether a reason is nothing but an item's title (one of ``known``, compared bare)."""
    bare = {bare_title(title) for title in known} - {""}
    return lambda reason: bool(reason) and bare_title(reason or "") in bare


def _title_mode(is_title: Callable[[str | None], bool], user: bool) -> FailureMode[Turn]:
    return FailureMode(
        "title_as_reason", "gives an item's title as its reason, not a reason",
        "asked for a reason before an answer, a 135M model copies the most salient words of "
        "the prompt, an item's name, into the field instead of explaining anything.",
        (lambda t: is_title(t.user_reason)) if user else (lambda t: is_title(t.rec_reason)),
    )  # fmt: skip


def recommender_failure_modes(
    habit: int | None, known_titles: Collection[str] = ()
) -> list[FailureMode[Turn]]:
    """How a small model fails as AFL's recommendation agent, one detector per mode.

    Args:
        habit: The run's most frequent proposed position (:func:`most_common_position`).
        known_titles: Every item's text, to recognise a reason that is only a title.
    """
    return [
        _title_mode(title_reason(known_titles), user=False),
        FailureMode(
            "repeats_rejected", "re-proposes an item the user has already rejected",
            "the rejections are plain text in a long prompt; a 135M model does not carry an "
            "instruction like 'the user did not want these' over it, and the same salient "
            "candidate (the tool's pick, a favourite slot) wins again.",
            lambda t: t.item is not None and t.item in t.rejected_before,
        ),
        FailureMode(
            "position_habit",
            f"proposes a non-target at list position {habit}, its most frequent slot"
            if habit else "proposes a non-target at its most frequent slot",
            "without a usable notion of the user's taste the choice follows surface cues of "
            "the prompt, such as one number of the list.",
            lambda t: habit is not None and t.position == habit and not t.is_target,
        ),
        FailureMode(
            "unusable", "names no usable candidate",
            "the reply breaks the JSON schema even after the client's bounded re-asks.",
            lambda t: t.item is None,
        ),
        FailureMode(
            "placeholder", "copies a template placeholder into its reason",
            "chat-tuned small models reproduce the slots of the templates they were tuned on "
            "('[Your Name]', '<reason>') when the prompt resembles a form.",
            lambda t: has_placeholder(t.rec_reason),
        ),
    ]  # fmt: skip


def user_failure_modes(known_titles: Collection[str] = ()) -> list[FailureMode[Turn]]:
    """How a small model fails as AFL's in-loop user agent (on turns it judged).

    Args:
        known_titles: Every item's text, to recognise a reason that is only a title.
    """
    return [
        _title_mode(title_reason(known_titles), user=True),
        FailureMode(
            "accepts_non_target", "accepts a proposal that is not the user's next item",
            "judging one of 20 candidates against a history needs taste the model lacks; an "
            "instruction-tuned model that cannot tell leans to agreeing ('yes'), which ends "
            "the dialogue in round 1, before the loop's memory is ever read.",
            lambda t: t.accepted is True and not t.is_target,
        ),
        FailureMode(
            "rejects_target", "rejects the user's next item",
            "the same missing taste the other way round: its verdict does not follow the item.",
            lambda t: t.accepted is False and t.is_target,
        ),
        FailureMode(
            "unusable", "gives no usable verdict",
            "the reply breaks the JSON schema even after the client's bounded re-asks.",
            lambda t: t.accepted is None,
        ),
        FailureMode(
            "placeholder", "copies a template placeholder into its reason",
            "chat-tuned small models reproduce the slots of the templates they were tuned on "
            "('[Your Name]', '<reason>') when the prompt resembles a form.",
            lambda t: has_placeholder(t.user_reason or ""),
        ),
    ]  # fmt: skip


def judged_turns(turns: Sequence[Turn]) -> list[Turn]:
    """The turns on which the model was asked for a verdict: proposals it judged as the user.

    Only turns of runs where the model played the user (``dialogue_turns(model_judges=True)``)
    carry a ``user_reason`` string; a turn with no usable proposal was never judged.
    """
    return [t for t in turns if t.item is not None and t.user_reason is not None]
