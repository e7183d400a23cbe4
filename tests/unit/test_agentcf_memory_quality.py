"""AgentCF memory quality: the authors' released agents as state, one ranker, paired rows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from recagents.columns import ITEM, LABEL, USER
from recagents.data.releases import MIRROR_ENV, URL_ENV
from recagents.llm.scripted import ScriptedClient
from recagents.papers.agentcf import released_agents as mq
from recagents.papers.agentcf.agents import initial_state, item_titles
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.subsets import subset_candidates

REAL_MIRROR = Path(__file__).resolve().parents[3] / "shared" / "mirror"
SAMPLE_USERS = ["2517", "2867", "30991", "62642"]

pytestmark = pytest.mark.skipif(not REAL_MIRROR.is_dir(), reason="no offline mirror")


@pytest.fixture(scope="module", autouse=True)
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The real mirror, one cache for the module, and no network."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(REAL_MIRROR))
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        patch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield REAL_MIRROR


@pytest.fixture(scope="module")
def dense():
    return mq.released_subset("dense")


def test_released_subset_is_every_user_with_the_release_split(dense):
    dataset, subset = dense
    assert len(subset.users) == 100 and dataset.domain == "CD"
    assert subset.windows.groupby(USER).size().eq(8).all()


def test_fully_released_users_are_the_mirror_sample(dense):
    _, subset = dense
    assert mq.fully_released_users(subset, "dense") == SAMPLE_USERS


def test_restrict_subset_keeps_windows_and_names_the_users(dense):
    _, subset = dense
    small = mq.restrict_subset(subset, SAMPLE_USERS[:2])
    other = mq.restrict_subset(subset, SAMPLE_USERS[2:])
    assert small.users == SAMPLE_USERS[:2] and len(small.windows) == 16
    assert small.split.name != other.split.name
    with pytest.raises(ValueError, match="not in the dense subset"):
        mq.restrict_subset(subset, ["no-such-user"])


def test_released_state_counts_what_came_from_the_authors(dense):
    dataset, subset = dense
    sample = mq.restrict_subset(subset, SAMPLE_USERS)
    agents = mq.released_state(dataset, sample, "dense", items=True)
    untrained = initial_state(dataset, sample)
    counts = agents.counts()
    assert counts["users_released"] == 4 and counts["users_untrained"] == 0
    every_item = set(sample.windows[ITEM])
    assert every_item <= set(agents.items_released)
    assert counts["items_untrained"] == len(untrained.item_memory) - len(agents.items_released)
    for user in SAMPLE_USERS:
        assert agents.state.user_memory[user] != untrained.user_memory[user]
        assert agents.state.user_versions[user][0] == untrained.user_memory[user]
    check = mq.first_description_check(untrained, agents)
    assert len(check) == len(agents.items_released) and check["equal_unescaped"].all()
    # The authors' seed texts keep CDs.item's HTML entities ("Simon &amp; Garfunkel").
    assert sorted(check.loc[~check["equal"], ITEM]) == ["3510", "3974", "5300"]
    users_only = mq.released_state(dataset, sample, "dense", items=False)
    assert users_only.items_released == [] and users_only.state.item_memory == untrained.item_memory


def _title_in_memory_ranker(request):
    """Scripted ranker: candidates whose title the user's memory names come first."""
    text = request.messages[-1]["content"]
    memory = text.split("\n", 1)[1].split("\nCandidate ", 1)[0]
    lines = re.findall(r"^(\d+)\. (.*?): ", text, flags=re.M)
    named = [int(k) for k, title in lines if title in memory]
    rest = [int(k) for k, _ in lines if int(k) not in named]
    return {"ranking": named + rest}


def test_memory_quality_measures_the_memories_with_the_ranker_held_fixed(dense):
    dataset, subset = dense
    sample = mq.restrict_subset(subset, SAMPLE_USERS)
    titles = item_titles(dataset)
    candidates = subset_candidates(sample, dataset, 9, seed=1, pool="subset")
    untrained = initial_state(dataset, sample)
    knowing = untrained.copy()
    for user, item in candidates[candidates[LABEL] == 1][[USER, ITEM]].itertuples(index=False):
        knowing.user_memory[user] = f"I always buy {titles[item]}."
    config = AgentCFConfig(domain="CD")
    client = ScriptedClient(_title_in_memory_ranker, "title-in-memory")
    result = mq.memory_quality(
        {"untrained": untrained, "same": untrained.copy(), "knowing": knowing},
        sample, candidates, titles, config, client, n_boot=200,
    )  # fmt: skip
    summary = result.summary.set_index("memories")
    assert summary.loc["knowing", "mean"] == 1.0 and summary.loc["knowing", "n"] == 4
    assert summary.loc["knowing", "diff"] > 0
    assert summary.loc["same", "diff"] == 0 and summary.loc["same", "p_value"] == 1
    assert set(result.per_user["status"]) == {"complete"}
    assert client.usage.requests == 12
    with pytest.raises(ValueError, match="untrained"):
        mq.memory_quality({"knowing": knowing}, sample, candidates, titles, config, client)
