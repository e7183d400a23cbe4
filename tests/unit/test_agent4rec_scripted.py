"""Tests for recagents.papers.agent4rec.scripted: the scripted browsing agent, no LLM.

The scripted client answers every step of the real page loop (``simulate``), so these tests
check that an agent browses past page 2, that memories are retrieved into later prompts, that
the satisfaction reflection is written, and that every reply matches its request's schema.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recagents.columns import ITEM, RATING, USER
from recagents.llm.client import ChatRequest
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import PASS
from recagents.papers.agent4rec.agents import Agent
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.papers.agent4rec.loop import simulate
from recagents.papers.agent4rec.prompts import (
    exit_schema,
    interview_schema,
    page_schema,
    persona_schema,
)
from recagents.papers.agent4rec.scripted import (
    browsing_client,
    browsing_policy,
    request_kind,
    top_genres,
)

SENTENCES = {
    t: {k: f"<{t}-{k}>" for k in (1, 2, 3)} for t in ("activity", "conformity", "diversity")
}
GENRES = ["Comedy", "Drama", "Horror", "Western"]


def _embed(texts):
    """Deterministic toy embedding: word counts over a small vocabulary, unit length."""
    vocab = ["comedy", "drama", "horror", "western", "page", "watched"]
    v = np.array([[t.lower().replace(",", " ").split().count(w) for w in vocab] for t in texts])
    v = v.astype(float) + 1e-3
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _world(n_items: int = 20):
    """One agent who likes comedies; 20 items cycling through four genres; a ranked list."""
    lines = {
        f"i{k}": f"Item {k} (1990); rated 3.50 on average; {GENRES[k % 4]}" for k in range(n_items)
    }
    agents = {"u1": Agent("u1", {"activity": 2, "conformity": 2, "diversity": 2}, "My tastes")}
    ranked = pd.DataFrame({USER: "u1", ITEM: list(lines), "rank": range(1, n_items + 1)})
    return agents, ranked, lines


def _run(exit_after: int = 3, log: RunLog | None = None):
    agents, ranked, lines = _world()
    client = browsing_client({"u1": {"Comedy"}}, exit_after=exit_after)
    shown, sessions = simulate(
        agents, ranked, lines, SENTENCES, "R", Agent4RecConfig(), client, log or RunLog(), _embed
    )
    return agents, client, shown, sessions


def test_request_kind_is_read_from_the_schema():
    def kind(schema):
        return request_kind(ChatRequest(messages=[], schema=schema))

    assert kind(page_schema(4)) == "page"
    assert kind(exit_schema()) == "exit"
    assert kind(interview_schema()) == "interview"
    assert kind({"type": "object", "required": ["sentence"]}) == "reflection"
    assert kind(persona_schema()) is None
    assert kind(None) is None


def test_requests_that_are_not_a_loop_step_are_passed_on():
    policy = browsing_policy({})
    assert policy(ChatRequest(messages=[], schema=persona_schema())) is PASS


def test_top_genres_without_ratings_counts_every_training_item():
    train = pd.DataFrame({"user_id": ["u1"] * 3, "item_id": ["a", "b", "c"]})
    genres = pd.Series({"a": ("Drama",), "b": ("Drama", "War"), "c": ("War",)})
    assert top_genres(train, genres, k=1) == {"u1": {"Drama"}}  # ties broken by name
    assert top_genres(train, genres, k=5) == {"u1": {"Drama", "War"}}


def test_the_scripted_agent_reads_genres_by_line_when_given():
    """Lines described by a summary do not end in genres: the agent is told them by line."""
    line = "Heat (1995); rated 3.88 on average; about: Two men, one city."
    request = ChatRequest(
        messages=[{"role": "system", "content": "x"}, {"role": "user", "content": f"1. {line}"}],
        schema={"type": "object", "required": ["items"]}, tag="u1",
    )  # fmt: skip
    blind = browsing_client({"u1": {"Action"}})
    told = browsing_client({"u1": {"Action"}}, line_genres={line: {"Action", "Crime"}})
    assert blind.map([request], progress=False)[0].data["items"][0]["watch"] is False
    assert told.map([request], progress=False)[0].data["items"][0]["watch"] is True


def test_top_genres_counts_liked_items_only():
    train = pd.DataFrame(
        {USER: ["u1"] * 4, ITEM: ["a", "b", "c", "d"], RATING: [5.0, 4.0, 4.0, 1.0]}
    )
    genres = pd.Series({"a": ["Drama"], "b": ["Drama", "Comedy"], "c": ["Comedy"], "d": ["Horror"]})
    assert top_genres(train, genres, k=1) == {"u1": {"Comedy"}}  # ties broken by name
    assert top_genres(train, genres, k=5) == {"u1": {"Comedy", "Drama"}}


def test_the_scripted_agent_browses_past_page_two_and_leaves_on_page_three():
    log = RunLog()
    _, client, shown, sessions = _run(exit_after=3, log=log)
    assert sessions["exit_page"].tolist() == [3] and sessions["exited"].tolist() == [True]
    assert sorted(shown["page"].unique()) == [1, 2, 3]
    watched = shown[shown["watched"]]
    assert len(watched) == 3, "one comedy per page of four"
    assert set(watched[ITEM]) == {"i0", "i4", "i8"}
    assert watched["rating"].tolist() == [4.0, 4.0, 4.0]
    assert sessions["satisfaction"].tolist() == [4.0], "1 + three liked items"
    assert client.usage.invalid_outputs == 0 and not log.problems
    assert client.model == "scripted:browsing-agent"


def test_memories_are_retrieved_and_the_reflection_is_written():
    agents, _, _, _ = _run(exit_after=3)
    memory = agents["u1"].memory
    reflections = [m for m in memory if m.startswith("I am satisfied")]
    assert len(reflections) == 1, "reflect_after=(2, 4): once, after page 2"
    assert memory.index(reflections[0]) == 4, "after the four memories of pages 1 and 2"
    assert memory[-1].endswith("I decided to leave.")


def test_later_prompts_carry_recalled_memories():
    agents, ranked, lines = _world()
    seen = []
    inner = browsing_policy({"u1": {"Comedy"}}, exit_after=4)

    def spy(request):
        reply = inner(request)
        if request_kind(request) == "exit":
            seen.append(reply["reason"])
        return reply

    from recagents.llm.scripted import ScriptedClient

    client = ScriptedClient(spy, "spy")
    config = Agent4RecConfig(memory_top_k=3)
    simulate(agents, ranked, lines, SENTENCES, "R", config, client, RunLog(), _embed)
    assert len(seen) == 4
    counts = [int(r.split("; ")[1].split()[0]) for r in seen]
    assert counts[0] == 2 and counts[1:] == [3, 3, 3], "memory_top_k caps the recalled memories"


# --------------------------------------------------------------------------- the entry


def test_entry_run_is_its_steps_in_order_and_ranks_nothing(cache_dir):
    """``entry.run`` equals its four steps called one by one, as notebook 02 calls them.

    On ml-100k, where the LLM writes the personas (the released agents: test_agent4rec_release).
    """
    from recagents import columns
    from recagents.data import load_dataset
    from recagents.llm.scripted import ScriptedClient
    from recagents.notebook import run_records
    from recagents.papers.agent4rec import entry
    from recagents.protocol import RunOptions

    dataset = load_dataset("ml-100k")
    profile = entry.PROFILES["smoke"]
    config = Agent4RecConfig(max_pages=profile["pages"])
    world = entry.population(dataset, config, profile["agents"])
    liked = top_genres(world.split.train, dataset.items.set_index(ITEM)[columns.GENRES])
    persona = {"tastes": [{"taste": "comedies", "reason": "scripted"}], "rates_high": "comedies",
               "rates_low": "horror"}  # fmt: skip

    def client():
        return browsing_client(liked, fallback=ScriptedClient(lambda request: persona, "persona"))

    options = RunOptions(profile="smoke", methods=("Random",), client=client(), n_boot=20)
    run = entry.run(dataset, None, options)
    assert run.config == config, "config=None: the paper's, with the profile's pages"
    assert set(run.tables) == set(entry.TABLES)
    assert run.table("agents")[USER].tolist() == world.agent_users
    assert len(run.table("exposures")) == profile["agents"] * config.items_per_page
    assert run.table("exposures")["watched"].any(), "the scripted agents watch their genres"

    log, by_hand = RunLog(), client()
    agents = entry.make_agents(world, config, by_hand, log)
    training = entry.train_config(profile)
    browsed = entry.browse(world, agents, ["Random"], config, by_hand, log, training)
    steps = entry.summarize(agents, browsed, config, log, 20, 0.0)
    assert run_records(steps) == run_records(run)
    assert run.log.calls_frame()["phase"].tolist() == log.calls_frame()["phase"].tolist()

    assert entry.RANKERS == ()
    with pytest.raises(NotImplementedError, match="ranks no shared candidates"):
        entry.rank(None)
