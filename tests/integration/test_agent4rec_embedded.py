"""Agent4Rec's simulator against the real embedded model (SmolLM2-135M), at the smallest size.

The assertions are about the mechanics — every exposure logged, sessions that end where the
log says, counted problems, a replay from the cache — never about the model's taste.
"""

import dataclasses

import pandas as pd
import pytest

from recagents import baselines
from recagents.columns import ITEM, USER
from recagents.config import settings
from recagents.llm.cache import ResponseCache
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.agent4rec.agents import build_agents, item_lines, random_split
from recagents.papers.agent4rec.config import TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.loop import simulate

SENTENCES = {t: {level: f"My {t} is at level {level} of 3." for level in (1, 2, 3)}
             for t in TRAITS}  # fmt: skip


@pytest.fixture
def client(tmp_path):
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None, llm_structured="auto"
    )
    return LLMClient(config=config, cache=ResponseCache(tmp_path / "cache.sqlite"))


def _run(tiny, split, client):
    config = Agent4RecConfig(max_pages=2, persona_items=8)
    lines = item_lines(tiny, split)
    users = sorted(split.train[USER].unique())[:2]
    traits = pd.DataFrame({USER: users, "activity": 1, "conformity": 2, "diversity": 3})
    sub = dataclasses.replace(split, train=split.train[split.train[USER].isin(users)])
    log = RunLog()
    agents = build_agents(sub, traits, lines, config, client, log)
    pop = baselines.train_baseline("Pop", split, progress=False)
    ranked = pop.top_k(users, config.list_length, exclude=pd.concat([split.train, split.test]))
    exposures, sessions = simulate(
        agents, ranked, lines, SENTENCES, "Pop", config, client, log, embed=None
    )
    return agents, ranked, exposures, sessions, log


def test_simulate_logs_every_page_and_replays(tiny, cache_dir, client):
    split = random_split(tiny, n_users=None, min_positives=5, seed=101)
    agents, ranked, exposures, sessions, log = _run(tiny, split, client)

    assert sorted(sessions[USER]) == sorted(agents)
    for row in sessions.itertuples(index=False):
        shown = exposures[exposures[USER] == row.user_id]
        assert sorted(shown["page"].unique()) == list(range(1, row.exit_page + 1))
        assert len(shown) == 4 * row.exit_page
        top = ranked[ranked[USER] == row.user_id].sort_values("rank")[ITEM].tolist()
        assert shown.sort_values(["page", "position"])[ITEM].tolist() == top[: len(shown)]
        assert 1 <= row.exit_page <= 2
    watched = exposures[exposures["watched"]]
    assert watched["rating"].dropna().between(1, 5).all()
    assert exposures.loc[~exposures["watched"], "rating"].isna().all()
    phases = pd.DataFrame(log.calls).groupby("phase").size().to_dict()
    assert phases["persona"] == 2 and phases["interview"] == 2
    assert phases["page"] == phases["exit"] == int(sessions["exit_page"].sum())
    for agent in agents.values():
        assert agent.memory and agent.memory[0].startswith("On page 1")

    again = _run(tiny, split, client)
    assert all(call["cached"] for call in again[4].calls), "a rerun must replay from the cache"
    pd.testing.assert_frame_equal(again[3], sessions)
