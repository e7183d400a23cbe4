"""Positive and negative controls of Agent4Rec's skilled scripted agent, and its failure modes.

A synthetic world (no release, no LLM): 12 agents, 300 items, each agent with 30 held-out
items. At skill 1 the agent's exit page and satisfaction separate the taste-aware recommender
from Random beyond their intervals; at skill 0 they cannot (the same choices on both).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recagents.columns import ITEM, USER
from recagents.failures import classify
from recagents.papers.agent4rec import failure_modes as modes
from recagents.papers.agent4rec import skilled
from recagents.papers.agent4rec.agents import Agent
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.skill import detectable_skill, sweep

N_USERS, N_ITEMS = 12, 300


@pytest.fixture(scope="module")
def world() -> dict:
    """Agents, item lines, a Random list per agent and each agent's held-out items."""
    rng = np.random.default_rng(3)
    users = [str(u) for u in range(N_USERS)]
    lines = {str(i): f"Movie {i} (2000); rated 3.50 on average" for i in range(N_ITEMS)}
    held_out = {u: {str(i) for i in rng.choice(N_ITEMS, 30, replace=False)} for u in users}
    rows = []
    for u in users:
        others = [str(i) for i in rng.permutation(N_ITEMS) if str(i) not in held_out[u]]
        rows += [{USER: u, ITEM: i, "rank": k} for k, i in enumerate(others[:20], start=1)]
    agents = {
        u: Agent(u, {"activity": 2, "conformity": 2, "diversity": 2}, "Likes movies.")
        for u in users
    }
    return {"agents": agents, "lines": lines, "held_out": held_out, "random": pd.DataFrame(rows)}


@pytest.fixture(scope="module")
def outcomes(world: dict) -> pd.DataFrame:
    """Per-agent outcomes of skill 0 and 1 on Random and on the taste-aware recommender."""
    good = skilled.taste_aware_ranking(world["random"], world["held_out"], 0.5, seed=1)
    exposures, sessions, log = skilled.run_sweep(
        world["agents"], {"Random": world["random"], "taste-aware": good}, world["lines"],
        world["held_out"], Agent4RecConfig(), levels=(0.0, 1.0), seed=1,
    )  # fmt: skip
    assert log.problems == {}, "every scripted reply fits the loop's schemas"
    return skilled.per_agent_outcomes(exposures, sessions, world["held_out"])


@pytest.mark.parametrize("metric", ["satisfaction", "exit_page"])
def test_skill_one_separates_recommenders_skill_zero_does_not(
    outcomes: pd.DataFrame, metric: str
) -> None:
    difference = skilled.paired_difference(outcomes, metric, "taste-aware", "Random")
    frame = sweep(lambda s: difference[difference["skill"] == s][metric], levels=(0.0, 1.0))
    top, bottom = frame.iloc[-1], frame.iloc[0]
    assert top["low"] > 0, f"skill 1: {metric} is higher on the better recommender"
    assert bottom["low"] <= 0 <= bottom["high"], f"skill 0: no {metric} difference"
    assert detectable_skill(frame, 0.0) == 1.0


def test_skill_one_watches_exactly_its_own_items(outcomes: pd.DataFrame) -> None:
    aware = outcomes[outcomes["recommender"] == "taste-aware"]
    knowing = aware[aware["skill"] == 1.0]["discrimination"].dropna()
    assert len(knowing) >= N_USERS // 2 and (knowing == 1.0).all()
    blind = aware[aware["skill"] == 0.0]["discrimination"]
    assert abs(blind.mean()) < 0.3, "a coin flip does not favour the agent's own items"
    random_top = outcomes[(outcomes["recommender"] == "Random") & (outcomes["skill"] == 1.0)]
    assert (random_top["exit_page"] == 1).all(), "nothing of its taste: leaves on page 1"
    assert (random_top["satisfaction"] == 1).all()


def test_taste_aware_ranking_mixes_held_out_items(world: dict) -> None:
    base, held_out = world["random"], world["held_out"]
    same = skilled.taste_aware_ranking(base, held_out, 0.0)
    pd.testing.assert_frame_equal(
        same.reset_index(drop=True),
        base.sort_values([USER, "rank"])[[USER, ITEM, "rank"]].reset_index(drop=True),
    )
    full = skilled.taste_aware_ranking(base, held_out, 1.0)
    assert all(i in held_out[u] for u, i in zip(full[USER], full[ITEM], strict=True))
    assert full.groupby(USER).size().eq(20).all()


def _session(**fields: object) -> modes.Session:
    base = dict(
        user="1", recommender="Random", exit_page=2, exited=True, satisfaction=5.0,
        pages=(1, 1, 2, 2), aligned=(True, False, True, False), watched=(True, False, True, False),
        ratings=(4.0, np.nan, 4.0, np.nan), feelings=("Nice.", "", "Good.", ""),
        mine=(True, False, True, False),
    )  # fmt: skip
    base.update(fields)
    return modes.Session(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "hit", "miss"),
    [
        ("leaves_page_1", {"exit_page": 1, "exited": True}, {"exit_page": 1, "exited": False}),
        ("all_or_none", {"watched": (False,) * 4}, {}),
        ("contradicts_itself", {"aligned": (False, False, True, False)}, {}),
        ("taste_blind", {"watched": (False, True, False, True)}, {}),
        ("empty_or_placeholder", {"feelings": ("[Your Name] liked it.", "", "Good.", "")}, {}),
    ],
)
def test_each_failure_detector_hits_and_misses(name: str, hit: dict, miss: dict) -> None:
    units = [_session(**hit), _session(**miss)]
    mode = next(m for m in modes.failure_modes(units) if m.name == name)
    assert mode.detect(units[0]) and not mode.detect(units[1])


def test_same_satisfaction_needs_a_majority_score() -> None:
    units = [_session(satisfaction=2.0)] * 3 + [_session(satisfaction=7.0)]
    report = classify(units, modes.failure_modes(units), what="sessions", text=modes.Session.text)
    assert report.records()["modes"]["same_satisfaction"]["count"] == 3
    spread = [_session(satisfaction=float(s)) for s in (1, 2, 3, 4)]
    assert modes.modal_satisfaction(spread) is None
    assert not any(m.detect(spread[0]) for m in modes.failure_modes(spread)
                   if m.name == "same_satisfaction")  # fmt: skip


def test_sessions_of_reads_the_run_logs() -> None:
    exposures = pd.DataFrame({
        USER: ["1", "1"], "recommender": ["Pop", "Pop"], "page": [1, 1], ITEM: ["7", "8"],
        "aligned": [True, None], "watched": [True, False], "rating": [4.0, None],
        "feeling": ["ok", ""],
    })  # fmt: skip
    sessions = pd.DataFrame({USER: ["1"], "recommender": ["Pop"], "exit_page": [1],
                             "exited": [True], "satisfaction": [2.0]})  # fmt: skip
    (one,) = modes.sessions_of(exposures, sessions, {"1": {"8"}})
    assert one.mine == (False, True) and one.aligned == (True, None)
    assert "watched 1 of 2 shown (1 of them its own)" in one.text()
