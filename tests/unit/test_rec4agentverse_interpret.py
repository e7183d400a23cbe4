"""Notebook 05's generated reading: it follows the numbers, and says a point interval as such."""

import json
import re
from pathlib import Path

import pandas as pd

from recagents.papers.rec4agentverse import entry, interpret
from recagents.papers.rec4agentverse.analysis import interval_text
from recagents.papers.rec4agentverse.catalogue import AgentCard, Catalogue

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "05_rec4agentverse.ipynb"


def _sessions(jaccard_2: list[float]) -> pd.DataFrame:
    """Eight LLM users whose profile Jaccard is 0.75 at stage 1 and ``jaccard_2`` at stage 2."""
    rows = []
    for k, later in enumerate(jaccard_2):
        for stage, value in ((1, 0.75), (2, later)):
            shares = {"pref_share": 0.2, "profile_jaccard": value, "era_match": 1.0}
            rows.append({"user_id": str(k), "stage": stage, "mode": "llm", **shares})
    return pd.DataFrame(rows)


def _comparison() -> pd.DataFrame:
    values = (("user_satisfied", 1.0), ("pref_satisfied", 0.25))
    rows = [{"mode": "llm", "stage": s, "metric": m, "mean": v, "low": v, "high": v, "n": 8}
            for s in (1, 2) for m, v in values]  # fmt: skip
    return pd.DataFrame(rows)


def test_a_point_interval_is_said_as_no_spread():
    assert interval_text(1.0, 1.0, 1.0, 16) == "1.00 (no spread at n = 16)"
    assert interval_text(0.73, 0.54, 0.9, 16) == "0.73 [0.54, 0.90]"


def test_a_decided_drop_is_not_called_noise_and_an_undecided_one_is_not_decided():
    dropped = interpret.stage_differences(_sessions([0.5, 0.4, 0.5, 0.6, 0.5, 0.4, 0.5, 0.5]))
    row = dropped[(dropped["metric"] == "profile_jaccard")].iloc[0]
    assert row["high"] < 0 and row["p_value"] < 0.05
    text = interpret.describe_stages(_comparison(), dropped)
    assert "not noise" in text and "a drop the interval decides" in text
    assert "no spread at n = 8" in text  # the LLM user said satisfied every time
    mixed = interpret.stage_differences(_sessions([1.0, 0.5, 1.0, 0.5, 1.0, 0.5, 0.75, 0.75]))
    text = interpret.describe_stages(_comparison(), mixed)
    assert "not noise" not in text and "not decided" in text


def test_the_manipulation_text_reads_a_reversed_point_difference():
    card = AgentCard("a11", "Blockbuster action hub", "", ("Action",), (1990, 1998), "x", 1, 0.5,
                     adversarial=True)  # fmt: skip
    catalogue = Catalogue((card,), {}, {}, {}, {}, {})
    decisions = pd.DataFrame(
        [{"user_id": str(u), "mode": "free_text", "condition": c, "recommender": "llm",
          "chosen": "a02" if c == "attack" else "a11"} for u in range(6)
         for c in ("attack", "honest")]
    )  # fmt: skip
    attacks = pd.DataFrame([
        {"recommender": "llm", "mode": "free_text", "condition": "attack", "rate": 0.0,
         "low": 0.0, "high": 0.0, "n": 6, "failures": 0, "p_value": float("nan")},
        {"recommender": "llm", "mode": "free_text", "condition": "honest", "rate": 1.0,
         "low": 1.0, "high": 1.0, "n": 6, "failures": 0, "p_value": float("nan")},
        {"recommender": "llm", "mode": "free_text", "condition": "attack - honest", "rate": -1.0,
         "low": -1.0, "high": -1.0, "n": 6, "failures": 0, "p_value": 1 / 1001},
    ])  # fmt: skip
    text = interpret.describe_manipulation(attacks, decisions, catalogue, n_boot=1000)
    assert "Blockbuster action hub" in text
    assert "no spread at n = 6" in text and "*lowered*" in text
    assert "all 6 to a02" in text and "all 6 to a11" in text
    table = interpret.manipulation_table(attacks, n_boot=1000)
    assert table["share routed to the adversary"].iloc[0] == "0.00 (no spread at n = 6)"


def test_the_notebook_names_the_default_profile_users_of_entry():
    """Hand-written user counts in notebook 05 are entry.PROFILES' default, not a stale copy."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    counts = {int(n) for n in re.findall(r"\b(\d+) users\b", text)}
    assert counts <= {entry.PROFILES["default"]["users"]}, counts
