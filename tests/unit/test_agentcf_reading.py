"""Notebook 01's generated words follow its numbers, and its statistics follow one procedure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagents.columns import USER
from recagents.papers.agentcf import entry, reading

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_agentcf.ipynb"
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def test_p_value_and_interval_agree_on_every_sample():
    rng = np.random.default_rng(7)
    for trial in range(60):
        n = int(rng.integers(4, 30))
        a = rng.normal(0.3 * rng.random(), 1.0, n)
        b = rng.normal(0.0, 1.0, n)
        result = reading.paired_interval(a, b, n_boot=1000, seed=trial)
        excludes = result.low > 0 or result.high < 0
        assert excludes == (result.p_value < 0.05), (trial, result)


def test_identical_methods_give_no_spread_and_p_one():
    same = reading.paired_interval([0.4, 0.5, 0.2], [0.4, 0.5, 0.2], n_boot=200)
    assert (same.diff, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert reading.interval_text(0.0, 0.0, 0.0, 3, signed=True) == "+0.000 (no spread at n = 3)"
    assert reading.interval_text(0.4, 0.3, 0.5, 3) == "0.400 [0.300, 0.500]"
    better = reading.paired_interval([1.0] * 6, [0.0] * 6, n_boot=200)
    assert better.low == 1.0 and better.p_value == 1 / 200  # the floor: no resample at 0


def _summary(random_interval, pop_mean, flat_at1=True):
    rows = []
    for method, (mean, low, high) in {
        "AgentCF B": (0.41, 0.35, 0.49),
        "Pop (all users)": (pop_mean, pop_mean - 0.1, pop_mean + 0.1),
        "Random": random_interval,
    }.items():
        rows.append(dict(method=method, metric="ndcg@10", mean=mean, low=low, high=high, n=8))
        spread = 0.0 if flat_at1 and method == "AgentCF B" else 0.2
        rows.append(dict(method=method, metric="ndcg@1", mean=0.0, low=0.0, high=spread, n=8))
    return pd.DataFrame(rows).assign(subset="dense")


def _per_user(pop, random):
    users = [f"u{i}" for i in range(8)]
    return {
        "Pop (all users)": pd.DataFrame({USER: users, "ndcg@10": pop}),
        "Random": pd.DataFrame({USER: users, "ndcg@10": random}),
    }


def test_ranking_reading_explains_random_off_chance_and_pop_below_random():
    per_user = _per_user([0.3] * 8, [0.5] * 8)
    text = reading.ranking_reading(_summary((0.38, 0.346, 0.423), 0.30), per_user, "dense", "m")
    assert "excludes its own expectation" in text
    assert "lies below Random" in text and "less popular than the negatives" in text
    assert "does tell them apart" in text
    assert "NDCG@1 has no spread at n = 8 for AgentCF B" in text


def test_ranking_reading_says_nothing_odd_when_there_is_nothing_odd():
    per_user = _per_user([0.55, 0.65, 0.45, 0.55, 0.65, 0.45, 0.55, 0.55], [0.5] * 8)
    summary = _summary((0.46, 0.35, 0.62), 0.51, flat_at1=False)
    text = reading.ranking_reading(summary, per_user, "dense", "m")
    assert "contains its own expectation" in text
    assert "lies above Random" in text and "less popular" not in text
    assert "does not tell them apart" in text and "no spread" not in text


def test_parse_reading_says_when_b_r_has_nothing_to_retrieve():
    table = pd.DataFrame(
        {"users": [3, 3], "repaired": [1, 0], "failed": [0, 0], "retrieval_fallbacks": [0, 3]},
        index=pd.MultiIndex.from_tuples([("dense", "AgentCF B"), ("dense", "AgentCF B+R")]),
    )
    one = reading.parse_reading(table, 1)
    assert "3 of 3 users" in one and "is empty after one step" in one
    assert "holds the earlier versions" in reading.parse_reading(table, 2)


def test_ablation_reading_counts_the_claim_on_paired_users():
    users = [f"u{i}" for i in range(6)]
    methods = {
        "full": pd.DataFrame({USER: users, "ndcg@10": [0.6] * 6}),
        "w/o item agent": pd.DataFrame({USER: users, "ndcg@10": [0.3] * 6}),
        "w/o user agent": pd.DataFrame({USER: users, "ndcg@10": [0.7, 0.6, 0.6, 0.6, 0.6, 0.6]}),
    }
    text = reading.ablation_reading(methods, "full", n_boot=200)
    assert "w/o item agent: -0.300 (no spread at n = 6)" in text
    assert "1 of 2 ablations score lower" in text and "1 with an interval below 0" in text


def test_learning_reading_sets_accuracy_beside_position():
    learning = pd.DataFrame({"answered": [4, 4], "accuracy": [0.0, 0.0]})
    events = pd.DataFrame(
        {
            "kind": ["forward"] * 4,
            "ok": [True] * 4,
            "chosen": [1] * 4,
            "positive_first": [False] * 4,
        }
    )
    text = reading.learning_reading(learning, events)
    assert "forward accuracy 0.000" in text and "took option 1 in 100%" in text
    assert "would score 0.000" in text


def _markdown() -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _code() -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("profile", ["smoke", "default"])
def test_the_notebooks_hand_written_sizes_are_the_profiles(profile):
    sizes = entry.PROFILES[profile]
    text = " ".join(_markdown().split())
    if profile == "default":
        assert (
            f"`default` ({sizes['n_users']} users of CDs-dense, {WORDS[sizes['steps']]} steps, "
            f"{WORDS[sizes['seeds']]} seeds" in text
        )
        assert f"`default` draws {sizes['n_users']} per subset" in text
        assert f"from {sizes['n_users']} to {2 * sizes['n_users']} in the default profile" in text
        assert f'"default" ({sizes["n_users"]} users, dense)' in _code()
    else:
        assert f"`smoke` about 4 minutes ({sizes['n_users']} users of the dense subset" in text
    # No other user count is named for a profile.
    for match in re.finditer(r"`(smoke|default)` (?:\w+ )*?\(?(\d+) users", text):
        assert int(match.group(2)) == entry.PROFILES[match.group(1)]["n_users"], match.group(0)


def test_display_order_score_reads_where_the_test_item_stands():
    candidates = pd.DataFrame(
        {
            USER: ["a"] * 3 + ["b"] * 3,
            "item_id": ["1", "2", "3", "4", "5", "6"],
            "label": [1, 0, 0, 0, 0, 1],
            "position": [0, 1, 2, 0, 1, 2],
        }
    )
    assert reading.display_order_ndcg(candidates) == pytest.approx((1 + 1 / np.log2(4)) / 2)
    assert "above chance" in reading.display_order_sentence(candidates)
