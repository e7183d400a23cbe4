"""Tests for recagents.papers.agentcf: data construction, schedule, prompts, parsers and memories.

No test calls a model: the training loop, the probe and the rankers need the LLM server, so
only their argument checks (raised before any client is made) are tested here. Everything
else is a pure function, tested on the tiny fixture or on small hand-built datasets whose
answers are known by construction.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest

from recagents import metrics
from recagents.columns import GENRES, ITEM, RANK, RATING, SCORE, TIMESTAMP, USER
from recagents.config import ConfigError
from recagents.data.atomic import DatasetError
from recagents.data.datasets import Dataset, candidate_sets, leave_one_out
from recagents.llm.cache import PRICES
from recagents.llm.client import ChatResult
from recagents.llm.runlog import RunLog, cost_table
from recagents.llm.scripted import ScriptedClient
from recagents.notebook import run_records
from recagents.papers.agentcf import agents, entry, evaluate
from recagents.papers.agentcf.agents import (
    AgentState,
    apply_item_reflection,
    apply_user_reflection,
    initial_item_memory,
    initial_state,
    initial_user_memory,
    reflecting_pairs,
    train,
    verbalised_history,
)
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.evaluate import (
    order_consistency,
    probe_summary,
    rank_candidates,
    retrieve_version,
)
from recagents.papers.agentcf.prompts import (
    choice_schema,
    forward_messages,
    item_reflection_messages,
    item_reflection_schema,
    llmrank_messages,
    parse_choice,
    ranking_messages,
    user_reflection_messages,
    user_reflection_schema,
)
from recagents.papers.agentcf.subsets import (
    Subset,
    make_subset,
    schedule,
    subset_stats,
    training_pairs,
)
from recagents.protocol import (
    FAITHFUL_MISSING_RANK,
    Paper,
    RankTask,
    RunOptions,
    parse_ranking,
    ranking_frame,
    ranking_schema,
)

WINDOW = 8  # the paper's window: 1 prefix + 5 targets + valid + test


# ------------------------------------------------------------------------------ helpers


def _dataset(rows, name="hand") -> Dataset:
    """A Dataset from ``(user, item, timestamp)`` rows in file order (no item/user files)."""
    frame = pd.DataFrame(rows, columns=[USER, ITEM, TIMESTAMP])
    frame[RATING] = 4.0
    frame = frame[[USER, ITEM, RATING, TIMESTAMP]]
    return Dataset(name=name, path=Path("."), interactions=frame, items=None, users=None)


def _by_file_position(frame: pd.DataFrame) -> dict[str, list[str]]:
    """{user: items sorted by time, ties by file position}, computed independently."""
    rows: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for position, (user, item, stamp) in enumerate(
        frame[[USER, ITEM, TIMESTAMP]].itertuples(index=False)
    ):
        rows[user].append((stamp, position, item))
    return {user: [item for _, _, item in sorted(history)] for user, history in rows.items()}


def _window_popularity(dataset: Dataset, window: int = WINDOW) -> pd.Series:
    """Mean dataset-wide interaction count of each eligible user's last ``window`` items."""
    popularity = dataset.interactions[ITEM].value_counts()
    scores = {
        user: float(np.mean([popularity[i] for i in items[-window:]]))
        for user, items in _by_file_position(dataset.interactions).items()
        if len(items) >= window
    }
    return pd.Series(scores)


def _user_items(frame: pd.DataFrame) -> dict[str, set[str]]:
    return frame.groupby(USER)[ITEM].agg(set).to_dict()


def _toy_embed(texts):
    """Bag-of-letters unit vectors: a deterministic stand-in for an embedding model."""
    vectors = np.zeros((len(texts), 26))
    for row, text in enumerate(texts):
        for char in text.lower():
            if "a" <= char <= "z":
                vectors[row, ord(char) - ord("a")] += 1
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


@pytest.fixture
def tiny_subset(tiny) -> Subset:
    return make_subset(tiny, "sparse", n_users=None)


# Hand-built: user "u" has 9 interactions (file order shuffled, two ties), "v" exactly 8,
# "w" only 7 (ineligible). Expected windows are written out by hand.
HAND_ROWS = [
    ("u", "a", 10),
    ("v", "v1", 1),
    ("u", "h", 80),
    ("u", "c", 30),
    ("v", "v3", 3),
    ("u", "b", 20),
    ("u", "e2", 50),
    ("w", "w1", 1),
    ("u", "d", 40),
    ("u", "e1", 50),  # ties with e2, later in the file
    ("v", "v2", 2),
    ("u", "g", 80),  # ties with h, later in the file: the test item
    ("u", "z", 5),  # earliest of nine: falls out of the window
    ("v", "v4", 4),
    ("v", "v5", 5),
    ("v", "v6", 6),
    ("v", "v7", 7),
    ("v", "v8", 8),
]
HAND_ROWS += [("w", f"w{k}", k) for k in range(2, 8)]
HAND_WINDOWS = {
    "u": ["a", "b", "c", "d", "e2", "e1", "h", "g"],
    "v": [f"v{k}" for k in range(1, 9)],
}
ROLES = ["prefix", "target", "target", "target", "target", "target", "valid", "test"]


# ------------------------------------------------------------------------------ config


def test_config_defaults_are_the_papers():
    config = AgentCFConfig()
    assert config.n_targets == 5
    assert config.batch_size == 20
    assert config.rounds == 2
    assert config.pair_order == "neg_first"
    assert config.update_negative is False
    assert config.exclude_future_negatives is False
    assert config.temperature == 0.2
    assert config.user_words == 180
    assert config.item_words == 50
    assert config.window == 8
    assert config.steps is None and config.n_steps == 5


def test_config_window_and_steps_follow_settings():
    config = AgentCFConfig(n_targets=3, steps=2)
    assert config.window == 6
    assert config.n_steps == 2


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_targets", 0),
        ("batch_size", 0),
        ("rounds", 0),
        ("steps", -1),
        ("steps", 6),  # more steps than targets
        ("pair_order", "sideways"),
        ("user_words", 9),
        ("item_words", 4),
        ("history_len", 0),
        ("temperature", -1.0),
        ("eval_temperature", 3.0),
        ("zero_shot_history_len", 0),
        ("subsets", ()),
        ("subsets", ("dense", "medium")),
        ("candidate_pool", "everything"),
        ("baselines", "Pop"),  # a string, not a tuple of names
    ],
)
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=f"AgentCFConfig.{field}="):
        AgentCFConfig(**{field: value})


def test_config_steps_zero_trains_nothing():
    assert AgentCFConfig(steps=0).n_steps == 0
    assert AgentCFConfig().n_steps == 5 and AgentCFConfig(steps=2).n_steps == 2


def test_config_is_frozen():
    config = AgentCFConfig()
    with pytest.raises(AttributeError):
        config.rounds = 3  # type: ignore[misc]


# ------------------------------------------------------------------------------ subsets


def test_make_subset_windows_on_tiny(tiny, tiny_subset):
    """Each user keeps the last 8 interactions, ordered by time then file position."""
    expected = _by_file_position(tiny.interactions)
    windows = tiny_subset.windows
    assert sorted(windows[USER].unique()) == sorted(expected)  # every tiny user has >= 8
    for user, group in windows.groupby(USER):
        assert group["slot"].tolist() == list(range(WINDOW))
        assert group[ITEM].tolist() == expected[user][-WINDOW:]
        assert group["role"].tolist() == ROLES
    # Documented ties of the fixture (see make_tiny.py).
    user1 = windows[windows[USER] == "1"].set_index("slot")[ITEM]
    assert (user1[6], user1[7]) == ("050", "003")
    user3 = windows[windows[USER] == "3"].set_index("slot")[ITEM]
    assert [user3[5], user3[6], user3[7]] == ["052", "005", "053"]


def test_make_subset_hand_built_ties_and_eligibility():
    subset = make_subset(_dataset(HAND_ROWS), "sparse", n_users=None)
    assert subset.users == ["u", "v"]  # "w" has only 7 interactions
    for user, items in HAND_WINDOWS.items():
        group = subset.windows[subset.windows[USER] == user]
        assert group[ITEM].tolist() == items
        assert group["role"].tolist() == ROLES
    assert dict(zip(subset.split.test[USER], subset.split.test[ITEM], strict=True)) == {
        "u": "g",
        "v": "v8",
    }
    assert dict(zip(subset.split.valid[USER], subset.split.valid[ITEM], strict=True)) == {
        "u": "h",
        "v": "v7",
    }


def test_make_subset_roles_follow_n_targets():
    subset = make_subset(_dataset(HAND_ROWS), "sparse", n_users=None, n_targets=2)
    group = subset.windows[subset.windows[USER] == "u"]
    assert group[ITEM].tolist() == ["d", "e2", "e1", "h", "g"]
    roles = dict(zip(group["slot"], group["role"], strict=True))
    assert roles == {0: "prefix", 1: "target", 2: "target", 3: "valid", 4: "test"}
    assert subset.test_slot() == 4
    assert subset.users == ["u", "v", "w"]  # a window of 5 admits "w" (7 interactions)
    assert len(subset.split.train) == 3 * 3  # prefix + 2 targets per user


def test_make_subset_split_matches_windows(tiny_subset):
    windows, split = tiny_subset.windows, tiny_subset.split
    n_users = windows[USER].nunique()
    assert len(split.train) == 6 * n_users
    assert split.train.groupby(USER).size().eq(6).all()
    assert split.valid[USER].is_unique and len(split.valid) == n_users
    assert split.test[USER].is_unique and len(split.test) == n_users
    assert "slot" not in split.train and "role" not in split.train
    for part, roles in (("train", ["prefix", "target"]), ("valid", ["valid"]), ("test", ["test"])):
        expected = windows[windows["role"].isin(roles)]
        assert _user_items(getattr(split, part)) == _user_items(expected)


def test_make_subset_sparse_is_seeded(tiny):
    first = make_subset(tiny, "sparse", n_users=10, seed=1)
    again = make_subset(tiny, "sparse", n_users=10, seed=1)
    assert first.users == again.users
    pd.testing.assert_frame_equal(first.windows, again.windows)
    assert len(first.users) == 10
    draws = {tuple(make_subset(tiny, "sparse", n_users=10, seed=s).users) for s in range(5)}
    assert len(draws) > 1


def test_make_subset_dense_is_seeded(tiny):
    first = make_subset(tiny, "dense", n_users=5, seed=3, dense_pool=0.5)
    again = make_subset(tiny, "dense", n_users=5, seed=3, dense_pool=0.5)
    assert first.users == again.users
    draws = {
        tuple(make_subset(tiny, "dense", n_users=5, seed=s, dense_pool=0.5).users) for s in range(5)
    }
    assert len(draws) > 1


def test_make_subset_dense_takes_the_most_popular_windows(tiny):
    """With a pool the size of the sample, dense is the top users by window popularity."""
    score = _window_popularity(tiny)
    dense = make_subset(tiny, "dense", n_users=10, dense_pool=0.25)
    chosen = score[dense.users]
    others = score.drop(dense.users)
    assert chosen.min() >= others.max()
    for seed in range(5):
        sparse = make_subset(tiny, "sparse", n_users=10, seed=seed)
        assert chosen.mean() >= score[sparse.users].mean()


def test_make_subset_dense_vs_sparse_on_constructed_data():
    """Five users share popular items, fifteen have items of their own: dense finds the five."""
    rows = [(f"p{u}", f"h{k}", k) for u in range(5) for k in range(8)]
    rows += [(f"s{u:02d}", f"s{u:02d}-{k}", k) for u in range(15) for k in range(8)]
    dataset = _dataset(rows)
    popular = {f"p{u}" for u in range(5)}
    for seed in range(3):
        dense = make_subset(dataset, "dense", n_users=5, seed=seed, dense_pool=0.25)
        assert set(dense.users) == popular
    sparse_draws = [set(make_subset(dataset, "sparse", n_users=5, seed=s).users) for s in range(5)]
    assert any(draw != popular for draw in sparse_draws)
    score = _window_popularity(dataset)
    assert np.mean([score[list(d)].mean() for d in sparse_draws]) < score[list(popular)].mean()


def test_make_subset_too_few_users(tiny):
    counts = tiny.interactions.groupby(USER).size()
    eligible = int((counts >= 13).sum())
    assert eligible < 40
    subset = make_subset(tiny, "sparse", n_users=eligible, n_targets=10)
    assert len(subset.users) == eligible
    with pytest.raises(DatasetError, match=str(eligible)):
        make_subset(tiny, "sparse", n_users=eligible + 1, n_targets=10)
    with pytest.raises(DatasetError):
        make_subset(tiny, "dense", n_users=41)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "medium"},
        {"kind": "dense", "dense_pool": 0.0},
        {"kind": "sparse", "n_users": 0},
        {"kind": "sparse", "n_targets": 0},
    ],
)
def test_make_subset_bad_arguments(tiny, kwargs):
    with pytest.raises(ValueError):
        make_subset(tiny, **kwargs)


def test_subset_targets_history_and_test_slot(tiny_subset):
    targets = tiny_subset.targets()
    assert list(targets.columns) == [USER, ITEM, "slot", "step"]
    assert len(targets) == 5 * len(tiny_subset.users)
    windows = tiny_subset.windows
    for user, group in targets.groupby(USER):
        group = group.sort_values("step")
        assert group["step"].tolist() == [0, 1, 2, 3, 4]
        assert group["slot"].tolist() == [1, 2, 3, 4, 5]
        expected = windows[(windows[USER] == user) & (windows["role"] == "target")]
        assert group[ITEM].tolist() == expected.sort_values("slot")[ITEM].tolist()
    assert tiny_subset.test_slot() == 7
    user = tiny_subset.users[0]
    items = windows[windows[USER] == user].sort_values("slot")[ITEM].tolist()
    assert tiny_subset.history(user, 0) == []
    assert tiny_subset.history(user, 3) == items[:3]
    assert tiny_subset.history(user, tiny_subset.test_slot()) == items[:7]


def test_subset_history_on_hand_built():
    subset = make_subset(_dataset(HAND_ROWS), "sparse", n_users=None)
    assert subset.history("u", 6) == ["a", "b", "c", "d", "e2", "e1"]
    assert subset.history("v", 2) == ["v1", "v2"]


# ------------------------------------------------------------------------------ stats


def test_subset_stats_on_hand_built_subset():
    """Window of 4 (n_targets=1): prefix, target, valid, test; answers counted by hand."""
    rows = [
        ("u1", "a", 1), ("u1", "b", 2), ("u1", "c", 3), ("u1", "d", 4),
        ("u2", "e", 1), ("u2", "d", 2), ("u2", "f", 3), ("u2", "b", 4),
        ("u3", "b", 1), ("u3", "g", 2), ("u3", "a", 3), ("u3", "e", 4),
    ]  # fmt: skip
    subset = make_subset(_dataset(rows), "sparse", n_users=None, n_targets=1)
    stats = subset_stats(subset)
    assert stats["subset"] == "sparse"
    assert stats["users"] == 3
    assert stats["items"] == 7  # a..g
    assert stats["distinct_targets"] == 3  # b, d, g
    assert stats["test_items_trained"] == 2  # d and b are targets; e is only a prefix
    assert stats["test_items_in_train"] == 3  # e counts here (u2's prefix)
    # 3 history items per user, 9 negatives from a pool of 6 other items.
    assert stats["paper_draw_history_hits"] == pytest.approx(9 * 3 / 6)


# ------------------------------------------------------------------------------ negatives


def test_training_pairs_one_per_target(tiny_subset):
    pairs = training_pairs(tiny_subset)
    assert list(pairs.columns) == [USER, "step", "slot", "positive", "negative"]
    targets = tiny_subset.targets()
    assert len(pairs) == len(targets)
    assert set(zip(pairs[USER], pairs["step"], pairs["positive"], strict=True)) == set(
        zip(targets[USER], targets["step"], targets[ITEM], strict=True)
    )
    assert not pairs.duplicated([USER, "step"]).any()
    ordered = pairs.sort_values(["step", USER], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(pairs, ordered)


def test_training_pairs_negatives_are_unseen(tiny_subset):
    seen = _user_items(tiny_subset.split.train)
    future = _user_items(pd.concat([tiny_subset.split.valid, tiny_subset.split.test]))
    train_items = set(tiny_subset.split.train[ITEM])
    for exclude in (False, True):
        pairs = training_pairs(tiny_subset, seed=7, exclude_future=exclude)
        for user, negative in zip(pairs[USER], pairs["negative"], strict=True):
            assert negative not in seen[user]
            assert negative in train_items
            if exclude:
                assert negative not in future[user]


def test_training_pairs_are_seeded(tiny_subset):
    first = training_pairs(tiny_subset, seed=11)
    pd.testing.assert_frame_equal(first, training_pairs(tiny_subset, seed=11))
    assert not first["negative"].equals(training_pairs(tiny_subset, seed=12)["negative"])


def test_training_pairs_follow_popularity_and_exclude_future():
    """A training item 40 users had dominates the negatives of the 20 users who had not.

    The popular item is those 20 users' valid item: drawn without ``exclude_future``,
    never with it.
    """
    rows = []
    for u in range(40):  # holders: "hot" is their prefix
        items = ["hot"] + [f"a{u:02d}-{k}" for k in range(7)]
        rows += [(f"a{u:02d}", item, t) for t, item in enumerate(items)]
    for u in range(20):  # others: "hot" is their valid item
        items = [f"b{u:02d}-{k}" for k in range(6)] + ["hot", f"b{u:02d}-test"]
        rows += [(f"b{u:02d}", item, t) for t, item in enumerate(items)]
    subset = make_subset(_dataset(rows), "sparse", n_users=None)
    pairs = training_pairs(subset, seed=2020)
    others = pairs[pairs[USER].str.startswith("b")]
    counts = Counter(others["negative"])
    hot = counts.pop("hot", 0)
    # Expected share of "hot": 40 / 354 of the weight, about 11 of 100 draws; any other
    # item has weight 1 (about 0.3 draws), and a uniform sampler would give "hot" < 1.
    assert hot >= 5
    assert hot >= 3 * max(counts.values())
    assert "hot" not in set(pairs.loc[pairs[USER].str.startswith("a"), "negative"])
    excluded = training_pairs(subset, seed=2020, exclude_future=True)
    assert "hot" not in set(excluded.loc[excluded[USER].str.startswith("b"), "negative"])


# ------------------------------------------------------------------------------ schedule


def test_schedule_round_robin_batches(tiny_subset):
    pairs = training_pairs(tiny_subset)
    batches = schedule(pairs, batch_size=7)
    assert len(batches) == len(pairs)
    ids = batches["batch"].tolist()
    assert sorted(set(ids)) == list(range(len(set(ids))))
    assert ids == sorted(ids)
    # 40 users per step in batches of 7: 6 batches per step, 5 steps.
    assert batches["batch"].nunique() == 30
    for _, batch in batches.groupby("batch"):
        assert len(batch) <= 7
        assert batch[USER].is_unique
        assert batch["step"].nunique() == 1
    last_step0 = batches.loc[batches["step"] == 0, "batch"].max()
    first_step1 = batches.loc[batches["step"] == 1, "batch"].min()
    assert last_step0 < first_step1
    assert batches["step"].is_monotonic_increasing
    cols = [USER, "step", "positive", "negative"]
    assert set(map(tuple, batches[cols].to_numpy())) == set(map(tuple, pairs[cols].to_numpy()))


def test_schedule_steps_and_batch_size_one(tiny_subset):
    pairs = training_pairs(tiny_subset)
    cut = schedule(pairs, batch_size=20, steps=2)
    assert set(cut["step"]) == {0, 1}
    assert len(cut) == 2 * len(tiny_subset.users)
    assert cut["batch"].tolist() == [0] * 20 + [1] * 20 + [2] * 20 + [3] * 20
    single = schedule(pairs, batch_size=1)
    assert single["batch"].tolist() == list(range(len(pairs)))
    with pytest.raises(ValueError, match="batch_size"):
        schedule(pairs, batch_size=0)


# ------------------------------------------------------------------------------ memories


def test_initial_user_memory_uses_features():
    woman = initial_user_memory({"gender": "F", "occupation": "engineer"})
    assert "woman" in woman and "an engineer" in woman
    man = initial_user_memory({"gender": "m", "occupation": "Writer"})
    assert "man" in man and "a writer" in man and "woman" not in man
    for occupation in ("other", "none", "", None, float("nan")):
        text = initial_user_memory({"gender": "M", "occupation": occupation}, domain="CD")
        assert "keen interest in CDs" in text
        assert "work as" not in text
    nobody = initial_user_memory({"occupation": "artist"})
    assert "person" in nobody and "an artist" in nobody
    generic = initial_user_memory(None, domain="CD")
    assert generic == initial_user_memory({}, domain="CD")
    assert "CDs" in generic and "work as" not in generic and "man" not in generic


def test_initial_item_memory_drops_unknown():
    assert initial_item_memory(("Drama", "Comedy")) == "A movie of the genres Drama, Comedy."
    assert initial_item_memory(("unknown", "Horror")) == "A movie of the genres Horror."
    assert initial_item_memory(("unknown",)) == "A movie."
    assert initial_item_memory((), domain="CD") == "A CD."


def test_initial_state_covers_the_subset(tiny, tiny_subset):
    state = initial_state(tiny, tiny_subset)
    assert sorted(state.user_memory) == tiny_subset.users
    assert "woman" in state.user_memory["1"] and "engineer" in state.user_memory["1"]
    assert "keen interest" in state.user_memory["2"]  # occupation "other"
    assert all(state.user_versions[u] == [m] for u, m in state.user_memory.items())
    # Every dataset item gets a memory, so dataset-pool candidates can be shown too.
    assert set(state.item_memory) == set(tiny.interactions[ITEM])
    assert set(tiny_subset.windows[ITEM]) <= set(state.item_memory)
    genres = dict(zip(tiny.items[ITEM], tiny.items[GENRES], strict=True))
    for item, memory in state.item_memory.items():
        assert memory == [initial_item_memory(genres.get(item, ()))]
        assert state.item(item) == memory[-1]


def _state() -> AgentState:
    return AgentState(
        user_memory={"u": "I like noir."},
        user_versions={"u": ["I like noir."]},
        item_memory={"p": ["A movie."], "n": ["A movie of the genres Drama."]},
    )


def test_apply_user_reflection_stores_text():
    state = _state()
    before, after = apply_user_reflection(state, "u", {"self_description": "  I like war.  "})
    assert (before, after) == ("I like noir.", "I like war.")
    assert state.user_memory["u"] == "I like war."
    assert state.user_versions["u"] == ["I like noir."]  # versions are saved per batch


@pytest.mark.parametrize(
    "reply", [None, {}, {"self_description": "   "}, {"self_description": 3}, "text"]
)
def test_apply_user_reflection_unusable_reply(reply):
    state = _state()
    before, after = apply_user_reflection(state, "u", reply)
    assert (before, after) == ("I like noir.", None)
    assert state.user_memory == {"u": "I like noir."}


def test_apply_item_reflection_stores_positive_only_by_default():
    state = _state()
    reply = {"preferred": "For noir fans.", "other": "For drama fans."}
    records = apply_item_reflection(state, "p", "n", reply)
    assert state.item_memory == {
        "p": ["A movie.", "For noir fans."],
        "n": ["A movie of the genres Drama."],
    }
    assert [(r[ITEM], r["role"], r["stored"]) for r in records] == [
        ("p", "positive", True),
        ("n", "negative", False),
    ]
    assert records[1]["after"] == "For drama fans."
    assert records[0]["before"] == "A movie."


def test_apply_item_reflection_update_negative():
    state = _state()
    reply = {"preferred": "For noir fans.", "other": "For drama fans."}
    records = apply_item_reflection(state, "p", "n", reply, update_negative=True)
    assert state.item("p") == "For noir fans."
    assert state.item("n") == "For drama fans."
    assert [r["stored"] for r in records] == [True, True]


@pytest.mark.parametrize("reply", [None, {}, {"preferred": " ", "other": ""}, ["x"]])
def test_apply_item_reflection_unusable_reply(reply):
    state = _state()
    records = apply_item_reflection(state, "p", "n", reply, update_negative=True)
    assert state.item_memory == _state().item_memory
    assert [r["stored"] for r in records] == [False, False]
    assert [r["after"] for r in records] == [None, None]


def test_apply_item_reflection_half_usable_reply():
    state = _state()
    apply_item_reflection(state, "p", "n", {"other": "For drama fans."}, update_negative=True)
    assert state.item_memory["p"] == ["A movie."]
    assert state.item_memory["n"][-1] == "For drama fans."


def test_agent_state_copy_is_deep():
    state = _state()
    clone = state.copy()
    clone.user_memory["u"] = "changed"
    clone.user_versions["u"].append("v2")
    clone.item_memory["p"].append("new")
    assert state.user_memory["u"] == "I like noir."
    assert state.user_versions["u"] == ["I like noir."]
    assert state.item_memory["p"] == ["A movie."]


# ------------------------------------------------------------------------------ prompts


def test_forward_messages_layout():
    messages = forward_messages("I love westerns.", "Alien: scary", "Heat: tense", "film")
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "I love westerns." in system and "I love westerns." not in user
    assert "1. Alien: scary\n2. Heat: tense" in user
    assert "Alien" not in system
    assert "film" in user and '"choice"' in user


def test_user_reflection_messages_three_cases():
    def content(**kwargs):
        messages = user_reflection_messages(
            "I like noir.", "Alien", "Heat", preferred=2, words=77, **kwargs
        )
        assert [m["role"] for m in messages] == ["system", "user"]
        assert "I like noir." in messages[0]["content"]
        return messages[1]["content"]

    right = content(chosen=2, explanation="tense heists")
    wrong = content(chosen=1, explanation="space monsters")
    blind = content(chosen=None)
    assert len({right, wrong, blind}) == 3
    for text in (right, wrong, blind):
        assert "1. Alien\n2. Heat" in text
        assert "at most 77 words" in text
        assert '"self_description"' in text
    assert "right choice" in right and "misled" not in right
    assert '"tense heists"' in right
    assert "misled" in wrong and "right choice" not in wrong
    assert "preferred movie 2, not movie 1" in wrong and '"space monsters"' in wrong
    assert "You chose" not in blind and "preferred movie 2 to movie 1" in blind


def test_item_reflection_messages_three_cases():
    def content(**kwargs):
        messages = item_reflection_messages(
            "I am the user after reflection.", "Alien", "Heat", preferred=1, words=33, **kwargs
        )
        return messages[1]["content"]

    right = content(chosen=1, explanation="monsters")
    wrong = content(chosen=2, explanation="heists")
    blind = content()
    assert len({right, wrong, blind}) == 3
    for text in (right, wrong, blind):
        assert "I am the user after reflection." in text
        assert "1. Alien\n2. Heat" in text
        assert "at most 33 words" in text
        assert '"preferred" for movie 1, "other" for movie 2' in text
    assert "real preference" in right and "misled" not in right
    assert "misled" in wrong and "They chose movie 2" in wrong
    assert "They chose" not in blind and "really preferred movie 1" in blind


def test_ranking_messages_optional_parts():
    candidates = ["A: x", "B: y", "C: z"]
    plain = ranking_messages("I like noir.", candidates)[1]["content"]
    assert "I like noir." in plain
    assert "1. A: x\n2. B: y\n3. C: z" in plain
    assert "Rank all 3 candidates" in plain
    assert "chose recently" not in plain and "Earlier" not in plain
    assert (
        ranking_messages("m", candidates, history=[])[1]["content"]
        == (ranking_messages("m", candidates)[1]["content"])
    )
    with_history = ranking_messages("m", candidates, history=["Old One", "Old Two"])[1]["content"]
    assert "chose recently" in with_history and "Old One\nOld Two" in with_history
    assert "Earlier" not in with_history
    retrieved = ranking_messages("m", candidates, retrieved="I used to like war.")[1]["content"]
    assert "Earlier" in retrieved and "I used to like war." in retrieved
    assert "chose recently" not in retrieved


def test_llmrank_messages():
    messages = llmrank_messages(["Old One", "Old Two"], ["A", "B"], domain="CD")
    user = messages[1]["content"]
    assert "Old One\nOld Two" in user and "1. A\n2. B" in user
    assert "Rank all 2 candidates" in user and "CDs" in user
    empty = llmrank_messages([], ["A"])[1]["content"]
    assert "(none)" in empty and "1. A" in empty


def test_verbalised_history():
    text = verbalised_history(["Alien", "Heat"])
    assert "Alien; Heat" in text and text.index("Alien") < text.index("Heat")
    assert "oldest first" in text
    assert verbalised_history([], domain="CD") == "I have not listened to any CDs yet."


# ------------------------------------------------------------------------------ schemas


def _valid(instance, schema) -> bool:
    try:
        jsonschema.validate(instance, schema)
    except jsonschema.ValidationError:
        return False
    return True


def test_choice_schema():
    schema = choice_schema(explanation_chars=20)
    assert _valid({"choice": 1, "explanation": "short"}, schema)
    assert _valid({"choice": 2, "explanation": ""}, schema)
    for bad in (
        {"choice": 3, "explanation": "x"},
        {"choice": "1", "explanation": "x"},
        {"choice": True, "explanation": "x"},
        {"choice": 1},
        {"explanation": "x"},
        {"choice": 1, "explanation": "x" * 21},
    ):
        assert not _valid(bad, schema), bad


def test_reflection_schemas():
    user = user_reflection_schema(words=10)
    assert _valid({"self_description": "I like noir."}, user)
    assert not _valid({}, user)
    assert not _valid({"self_description": "x" * 1000}, user)
    item = item_reflection_schema(words=10)
    assert _valid({"preferred": "a", "other": "b"}, item)
    assert not _valid({"preferred": "a"}, item)


@pytest.mark.parametrize("n", [1, 3, 10])
def test_ranking_schema(n):
    schema = ranking_schema(n)
    items = schema["properties"]["ranking"]
    assert items["minItems"] == items["maxItems"] == n
    assert items["items"]["enum"] == list(range(1, n + 1))
    assert _valid({"ranking": list(range(n, 0, -1))}, schema)
    assert not _valid({"ranking": list(range(1, n))}, schema)  # too short
    assert not _valid({"ranking": list(range(1, n + 2))}, schema)  # too long
    assert not _valid({"ranking": [0] + list(range(2, n + 1))}, schema)
    assert not _valid({"ranking": list(range(1, n)) + [n + 1]}, schema)
    assert not _valid({}, schema)


def test_ranking_schema_allows_duplicates():
    """Documented: the schema cannot demand a permutation; parse_ranking repairs it."""
    assert _valid({"ranking": [1, 1, 2]}, ranking_schema(3))


# ------------------------------------------------------------------------------ parsers


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"choice": 1}, 1),
        ({"choice": 2, "explanation": "x"}, 2),
        ({"choice": "2"}, 2),
        ({"choice": " 1 "}, 1),
        ({"choice": True}, None),
        ({"choice": False}, None),
        ({"choice": 3}, None),
        ({"choice": 0}, None),
        ({"choice": "two"}, None),
        ({"choice": None}, None),
        ({"explanation": "x"}, None),
        (None, None),
        ([1], None),
        ("1", None),
    ],
)
def test_parse_choice(data, expected):
    assert parse_choice(data) == expected


def test_parse_ranking_complete():
    parse = parse_ranking({"ranking": [3, 1, 2]}, 3)
    assert parse.order == (2, 0, 1)
    assert parse.missing == ()
    assert (parse.duplicates, parse.out_of_range) == (0, 0)
    assert parse.status == "complete"


def test_parse_ranking_repairs():
    parse = parse_ranking({"ranking": [2, 2, 7, "x", 0, 4, 2, True, 1.5, "3"]}, 5)
    assert parse.order == (1, 3, 2)  # 2, 4, "3": first copies, in order
    assert parse.duplicates == 2
    assert parse.out_of_range == 5  # 7, "x", 0, True, 1.5
    assert parse.missing == (0, 4)
    assert parse.status == "repaired"
    only_missing = parse_ranking({"ranking": [2]}, 3)
    assert only_missing.status == "repaired" and only_missing.missing == (0, 2)


@pytest.mark.parametrize(
    "data", [None, {}, {"ranking": []}, {"ranking": "1, 2, 3"}, {"ranking": [0, 9, "a"]}, [1, 2]]
)
def test_parse_ranking_failed(data):
    parse = parse_ranking(data, 3)
    assert parse.status == "failed"
    assert parse.order == ()
    assert parse.missing == (0, 1, 2)


def test_parse_ranking_unicode_digit_is_dropped_not_raised():
    """str.isdigit() is true for '²', which int() refuses: such entries are dropped."""
    parse = parse_ranking({"ranking": [1, "²", 2]}, 2)
    assert parse.out_of_range == 1 and parse.status == "repaired"
    assert parse_ranking({"ranking": ["٣", " 2 "]}, 3).order == (1,)


def test_ranking_frame_complete():
    parse = parse_ranking({"ranking": [2, 3, 1]}, 3)
    frame = ranking_frame("u", ["x", "y", "z"], parse)
    assert list(frame.columns) == [USER, ITEM, SCORE, RANK]
    assert dict(zip(frame[ITEM], frame[RANK], strict=True)) == {"y": 1, "z": 2, "x": 3}
    assert frame.sort_values(SCORE, ascending=False)[ITEM].tolist() == ["y", "z", "x"]
    faithful = ranking_frame("u", ["x", "y", "z"], parse, "faithful")
    pd.testing.assert_frame_equal(frame, faithful)


def test_ranking_frame_repaired_places_missing_last():
    items = [f"i{k}" for k in range(6)]
    parse = parse_ranking({"ranking": [4, 2]}, 6)  # i3 first, i1 second
    frames = [ranking_frame("u", items, parse, "repaired", seed=s) for s in range(10)]
    for frame in frames:
        rank = dict(zip(frame[ITEM], frame[RANK], strict=True))
        assert (rank["i3"], rank["i1"]) == (1, 2)
        assert sorted(frame[RANK]) == list(range(1, 7))
        assert {rank[i] for i in ("i0", "i2", "i4", "i5")} == {3, 4, 5, 6}
        by_score = frame.sort_values(SCORE, ascending=False)[ITEM].tolist()
        assert by_score == frame.sort_values(RANK)[ITEM].tolist()
    again = ranking_frame("u", items, parse, "repaired", seed=3)
    pd.testing.assert_frame_equal(frames[3], again)
    orders = {tuple(f.sort_values(RANK)[ITEM]) for f in frames}
    assert len(orders) > 1  # the seed decides the missing candidates' order


def test_ranking_frame_faithful_sinks_missing():
    items = ["a", "b", "c", "d"]
    parse = parse_ranking({"ranking": [3, 3, 9]}, 4)
    frame = ranking_frame("u", items, parse, "faithful")
    rank = dict(zip(frame[ITEM], frame[RANK], strict=True))
    assert rank == {"c": 1, "a": FAITHFUL_MISSING_RANK, "b": FAITHFUL_MISSING_RANK + 1,
                    "d": FAITHFUL_MISSING_RANK + 2}  # fmt: skip
    assert (frame.set_index(ITEM).loc[["a", "b", "d"], SCORE] == -10000.0).all()
    assert FAITHFUL_MISSING_RANK > len(items)
    failed = ranking_frame("u", items, parse_ranking(None, 4), "faithful")
    assert (failed[RANK] >= FAITHFUL_MISSING_RANK).all()
    # Several left out: still one rank per item, so the metrics accept it; a positive left
    # out scores 0 at every cut-off, a positive ranked first scores 1.
    for positive, expected in (("a", 0.0), ("c", 1.0)):
        truth = pd.DataFrame({USER: ["u"], ITEM: [positive]})
        scores = metrics.ranking_metrics(frame, truth, ks=(1, 4), metrics=("ndcg", "hr"))
        assert scores[["ndcg@1", "ndcg@4", "hr@4"]].iloc[0].tolist() == [expected] * 3
    repaired = ranking_frame("u", items, parse_ranking(None, 4), "repaired", seed=1)
    assert sorted(repaired[RANK]) == [1, 2, 3, 4]


# ------------------------------------------------------------------------------ reflection


def _outcomes():
    return [
        {USER: "a", "correct": True},
        {USER: "b", "correct": False},
        {USER: "c", "correct": True},
        {USER: "d", "correct": False},
    ]


def test_reflecting_pairs_round_zero_everyone():
    outcomes = _outcomes()
    users, items = reflecting_pairs(outcomes, 0)
    assert users == outcomes and items == outcomes
    assert all(a is b for a, b in zip(users, outcomes, strict=True))


def test_reflecting_pairs_later_rounds_only_wrong_users():
    outcomes = _outcomes()
    users, items = reflecting_pairs(outcomes, 1)
    assert [o[USER] for o in users] == ["b", "d"]
    assert [o[USER] for o in items] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("round_index", [0, 1])
def test_reflecting_pairs_ablations(round_index):
    outcomes = _outcomes()
    users, items = reflecting_pairs(outcomes, round_index, "no_user_agent")
    assert users == [] and len(items) == 4
    users, items = reflecting_pairs(outcomes, round_index, "no_item_agent")
    assert items == [] and len(users) == (4 if round_index == 0 else 2)


def test_reflecting_pairs_no_autonomy_round_zero():
    outcomes = [{USER: "a", "correct": None}, {USER: "b", "correct": None}]
    users, items = reflecting_pairs(outcomes, 0, "no_autonomy")
    assert users == outcomes and items == outcomes


# ------------------------------------------------------------------------------ retrieval


def test_retrieve_version_picks_nearest_middle_version():
    versions = ["zzz zzz", "I love horror films", "quick jazz boxing", "zzz current"]
    text, fallback = retrieve_version(versions, "horror films I love", embed=_toy_embed)
    assert (text, fallback) == ("I love horror films", False)
    text, fallback = retrieve_version(versions, "boxing jazz quick", embed=_toy_embed)
    assert (text, fallback) == ("quick jazz boxing", False)


def test_retrieve_version_excludes_first_and_last():
    query = "exactly this text"
    versions = [query, "something rather different", "bbb", query]
    text, fallback = retrieve_version(versions, query, embed=_toy_embed)
    assert text in versions[1:-1] and not fallback
    assert text == "something rather different"  # nearer than "bbb" by letters


@pytest.mark.parametrize("versions", [["initial"], ["initial", "current"]])
def test_retrieve_version_empty_pool_falls_back(versions):
    def never(texts):
        raise AssertionError("nothing to embed")

    assert retrieve_version(versions, "query", embed=never) == ("initial", True)


# ------------------------------------------------------------------------------ cost


def _calls() -> pd.DataFrame:
    log = RunLog()
    log.add_calls(
        "train",
        "forward",
        [
            ChatResult(ok=True, cached=True, prompt_tokens=100_000, completion_tokens=20_000,
                       latency_s=1.24),
            ChatResult(ok=False, failure="invalid", prompt_tokens=50_000, completion_tokens=3_000,
                       latency_s=0.5, reasks=2),
        ],
    )  # fmt: skip
    log.add_calls(
        "train",
        "user_reflection",
        [ChatResult(ok=True, prompt_tokens=10_000, completion_tokens=7_000, latency_s=2.0)],
    )
    log.add_calls(
        "rank:B",
        "rank",
        [
            ChatResult(ok=True, cached=True, prompt_tokens=400_000, completion_tokens=1_000,
                       latency_s=3.0, reasks=1),
            ChatResult(ok=False, failure="transport"),
        ],
    )  # fmt: skip
    return log.calls_frame()


def test_cost_table_per_phase_and_total():
    table = cost_table(_calls())
    assert table.index.tolist() == ["train", "rank:B", "total"]
    assert table.loc["train", "calls"] == 3 and table.loc["rank:B", "calls"] == 2
    assert table.loc["train", "failed"] == 1 and table.loc["rank:B", "failed"] == 1
    assert table.loc["train", "reasks"] == 2 and table.loc["rank:B", "reasks"] == 1
    assert table.loc["train", "from_cache"] == 1 and table.loc["rank:B", "from_cache"] == 1
    assert table.loc["train", "prompt_tokens"] == 160_000
    assert table.loc["train", "completion_tokens"] == 30_000
    assert table.loc["rank:B", "prompt_tokens"] == 400_000
    assert table.loc["train", "endpoint_s"] == pytest.approx(3.7)
    for column in ("calls", "failed", "reasks", "from_cache", "prompt_tokens"):
        assert table.loc["total", column] == table.loc[["train", "rank:B"], column].sum()
    price_in, price_out = PRICES["gpt-3.5-turbo"]
    for phase in table.index:
        expected = (
            table.loc[phase, "prompt_tokens"] * price_in
            + table.loc[phase, "completion_tokens"] * price_out
        ) / 1e6
        assert table.loc[phase, "usd_at_gpt-3.5-turbo"] == pytest.approx(expected, abs=1e-4)
    assert table.loc["total", "usd_at_gpt-3.5-turbo"] > 0


def test_cost_table_price_model_and_empty():
    table = cost_table(_calls(), price_model="gpt-4o")
    price_in, price_out = PRICES["gpt-4o"]
    expected = (560_000 * price_in + 31_000 * price_out) / 1e6
    assert table.loc["total", "usd_at_gpt-4o"] == pytest.approx(expected, abs=1e-4)
    assert "usd_at_gpt-3.5-turbo" not in table
    assert cost_table(RunLog().calls_frame()).empty


# ------------------------------------------------------------------------------ probes


def _probe_row(user, step, order, chosen, preferred):
    """A probe row as pairwise_probe writes it (``chosen`` None: no usable reply)."""
    ok = chosen is not None
    return {
        USER: user,
        "step": step,
        "positive": f"{user}-pos",
        "negative": f"{user}-neg",
        "order": order,
        "ok": ok,
        "chose_first": chosen == 1 if ok else None,
        "correct": chosen == preferred if ok else None,
    }


@pytest.fixture
def probe() -> pd.DataFrame:
    # neg_first: the positive is item 2; pos_first: it is item 1.
    rows = [
        _probe_row("a", 0, "neg_first", 2, 2),  # reads the items: right both times
        _probe_row("a", 0, "pos_first", 1, 1),
        _probe_row("b", 0, "neg_first", 1, 2),  # always the first option
        _probe_row("b", 0, "pos_first", 1, 1),
        _probe_row("c", 0, "neg_first", 1, 2),  # wrong both times, consistently
        _probe_row("c", 0, "pos_first", 2, 1),
        _probe_row("d", 0, "neg_first", None, 2),  # one order failed: not comparable
        _probe_row("d", 0, "pos_first", 1, 1),
    ]
    return pd.DataFrame(rows)


def test_probe_summary(probe):
    summary = probe_summary(probe).set_index("order")
    assert summary.loc["neg_first", "pairs"] == 4 and summary.loc["pos_first", "pairs"] == 4
    assert summary.loc["neg_first", "answered"] == 3 and summary.loc["pos_first", "answered"] == 4
    assert float(summary.loc["neg_first", "accuracy"]) == pytest.approx(1 / 3)
    assert float(summary.loc["pos_first", "accuracy"]) == pytest.approx(3 / 4)
    assert float(summary.loc["neg_first", "chose_first"]) == pytest.approx(2 / 3)
    assert float(summary.loc["pos_first", "chose_first"]) == pytest.approx(3 / 4)


def test_order_consistency(probe):
    assert order_consistency(probe) == pytest.approx(2 / 3)  # a and c agree, b does not
    always_first = probe[probe[USER] == "b"]
    assert order_consistency(always_first) == 0.0
    one_order = probe[probe["order"] == "neg_first"]
    assert np.isnan(order_consistency(one_order))


# ------------------------------------------------------------------------------ guards


@pytest.fixture
def no_client(monkeypatch):
    """Make any attempt to build an LLM client fail loudly (a guard, not a fake model)."""

    def refuse(*args, **kwargs):
        raise AssertionError("an LLM client was requested")

    for module in (agents, evaluate):
        monkeypatch.setattr(module, "get_client", refuse)


def test_rank_candidates_rejects_unknown_variant(no_client):
    with pytest.raises(ValueError, match="variant"):
        rank_candidates(None, None, None, {}, variant="bogus")


def test_train_rejects_unknown_mode(no_client):
    with pytest.raises(ValueError, match="mode"):
        train(_state(), pd.DataFrame(), None, {}, mode="bogus", progress=False)


# ------------------------------------------------------------------------------ entry points


def _scripted(request):
    """Schema-valid replies: choose the first option, keep short memories, rank as shown."""
    required = set(request.schema["required"])
    if "choice" in required:
        return {"choice": 1, "explanation": "the first one"}
    if "self_description" in required:
        return {"self_description": "I like what I chose."}
    if "preferred" in required:
        return {"preferred": "liked", "other": "not chosen"}
    return {"ranking": list(range(1, request.schema["properties"]["ranking"]["minItems"] + 1))}


def test_entry_is_a_paper_with_the_notebooks_profiles():
    assert isinstance(entry, Paper)
    assert entry.RANKERS == ("Zero-shot LLM", "AgentCF B", "AgentCF B+H", "AgentCF B+R")
    smoke = entry.default_config("smoke")
    # 3 users of a release cannot train the same-sample models on the paper's candidates
    # (some are no item of theirs): the models on the release's users stand in
    assert (smoke.batch_size, smoke.steps, smoke.subsets, smoke.full_data_baselines) == (
        3, 1, ("dense",), ("Pop", "BPR")
    )  # fmt: skip
    assert entry.default_config().full_data_baselines == ("Pop", "BPR")
    assert entry.sample_training("default").epochs == 100
    with pytest.raises(ValueError, match="unknown profile"):
        entry.default_config("huge")


def test_entry_run_scores_every_method_of_every_subset(tiny, cache_dir):
    config = AgentCFConfig(steps=1, batch_size=3, rounds=1, subsets=("sparse",),
                           candidate_pool="dataset", full_data_baselines=())  # fmt: skip
    outer = RunLog()
    options = RunOptions(n_users=3, client=ScriptedClient(_scripted, "agentcf"), log=outer,
                         n_boot=50)  # fmt: skip
    run = entry.run(tiny, config, options)
    methods = [*entry.METHODS, "Random"]  # no subset-trained models: negatives from the dataset
    assert list(run.metrics["metric"]) == [
        f"ndcg@{k}/sparse/{m}" for m in methods for k in (1, 5, 10)
    ]
    assert (run.metrics["n"] == 3).all() and set(run.tables) == set(entry.TABLES)
    assert run_records(run)["ndcg@10/sparse/Random/n"] == 3
    part = run.parts["sparse"]
    assert part.trained != part.initial and len(part.pairs) == 3
    phases = run.log.calls_frame()["phase"].value_counts().to_dict()
    assert phases == {"train": 9, **{f"rank {m}": 3 for m in entry.METHODS}}
    assert len(outer.calls) == len(run.log.calls)  # the caller's log receives the same calls
    assert (run.table("parses")["status"] == "complete").all()
    assert set(run.table("rankings")["method"]) == set(methods)
    summary = run.table("summary")
    assert (summary["subset"] == "sparse").all() and set(summary["method"]) == set(methods)
    with pytest.raises(ValueError, match="methods: unknown AgentCF"):
        entry.run(tiny, config, RunOptions(methods=("B",)))


def test_entry_run_trains_only_for_trained_rankers(tiny, cache_dir):
    config = AgentCFConfig(steps=1, batch_size=3, subsets=("sparse",), candidate_pool="dataset",
                           full_data_baselines=())  # fmt: skip
    options = RunOptions(n_users=3, methods=("LLMRank (zero-shot)",), n_boot=20,
                         client=ScriptedClient(_scripted, "agentcf"))  # fmt: skip
    run = entry.run(tiny, config, options)
    assert set(run.log.calls_frame()["phase"]) == {"rank LLMRank (zero-shot)"}
    assert run.parts["sparse"].trained is run.parts["sparse"].initial


@pytest.fixture
def rank_task(tiny, cache_dir):
    """Three users with at least 11 interactions, their test item and 9 negatives each."""
    split = leave_one_out(tiny)
    counts = tiny.interactions.groupby(USER).size()
    users = sorted(counts[counts >= 11].index)[:3]
    candidates = candidate_sets(split, 9, seed=0)
    return RankTask(tiny, split, candidates[candidates[USER].isin(users)], seed=0)


def test_entry_rank_puts_every_ranker_on_the_shared_candidates(rank_task):
    config = AgentCFConfig(steps=1, rounds=1)
    options = RunOptions(client=ScriptedClient(_scripted, "agentcf"))
    rankings = entry.rank(rank_task, config, options)
    assert list(rankings) == list(entry.RANKERS)
    shown = rank_task.candidates.sort_values([USER, "position"])
    for method, ranking in rankings.items():
        assert ranking.method == method
        assert ranking.status_counts()["complete"] == 3
        frame = ranking.frame.sort_values([USER, RANK])
        assert frame[ITEM].tolist() == shown[ITEM].tolist()  # ranked as shown
    zero = rankings["Zero-shot LLM"].calls
    assert zero["phase"].tolist() == ["Zero-shot LLM"] * 3
    calls = rankings["AgentCF B+R"].calls["phase"].value_counts().to_dict()
    assert calls == {"train": 9, "rank:B+R": 3}  # 3 choices, 3 user and 3 item reflections
    assert rankings["AgentCF B"].note == "1 training step(s)"


def test_entry_rank_without_training_and_one_method(rank_task):
    config = AgentCFConfig(steps=0)
    options = RunOptions(methods=("AgentCF B",), client=ScriptedClient(_scripted, "agentcf"))
    rankings = entry.rank(rank_task, config, options)
    assert list(rankings) == ["AgentCF B"]
    ranking = rankings["AgentCF B"]
    assert ranking.note == "no training" and set(ranking.calls["phase"]) == {"rank:B"}
