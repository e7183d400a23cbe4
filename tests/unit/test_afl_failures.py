"""AFL's failure detectors on made-up turns and a made-up dialogue: each one hits and misses."""

from __future__ import annotations

import pandas as pd
import pytest

from recagents.failures import classify
from recagents.papers.afl.failure_modes import (
    Turn,
    dialogue_turns,
    judged_turns,
    most_common_position,
    recommender_failure_modes,
    user_failure_modes,
)
from recagents.papers.afl.samples import Sample


def _turn(**changes) -> Turn:
    base = dict(source="AFL loop", user="u", round=1, item="Heat (1995)", position=3,
                is_target=False, is_tool_pick=True, rejected_before=(), rec_reason="fits",
                accepted=False, user_reason="not for me")  # fmt: skip
    return Turn(**{**base, **changes})


KNOWN = ("Heat (1995)", "2001: A Space Odyssey (1968)")


def _detect(side: str, name: str, turn: Turn, habit: int | None = 2) -> bool:
    modes = recommender_failure_modes(habit, KNOWN) if side == "rec" else user_failure_modes(KNOWN)
    (mode,) = [m for m in modes if m.name == name]
    return mode.detect(turn)


@pytest.mark.parametrize(
    ("side", "name", "hit", "miss"),
    [
        ("rec", "repeats_rejected", _turn(rejected_before=("Heat (1995)",)),
         _turn(rejected_before=("Fargo (1996)",))),
        ("rec", "position_habit", _turn(position=2), _turn(position=2, is_target=True)),
        ("rec", "unusable", _turn(item=None, position=None), _turn()),
        ("rec", "placeholder", _turn(rec_reason="<reason for the choice>"), _turn()),
        ("rec", "title_as_reason", _turn(rec_reason="'2001: A Space Odyssey'"),
         _turn(rec_reason="Like 2001: A Space Odyssey, it is science fiction.")),
        ("user", "title_as_reason", _turn(user_reason="heat (1995)."), _turn()),
        ("user", "accepts_non_target", _turn(accepted=True), _turn(accepted=True, is_target=True)),
        ("user", "rejects_target", _turn(is_target=True), _turn()),
        ("user", "unusable", _turn(accepted=None), _turn()),
        ("user", "placeholder", _turn(user_reason="Regards, [Your Name]"),
         _turn(user_reason="[Heat] is fine")),
    ],
)  # fmt: skip
def test_each_detector_hits_and_misses(side, name, hit, miss):
    assert _detect(side, name, hit) and not _detect(side, name, miss)


def test_no_habit_no_position_failure():
    assert not _detect("rec", "position_habit", _turn(position=2), habit=None)


def test_dialogue_turns_track_rejections_and_classify_counts_them():
    sample = Sample(user="u", history=("h",), candidates=("a", "b", "c"), target="c",
                    prior="a", focus=("a",))  # fmt: skip
    titles = {"a": "A", "b": "B", "c": "C", "h": "H"}
    rounds = pd.DataFrame({
        "user_id": ["u"] * 3, "round": [1, 2, 3], "item_id": ["a", "b", "a"],
        "position": [0, 1, 0], "label": [0, 0, 0], "rec_reason": ["r1", "r2", "r3"],
        "accepted": [False, False, True], "user_reason": ["no", "no", "yes"],
    })  # fmt: skip
    turns = dialogue_turns(rounds, [sample], titles, "demo")
    assert [t.rejected_before for t in turns] == [(), ("A",), ("A", "B")]
    assert [t.is_tool_pick for t in turns] == [True, False, True]
    assert most_common_position(turns) == 1
    report = classify(turns, recommender_failure_modes(1), "proposals", text=Turn.text)
    counts = {c.name: c.count for c in report.counts}
    assert counts == {"title_as_reason": 0, "repeats_rejected": 1, "position_habit": 2,
                      "unusable": 0, "placeholder": 0}  # fmt: skip
    assert report.clean == 1 and "already rejected: A; B" in report.counts[1].example
    verdicts = classify(judged_turns(turns), user_failure_modes(), "verdicts", text=Turn.text)
    assert {c.name: c.count for c in verdicts.counts}["accepts_non_target"] == 1
    assert verdicts.n == 3 and verdicts.clean == 2
    scripted = dialogue_turns(rounds, [sample], titles, "demo", model_judges=False)
    assert all(t.accepted is None for t in scripted) and judged_turns(scripted) == []
    assert [t.rejected_before for t in scripted] == [(), ("A",), ("A", "B")]
