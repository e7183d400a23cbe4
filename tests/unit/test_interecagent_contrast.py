"""The scripted players beside the model's rows: notebook 04's sessions and one-turn figures.

The scripted players (``scripted.skilled_hits``, ``scripted.skilled_one_turn``; no LLM) run
the same conversation loop and the same one-turn tasks as the embedded model on ml-100k's
real item table. At skill 1 they must beat chance by interval on every task (so the figures
are not flat), at skill 0 they must not find the conversation targets; the runs kept for
the sweep must be reused, not run twice; and the generated sentences (``contrast``) must
state the numbers of the rows they are given.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from recagents.data import load_dataset
from recagents.data.datasets import candidate_sets, leave_one_out
from recagents.papers.interecagent import contrast, scripted
from recagents.papers.interecagent.config import InteRecConfig, SimulatorConfig
from recagents.papers.interecagent.simulator import make_sessions
from recagents.papers.interecagent.toolbox import build_context

MAX_TURNS = 2
CONFIG = InteRecConfig(max_reflections=1, seed=11)
SIM = SimulatorConfig(seed=11)


@pytest.fixture(scope="module")
def bench():
    dataset = load_dataset("ml-100k")
    split = leave_one_out(dataset, min_rating=3)
    ctx = build_context(dataset, split.history("test"), seed=11)  # no SASRec: popularity ranks
    sessions = make_sessions(split, dataset, 12, seed=11, table=ctx.table)
    one_turn = make_sessions(split, dataset, 12, seed=12, table=ctx.table)
    return split, ctx, sessions, one_turn


def test_skilled_hits_rows_separate_and_reuse_kept_runs(bench):
    _, ctx, sessions, _ = bench
    keep: dict = {}
    rows = scripted.skilled_hits(sessions, ctx, CONFIG, SIM, MAX_TURNS, seed=11, n_boot=300,
                                 keep=keep)  # fmt: skip
    by_id = rows[rows["rule"] == "id"].set_index("method")
    top, bottom = by_id.loc["scripted, skill 1"], by_id.loc["scripted, skill 0"]
    assert top["hit_low"] > bottom["hit_high"], by_id
    assert bottom["hit"] == 0.0 and top["n"] == bottom["n"] == 12
    assert set(keep) == {1.0, 0.0}
    first = keep[1.0]
    again = scripted.skilled_hits(sessions, ctx, CONFIG, SIM, MAX_TURNS, levels=(1.0,), seed=11,
                                  n_boot=300, keep=keep)  # fmt: skip
    assert keep[1.0] is first, "a kept run is reused"
    assert again.loc[again["rule"] == "id", "hit"].item() == top["hit"]


def test_skilled_one_turn_beats_chance_at_skill_1(bench):
    split, ctx, _, one_turn = bench
    candidates = candidate_sets(split, 19, seed=11)
    kept: dict[str, pd.DataFrame] = {}
    rows = scripted.skilled_one_turn(
        one_turn, candidates, ctx, CONFIG, SIM, seed=11, n_boot=300, keep=kept
    )
    assert set(kept) == {"scripted, skill 1", "scripted, skill 0"}
    for label, ranking in kept.items():  # the kept per-user rows give the summary's mean
        mean = rows.set_index(["method", "metric"]).loc[(label, "ndcg"), "mean"]
        assert set(ranking["method"]) == {label} and len(ranking) == 12
        assert ranking["ndcg"].mean() == pytest.approx(mean)
    table = rows.set_index(["method", "metric"])
    chance_recall = 5 / len(ctx.table)
    assert table.loc[("scripted, skill 1", "recall"), "low"] > chance_recall, table
    random_ndcg = sum(1 / math.log2(r + 1) for r in range(1, 21)) / 20
    assert table.loc[("scripted, skill 1", "ndcg"), "low"] > random_ndcg, table
    assert table.loc[("scripted, skill 0", "recall"), "low"] <= chance_recall, table
    assert set(rows["n"]) == {12}


def _rows(values: dict[str, tuple[float, float, float]], metric: str | None = None) -> pd.DataFrame:
    frame = pd.DataFrame(
        [{"method": m, "mean": v[0], "low": v[1], "high": v[2], "n": 6} for m, v in values.items()]
    )
    return frame if metric is None else frame.assign(metric=metric)


def test_session_sentence_states_the_rows_and_turns():
    rows = _rows({"InteRecAgent": (0, 0, 0), "LLM only": (0, 0, 0),
                  "scripted, skill 1": (5 / 6, 0.5, 1.0),
                  "scripted, skill 0": (0, 0, 0)})  # fmt: skip
    turns = pd.DataFrame({"kind": ["answer", "answer", "plan", "llm_only"],
                          "recommended": [[], [], ["1", "2"], ["3"]],
                          "hit_id": [False] * 4})  # fmt: skip
    text = contrast.describe_session_hits(rows, turns, 2, "tiny")
    assert "all 2 methods (InteRecAgent, LLM only) score 0 (no spread at n = 6)" in text
    assert "Of the model's 4 turns" in text and "2 answered in words" in text
    assert "2 recommended at least one item, none of them the target" in text
    assert "5 of 6 at skill 1, Hit@2 = 0.833 [0.5, 1]" in text and "0 of 6 at skill 0" in text
    assert "The interval at skill 1 lies above every interval" in text
    overlapping = rows.assign(low=0.0)
    assert "no scripted interval lies above" in contrast.describe_session_hits(
        overlapping, turns, 2, "tiny"
    )


def test_one_turn_sentence_states_each_task_and_the_chance():
    rows = pd.concat([
        _rows({"InteRecAgent": (0, 0, 0), "Pop": (0, 0, 0), "scripted, skill 1": (0.8, 0.5, 1)},
              "recall"),
        _rows({"InteRecAgent": (0, 0, 0), "Pop": (0.4, 0.3, 0.5), "scripted, skill 1": (1, 1, 1)},
              "ndcg"),
    ])  # fmt: skip
    ranking = pd.DataFrame({"method": ["InteRecAgent"] * 3, "status": ["failed", "failed", "ok"]})
    text = contrast.describe_one_turn(rows, n_items=1000, ranking=ranking)
    assert text.startswith("Recall@5 over 6 users: all 2 methods (InteRecAgent, Pop) score 0")
    assert "scripted, skill 1 0.8 [0.5, 1]" in text and "probability 0.005" in text
    assert "Ranking NDCG over 6 users: InteRecAgent 0 (no spread at n = 6); Pop 0.4 [0.3, 0.5]" in (
        text
    )
    assert "ranked nothing for 2 of 3 users" in text
