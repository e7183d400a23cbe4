"""Tests for Agent4Rec's simulator: settings, data, prompts, schemas, parsers, the entry.

No test calls a model: ``build_agents``, ``simulate`` and ``taste_probe`` need the LLM
server, so only the pure pieces they are built from are tested here (the prompts, the
schemas the replies must match, the parsers that turn a reply into a row or into "unusable",
memory retrieval with a toy embedding, and the call log). Expectations are computed
independently from the tiny fixture or written out by hand on small built datasets.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest

from recagents.columns import ITEM, RATING, TIMESTAMP, USER
from recagents.data.atomic import DatasetError
from recagents.data.datasets import Dataset, Split
from recagents.llm.client import ChatResult
from recagents.llm.runlog import RunLog, cost_table
from recagents.papers.agent4rec.agents import Agent, item_lines, random_split
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.papers.agent4rec.evaluate import taste_probe_sets
from recagents.papers.agent4rec.loop import recall
from recagents.papers.agent4rec.prompts import (
    exit_messages,
    exit_schema,
    interview_messages,
    interview_schema,
    page_messages,
    page_schema,
    parse_page,
    persona_messages,
    persona_schema,
    persona_text,
    reflection_messages,
    taste_schema,
)

# Trait sentences with a unique marker per trait and level, so a prompt's habits can be read.
SENTENCES = {
    trait: {level: f"<{trait}-{level}>" for level in (1, 2, 3)}
    for trait in ("activity", "conformity", "diversity")
}


# ------------------------------------------------------------------------------ helpers


def _dataset(rows, name="hand", items=None) -> Dataset:
    """A Dataset from ``(user, item, rating)`` rows (timestamps are the file position)."""
    frame = pd.DataFrame(rows, columns=[USER, ITEM, RATING])
    frame[RATING] = frame[RATING].astype(float)
    frame[TIMESTAMP] = np.arange(len(frame), dtype=float)
    return Dataset(name=name, path=Path("."), interactions=frame, items=items, users=None)


def _dense(n_users=60, n_items=80, rating=4.0) -> Dataset:
    """Every user rates every item: a big dataset whose items all end up in train."""
    rows = [(f"u{u}", f"i{i}", rating) for u in range(n_users) for i in range(n_items)]
    return _dataset(rows, name="dense")


def _rows(frame: pd.DataFrame) -> Counter:
    return Counter(map(tuple, frame[[USER, ITEM, RATING, TIMESTAMP]].itertuples(index=False)))


def _valid(instance, schema) -> bool:
    try:
        jsonschema.validate(instance, schema)
    except jsonschema.ValidationError:
        return False
    return True


def _agent(memory=None, traits=(1, 2, 3)) -> Agent:
    return Agent(
        user_id="u1",
        traits=dict(zip(("activity", "conformity", "diversity"), traits, strict=True)),
        persona="My tastes:\n- quiet dramas (rated them 5)",
        memory=list(memory or []),
    )


def _vocab_embed(texts):
    """Deterministic toy embedding: unit vectors of word counts over a fixed vocabulary."""
    vocab = ["comedy", "drama", "horror", "western", "page"]
    vectors = np.array([[text.lower().split().count(w) for w in vocab] for text in texts], float)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


@pytest.fixture
def tiny_split(tiny) -> Split:
    return random_split(tiny, n_users=None, min_positives=1)


# ------------------------------------------------------------------------------ config


def test_config_defaults_are_the_papers():
    config = Agent4RecConfig()
    assert config.items_per_page == 4
    assert config.max_pages == 5
    assert config.like_threshold == 3
    assert config.persona_items == 25
    assert config.memory_top_k == 5
    assert tuple(config.reflect_after) == (2, 4)
    assert config.temperature == 0.2
    assert config.seed == 101
    assert config.list_length == 20


def test_config_list_length_follows_the_page_settings():
    assert Agent4RecConfig(items_per_page=3, max_pages=7).list_length == 21
    assert Agent4RecConfig(items_per_page=1, max_pages=1).list_length == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("items_per_page", 0),
        ("max_pages", 0),
        ("persona_items", 0),
        ("memory_top_k", -1),
        ("temperature", -0.1),
        ("temperature", 2.5),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        Agent4RecConfig(**{field: value})


def test_config_accepts_boundary_values():
    config = Agent4RecConfig(memory_top_k=0, temperature=0.0)
    assert config.memory_top_k == 0 and config.temperature == 0.0
    assert Agent4RecConfig(temperature=2.0).temperature == 2.0


def test_config_is_frozen():
    config = Agent4RecConfig()
    with pytest.raises(AttributeError):
        config.max_pages = 3  # type: ignore[misc]


# ------------------------------------------------------------------------------ random_split

# Hand-built eligibility at min_positives=3, positive_above=3: "a" has 3 ratings above 3
# (and two low ones); "b" has many ratings of exactly 3 (not above); "c" has only 2 above 3.
ELIGIBILITY_ROWS = (
    [("a", f"x{k}", r) for k, r in enumerate([4, 5, 4, 1, 2])]
    + [("b", f"x{k}", 3) for k in range(8)]
    + [("c", f"x{k}", r) for k, r in enumerate([5, 5, 1, 1, 2, 2])]
    + [("d", f"x{k}", 5) for k in range(6)]
)


def test_random_split_eligibility_is_strictly_above_the_threshold():
    dataset = _dataset(ELIGIBILITY_ROWS)
    split = random_split(dataset, n_users=None, min_positives=3, positive_above=3.0, seed=0)
    users = set(split.train[USER]) | set(split.valid[USER]) | set(split.test[USER])
    assert users == {"a", "d"}
    with pytest.raises(DatasetError):
        random_split(dataset, n_users=3, min_positives=3, positive_above=3.0)
    # Lowering the bar makes "c" eligible; "b" only once ratings of 3 count.
    lower = random_split(dataset, n_users=None, min_positives=2, positive_above=3.0, seed=0)
    assert set(lower.train[USER]) | set(lower.valid[USER]) | set(lower.test[USER]) == {
        "a",
        "c",
        "d",
    }
    everyone = random_split(dataset, n_users=None, min_positives=2, positive_above=2.5, seed=0)
    parts = pd.concat([everyone.train, everyone.valid, everyone.test])
    assert set(parts[USER]) == {"a", "b", "c", "d"}


def test_random_split_keeps_all_ratings_of_a_drawn_user():
    dense = _dense(n_users=30, n_items=40)
    frame = dense.interactions.copy()
    frame.loc[frame[ITEM] == "i0", RATING] = 1.0  # a low rating must travel with the user
    dataset = Dataset("dense", Path("."), frame, None, None)
    split = random_split(dataset, n_users=None, min_positives=20, seed=3)
    parts = pd.concat([split.train, split.valid, split.test])
    assert _rows(parts) == _rows(frame), "every item occurs in train, so nothing is dropped"
    assert (parts[RATING] == 1.0).sum() == 30


def test_random_split_draws_n_users_with_a_seed(tiny):
    positives = tiny.interactions[tiny.interactions[RATING] > 3].groupby(USER).size()
    eligible = set(positives[positives >= 8].index)
    assert len(eligible) > 12  # enough users for draws to differ

    def drawn(seed):
        split = random_split(tiny, n_users=6, min_positives=8, seed=seed)
        return split, set(split.train[USER]) | set(split.valid[USER]) | set(split.test[USER])

    first, users = drawn(5)
    again, users_again = drawn(5)
    assert len(users) == 6 and users <= eligible
    assert users == users_again
    for part in ("train", "valid", "test"):
        assert getattr(first, part).equals(getattr(again, part))
    others = [drawn(seed)[1] for seed in (6, 7, 8)]
    assert any(other != users for other in others), "the draw must depend on the seed"


def test_random_split_fractions_over_many_rows():
    dataset = _dense(n_users=60, n_items=80)  # 4,800 rows; every item ends up in train
    split = random_split(dataset, n_users=None, min_positives=20, seed=11)
    total = len(dataset.interactions)
    shares = [len(split.train) / total, len(split.valid) / total, len(split.test) / total]
    assert shares == pytest.approx([0.4, 0.3, 0.3], abs=0.03)
    # Split per user: every user has rows in all three parts, near 40/30/30 each.
    per_user = pd.concat(
        {p: getattr(split, p).groupby(USER).size() for p in ("train", "valid", "test")}, axis=1
    )
    assert not per_user.isna().any().any()
    assert (per_user["train"] / 80).mean() == pytest.approx(0.4, abs=0.03)
    # Random, not by time: train is not simply each user's earliest rows.
    assert split.train[TIMESTAMP].max() > split.test[TIMESTAMP].min()


def test_random_split_other_fractions_are_followed():
    dataset = _dense(n_users=60, n_items=80)
    split = random_split(dataset, n_users=None, min_positives=20, fractions=(0.6, 0.2, 0.2))
    assert len(split.train) / 4800 == pytest.approx(0.6, abs=0.03)


def test_random_split_on_tiny_loses_only_items_unknown_to_train(tiny, tiny_split):
    parts = pd.concat([tiny_split.train, tiny_split.valid, tiny_split.test])
    known = set(tiny_split.train[ITEM])
    assert set(tiny_split.valid[ITEM]) <= known
    assert set(tiny_split.test[ITEM]) <= known
    before, after = _rows(tiny.interactions), _rows(parts)
    assert not after - before, "no interaction invented or duplicated"
    dropped = before - after
    assert all(item not in known for _, item, _, _ in dropped.elements())
    assert len(tiny_split.train) / len(tiny.interactions) == pytest.approx(0.4, abs=0.08)


def test_random_split_errors(tiny):
    with pytest.raises(DatasetError, match="asked for 41"):
        random_split(tiny, n_users=41, min_positives=1)
    with pytest.raises(DatasetError):
        random_split(tiny, n_users=1, min_positives=13)  # nobody has 13 positives
    no_ratings = Dataset(
        "bare", Path("."), tiny.interactions.drop(columns=[RATING]), tiny.items, None
    )
    with pytest.raises(DatasetError, match="rating"):
        random_split(no_ratings, n_users=None)


@pytest.mark.parametrize(
    "fractions", [(0.5, 0.5, 0.5), (0.6, 0.4, 0.0), (1.2, -0.1, -0.1), (0.4, 0.3, 0.2)]
)
def test_random_split_rejects_bad_fractions(tiny, fractions):
    with pytest.raises(ValueError, match="fractions") as caught:
        random_split(tiny, n_users=None, min_positives=1, fractions=fractions)
    assert not isinstance(caught.value, DatasetError)


# ------------------------------------------------------------------------------ item lines


def test_item_lines_title_year_mean_and_genres(tiny, tiny_split):
    lines = item_lines(tiny, tiny_split)
    ratings = tiny.interactions.groupby(ITEM)[RATING]
    mean = ratings.sum() / ratings.size()
    assert set(lines) == set(tiny.interactions[ITEM])
    assert lines["001"] == f"The Usual Suspects (1995); rated {mean['001']:.2f} on average; " + (
        "Crime, Thriller"
    )
    assert lines["003"].startswith("An American in Paris (1951); ")
    assert lines["002"].startswith("The Horseman on the Roof (Hussard sur le toit, Le) (1995);")
    assert lines["005"].startswith("The Good, The Bad and The Ugly (")
    for item, line in lines.items():
        assert f"; rated {mean[item]:.2f} on average" in line
        assert ", The (" not in line and ", A (" not in line


def test_item_lines_missing_year_or_genres(tiny, tiny_split):
    lines = item_lines(tiny, tiny_split)
    mean = tiny.interactions.groupby(ITEM)[RATING].mean()
    assert lines["008"] == f"Lost Reel; rated {mean['008']:.2f} on average; Documentary"
    assert lines["009"] == f"Untitled Short (1999); rated {mean['009']:.2f} on average"


def test_item_lines_without_description(tiny, tiny_split):
    plain = item_lines(tiny, tiny_split, describe="none")
    mean = tiny.interactions.groupby(ITEM)[RATING].mean()
    assert plain["001"] == f"The Usual Suspects (1995); rated {mean['001']:.2f} on average"
    assert all(line.endswith(" on average") for line in plain.values())


def test_item_lines_mean_has_two_decimals():
    rows = [("a", "m", 5), ("b", "m", 4), ("c", "m", 4)]  # mean 4.333...
    dataset = _dataset(rows)
    split = Split(dataset.interactions, dataset.interactions[:0], dataset.interactions[:0], "s")
    assert item_lines(dataset, split) == {"m": "item m; rated 4.33 on average"}


def test_item_lines_rejects_unknown_description(tiny, tiny_split):
    with pytest.raises(ValueError, match="describe"):
        item_lines(tiny, tiny_split, describe="stars")


def test_item_lines_with_a_summary_and_without_ratings():
    """A dataset without ratings (the Agent4Rec release) shows its items' own mean rating."""
    interactions = pd.DataFrame({USER: ["a", "b"], ITEM: ["m", "n"]})
    items = pd.DataFrame(
        {ITEM: ["m", "n"], "title": ["Heat", "Up"], "year": pd.array([1995, None], "Int64"),
         "genres": [("Action",), ()], "mean_rating": [3.876, 4.0],
         "summary": ["Two men  face\noff.", ""]}
    )  # fmt: skip
    dataset = Dataset("d", Path("."), interactions, items, None)
    split = Split(interactions, interactions[:0], interactions[:0], "s")
    lines = item_lines(dataset, split, describe="summary")
    assert lines == {
        "m": "Heat (1995); rated 3.88 on average; about: Two men face off.",
        "n": "Up; rated 4.00 on average",
    }
    assert item_lines(dataset, split)["m"] == "Heat (1995); rated 3.88 on average; Action"
    with pytest.raises(DatasetError, match="no ratings and no mean_rating"):
        item_lines(Dataset("d", Path("."), interactions, items.drop(columns="mean_rating"),
                           None), split)  # fmt: skip


# ------------------------------------------------------------------------------ persona


def test_persona_messages_group_by_star_highest_first():
    rated = [("Alpha", 3.0), ("Bravo", 5.0), ("Charlie", 1.0), ("Delta", 5.0), ("Echo", 3.0)]
    messages = persona_messages(rated, domain="movie")
    assert [m["role"] for m in messages] == ["system", "user"]
    text = messages[1]["content"]
    lines = [line for line in text.splitlines() if line.startswith("Rated ")]
    assert len(lines) == 3
    assert lines[0].startswith("Rated 5/5") and "Bravo" in lines[0] and "Delta" in lines[0]
    assert lines[1].startswith("Rated 3/5") and "Alpha" in lines[1] and "Echo" in lines[1]
    assert lines[2].startswith("Rated 1/5") and "Charlie" in lines[2]
    assert "Bravo" not in lines[1] + lines[2]
    assert "movies" in text


def test_persona_messages_use_the_domain():
    messages = persona_messages([("Some Book", 4.0)], domain="book")
    assert "books" in messages[1]["content"] and "movie" not in messages[1]["content"]


GOOD_PERSONA = {
    "tastes": [
        {"taste": "Slow dramas", "reason": "rated several 5"},
        {"taste": "Westerns", "reason": "watches many"},
    ],
    "rates_high": "Character-driven stories.",
    "rates_low": "Loud blockbusters.",
}


def test_persona_text_keeps_tastes_and_the_high_sentence():
    text = persona_text(GOOD_PERSONA)
    assert text is not None
    assert "Slow dramas" in text and "rated several 5" in text
    assert "Westerns" in text and "watches many" in text
    assert text.index("Slow dramas") < text.index("Westerns")
    assert "I rate highly: Character-driven stories." in text
    assert "Loud blockbusters" not in text, "the simulator does not use the low sentence"


def test_persona_text_skips_bad_tastes_and_missing_high_sentence():
    data = {
        "tastes": [{"taste": "  "}, "not a dict", {"taste": "Musicals", "reason": "sings"}],
        "rates_low": "x",
    }
    text = persona_text(data)
    assert text is not None and "Musicals" in text
    assert "I rate highly" not in text


@pytest.mark.parametrize(
    "data",
    [
        None,
        "a string",
        [],
        {},
        {"tastes": []},
        {"tastes": "dramas"},
        {"tastes": [{"reason": "no taste"}], "rates_high": "x"},
        {"tastes": [{"taste": ""}, {"taste": 3}], "rates_high": "x"},
    ],
)
def test_persona_text_unusable_replies_give_none(data):
    assert persona_text(data) is None


@pytest.mark.parametrize("reason", [None, 5, ["a list"], "", "   "])
def test_persona_text_tolerates_a_missing_or_non_string_reason(reason):
    text = persona_text({"tastes": [{"taste": "Dramas", "reason": reason}], "rates_high": "x"})
    assert text is not None and "- Dramas" in text
    assert "()" not in text and "None" not in text


# ------------------------------------------------------------------------------ schemas


def _page_reply(n, **override):
    entry = {"aligned": True, "watch": True, "rating": 4, "feeling": "nice"}
    return {"items": [{**entry, **override} for _ in range(n)]}


def test_page_schema_accepts_a_full_page():
    assert _valid(_page_reply(4), page_schema(4))
    assert _valid(_page_reply(2, watch=False, rating=1, feeling=""), page_schema(2))


@pytest.mark.parametrize(
    "reply",
    [
        _page_reply(3),
        _page_reply(5),
        _page_reply(4, rating=0),
        _page_reply(4, rating=6),
        _page_reply(4, rating="4"),
        _page_reply(4, aligned="yes"),
        _page_reply(4, watch=1.5),
        _page_reply(4, feeling="x" * 201),
        {"items": [{"aligned": True, "watch": True, "rating": 4}] * 4},
        {"pages": _page_reply(4)["items"]},
    ],
)
def test_page_schema_rejects_bad_replies(reply):
    assert not _valid(reply, page_schema(4))


def test_exit_schema():
    schema = exit_schema()
    good = {"feeling": "negative", "decision": "exit", "reason": "bored"}
    assert _valid(good, schema)
    assert _valid({**good, "feeling": "positive", "decision": "next"}, schema)
    for bad in (
        {**good, "decision": "stay"},
        {**good, "decision": "EXIT"},
        {**good, "feeling": "neutral"},
        {"feeling": "positive", "decision": "next"},
        {**good, "reason": "x" * 301},
    ):
        assert not _valid(bad, schema), bad


def test_interview_schema():
    schema = interview_schema()
    for score in (1, 5, 10):
        assert _valid({"satisfaction": score, "reason": "ok"}, schema)
    for bad in (
        {"satisfaction": 0, "reason": "ok"},
        {"satisfaction": 11, "reason": "ok"},
        {"satisfaction": 5.5, "reason": "ok"},
        {"satisfaction": "7", "reason": "ok"},
        {"satisfaction": 7},
    ):
        assert not _valid(bad, schema), bad


def test_taste_schema():
    schema = taste_schema(3)
    assert _valid({"watch": [True, False, True]}, schema)
    for bad in (
        {"watch": [True, False]},
        {"watch": [True, False, True, True]},
        {"watch": ["yes", "no", "yes"]},
        {"watch": [1, 0, 1]},
        {"answers": [True, False, True]},
    ):
        assert not _valid(bad, schema), bad


def test_persona_schema():
    schema = persona_schema()
    assert _valid(GOOD_PERSONA, schema)
    taste = {"taste": "t", "reason": "r"}
    for bad in (
        {**GOOD_PERSONA, "tastes": []},
        {**GOOD_PERSONA, "tastes": [taste] * 5},
        {**GOOD_PERSONA, "tastes": [{"taste": "t"}]},
        {**GOOD_PERSONA, "tastes": [{"taste": "t" * 151, "reason": "r"}]},
        {"tastes": [taste], "rates_high": "x"},
        {"tastes": [taste], "rates_low": "x"},
    ):
        assert not _valid(bad, schema), bad


# ------------------------------------------------------------------------------ prompts

SHOWN = ["Alpha (1990); rated 3.10", "Bravo (1991); rated 4.20", "Charlie (1992); rated 2.00"]


def test_page_messages_number_the_items_in_order():
    messages = page_messages(_agent(), 3, SHOWN, [], SENTENCES)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "Page 3" in user
    numbered = [line for line in user.splitlines() if line[:1].isdigit()]
    assert numbered == [f"{k}. {line}" for k, line in enumerate(SHOWN, start=1)]


def test_page_messages_role_has_traits_and_persona():
    agent = _agent(traits=(1, 2, 3))
    system = page_messages(agent, 1, SHOWN, [], SENTENCES)[0]["content"]
    for marker in ("<activity-1>", "<conformity-2>", "<diversity-3>"):
        assert marker in system
    for marker in ("<activity-2>", "<activity-3>", "<conformity-1>", "<diversity-1>"):
        assert marker not in system
    assert agent.persona in system
    other = page_messages(_agent(traits=(3, 1, 2)), 1, SHOWN, [], SENTENCES)[0]["content"]
    assert "<activity-3>" in other and "<conformity-1>" in other and "<diversity-2>" in other


def test_page_messages_recalled_memories_only_when_given():
    agent = _agent(memory=["an old memory that is not recalled"])
    without = page_messages(agent, 2, SHOWN, [], SENTENCES)
    assert "remember" not in without[0]["content"]
    assert "an old memory" not in without[0]["content"] + without[1]["content"]
    recalled = ["I watched Delta and liked it.", "I decided to leave."]
    with_memories = page_messages(agent, 2, SHOWN, recalled, SENTENCES)[0]["content"]
    for memory in recalled:
        assert memory in with_memories
    assert "an old memory" not in with_memories, "only the recalled memories are shown"


def test_page_messages_use_the_domain():
    messages = page_messages(_agent(), 1, SHOWN, [], SENTENCES, domain="book")
    text = messages[0]["content"] + messages[1]["content"]
    assert "book" in text and "movie" not in text


@pytest.mark.parametrize("page", [1, 2])
def test_exit_messages_no_fatigue_on_early_pages(page):
    user = exit_messages(_agent(), page, [], SENTENCES)[1]["content"]
    assert f"page {page}" in user
    assert "tired" not in user


@pytest.mark.parametrize("page", [3, 4, 5, 9])
def test_exit_messages_fatigue_from_page_three(page):
    user = exit_messages(_agent(), page, [], SENTENCES)[1]["content"]
    assert f"page {page}" in user
    assert "tired" in user


def test_exit_messages_grow_more_tired():
    """As the authors grade it: a little tired on pages 3-4, very tired from page 5."""
    wording = {p: exit_messages(_agent(), p, [], SENTENCES)[1]["content"] for p in (3, 4, 5, 6)}
    assert wording[3].replace("page 3", "page 4") == wording[4]
    assert wording[5].replace("page 5", "page 6") == wording[6]
    assert "very tired" in wording[5] and "very tired" not in wording[4]


def test_exit_messages_activity_trait_and_memories_only():
    recalled = ["On page 1 I was shown: Alpha.", "I watched nothing."]
    system = exit_messages(_agent(traits=(2, 1, 3)), 2, recalled, SENTENCES)[0]["content"]
    assert "<activity-2>" in system
    assert "<conformity-1>" not in system and "<diversity-3>" not in system
    for memory in recalled:
        assert memory in system


def test_interview_messages_include_the_whole_memory():
    memory = [f"memory number {k}." for k in range(12)]
    agent = _agent(memory=memory)
    messages = interview_messages(agent, SENTENCES)
    system = messages[0]["content"]
    for line in memory:
        assert line in system
    assert agent.persona in system
    for marker in ("<activity-1>", "<conformity-2>", "<diversity-3>"):
        assert marker in system


def test_reflection_messages_use_the_last_four_memories():
    memory = [f"memory number {k}." for k in range(7)]
    user = reflection_messages(_agent(memory=memory))[1]["content"]
    for k in range(3):
        assert f"memory number {k}." not in user
    for k in range(3, 7):
        assert f"memory number {k}." in user
    short = reflection_messages(_agent(memory=memory[:2]))[1]["content"]
    assert "memory number 0." in short and "memory number 1." in short


# ------------------------------------------------------------------------------ parse_page


def test_parse_page_reads_each_item():
    data = {
        "items": [
            {"aligned": True, "watch": True, "rating": 5, "feeling": "loved it"},
            {"aligned": False, "watch": False, "rating": 1, "feeling": "should vanish"},
            {"aligned": True, "watch": True, "rating": 2, "feeling": "meh"},
        ]
    }
    judged = parse_page(data, 3)
    assert judged == [
        {"aligned": True, "watched": True, "rating": 5.0, "feeling": "loved it"},
        {"aligned": False, "watched": False, "rating": None, "feeling": ""},
        {"aligned": True, "watched": True, "rating": 2.0, "feeling": "meh"},
    ]


@pytest.mark.parametrize(
    "data",
    [
        None,
        "items",
        {},
        {"items": "four"},
        _page_reply(3),
        _page_reply(5),
        {"items": [*_page_reply(3)["items"], "not a dict"]},
    ],
)
def test_parse_page_needs_exactly_n_judgements(data):
    assert parse_page(data, 4) is None


@pytest.mark.parametrize("rating", [0, 6, 3.5, "4", True, None])
def test_parse_page_drops_invalid_ratings_of_watched_items(rating):
    judged = parse_page(_page_reply(1, rating=rating), 1)
    assert judged is not None
    assert judged[0]["watched"] is True and judged[0]["rating"] is None


@pytest.mark.parametrize("watch", [False, "true", 1, None])
def test_parse_page_counts_only_a_true_watch(watch):
    judged = parse_page(_page_reply(1, watch=watch, rating=5, feeling="x"), 1)
    assert judged is not None
    assert judged[0] == {"aligned": True, "watched": False, "rating": None, "feeling": ""}


@pytest.mark.parametrize("aligned", ["yes", 1, None])
def test_parse_page_aligned_is_none_unless_a_bool(aligned):
    judged = parse_page(_page_reply(2, aligned=aligned), 2)
    assert judged is not None
    assert [j["aligned"] for j in judged] == [None, None]


def test_parse_page_missing_keys_are_tolerated():
    judged = parse_page({"items": [{}, {"watch": True, "rating": 3}]}, 2)
    assert judged == [
        {"aligned": None, "watched": False, "rating": None, "feeling": ""},
        {"aligned": None, "watched": True, "rating": 3.0, "feeling": ""},
    ]


# ------------------------------------------------------------------------------ log and recall


def test_simulation_log_rows_and_counts():
    """The simulator's calls go to the shared RunLog, the step as both phase and kind."""
    log = RunLog()
    log.add_calls(
        "page",
        "page",
        [
            ChatResult(ok=True, cached=True, prompt_tokens=300, completion_tokens=40,
                       latency_s=1.5),
            ChatResult(ok=False, failure="invalid", prompt_tokens=200, completion_tokens=10,
                       latency_s=0.5, reasks=2),
        ],
    )  # fmt: skip
    log.add_calls("exit", "exit", [ChatResult(ok=False, failure="transport")])
    log.add_calls("interview", "interview", [])
    assert len(log.calls) == 3
    assert log.calls[0] == {
        "phase": "page",
        "kind": "page",
        "ok": True,
        "failure": None,
        "cached": True,
        "prompt_tokens": 300,
        "completion_tokens": 40,
        "latency_s": 1.5,
        "reasks": 0,
    }
    assert log.calls[1]["failure"] == "invalid" and log.calls[1]["reasks"] == 2
    assert log.calls[2]["phase"] == "exit" and log.calls[2]["ok"] is False

    log.count("page_unusable")
    log.count("page_unusable")
    log.count("exit_unusable", 3)
    assert log.problems == {"page_unusable": 2, "exit_unusable": 3}

    frame = log.calls_frame()
    assert len(frame) == 3
    table = cost_table(frame)
    assert table.loc["page", "calls"] == 2 and table.loc["page", "failed"] == 1
    assert table.loc["total", "prompt_tokens"] == 500
    assert table.loc["exit", "failed"] == 1


def test_simulation_logs_do_not_share_state():
    first, second = RunLog(), RunLog()
    first.count("x")
    first.add_calls("page", "page", [ChatResult(ok=True)])
    assert second.problems == {} and second.calls == []
    assert RunLog().calls_frame().empty


def test_recall_returns_everything_when_few_memories():
    def never(texts):
        raise AssertionError("no embedding needed")

    memory = ["one", "two", "three"]
    agent = _agent(memory=memory)
    assert recall(agent, "query", 5, never) == memory
    assert recall(agent, "query", 3, never) == memory
    recalled = recall(agent, "query", 3, never)
    recalled.append("extra")
    assert agent.memory == memory, "the agent's memory must not be handed out for mutation"
    assert recall(_agent(), "query", 5, never) == []


def test_recall_picks_the_k_nearest_in_original_order():
    memory = [
        "drama drama",  # 0: far
        "comedy drama",  # 1: cos 0.71 to "comedy"
        "horror",  # 2: far
        "western page",  # 3: far
        "comedy",  # 4: cos 1 (the nearest, but later in memory than 1)
        "comedy comedy comedy drama",  # 5: cos 0.95
    ]
    agent = _agent(memory=memory)
    assert recall(agent, "comedy", 1, _vocab_embed) == ["comedy"]
    assert recall(agent, "comedy", 2, _vocab_embed) == ["comedy", "comedy comedy comedy drama"]
    assert recall(agent, "comedy", 3, _vocab_embed) == [
        "comedy drama",
        "comedy",
        "comedy comedy comedy drama",
    ]
    assert recall(agent, "western", 1, _vocab_embed) == ["western page"]
    assert recall(agent, "comedy", 0, _vocab_embed) == []
    assert agent.memory == memory


# ------------------------------------------------------------------------------ taste probe


def _pool(split: Split) -> dict[str, set[str]]:
    held = pd.concat([split.valid, split.test])
    return held.groupby(USER)[ITEM].agg(set).to_dict()


@pytest.mark.parametrize("ratio", [1, 2, 3, 9])
def test_taste_probe_sets_sizes_labels_and_sources(tiny, tiny_split, ratio):
    probe = taste_probe_sets(tiny_split, tiny, ratio)
    assert list(probe.columns) == [USER, ITEM, "label", "position"]
    pool = _pool(tiny_split)
    rated = tiny.interactions.groupby(USER)[ITEM].agg(set).to_dict()
    train_items = set(tiny_split.train[ITEM])
    expected_users = {u for u in tiny_split.train[USER].unique() if pool.get(u)}
    assert set(probe[USER]) == expected_users
    small_pools = 0
    for user, group in probe.groupby(USER):
        n_pos = min(len(pool[user]), 20 // (ratio + 1))
        small_pools += n_pos < 20 // (ratio + 1)
        positives = group[group["label"] == 1]
        negatives = group[group["label"] == 0]
        assert len(positives) == n_pos
        assert len(negatives) == ratio * n_pos
        assert set(group["label"]) <= {0, 1}
        assert group[ITEM].is_unique
        assert set(positives[ITEM]) <= pool[user]
        assert not set(negatives[ITEM]) & rated[user], "negatives are never rated by the user"
        assert set(negatives[ITEM]) <= train_items
        assert sorted(group["position"]) == list(range(len(group)))
    if ratio == 1:
        assert small_pools > 0  # the min(pool, ...) case is exercised on tiny


def test_taste_probe_sets_papers_counts_with_large_pools():
    # Users u0..u9 rated i0..i99: i0..i39 in train, i40..i99 held out (a pool of 60).
    # User "z" alone trained on i100..i149, so those are the only items u0..u9 never rated;
    # "z" has nothing held out and is skipped.
    train = [(f"u{u}", f"i{i}", 4) for u in range(10) for i in range(40)]
    held = [(f"u{u}", f"i{i}", 4) for u in range(10) for i in range(40, 100)]
    train += [("z", f"i{i}", 4) for i in range(100, 150)]
    train_frame, held_frame = _dataset(train).interactions, _dataset(held).interactions
    split = Split(train_frame, held_frame[::2], held_frame[1::2], "hand")
    dataset = _dataset(train + held)
    never_rated = {f"i{i}" for i in range(100, 150)}
    for ratio, (n_pos, n_neg) in {1: (10, 10), 2: (6, 12), 3: (5, 15), 9: (2, 18)}.items():
        probe = taste_probe_sets(split, dataset, ratio)
        assert set(probe[USER]) == {f"u{u}" for u in range(10)}
        counts = probe.groupby(USER)["label"].agg(["sum", "size"])
        assert (counts["sum"] == n_pos).all()
        assert (counts["size"] - counts["sum"] == n_neg).all()
        assert set(probe.loc[probe["label"] == 0, ITEM]) <= never_rated
        positives = probe.loc[probe["label"] == 1, ITEM].map(lambda i: int(i[1:]))
        assert positives.between(40, 99).all()


def test_taste_probe_sets_is_seeded(tiny, tiny_split):
    first = taste_probe_sets(tiny_split, tiny, 3, seed=4)
    assert first.equals(taste_probe_sets(tiny_split, tiny, 3, seed=4))
    assert not first.equals(taste_probe_sets(tiny_split, tiny, 3, seed=5))


def test_taste_probe_sets_shuffles_positions(tiny, tiny_split):
    probe = taste_probe_sets(tiny_split, tiny, 1).sort_values([USER, "position"])
    first_labels = probe.groupby(USER)["label"].agg(list)
    # Not every list starts with all its positives: the order is a permutation, not blocks.
    blocked = [labels == sorted(labels, reverse=True) for labels in first_labels]
    assert not all(blocked)


def test_taste_probe_sets_skips_users_with_an_empty_pool(tiny, tiny_split):
    user = sorted(tiny_split.train[USER].unique())[0]
    split = Split(
        train=tiny_split.train,
        valid=tiny_split.valid[tiny_split.valid[USER] != user],
        test=tiny_split.test[tiny_split.test[USER] != user],
        name="no-pool",
    )
    probe = taste_probe_sets(split, tiny, 1)
    assert user not in set(probe[USER])
    assert set(probe[USER]) == set(tiny_split.train[USER]) - {user}


@pytest.mark.parametrize("ratio", [0, -1])
def test_taste_probe_sets_rejects_a_ratio_below_one(tiny, tiny_split, ratio):
    with pytest.raises(ValueError, match="ratio"):
        taste_probe_sets(tiny_split, tiny, ratio)
