"""Notebook 02's generated readings: intervals over agents, flat intervals said as such."""

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.metrics import classification_ci
from recagents.papers.agent4rec import reading


def _probe(answers: dict[str, list[tuple[int, int]]]) -> pd.DataFrame:
    """A taste-probe frame from ``agent -> [(label, predicted), ...]``."""
    rows = [
        {USER: agent, "label": label, "predicted": said}
        for agent, pairs in answers.items()
        for label, said in pairs
    ]
    frame = pd.DataFrame(rows)
    frame["predicted"] = frame["predicted"].astype("Int64")
    return frame


def test_taste_intervals_resample_agents_not_judgements():
    # Four agents always right, four always wrong: 160 judgements but 8 independent units.
    right = [(1, 1)] * 10 + [(0, 0)] * 10
    wrong = [(1, 0)] * 10 + [(0, 1)] * 10
    judged = _probe({f"a{k}": right if k < 4 else wrong for k in range(8)})
    ours = reading.taste_by_agents(judged, n_boot=2000, seed=1).set_index("metric")
    pooled = classification_ci(
        judged["label"].to_numpy(), judged["predicted"].astype(int).to_numpy(), 2000, seed=1
    ).set_index("metric")
    assert ours.loc["accuracy", "mean"] == 0.5 == pooled.loc["accuracy", "mean"]
    assert ours.loc["accuracy", "n"] == 8 and ours.loc["accuracy", "judgements"] == 160
    width = ours.loc["accuracy", "high"] - ours.loc["accuracy", "low"]
    pooled_width = pooled.loc["accuracy", "high"] - pooled.loc["accuracy", "low"]
    assert width > 2 * pooled_width, "clustered answers must widen the interval"
    assert ours.loc["accuracy", "prevalence"] == 0.5


def test_taste_reading_compares_precision_with_the_prevalence():
    keen = [(1, 1)] * 5 + [(0, 0)] * 15  # says yes to exactly its own items
    keener = [(1, 1)] * 5 + [(0, 1)] + [(0, 0)] * 14  # ... and one other item
    blind = [(1, 1), (0, 1), (0, 1), (0, 1)] * 5  # yes to everything
    taste = pd.concat(
        [
            reading.taste_by_agents(
                _probe({f"k{k}": [keen, keener][k % 2] for k in range(6)})
            ).assign(ratio="1:3"),
            reading.taste_by_agents(_probe({f"b{k}": blind for k in range(6)}), n_boot=200).assign(
                ratio="1:3 blind"
            ),
        ]
    )
    text = reading.describe_taste(taste)
    keen_line, blind_line = text.splitlines()
    assert "above it: the answers carry taste" in keen_line
    assert "no spread at n = 6" in blind_line and "no spread to decide with" in blind_line
    assert reading.side_of(0.118, 0.118, 0.1) == "flat", "no spread decides nothing"
    assert reading.side_of(0.2, 0.3, 0.1) == "above" and reading.side_of(0, 0.3, 0.1) == "contains"


def test_a_flat_interval_is_no_spread_never_precision():
    assert reading.interval_text(2.0, 2.0, 2.0, 8).startswith("2 (no spread at n = 8")
    assert reading.interval_text(0.5, 0.25, 0.75, 8) == "0.5 [0.25, 0.75] (n = 8)"
    flat = reading.no_spread_reading(
        "satisfaction", (2.0, 2.0, 2.0), 8, "tiny", recorded=3.945, recorded_source="theirs"
    )
    assert flat is not None and "no spread at n = 8" in flat
    assert "not visible" not in flat and "3.94 (theirs), above ours" in flat
    assert reading.no_spread_reading("p_view", (0.4, 0.2, 0.6), 8, "tiny") is None


def _engagement(values: dict[str, list[float]], metric: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    per_agent = pd.DataFrame(
        [
            {USER: f"u{k}", "recommender": name, metric: v}
            for name, column in values.items()
            for k, v in enumerate(column)
        ]
    )
    summary = []
    for name, column in values.items():
        x = np.asarray(column, float)
        summary.append(
            {"recommender": name, "metric": metric, "mean": x.mean(), "low": x.min(),
             "high": x.max(), "n": len(x)}
        )  # fmt: skip
    return pd.DataFrame(summary), per_agent


def test_engagement_reading_says_flat_metrics_cannot_rank():
    summary, per_agent = _engagement({"Random": [2.0] * 8, "MF": [2.0] * 8}, "satisfaction")
    text = reading.describe_engagement(summary, per_agent, ["Random", "MF"], n_boot=200)
    assert "no spread at n = 8" in text and "cannot rank" in text
    summary, per_agent = _engagement({"Random": [1.0, 0.5], "MF": [0.5, 0.0]}, "p_view")
    text = reading.describe_engagement(summary, per_agent, ["Random", "MF"], n_boot=200)
    assert "the same for every agent, so no interval decides it" in text
    assert "ignores taste" not in text, "a gap with no spread explains nothing"


def test_engagement_reading_explains_random_on_top_and_uses_paired_gaps():
    summary, per_agent = _engagement(
        {"Random": [1.0, 0.75, 1.0, 0.75, 1.0, 0.75], "MF": [0.25, 0.25, 0.0, 0.0, 0.25, 0.0]},
        "p_view",
    )
    text = reading.describe_engagement(summary, per_agent, ["Random", "MF"], n_boot=500)
    assert "highest Random" in text and "lowest MF" in text
    assert "which excludes 0" in text and "Random, which ignores taste, leads here" in text
    summary, per_agent = _engagement(
        {"Random": [0.0, 1.0, 0.0, 1.0], "MF": [1.0, 0.0, 1.0, 0.5]}, "p_view"
    )
    text = reading.describe_engagement(summary, per_agent, ["Random", "MF"], n_boot=500)
    assert "contains 0" in text and "ignores taste" not in text


def test_rating_shares_resample_agents():
    flags = pd.Series([True] * 10 + [False] * 10)
    agents = pd.Series(["a"] * 10 + ["b"] * 10)
    share, low, high, n = reading.share_by_agents(flags, agents, n_boot=500, seed=3)
    assert (share, n) == (0.5, 2) and low == 0.0 and high == 1.0, "two agents: all or nothing"
    same = reading.share_by_agents(pd.Series([True, False] * 4), pd.Series(list("aabbccdd")))
    assert same[:3] == (0.5, 0.5, 0.5), "every agent the same share: no spread"


def test_recorded_reading_counts_rising_levels():
    anova = pd.DataFrame(
        [
            {"trait": "activity", "measure": "exit_page", "mean_1": 2.6, "mean_2": 3.7,
             "mean_3": 4.4},
            {"trait": "conformity", "measure": "rating_mse", "mean_1": 0.3, "mean_2": 0.2,
             "mean_3": 0.5},
        ]
    )  # fmt: skip
    shares = pd.DataFrame({"rating": [1, 2, 3, 4, 5], "share": [0.0, 0.01, 0.08, 0.75, 0.16]})
    text = reading.describe_recorded({"LightGCN": anova}, {"LightGCN": shares})
    assert "1 of 2 trait measures (exit_page with activity)" in text
    assert "4 stars is the most common" in text and "1.0% of ratings" in text
