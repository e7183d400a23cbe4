"""Tests of the generated sentences (recagents.compare.describe) and the paired tests' p-value.

The sentences must follow the numbers: a method above chance is listed as above, a Random row
outside its chance level gets the sentence saying why, Pop below Random is explained, and an
interval with no spread is never reported as precision. The p-value of
:func:`recagents.metrics.compare_to_reference` (the leaderboard's and notebook 00's paired
tests) must agree with its own interval.
"""

import numpy as np
import pandas as pd
import pytest

from recagents.columns import USER
from recagents.compare import describe
from recagents.metrics import compare_to_reference


def _rows(values: dict[str, tuple[float, float, float]], metric: str = "ndcg@10", n: int = 100):
    return pd.DataFrame(
        [
            {"method": m, "metric": metric, "mean": v[0], "low": v[1], "high": v[2], "n": n}
            for m, v in values.items()
        ]
    )


def test_chance_levels_match_the_formulas() -> None:
    assert describe.chance_level("hr@1", 10) == pytest.approx(0.1)
    assert describe.chance_level("ndcg@10", 10) == pytest.approx(0.4544, abs=1e-4)
    assert describe.chance_level("ndcg@10", 20) == pytest.approx(0.2272, abs=1e-4)
    assert describe.chance_level("mrr", 10) == pytest.approx(0.2929, abs=1e-4)
    assert describe.chance_level("hr@10", 5) == 1.0
    with pytest.raises(ValueError):
        describe.chance_level("recall@5", 10)


def test_interval_text_reports_no_spread_not_precision() -> None:
    assert describe.interval_text(0.5, 0.4, 0.6, 12) == "0.500 [0.400, 0.600]"
    assert "no spread at n = 12" in describe.interval_text(2.0, 2.0, 2.0, 12)


def test_chance_sentence_sorts_methods_and_flags_a_random_miss() -> None:
    rows = _rows({"SASRec": (0.7, 0.6, 0.8), "LLM": (0.25, 0.1, 0.4), "Random": (0.18, 0.16, 0.2)})
    text = describe.describe_chance(rows, "ndcg@10", 20)
    assert "above chance: SASRec;" in text
    assert "includes chance: LLM;" in text
    assert "below chance: Random." in text
    assert "one seeded draw" in text  # Random below its own chance level is explained
    inside = describe.describe_random(_rows({"Random": (0.23, 0.2, 0.26)}), "ndcg@10", 20)
    assert "holding its chance level" in inside and "seeded draw" not in inside


def test_pop_below_random_is_explained_and_pop_above_is_not_called_a_tie() -> None:
    below = describe.describe_pop_vs_random(
        _rows({"Pop": (0.2, 0.1, 0.3), "Random": (0.3, 0.2, 0.4)}, n=12), "ndcg@10"
    )
    assert "Pop is below Random" in below and "n = 12" in below
    above = describe.describe_pop_vs_random(
        _rows({"Pop": (0.6, 0.55, 0.65), "Random": (0.3, 0.25, 0.35)}), "ndcg@10"
    )
    assert "Pop is above Random" in above
    assert describe.describe_pop_vs_random(_rows({"Pop": (0.6, 0.5, 0.7)}), "ndcg@10") == ""


def test_paired_sentence_reads_the_interval() -> None:
    tests = pd.DataFrame(
        [
            {"method": "A", "diff": 0.1, "low": 0.05, "high": 0.15, "p_value": 0.001},
            {"method": "B", "diff": -0.1, "low": -0.2, "high": -0.01, "p_value": 0.02},
            {"method": "C", "diff": 0.02, "low": -0.05, "high": 0.09, "p_value": 0.6},
            {"method": "D", "diff": 0.0, "low": 0.0, "high": 0.0, "p_value": 1.0},
        ]
    )
    text = describe.describe_paired(tests, "Pop", "ndcg@10", 50)
    assert "above 0 for: A (+0.100" in text
    assert "below 0 for: B (-0.100" in text
    assert "undecided) for: C" in text
    assert "D: the same value as Pop for every user (no spread at n = 50)" in text


def test_popularity_sentence_flags_a_column_that_cannot_separate() -> None:
    table = pd.DataFrame(
        {
            "method": ["Ground truth", "Pop", "LLM", "BPR"],
            "pop_ratio": [1.0, 1.4, 0.3, 0.9],
            "coverage": [0.05, 0.25, 0.25, 0.25],
            "gini": [0.9, 0.7, 0.5, 0.6],
            "n_users": [12, 12, 12, 12],
        }
    )
    text = describe.describe_popularity(table)
    assert text.index("Pop (1.40)") < text.index("BPR (0.90)") < text.index("LLM (0.30)")
    assert "Above 1 (more popular than what users chose next): Pop." in text
    assert "The coverage is 0.250 for 3 of 3 methods" in text
    assert "The gini is" not in text  # the Gini column differs between methods


def test_position_sentence_tells_invariant_from_order_following() -> None:
    position = pd.DataFrame(
        [
            {"method": "Pop", "order": "reversed", "kendall_tau": 0.99, "top1_changed": 0.0},
            {"method": "Pop", "order": "shuffled", "kendall_tau": 0.99, "top1_changed": 0.0},
            {"method": "LLM", "order": "reversed", "kendall_tau": -0.6, "top1_changed": 1.0},
            {"method": "LLM", "order": "shuffled", "kendall_tau": 0.0, "top1_changed": 0.8},
        ]
    ).assign(n_users=5)
    text = describe.describe_position(position)
    assert "Pop: tau 0.99 reversed" in text and "order-invariant" in text
    assert "LLM: tau -0.60 reversed" in text and "pulled toward the display order" in text
    assert "means over 5 probed users" in text


def _per_user(values: dict[str, list[float]]) -> dict[str, pd.DataFrame]:
    return {
        name: pd.DataFrame({USER: [f"u{i}" for i in range(len(v))], "ndcg@10": v})
        for name, v in values.items()
    }


@pytest.mark.parametrize("seed", range(8))
def test_paired_p_value_agrees_with_its_interval(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Small, skewed samples: where a null-centred p-value and a percentile interval disagree.
    reference = rng.integers(0, 2, 12).astype(float)
    other = np.clip(reference - rng.binomial(1, 0.25, 12) + rng.binomial(1, 0.1, 12), 0, 1)
    per_user = _per_user({"ref": list(reference), "x": list(other)})
    table = compare_to_reference(per_user, "ref", "ndcg@10")
    row = table.iloc[0]
    excludes_zero = row["low"] > 0 or row["high"] < 0
    assert excludes_zero == (row["p_value"] < 0.05), row.to_dict()


def test_paired_p_value_fixes_an_interval_beside_a_large_p() -> None:
    # 12 users where the null-centred p-value of metrics.paired_bootstrap is 0.07 while the
    # percentile interval excludes 0 (the kind of pair the issue found in notebook 01).
    reference = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    other = [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    row = compare_to_reference(_per_user({"ref": reference, "x": other}), "ref", "ndcg@10").iloc[0]
    assert row["diff"] == pytest.approx(-0.25)
    assert row["high"] < 0  # the interval decides ...
    assert row["p_value"] < 0.05  # ... and so does the p-value read off the same resamples


def test_tiny_samples_are_flagged_and_a_flat_random_row_says_no_spread() -> None:
    tests = pd.DataFrame([{"method": "A", "diff": 0.2, "low": 0.1, "high": 0.3, "p_value": 0.001}])
    assert "mechanics, not as evidence" in describe.describe_paired(tests, "Pop", "ndcg@10", 2)
    assert "mechanics" not in describe.describe_paired(tests, "Pop", "ndcg@10", 50)
    flat = describe.describe_random(_rows({"Random": (0.0, 0.0, 0.0)}, n=2), "ndcg@10", 20)
    assert "no spread at n = 2" in flat and "below its own chance level" in flat
