"""AgentCF's prompts follow the dataset's domain; the movie wording is byte-identical to before.

The movie strings are pinned (literally, and as a SHA-256 of every builder's output at the
commit before the wording table), so cached replies of the default run still hit.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from recagents.columns import GENRES, ITEM, TITLE, USER
from recagents.data.datasets import Dataset, Split
from recagents.papers.agentcf.agents import (
    initial_item_memory,
    initial_state,
    initial_user_memory,
    verbalised_history,
)
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.prompts import (
    DOMAIN_WORDING,
    domain_wording,
    forward_messages,
    item_reflection_messages,
    llmrank_messages,
    ranking_messages,
    user_reflection_messages,
)
from recagents.papers.agentcf.subsets import Subset

#: SHA-256 of :func:`_every_prompt` for movies, computed from the prompts at git HEAD.
MOVIE_DIGEST = "9aeb08306ca3a910894a7237d75387964ff7e4cf3541042accbae3e7a80bbf1a"


def _every_prompt(**domain: str | None) -> list:
    """One output of every prompt and memory builder, in a fixed order."""
    return [
        forward_messages("mem", "a", "b", **domain),
        user_reflection_messages("mem", "a", "b", 1, 2, "ex", **domain),
        user_reflection_messages("mem", "a", "b", 2, 2, "ex", **domain),
        user_reflection_messages("mem", "a", "b", 2, **domain),
        item_reflection_messages("mem", "a", "b", 1, 2, "ex", **domain),
        item_reflection_messages("mem", "a", "b", 1, **domain),
        ranking_messages("mem", ["x", "y"], history=["h"], retrieved="r", **domain),
        llmrank_messages(["h"], ["x", "y"], **domain),
        initial_user_memory({"gender": "F", "occupation": "artist"}, **domain),
        initial_user_memory(None, **domain),
        initial_item_memory(("Drama", "War"), **domain),
        verbalised_history([], **domain),
        verbalised_history(["t"], **domain),
    ]


def _digest(outputs: list) -> str:
    return hashlib.sha256(json.dumps(outputs).encode()).hexdigest()


@pytest.mark.parametrize("domain", [{}, {"domain": "movie"}, {"domain": None}])
def test_movie_prompts_are_unchanged(domain: dict) -> None:
    assert _digest(_every_prompt(**domain)) == MOVIE_DIGEST


def test_movie_forward_prompt_literally() -> None:
    system, user = forward_messages("MEM", "A", "B")
    assert system["content"] == (
        "You are a movie enthusiast choosing what to watch. This is how you describe your own "
        "taste:\nMEM"
    )
    assert user["content"].startswith("You are offered two movies:\n1. A\n2. B\nPick exactly")
    assert verbalised_history([]) == "I have not watched any movies yet."
    assert initial_item_memory(("Drama",)) == "A movie of the genres Drama."


def _texts(outputs: list) -> str:
    parts = []
    for output in outputs:
        if isinstance(output, str):
            parts.append(output)
        else:
            parts.extend(message["content"] for message in output)
    return "\n".join(parts)


def test_cd_prompts_never_speak_of_watching_or_movies() -> None:
    text = _texts(_every_prompt(domain="CD")).lower()
    for word in ("watch", "movie", "film"):
        assert word not in text
    assert "choosing what to listen to" in text
    assert verbalised_history([], domain="CD") == "I have not listened to any CDs yet."


def test_cd_first_item_description_is_the_papers() -> None:
    text = initial_item_memory(("Rock",), "CD", "Abbey Road", "Classic Rock; Pop")
    assert text == "The CD is called 'Abbey Road'. The category of this CD is: 'Classic Rock; Pop'."
    # Without a title or category it falls back on the genre sentence.
    assert initial_item_memory(("Rock",), "CD", float("nan"), None) == "A CD of the genres Rock."


def test_unknown_domain_gets_a_neutral_verb() -> None:
    words = domain_wording("office product")
    assert words.noun == "office product" and words.verb == "try"
    assert "movie" not in forward_messages("m", "a", "b", "office product")[0]["content"]
    assert set(DOMAIN_WORDING) >= {"movie", "CD"}


def _cd_dataset() -> tuple[Dataset, Subset]:
    interactions = pd.DataFrame({USER: ["u1", "u1"], ITEM: ["i1", "i2"]})
    items = pd.DataFrame(
        {
            ITEM: ["i1", "i2"],
            TITLE: ["Blue", "Kind of Blue"],
            GENRES: [("Jazz",), ()],
            "category": ["Jazz", "CDs"],
        }
    )
    dataset = Dataset("cds-toy", Path("."), interactions, items, None, domain="CD")
    windows = interactions.assign(slot=[0, 1], role=["prefix", "target"])
    empty = interactions.iloc[:0]
    split = Split(train=interactions, valid=empty, test=empty, name="toy")
    return dataset, Subset(name="dense", windows=windows, split=split)


def test_initial_state_and_config_follow_the_dataset_domain() -> None:
    dataset, subset = _cd_dataset()
    state = initial_state(dataset, subset)
    assert state.item("i1") == "The CD is called 'Blue'. The category of this CD is: 'Jazz'."
    assert state.user_memory["u1"] == (
        "I enjoy CDs. I have not yet worked out which kinds of CDs I like and dislike."
    )
    assert AgentCFConfig().domain is None
    assert AgentCFConfig().for_dataset(dataset).domain == "CD"
    assert AgentCFConfig(domain="movie").for_dataset(dataset).domain == "movie"
