"""AgentCF's positive and negative controls: the skilled scripted policy through the real loop.

At skill 1 (reflections always write the true outcome) the re-test accuracy interval must
exclude chance, and on data where taste is in the words NDCG@10 must beat a random order; at
skill 0 (reflections carry no information) neither. Plus the prompt readers of the policy
and its schema-valid replies.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagents.columns import GENRES, ITEM, RATING, TIMESTAMP, TITLE, USER
from recagents.data.datasets import Dataset
from recagents.data.releases import MIRROR_ENV, URL_ENV
from recagents.llm.client import ChatRequest
from recagents.papers.agentcf import mechanism
from recagents.papers.agentcf.agents import initial_state, item_titles
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.prompts import (
    choice_schema,
    forward_messages,
    item_reflection_messages,
    item_reflection_schema,
    ranking_messages,
    user_reflection_messages,
    user_reflection_schema,
)
from recagents.papers.agentcf.scripted import (
    SkilledAgentCF,
    content_words,
    scripted_client,
    told_preferred,
)
from recagents.papers.agentcf.subsets import (
    make_subset,
    schedule,
    subset_candidates,
    training_pairs,
)
from recagents.protocol import ranking_schema
from recagents.skill import detectable_skill

REAL_MIRROR = Path(__file__).resolve().parents[3] / "shared" / "mirror"
GENRE_NAMES = ("jazz", "polka", "opera")


def _taste_dataset(n_users: int = 18) -> Dataset:
    """Users who each like one genre only: 8 items of it in time order, 12 items per genre."""
    items = [f"i{g}{k}" for g in range(len(GENRE_NAMES)) for k in range(12)]
    rng = np.random.default_rng(0)
    rows = []
    for user in range(n_users):
        genre = user % len(GENRE_NAMES)
        mine = rng.choice([i for i in items if i[1] == str(genre)], 8, replace=False)
        rows += [(f"u{user}", item, t) for t, item in enumerate(mine)]
    frame = pd.DataFrame(rows, columns=[USER, ITEM, TIMESTAMP]).assign(**{RATING: 4.0})
    item_frame = pd.DataFrame(
        {
            ITEM: items,
            TITLE: [f"Album{i}" for i in items],
            GENRES: [(GENRE_NAMES[int(i[1])].capitalize(),) for i in items],
        }
    )
    return Dataset(name="taste", path=Path("."), interactions=frame, items=item_frame, users=None)


@pytest.fixture(scope="module")
def taste_sweep() -> dict[str, pd.DataFrame]:
    dataset = _taste_dataset()
    config = AgentCFConfig(domain="movie", batch_size=6, steps=2, seed=1)
    subset = make_subset(dataset, "sparse", None, config.n_targets, seed=0)
    pairs = schedule(training_pairs(subset, config.seed), config.batch_size, config.steps)
    candidates = subset_candidates(subset, dataset, 9, seed=0, pool="subset")
    runs = mechanism.scripted_sweep(
        initial_state(dataset, subset, "movie"), pairs, subset, candidates,
        item_titles(dataset), config, levels=(0.0, 1.0), replicates=3,
    )  # fmt: skip
    return mechanism.sweep_frames(runs, n_boot=500)


def _at(frame: pd.DataFrame, skill: float) -> pd.Series:
    return frame.set_index("skill").loc[skill]


def test_skill_one_detects_the_pairwise_effect_and_skill_zero_does_not(taste_sweep):
    top, bottom = _at(taste_sweep["retest"], 1.0), _at(taste_sweep["retest"], 0.0)
    assert top["low"] > 0.5
    assert bottom["low"] <= 0.5 <= bottom["high"]
    assert detectable_skill(taste_sweep["retest"], 0.5) == 1.0


def test_skill_one_ranks_above_random_where_taste_is_in_the_words(taste_sweep):
    chance = mechanism.random_ndcg()
    for variant in ("B", "B+R"):
        top, bottom = _at(taste_sweep[variant], 1.0), _at(taste_sweep[variant], 0.0)
        assert top["low"] > chance, variant
        assert bottom["low"] <= chance <= bottom["high"], variant


@pytest.fixture(scope="module")
def cds_mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if not REAL_MIRROR.is_dir():
        pytest.skip("no offline mirror")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(REAL_MIRROR))
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        patch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield REAL_MIRROR


def test_notebook_default_users_show_the_retest_effect(cds_mirror):
    """The notebook's default data and units: 8 CDs-dense users, 2 steps, the paper's lists."""
    from recagents.data import load_dataset
    from recagents.papers.agentcf import pipeline

    config = AgentCFConfig(batch_size=8, steps=2, subsets=("dense",)).for_dataset(
        load_dataset("cds-dense")
    )
    dataset, subset, candidates = pipeline.draw(load_dataset("cds-dense"), "dense", 8, config)
    pairs = schedule(training_pairs(subset, config.seed), config.batch_size, config.steps)
    runs = mechanism.scripted_sweep(
        initial_state(dataset, subset, config.domain), pairs, subset, candidates,
        item_titles(dataset), config, levels=(0.0, 1.0), replicates=3,
    )  # fmt: skip
    retest = mechanism.sweep_frames(runs, n_boot=500)["retest"]
    assert _at(retest, 1.0)["low"] > 0.5
    assert _at(retest, 0.0)["low"] <= 0.5 <= _at(retest, 0.0)["high"]


# ------------------------------------------------------------------------ the policy's parts

FIRST = "Album1: A movie of the genres Jazz."
SECOND = "Album2: A movie of the genres Polka."


@pytest.mark.parametrize(
    ("chosen", "preferred"), [(None, 1), (None, 2), (1, 1), (2, 2), (1, 2), (2, 1)]
)
def test_told_preferred_reads_every_reflection_case(chosen, preferred):
    for build in (user_reflection_messages, item_reflection_messages):
        messages = build("I like jazz.", FIRST, SECOND, preferred, chosen, "because")
        assert told_preferred(messages[1]["content"]) == preferred


def _ask(policy: SkilledAgentCF, messages: list, schema: dict) -> dict:
    return policy(ChatRequest(messages=messages, schema=schema))


def test_choice_follows_the_memory_and_ties_are_coins():
    policy = SkilledAgentCF(0.0, seed=0)
    jazz = _ask(policy, forward_messages("I like: jazz.", FIRST, SECOND), choice_schema())
    polka = _ask(policy, forward_messages("I like: polka.", FIRST, SECOND), choice_schema())
    assert (jazz["choice"], polka["choice"]) == (1, 2)
    ties = {_ask(policy, forward_messages("I enjoy movies.", FIRST, SECOND), choice_schema())[
        "choice"] for _ in range(30)}  # fmt: skip
    assert ties == {1, 2}


def test_reflections_write_the_truth_at_skill_one_and_nothing_at_skill_zero():
    messages = user_reflection_messages("I enjoy movies.", FIRST, SECOND, 2, 1, "x")
    skilled = _ask(SkilledAgentCF(1.0), messages, user_reflection_schema())
    blind = _ask(SkilledAgentCF(0.0), messages, user_reflection_schema())
    assert "polka" in content_words(skilled["self_description"])
    assert "jazz" not in content_words(skilled["self_description"])
    assert blind["self_description"] == "I enjoy movies."
    items = item_reflection_messages("I like: polka waltz.", FIRST, SECOND, 2, 2, "x")
    taught = _ask(SkilledAgentCF(1.0), items, item_reflection_schema())
    untaught = _ask(SkilledAgentCF(0.0), items, item_reflection_schema())
    assert "waltz" in content_words(taught["preferred"])
    assert "waltz" not in content_words(untaught["preferred"] + untaught["other"])
    assert "polka" in content_words(taught["preferred"])


def test_ranker_puts_the_overlapping_candidate_first_and_replies_in_schema():
    lines = [f"Album{k}: A movie of the genres Polka." for k in range(9)]
    lines.insert(6, "Album9: A movie of the genres Jazz.")
    messages = ranking_messages("I like: jazz.", lines, "movie", retrieved="I like: opera.")
    client = scripted_client(0.5, seed=3)
    [result] = client.map([ChatRequest(messages=messages, schema=ranking_schema(10))])
    assert result.ok, result.error
    assert result.data["ranking"][0] == 7
    assert sorted(result.data["ranking"]) == list(range(1, 11))
