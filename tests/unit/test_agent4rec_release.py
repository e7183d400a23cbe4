"""Agent4Rec's own ML-1M agents from the pinned release, as notebook 02's default world.

Everything is read through :func:`recagents.data.releases.fetch`: from the offline mirror
named by ``$RECAGENTS_RELEASES_MIRROR`` or the cache, never the network (the download URL is
a closed loopback port here); the tests skip when neither holds the release.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from recagents.columns import GENRES, ITEM, RATING, TITLE, USER, YEAR
from recagents.data import load_dataset, released
from recagents.data.datasets import Dataset, Split
from recagents.data.releases import URL_ENV, ReleaseError
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import ScriptedClient
from recagents.papers.agent4rec import entry
from recagents.papers.agent4rec.agents import (
    RELEASED_PERSONA_SOURCE,
    agents_from_released,
    item_mean_ratings,
    released_agents,
)
from recagents.papers.agent4rec.config import TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.evaluate import taste_probe_sets
from recagents.papers.agent4rec.scripted import browsing_client, top_genres
from recagents.protocol import RunOptions


@pytest.fixture(scope="module", autouse=True)
def offline() -> Iterator[None]:
    """No network: a file comes from the mirror or the cache, or the test skips."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        yield


@pytest.fixture(scope="module")
def ml1m(offline: None) -> tuple[Dataset, Split]:
    try:
        return released.load_agent4rec_ml1m()
    except ReleaseError as error:
        pytest.skip(f"the Agent4Rec release is neither mirrored nor cached ({error})"[:200])


@pytest.fixture(scope="module")
def agents(ml1m: tuple[Dataset, Split]) -> pd.DataFrame:
    return released_agents()


def test_the_dataset_is_the_released_agents_and_split(ml1m: tuple[Dataset, Split]) -> None:
    dataset, split = ml1m
    assert dataset.name == "agent4rec-ml1m" and dataset.n_users == 1000
    assert sorted(dataset.interactions[USER].unique(), key=int) == [str(k) for k in range(1000)]
    assert RATING not in dataset.interactions  # ratings.dat is not in the release
    sizes = {part: len(getattr(split, part)) for part in ("train", "valid", "test")}
    assert sizes == {"train": 74271, "valid": 55486, "test": 55492}
    assert len(dataset.interactions) == sum(sizes.values())
    assert split.train[USER].nunique() == 1000
    # Agent 0's first training items, in file order.
    assert split.train[split.train[USER] == "0"][ITEM].tolist()[:3] == ["2586", "579", "131"]
    assert load_dataset("agent4rec-ml1m").fingerprint == dataset.fingerprint


def test_the_items_are_movie_detail(ml1m: tuple[Dataset, Split]) -> None:
    items = ml1m[0].items.set_index(ITEM)
    assert len(items) == 3292 and items.index.is_unique
    toy = items.loc["0"]
    assert toy[TITLE] == "Toy Story" and toy[YEAR] == 1995  # "(1995)" moved to the year
    assert toy[GENRES] == ("Animation", "Children's", "Comedy")
    assert round(toy["mean_rating"], 3) == 4.147 and toy["summary"].startswith("A group of toys")
    assert items["summary"].str.len().gt(0).all() and not items["summary"].str.contains("\n").any()
    assert items[YEAR].notna().all()
    assert item_mean_ratings(ml1m[0]).loc["0"] == toy["mean_rating"]


def test_released_agents_personas_and_traits(agents: pd.DataFrame) -> None:
    assert agents.index.tolist() == [str(k) for k in range(1000)]
    assert set(agents.columns) == {"persona", *TRAITS, "persona_source"}
    assert agents[list(TRAITS)].isin([1, 2, 3]).all().all()
    assert (agents["persona_source"] == RELEASED_PERSONA_SOURCE).all()
    first = agents.loc["0", "persona"]
    # The shape of prompts.persona_text: tastes with their reasons, then what it rates highly.
    lines = first.splitlines()
    assert lines[0] == "My tastes:" and len(lines) == 1 + 5 + 1
    assert lines[1].startswith("- I enjoy animated movies") and "(I have given high" in lines[1]
    assert lines[-1].startswith("I rate highly: The user tends to give high ratings")
    # 32 agents have no high_rating in the file: their persona has no such line.
    assert (~agents["persona"].str.contains("\nI rate highly: ")).sum() == 32
    levels = released.agent4rec_traits().set_index(USER)
    assert (agents[list(TRAITS)] == levels[list(TRAITS)]).all().all()
    assert levels.loc["0", "n_ratings"] == 53


def test_agents_come_from_the_release_without_an_llm(agents: pd.DataFrame) -> None:
    built = agents_from_released(["3", "0"], agents)
    assert list(built) == ["3", "0"]
    assert built["0"].persona == agents.loc["0", "persona"] and built["0"].memory == []
    assert built["3"].traits == {t: int(agents.loc["3", t]) for t in TRAITS}
    with pytest.raises(ValueError, match="not among the released agents"):
        agents_from_released(["1000"], agents)


def test_population_and_agents_on_the_release(ml1m: tuple[Dataset, Split]) -> None:
    dataset, split = ml1m
    config = Agent4RecConfig(seed=101)
    world = entry.population(dataset, config, 4)
    assert world.split.fingerprint == split.fingerprint
    assert world.users == sorted(str(k) for k in range(1000)) and len(world.agent_users) == 4
    assert world.personas is not None and len(world.traits) == 1000
    assert world.lines["0"] == (
        "Toy Story (1995); rated 4.15 on average; about: A group of toys embarks on a "
        "thrilling adventure to save their owner."
    )

    def refuse(request):  # no persona call may be made for the released agents
        raise AssertionError("an LLM call was made")

    log = RunLog()
    made = entry.make_agents(world, config, ScriptedClient(refuse, "refuse"), log)
    assert sorted(made) == world.agent_users and log.calls == []
    for user, agent in made.items():
        assert agent.persona == world.personas.loc[user, "persona"]


def test_the_taste_probe_uses_held_out_items(ml1m: tuple[Dataset, Split]) -> None:
    dataset, split = ml1m
    probe = taste_probe_sets(split, dataset, 1, seed=101, users=["0", "1"])
    held_out = pd.concat([split.valid, split.test]).groupby(USER)[ITEM].agg(set)
    rated = dataset.interactions.groupby(USER)[ITEM].agg(set)
    for user, rows in probe.groupby(USER):
        assert len(rows) == 20 and rows["label"].sum() == 10
        assert set(rows.loc[rows["label"] == 1, ITEM]) <= held_out[user]
        assert not set(rows.loc[rows["label"] == 0, ITEM]) & rated[user]


def test_the_smoke_profile_runs_on_the_release(ml1m: tuple[Dataset, Split]) -> None:
    """entry.run on the authors' agents with a scripted browsing agent: no LLM, no persona."""
    dataset, _ = ml1m
    profile = entry.PROFILES["smoke"]
    config = Agent4RecConfig(max_pages=profile["pages"])
    world = entry.population(dataset, config, profile["agents"])
    genres = dataset.items.set_index(ITEM)[GENRES]
    liked = top_genres(world.split.train, genres)
    by_line = {line: set(genres[item]) for item, line in world.lines.items()}
    client = browsing_client(liked, line_genres=by_line)
    options = RunOptions(profile="smoke", methods=("Random",), client=client, n_boot=20)
    run = entry.run(dataset, None, options)
    agents = run.table("agents").set_index(USER)
    assert agents.index.tolist() == world.agent_users
    assert (agents["persona"] == world.personas.loc[world.agent_users, "persona"]).all()
    assert len(run.table("exposures")) == profile["agents"] * config.items_per_page
    assert run.table("exposures")["watched"].any(), "the scripted agents watch their genres"
    assert set(run.log.calls_frame()["phase"]) == {"page", "exit", "interview"}


def test_the_released_prompts_run_through_entry_on_the_release(
    ml1m: tuple[Dataset, Split],
) -> None:
    """prompts="released": entry.run sends the authors' template text, no schema, and reads
    free text; the page shows each item's mean rating and summary from the release."""
    dataset, _ = ml1m
    seen: list = []

    def reply(request: Any) -> str:
        seen.append(request)
        text = "\n".join(m["content"] for m in request.messages)
        if "RATING: [integer between 1 and 10]" in text:
            return "RATING: 7; REASON: fine"
        if "ALIGN" in text:
            return "MOVIE: none; ALIGN: No; REASON: r"
        return "NEGATIVE: dull\n[EXIT]; Reason: done"

    config = Agent4RecConfig(max_pages=1, prompts="released")
    options = RunOptions(profile="smoke", methods=("Random",), client=ScriptedClient(reply, "t"),
                         n_boot=20)  # fmt: skip
    run = entry.run(dataset, config, options)
    assert seen and all(r.schema is None for r in seen)
    page = next(r for r in seen if "ALIGN" in r.messages[-1]["content"])
    assert "History ratings:" in page.messages[-1]["content"]
    assert "Summary:" in page.messages[-1]["content"]
    assert run.table("sessions")["satisfaction"].tolist() == [7.0] * len(run.table("sessions"))
