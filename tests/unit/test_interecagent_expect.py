"""Notebook 04's generated "what you should see" text, interval wording and side tables.

The sentences must state the numbers of the rows they are given (never a fixed outcome):
a point interval is said as "no spread at n = ...", Random is set against its chance level
and the range a random ranker's mean really takes at that n, a method below Random is told
how many targets it left out. The notebook itself must keep the paper's values off our axes
and state the default profile's sizes as entry.PROFILES has them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from recagents.papers.interecagent import entry, expect

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "04_interecagent.ipynb"


def _cells(kind: str) -> list[str]:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == kind]


def test_interval_text_says_no_spread_for_a_point():
    assert expect.interval_text(0.0, 0.0, 0.0, 6) == "0 (no spread at n = 6)"
    assert expect.interval_text(0.8, 0.5, 1.0, 10) == "0.8 [0.5, 1] (n = 10)"
    frame = pd.DataFrame({"mean": [0.0, 0.5], "low": [0.0, 0.25], "high": [0.0, 0.75], "n": 4})
    assert expect.interval_column(frame).tolist() == [
        "0 (no spread at n = 4)",
        "0.5 [0.25, 0.75] (n = 4)",
    ]


def test_chance_levels():
    assert expect.random_ndcg(20) == pytest.approx(0.3520, abs=1e-4)
    assert expect.hit_chance(5, 1000, 2) == pytest.approx(1 - 0.995**2)
    small = expect.random_mean_range(2, 20, seed=1)
    large = expect.random_mean_range(200, 20, seed=1)
    assert small[0] < large[0] < expect.random_ndcg(20) < large[1] < small[1]


def _ndcg_rows(values: dict[str, tuple[float, float, float]], n: int = 10) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"method": m, "metric": "ndcg", "mean": v[0], "low": v[1], "high": v[2], "n": n}
            for m, v in values.items()
        ]
    )


def test_ranking_baselines_are_explained_from_the_users():
    rows = _ndcg_rows({"Random": (0.296, 0.263, 0.329), "Pop": (0.42, 0.30, 0.49),
                       "LLM only": (0.18, 0.07, 0.30)})  # fmt: skip
    ranks = [None] * 5 + [1, 2, 3, 4, 5]
    ranking = pd.DataFrame({"method": "LLM only", "rank": pd.array(ranks, dtype="Int64")})
    text = expect.explain_ranking_baselines(rows, ranking, 20, seed=3)
    assert "its chance level is 0.352, outside its bootstrap interval" in text
    assert "this run's Random mean lies inside that range" in text
    assert "LLM only scores below Random: it left the target out for 5 of 10 users" in text
    assert "Pop (0.42) is above Random; their intervals overlap" in text
    inside = _ndcg_rows({"Random": (0.35, 0.30, 0.40)})
    text = expect.explain_ranking_baselines(inside, ranking, 20)
    assert "inside its interval" in text and "narrower" not in text


def test_expect_hits_states_each_row_or_their_shared_value():
    hits = pd.DataFrame(
        {"method": ["A", "A", "B"], "rule": ["id", "fuzzy", "id"], "hit": [0.0, 0.0, 0.5],
         "hit_low": [0.0, 0.0, 0.25], "hit_high": [0.0, 0.0, 0.75], "at": [3.0, 3.0, 2.0],
         "at_low": [3.0, 3.0, 1.5], "at_high": [3.0, 3.0, 2.5], "n": 4}
    )  # fmt: skip
    conversations = pd.DataFrame({"leaks": [1, 0], "regenerations": [2, 1]})
    text = expect.expect_hits(hits, conversations, 2, 0.01)
    assert text.startswith(expect.LEAD)
    assert "B by id: Hit@2 0.5 [0.25, 0.75] (n = 4)" in text
    assert "above chance by interval: B (id)" in text and "leaked" in text and "1 message" in text
    same = expect.expect_hits(hits.iloc[:2], conversations, 2, 0.01)
    assert "every row (A by id, A by fuzzy) has Hit@2 0 (no spread at n = 4)" in same
    assert "no row's interval lies above chance" in same


def test_expect_one_turn_names_the_best_row_and_chance():
    rows = pd.concat([
        _ndcg_rows({"Random": (0.3, 0.26, 0.33), "S": (1.0, 1.0, 1.0)}),
        _ndcg_rows({"Random": (0.0, 0.0, 0.0)}).assign(metric="recall"),
    ])  # fmt: skip
    text = expect.expect_one_turn(rows, 1000, 20)
    assert "ranking NDCG: the highest row is S, 1 (no spread at n = 10)" in text
    assert "intervals above it: S" in text and "no interval lies above it" in text


def test_paper_side_table_columns():
    table = expect.paper_side_table({"InteRecAgent": 0.85}, "Hit@5", "Table 2, ML-10M")
    assert table.loc["InteRecAgent"].tolist() == [0.85, "Hit@5", "Table 2, ML-10M"]


def test_notebook_keeps_paper_values_off_the_axes():
    code = "\n".join(_cells("code"))
    for call in re.findall(r"interval_plot\((.*?)\)  # fmt: skip", code, flags=re.S):
        assert "paper=" not in call
    assert "paper_side_table(" in code


def test_notebook_states_the_default_profile_sizes_of_entry():
    default = entry.PROFILES["default"]
    markdown = "\n".join(_cells("markdown"))
    stated = re.search(r"\((\d+) conversations, (\d+) one-turn users", markdown)
    assert stated is not None
    assert (int(stated[1]), int(stated[2])) == (default["sessions"], default["one_turn"])
    share = re.search(r"`N_SESSIONS = (\d+)` \((\w+) times the default profile's (\d+)\)", markdown)
    assert share is not None and int(share[3]) == default["sessions"]
    assert int(share[1]) == 4 * default["sessions"] and share[2] == "four"
    assert not math.isnan(float(default["epochs"]))
