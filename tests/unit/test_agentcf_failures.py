"""AgentCF's failure detectors on made-up replies: each mode hits its case, misses a clean one."""

from __future__ import annotations

import pandas as pd
import pytest

from recagents.columns import ITEM, USER
from recagents.data.datasets import POSITION
from recagents.papers.agentcf import failure_modes as fm
from recagents.papers.agentcf.evaluate import RankOutcome


def _mode(modes, name):
    return next(mode for mode in modes if mode.name == name)


def test_one_position_needs_both_orders():
    detect = _mode(fm.AGENT_MODES, "one_position").detect
    assert detect({"positions": [1, 1, 1, 1], "orders": {"neg_first", "pos_first"}})
    assert not detect({"positions": [1, 2, 1, 1], "orders": {"neg_first", "pos_first"}})
    assert not detect({"positions": [1, 1], "orders": {"neg_first"}})  # could be taste


def test_explanation_modes():
    pair = "Tapestry Pop Adult Contemporary Kind of Blue Jazz Bebop"
    no_words = _mode(fm.EXPLANATION_MODES, "no_item_words").detect
    assert no_words({"text": "It depends on my personal preferences.", "pair": pair})
    assert no_words({"text": "3", "pair": pair})
    assert not no_words({"text": "I love bebop.", "pair": pair})
    other = _mode(fm.EXPLANATION_MODES, "prefers_other").detect
    assert other({"text": "but I prefer the CD 2 over the CD 1.", "chosen": 1})
    assert not other({"text": "I prefer CD 1.", "chosen": 1})
    assert not other({"text": "I like both.", "chosen": 2})


def _memory(after, before="I enjoy CDs.", side="user", own="", other=""):
    return {"after": after, "before": before, "side": side, "own_title": own, "other_title": other}


@pytest.mark.parametrize(
    ("name", "hit", "miss"),
    [
        ("option_number", _memory("I prefer CD 2 over CD 1."), _memory("I like 1970s rock.")),
        ("option_number", _memory("Cd 1"), _memory("Top 10 hits of 1999, CD remaster")),
        ("bare_label", _memory("Cantabrete"), _memory("A soulful pop record for fans of ballads")),
        ("unchanged", _memory("I enjoy CDs. "), _memory("I enjoy jazz CDs.")),
        ("placeholder", _memory("I am [Your Name] and I like"), _memory("I like jazz.")),
        (
            "names_other_item",
            _memory(
                "Singles 1969-1981", side="item", own="Kind of Blue", other="Singles 1969-1981"
            ),
            _memory(
                "Kind of Blue, for fans of Singles 1969-1981",
                side="item",
                own="Kind of Blue",
                other="Singles 1969-1981",
            ),
        ),  # fmt: skip
    ],
)
def test_memory_modes_hit_and_miss(name, hit, miss):
    detect = _mode(fm.MEMORY_MODES, name).detect
    assert detect(hit)
    assert not detect(miss)


def test_names_other_item_is_for_item_memories_only():
    detect = _mode(fm.MEMORY_MODES, "names_other_item").detect
    assert not detect(_memory("Singles 1969-1981", side="user", own="", other="Singles 1969-1981"))


def test_ranking_modes():
    order = _mode(fm.RANKING_MODES, "display_order").detect
    assert order({"positions": list(range(10)), "missing": 0})
    assert order({"positions": [*range(1, 10), 0], "missing": 0})  # counts up from 2
    assert order({"positions": [*range(1, 10), 0], "missing": 1})  # 1 left out, appended
    assert not order({"positions": [3, 0, 7, 1, 2, 4, 5, 6, 8, 9], "missing": 0})
    repeats = _mode(fm.RANKING_MODES, "repeats_number").detect
    assert repeats({"duplicates": 1, "missing": 1})
    assert not repeats({"duplicates": 0, "missing": 0})


def test_failure_reports_count_a_made_up_run():
    events = pd.DataFrame(
        [
            {"kind": "forward", USER: "u", "step": 0, "round": 0, "ok": True, "chosen": 1,
             "positive_first": False, "correct": False, "explanation": "3"},
            {"kind": "user_reflection", USER: "u", "step": 0, "round": 0, "ok": True,
             "before": "I enjoy CDs.", "after": "I prefer CD 2."},
            {"kind": "item_reflection", USER: "u", "step": 0, "round": 0, "ok": True,
             "stored": True, ITEM: "p", "before": "The CD is called 'P'.", "after": "N"},
        ]
    )  # fmt: skip
    probe = pd.DataFrame(
        {USER: ["u", "u"], "order": ["neg_first", "pos_first"], "ok": [True, True],
         "chose_first": [True, True]}
    )  # fmt: skip
    pairs = pd.DataFrame({USER: ["u"], "step": [0], "positive": ["p"], "negative": ["n"]})
    candidates = pd.DataFrame({USER: "u", ITEM: ["a", "b", "c"], "label": [0, 1, 0],
                               POSITION: [0, 1, 2]})  # fmt: skip
    ranked = pd.DataFrame({USER: "u", ITEM: ["a", "b", "c"], "score": [3, 2, 1], "rank": [1, 2, 3]})
    parses = pd.DataFrame({USER: ["u"], "status": ["complete"], "missing": [0], "duplicates": [0]})
    outcome = RankOutcome(ranked=ranked, faithful=ranked, parses=parses)
    reports = fm.failure_reports(
        events, probe, pairs, {"B": outcome}, candidates, {"p": "P", "n": "N"},
        {"p": "The CD is called 'P'.", "n": "The CD is called 'N'."},
    )  # fmt: skip
    counts = {key: {c.name: c.count for c in r.counts} for key, r in reports.items()}
    assert counts["agents"] == {"one_position": 1}
    assert counts["explanations"] == {"no_item_words": 1, "prefers_other": 0}
    assert counts["memories"]["option_number"] == 1
    assert counts["memories"]["names_other_item"] == 1 and counts["memories"]["bare_label"] == 1
    assert counts["rankings"] == {"display_order": 1, "repeats_number": 0}
    table = fm.failure_table(reports)
    assert set(table.index.get_level_values("replies")) == {
        "user agents", "choice explanations", "memory rewrites", "ranking replies"
    }  # fmt: skip
