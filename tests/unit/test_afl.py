"""Unit tests for recagents.papers.afl: configuration, samples, user-simulation sets, prompts,
schemas, parsers and the analysis helpers.

No test calls a model. The loop's output is replaced by hand-built rounds frames with the
columns :func:`recagents.papers.afl.loop.feedback_loop` returns, whose answers are known by
construction; data helpers are tested on the tiny fixture or on small hand-built interaction
frames.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jsonschema
import matplotlib
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from recagents import baselines  # noqa: E402
from recagents.columns import ITEM, LABEL, RATING, TIMESTAMP, USER  # noqa: E402
from recagents.config import ConfigError  # noqa: E402
from recagents.data.datasets import POSITION, Dataset, chronological_order  # noqa: E402
from recagents.papers.afl import entry  # noqa: E402
from recagents.papers.afl.analysis import (  # noqa: E402
    bias_figure,
    bias_measures,
    bias_tests,
    chosen_items,
    dialogue_trace,
    identical_choices,
    rounds_curve_figure,
)
from recagents.papers.afl.config import STOPS, AFLConfig  # noqa: E402
from recagents.papers.afl.evaluate import (  # noqa: E402
    always_yes_metrics,
    hit_rate_table,
    hits_by_round,
    predictions,
    relative_gain,
    simulation_metrics,
    stop_counts,
)
from recagents.papers.afl.prompts import (  # noqa: E402
    RoundMemory,
    decision_schema,
    judge_messages,
    parse_decision,
    parse_recommendation,
    recommend_messages,
    recommend_schema,
    user_loop_messages,
)
from recagents.papers.afl.samples import Sample, make_samples, recent_histories  # noqa: E402
from recagents.papers.afl.user_simulation import (  # noqa: E402
    step1_candidates,
    user_sim_sets,
    user_sim_split,
)
from recagents.protocol import RunOptions  # noqa: E402

SIM = AFLConfig(n_candidates=10, window=5, ratios=((1, 1), (1, 4)))


# ------------------------------------------------------------------------------ helpers


def _frame(rows) -> pd.DataFrame:
    """Interactions from ``(user, item, timestamp)`` rows in file order."""
    frame = pd.DataFrame(rows, columns=[USER, ITEM, TIMESTAMP])
    frame[RATING] = 4.0
    return frame[[USER, ITEM, RATING, TIMESTAMP]]


def _dataset(rows) -> Dataset:
    return Dataset(name="hand", path=Path("."), interactions=_frame(rows), items=None, users=None)


def _row(user, round_, item=None, position=None, label=None, accepted=None, stop=None):
    """One row of a rounds frame, as feedback_loop builds it."""
    return {
        USER: user,
        "round": round_,
        ITEM: item,
        POSITION: position,
        LABEL: label,
        "rec_reason": None if item is None else f"why {item}",
        "rec_ok": item is not None,
        "accepted": accepted,
        "user_reason": None if accepted is None else f"user on {item}",
        "user_ok": None if accepted is None and item is None else accepted is not None,
        "stop": stop,
    }


def _rounds() -> pd.DataFrame:
    """Three dialogues with known predictions.

    ``a``: rejected at round 1 (a1, a miss), accepted at round 2 (a2, the target).
    ``b``: the round-1 recommendation failed.
    ``c``: round 1 c1 (the target) rejected, round 2 c2 rejected, round 3 failed.
    """
    rows = [
        _row("a", 1, "a1", 3, 0, accepted=False),
        _row("a", 2, "a2", 0, 1, accepted=True, stop="accepted"),
        _row("b", 1, stop="rec_failed"),
        _row("c", 1, "c1", 4, 1, accepted=False),
        _row("c", 2, "c2", 1, 0, accepted=False),
        _row("c", 3, stop="rec_failed"),
    ]
    return pd.DataFrame(rows)


def _sample(user="u", n=5, target_at=2, prior_at=0) -> Sample:
    candidates = tuple(f"{user}-i{k}" for k in range(n))
    return Sample(
        user=user,
        history=("h1", "h2"),
        candidates=candidates,
        target=candidates[target_at],
        prior=candidates[prior_at],
        focus=candidates[:2],
        scores={c: float(-k) for k, c in enumerate(candidates)},
    )


def _titles(samples) -> dict[str, str]:
    items = {i for s in samples for i in (*s.candidates, *s.history)}
    return {i: f"Title {i}" for i in items}


# ------------------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_candidates": 1}, "AFLConfig.n_candidates=1 is out of range"),
        ({"max_rounds": 0}, "AFLConfig.max_rounds=0 is out of range"),
        ({"user_rounds": 0}, "AFLConfig.user_rounds=0 is out of range"),
        ({"user_signal": "both"}, "AFLConfig.user_signal='both' is not one of"),
        ({"focus_share": 0.0}, "AFLConfig.focus_share=0.0 is out of range"),
        ({"focus_share": 1.5}, "AFLConfig.focus_share=1.5 is out of range"),
        ({"max_tokens": 2.5}, "AFLConfig.max_tokens=2.5 is not an integer"),
        ({"ratios": ((0, 1),)}, "AFLConfig.ratios=.*a ratio needs positives"),
        ({"ratios": ((1, 0),)}, "AFLConfig.ratios=.*a ratio needs positives"),
        ({"window": 5}, "more positives than the window"),
        ({"n_candidates": 10, "window": 4, "ratios": ((1, 1),)}, "more positives"),
    ],
)
def test_config_rejects_bad_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AFLConfig(**kwargs)


def test_default_config_is_the_notebooks_at_each_profile(tiny):
    smoke = RunOptions(profile="smoke")
    assert entry.default_config(tiny, smoke) == AFLConfig(
        max_rounds=2, ratios=((1, 1),), nest_negatives=True, domain=tiny.domain
    )
    assert entry.default_config(tiny) == AFLConfig(nest_negatives=True, domain=tiny.domain)
    assert entry.default_config(tiny, RunOptions(profile="paper")).nest_negatives is False
    assert entry.tool_training(smoke) == baselines.TrainConfig(epochs=1, stopping_step=3)
    given = baselines.TrainConfig(epochs=7)
    assert entry.tool_training(RunOptions(training=given)) is given
    with pytest.raises(ValueError, match="unknown profile"):
        entry.default_config(tiny, RunOptions(profile="huge"))


def test_config_sizes():
    config = AFLConfig()
    assert config.focus_size == 5
    assert config.positives_for((1, 1)) == 10
    assert config.positives_for((1, 3)) == 5
    assert config.positives_for((1, 9)) == 2
    assert AFLConfig(n_candidates=10, focus_share=0.01).focus_size == 1
    # a window exactly as large as the biggest positive set is fine
    assert AFLConfig(n_candidates=10, window=5, ratios=((1, 1),)).positives_for((1, 1)) == 5


# ------------------------------------------------------------------------------ samples


def test_recent_histories_last_items_in_time_order_ties_by_file_order():
    frame = _frame(
        [
            ("u1", "x", 5),
            ("u2", "p", 2),
            ("u1", "y", 5),  # same second as x, later in the file
            ("u1", "z", 1),
            ("u1", "w", 9),
            ("u2", "q", 1),
        ]
    )
    histories = recent_histories(frame, ["u2", "u1"], 3)
    assert list(histories) == ["u2", "u1"], "keys follow the requested order"
    assert histories["u1"] == ("x", "y", "w")
    assert histories["u2"] == ("q", "p")
    assert recent_histories(frame, ["u1"], 1) == {"u1": ("w",)}
    with pytest.raises(ValueError, match="no history"):
        recent_histories(frame, ["u1", "ghost"], 3)


def _scored(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=[USER, ITEM, LABEL, POSITION, "score"])


def test_make_samples_prior_focus_and_ties():
    # rows deliberately not in display order; a and c tie at the top score
    scored = _scored(
        [
            ("u", "a", 0, 2, 5.0),
            ("u", "b", 1, 0, 3.0),
            ("u", "d", 0, 3, np.nan),
            ("u", "c", 0, 1, 5.0),
            ("u", "e", 0, 4, -1.0),
        ]
    )
    [sample] = make_samples(scored, {"u": ("h1", "h2")}, focus_size=3)
    assert sample.candidates == ("b", "c", "a", "d", "e"), "candidates in display order"
    assert sample.target == "b"
    assert sample.prior == "c", "a tie goes to the earlier display position"
    assert sample.focus == ("c", "a", "b")
    assert sample.history == ("h1", "h2")
    assert sample.scores["a"] == 5.0 and math.isnan(sample.scores["d"])


def test_make_samples_nan_is_never_the_prior_unless_all_are_nan():
    scored = _scored(
        [
            ("u", "n1", 0, 0, np.nan),
            ("u", "low", 1, 1, -50.0),
            ("u", "n2", 0, 2, np.nan),
            ("v", "m1", 0, 1, np.nan),
            ("v", "m2", 1, 0, np.nan),
            ("v", "m3", 0, 2, np.nan),
        ]
    )
    samples = make_samples(scored, {"u": ("h",), "v": ("h",)}, focus_size=2)
    assert [s.user for s in samples] == ["u", "v"]
    u, v = samples
    assert u.prior == "low" and u.focus[0] == "low"
    assert v.prior == "m2", "all NaN: the first displayed candidate"
    assert v.focus == ("m2", "m1")


@pytest.mark.parametrize("labels", [(0, 0, 0), (1, 1, 0)])
def test_make_samples_needs_exactly_one_positive(labels):
    scored = _scored([("u", f"i{k}", lab, k, 1.0) for k, lab in enumerate(labels)])
    with pytest.raises(ValueError, match="exactly one"):
        make_samples(scored, {"u": ("h",)}, focus_size=1)


# ------------------------------------------------------------------------------ user simulation


def test_user_sim_split_holds_out_each_users_last_window(tiny):
    window = 5
    split, held = user_sim_split(tiny, window)
    ordered = chronological_order(tiny.interactions)
    sequences = ordered.groupby(USER, sort=False)[ITEM].agg(list)
    assert set(held[USER]) == set(sequences.index), "every tiny user has >= 8 interactions"
    held_lists = held.groupby(USER, sort=False)[ITEM].agg(list)
    for user, items in sequences.items():
        assert held_lists[user] == items[-window:], "the window is the last items, in order"
        init = split.train.loc[split.train[USER] == user, ITEM].tolist()
        valid = split.valid.loc[split.valid[USER] == user, ITEM].tolist()
        test = split.test.loc[split.test[USER] == user, ITEM].tolist()
        assert init + valid + test == items[:-window], "the split is exactly init"
        assert test == [items[-window - 1]], "split test = init's last item"
    split_pairs = set(
        map(tuple, pd.concat([split.train, split.valid, split.test])[[USER, ITEM]].to_numpy())
    )
    assert not split_pairs & set(map(tuple, held.to_numpy())), "held-out rows never in the split"


def test_user_sim_split_drops_users_with_too_few_interactions(tiny):
    window = 10
    split, held = user_sim_split(tiny, window)
    counts = tiny.interactions.groupby(USER).size()
    kept = set(counts[counts >= window + 3].index)
    assert 0 < len(kept) < len(counts), "the tiny fixture has users on both sides"
    assert set(held[USER]) == kept
    assert set(split.train[USER]) | set(split.test[USER]) == kept
    assert (held.groupby(USER).size() == window).all()


def test_user_sim_split_boundary_on_a_hand_built_dataset():
    rows = [("keep", f"k{t}", t) for t in range(5)] + [("drop", f"d{t}", t) for t in range(4)]
    split, held = user_sim_split(_dataset(rows), window=2)
    assert set(held[USER]) == {"keep"}
    assert held[ITEM].tolist() == ["k3", "k4"]
    assert split.test[ITEM].tolist() == ["k2"] and split.valid[ITEM].tolist() == ["k1"]
    assert split.train[ITEM].tolist() == ["k0"]
    assert "drop" not in set(split.train[USER])


@pytest.fixture
def sim_data(tiny):
    split, held = user_sim_split(tiny, SIM.window)
    users = sorted(split.test[USER].unique())
    assert len(users) == 40
    return split, held, users


def _judged_items(judged, user, ratio, label):
    rows = judged[(judged[USER] == user) & (judged["ratio"] == ratio) & (judged[LABEL] == label)]
    return rows[ITEM].tolist()


def test_user_sim_sets_positives_negatives_and_step1(sim_data):
    split, held, users = sim_data
    sets = user_sim_sets(split, held, None, users, SIM)
    everything = pd.concat([split.train, split.valid, split.test, held])
    seen = everything.groupby(USER)[ITEM].agg(set)
    held_lists = held.groupby(USER)[ITEM].agg(list)
    target_of = split.test.set_index(USER)[ITEM]
    assert [s.user for s in sets.step1] == users
    assert list(sets.judged.columns) == [USER, "ratio", ITEM, LABEL]
    assert set(sets.judged["ratio"]) == {"1:1", "1:4"}
    for sample in sets.step1:
        user = sample.user
        candidates = list(sample.candidates)
        assert len(candidates) == SIM.n_candidates == len(set(candidates))
        assert sample.target == target_of[user]
        assert candidates.count(sample.target) == 1, "exactly one positive"
        others = set(candidates) - {sample.target}
        assert not others & seen[user], "step-1 negatives are outside the user's items"
        for ratio, n_pos in (("1:1", 5), ("1:4", 2)):
            positives = _judged_items(sets.judged, user, ratio, 1)
            negatives = _judged_items(sets.judged, user, ratio, 0)
            assert positives == held_lists[user][:n_pos], "the window's first p items, in order"
            assert len(negatives) == SIM.n_candidates - n_pos == len(set(negatives))
            assert not set(negatives) & seen[user], "negatives outside the user's items"
            assert not set(negatives) & set(candidates), "negatives outside step 1's candidates"


def test_user_sim_sets_are_seeded(sim_data):
    split, held, users = sim_data
    first = user_sim_sets(split, held, None, users, SIM)
    again = user_sim_sets(split, held, None, users, SIM)
    other = user_sim_sets(split, held, None, users, dataclasses.replace(SIM, seed=1))
    pd.testing.assert_frame_equal(first.judged, again.judged)
    assert first.step1 == again.step1
    assert not first.judged.equals(other.judged)
    assert [s.candidates for s in first.step1] != [s.candidates for s in other.step1]


def test_nested_negatives_are_prefixes_of_the_largest_set(sim_data):
    split, held, users = sim_data
    nested = dataclasses.replace(SIM, nest_negatives=True)
    sets = user_sim_sets(split, held, None, users, nested)
    for user in users:
        small = _judged_items(sets.judged, user, "1:1", 0)
        large = _judged_items(sets.judged, user, "1:4", 0)
        assert len(small) == 5 and len(large) == 8
        assert large[: len(small)] == small
    fresh = user_sim_sets(split, held, None, users, SIM)
    assert any(
        _judged_items(fresh.judged, u, "1:4", 0)[:5] != _judged_items(fresh.judged, u, "1:1", 0)
        for u in users
    ), "without nesting each ratio draws afresh"


def test_step1_candidates_round_trip(sim_data):
    split, held, users = sim_data
    raw = user_sim_sets(split, held, None, users, SIM)
    frame = step1_candidates(raw)
    assert list(frame.columns) == [USER, ITEM]
    assert list(map(tuple, frame.to_numpy())) == [
        (s.user, item) for s in raw.step1 for item in s.candidates
    ]
    # score each candidate by its item id, so the prior is the largest id of the list
    scores = frame.assign(score=frame[ITEM].map(lambda i: float(int(i))))
    scored = user_sim_sets(split, held, scores, users, SIM)
    pd.testing.assert_frame_equal(scored.judged, raw.judged)
    for before, after in zip(raw.step1, scored.step1, strict=True):
        assert after.candidates == before.candidates and after.target == before.target
        assert after.prior == max(after.candidates, key=int)
        assert after.focus == tuple(sorted(after.candidates, key=int, reverse=True)[:3])
        assert after.scores == {i: float(int(i)) for i in after.candidates}


# ------------------------------------------------------------------------------ prompts

HISTORY = ["Hist One", "Hist Two"]
CANDIDATES = ["Cand Alpha", "Cand Beta", "Cand Gamma"]
MEMORY = [RoundMemory(1, "Cand Alpha", "my own reason", "the user's complaint")]


def _user_text(messages) -> str:
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_recommend_messages_round_one():
    messages = recommend_messages(HISTORY, CANDIDATES, "Cand Beta", [], AFLConfig())
    text = _user_text(messages)
    assert "Hist One; Hist Two" in text
    assert "1. Cand Alpha\n2. Cand Beta\n3. Cand Gamma" in text
    assert "The other recommender system suggests: Cand Beta." in text
    assert '"choice"' in text and '"item"' not in text
    assert "did not find" not in text
    assert "movie" in messages[0]["content"]


def test_recommend_messages_with_memory():
    config = AFLConfig()
    text = _user_text(recommend_messages(HISTORY, CANDIDATES, "Cand Beta", MEMORY, config))
    assert "suggests" not in text, "the prior is shown in round 1 only"
    assert "did not find your last recommendation" in text
    memory_line = next(line for line in text.splitlines() if line.startswith("Round 1:"))
    assert "Cand Alpha" in memory_line and "my own reason" in memory_line
    assert "the user's complaint" in memory_line
    assert "1. Cand Alpha" in text and "Hist Two" in text

    every = AFLConfig(prior_every_round=True)
    text = _user_text(recommend_messages(HISTORY, CANDIDATES, "Cand Beta", MEMORY, every))
    assert "The other recommender system suggests: Cand Beta." in text

    silent = AFLConfig(feedback_text=False)
    text = _user_text(recommend_messages(HISTORY, CANDIDATES, "Cand Beta", MEMORY, silent))
    assert "the user's complaint" not in text
    assert "my own reason" in text and "rejected" in text


def test_recommend_messages_faithful_parsing_asks_for_the_title():
    text = _user_text(
        recommend_messages(HISTORY, CANDIDATES, None, [], AFLConfig(faithful_parsing=True))
    )
    assert '"item"' in text and '"choice"' not in text and "exact" in text
    assert "suggests" not in text, "no prior given, none shown"


def _loop(config, score=1.234, memory=()):
    return user_loop_messages(
        HISTORY,
        CANDIDATES,
        "Cand Gamma",
        "gamma is great",
        "Hint Item",
        ["Focus First", "Focus Second"],
        score,
        list(memory),
        config,
    )


def test_user_loop_messages_hint_mode():
    messages = _loop(AFLConfig(user_signal="hint"))
    system, text = messages[0]["content"], _user_text(messages)
    assert "Hint Item" in system and "Hist One; Hist Two" in system
    assert "Focus First; Focus Second" in text
    assert "Now the agent recommends: Cand Gamma. Its reason: gamma is great" in text
    assert "1.234" not in text + system and "score" not in text.casefold()
    assert "2. Cand Beta" in text


def test_user_loop_messages_score_mode():
    messages = _loop(AFLConfig(user_signal="score"))
    system, text = messages[0]["content"], _user_text(messages)
    assert "Reward model score: 1.234." in text
    assert "Focus First" not in text and "Hint Item" not in system
    for missing in (float("nan"), None):
        text = _user_text(_loop(AFLConfig(user_signal="score"), score=missing))
        assert "has no score" in text and "Reward model score:" not in text


def test_user_loop_messages_memory_only_when_enabled():
    line = "Round 1: the agent recommended Cand Alpha because my own reason; you rejected it"
    with_memory = _user_text(_loop(AFLConfig(user_memory_in_loop=True), memory=MEMORY))
    assert line in with_memory and "the user's complaint" in with_memory
    without = _user_text(_loop(AFLConfig(user_memory_in_loop=False), memory=MEMORY))
    assert "Round 1" not in without and "my own reason" not in without


def test_judge_messages_single_and_afl():
    config = AFLConfig()
    single = _user_text(judge_messages(HISTORY, "Judged Film", 0.5, None, config))
    assert "recommendation agent" not in single
    assert "The movie: Judged Film. Reward model score: 0.500." in single

    rounds = [
        RoundMemory(1, "Cand Alpha", "ra", "ua", accepted=False),
        RoundMemory(2, "Cand Beta", "rb", "ub", accepted=True),
    ]
    messages = judge_messages(HISTORY, "Judged Film", None, (CANDIDATES, rounds), config)
    text = _user_text(messages)
    assert "Cand Alpha; Cand Beta; Cand Gamma" in text
    assert "Round 1: it recommended Cand Alpha because ra; you rejected it because ua." in text
    assert "Round 2: it recommended Cand Beta because rb; you accepted it because ub." in text
    assert "has no score" in text
    assert "Hist One; Hist Two" in messages[0]["content"]


@pytest.mark.parametrize("with_dialogue", [False, True])
def test_judge_messages_item_comes_last(with_dialogue):
    dialogue = (CANDIDATES, MEMORY) if with_dialogue else None
    first = judge_messages(HISTORY, "Item One", 0.1, dialogue, AFLConfig())
    second = judge_messages(HISTORY, "Item Two", -2.0, dialogue, AFLConfig())
    assert first[0] == second[0], "same system prompt"
    a, b = _user_text(first), _user_text(second)
    cut = a.index("The movie: Item One")
    assert cut == b.index("The movie: Item Two")
    assert a[:cut] == b[:cut], "everything before the item line is shared"
    assert "Item One" not in a[:cut]


# ------------------------------------------------------------------------------ schemas, parsers


def test_every_prompt_follows_the_domain():
    """AFL's LastFM prompts say "music artist": no builder may keep MovieLens' "movie"."""
    config = AFLConfig(domain="music artist")
    built = [
        recommend_messages(HISTORY, CANDIDATES, "Cand Beta", [], config),
        recommend_messages(HISTORY, CANDIDATES, None, MEMORY, config),
        _loop(config, memory=MEMORY),
        _loop(dataclasses.replace(config, user_signal="score"), score=None),
        judge_messages(HISTORY, "Judged", None, (CANDIDATES, MEMORY), config),
        judge_messages(HISTORY, "Judged", 0.5, None, config),
    ]
    for messages in built:
        text = " ".join(m["content"] for m in messages)
        assert "music artist" in text
        assert "movie" not in text.casefold() and "film" not in text.casefold()


def test_recommend_schema():
    schema = recommend_schema(4, AFLConfig())
    assert list(schema["properties"]) == ["reason", "choice"]
    assert schema["properties"]["choice"]["enum"] == [1, 2, 3, 4]
    assert schema["required"] == ["reason", "choice"]
    jsonschema.validate({"reason": "r", "choice": 4}, schema)
    for bad in ({"reason": "r", "choice": 5}, {"reason": "r", "choice": 0}, {"choice": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)

    faithful = recommend_schema(4, AFLConfig(faithful_parsing=True))
    assert list(faithful["properties"]) == ["reason", "item"]
    assert faithful["properties"]["item"]["type"] == "string"
    jsonschema.validate({"reason": "r", "item": "Some Title"}, faithful)


def test_decision_schema():
    schema = decision_schema(AFLConfig())
    assert list(schema["properties"]) == ["reason", "decision"]
    assert schema["properties"]["decision"]["enum"] == ["yes", "no"]
    jsonschema.validate({"reason": "r", "decision": "no"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"reason": "r", "decision": "maybe"}, schema)


def test_parse_recommendation_by_index():
    cands = ["A", "B", "C"]
    assert parse_recommendation({"reason": " because ", "choice": 1}, cands) == (0, "because")
    assert parse_recommendation({"reason": "r", "choice": 3}, cands) == (2, "r")
    for choice in (0, 4, -1, True, "2", 2.0, None):
        index, reason = parse_recommendation({"reason": "r", "choice": choice}, cands)
        assert index is None and reason == "r", choice
    for data in (None, [1], "1", 1):
        assert parse_recommendation(data, cands) == (None, None)


def test_parse_recommendation_faithful():
    cands = ["The Matrix (1999)", "Heat (1995)"]
    assert parse_recommendation({"reason": "r", "item": "heat (1995)"}, cands, True) == (1, "r")
    assert parse_recommendation({"item": "  the   MATRIX (1999) "}, cands, True) == (0, None)
    for named in ("**Heat (1995)**", '"Heat (1995)"', "Heat", "Unknown (2000)", 2):
        assert parse_recommendation({"reason": "r", "item": named}, cands, True) == (None, "r")
    assert parse_recommendation({"reason": "r", "choice": 1}, cands, True) == (None, "r")


def test_parse_decision():
    assert parse_decision({"reason": " ok ", "decision": "yes"}) == (True, "ok")
    assert parse_decision({"reason": "r", "decision": "no"}) == (False, "r")
    assert parse_decision({"decision": " YES "}) == (True, None)
    for word in ("maybe", "yes!", "", 1, None, True):
        assert parse_decision({"reason": "r", "decision": word}) == (None, "r")
    for data in (None, ["yes"], "yes"):
        assert parse_decision(data) == (None, None)


# ------------------------------------------------------------------------------ loop results


def test_predictions_take_the_last_usable_proposal_up_to_the_limit():
    rounds = _rounds()
    one = predictions(rounds, 1).set_index(USER)
    assert one.loc["a", ITEM] == "a1" and one.loc["a", "hit"] == 0
    assert one.loc["c", ITEM] == "c1" and one.loc["c", "hit"] == 1
    assert one.loc["b", ITEM] is None and one.loc["b", "hit"] == 0
    three = predictions(rounds, 3).set_index(USER)
    assert three.loc["a", ITEM] == "a2" and three.loc["a", POSITION] == 0
    assert three.loc["c", ITEM] == "c2" and three.loc["c", POSITION] == 1, "failure keeps c2"
    assert list(three.index) == ["a", "b", "c"]


def test_hits_by_round():
    hits = hits_by_round(_rounds(), 5)
    assert list(hits.columns) == [USER, "limit", "hit"]
    table = hits.pivot(index=USER, columns="limit", values="hit")
    assert table.loc["a"].tolist() == [0, 1, 1, 1, 1], "accepted at round 2 keeps its item"
    assert table.loc["b"].tolist() == [0, 0, 0, 0, 0], "a failed round 1 predicts nothing"
    assert table.loc["c"].tolist() == [1, 0, 0, 0, 0]


def test_hit_rate_table():
    table = hit_rate_table({"A": [1, 0, 1, 1], "B": [0, 0]}, n_boot=200).set_index("method")
    assert table.loc["A", "mean"] == 0.75 and table.loc["A", "n"] == 4
    assert table.loc["A", "low"] <= 0.75 <= table.loc["A", "high"]
    assert table.loc["B", "mean"] == 0.0 == table.loc["B", "high"]
    assert set(table["metric"]) == {"HR@1"}


def test_stop_counts():
    counts = stop_counts(_rounds())
    assert list(counts.index) == list(STOPS)
    assert counts.to_dict() == {"accepted": 1, "limit": 0, "rec_failed": 2, "user_failed": 0}


# ------------------------------------------------------------------------------ simulation metrics


def _judgements() -> pd.DataFrame:
    rng = np.random.default_rng(4)
    rows = []
    for agent in ("User Agent", "AFL"):
        for ratio in ("1:1", "1:4"):
            for k in range(30):
                label = int(k % 3 == 0)
                predicted = [True, False, None][rng.integers(3)] if k % 4 else bool(label)
                rows.append((agent, "u", ratio, f"i{k}", label, predicted))
    return pd.DataFrame(rows, columns=["agent", USER, "ratio", ITEM, LABEL, "predicted"])


def _sklearn(labels, predicted) -> dict[str, float]:
    kw = {"zero_division": 0}
    return {
        "accuracy": accuracy_score(labels, predicted),
        "precision": precision_score(labels, predicted, **kw),
        "recall": recall_score(labels, predicted, **kw),
        "f1": f1_score(labels, predicted, **kw),
    }


@pytest.mark.parametrize("failures_as_wrong", [False, True])
def test_simulation_metrics_match_sklearn(failures_as_wrong):
    judgements = _judgements()
    table = simulation_metrics(judgements, n_boot=100, failures_as_wrong=failures_as_wrong)
    assert list(table.columns) == [
        "agent",
        "ratio",
        "metric",
        "mean",
        "low",
        "high",
        "n",
        "unanswered",
    ]
    assert set(table["agent"]) == {"User Agent", "AFL"}
    for (agent, ratio), group in judgements.groupby(["agent", "ratio"]):
        missing = group["predicted"].isna()
        if failures_as_wrong:
            predicted = [
                (label == 0) if m else bool(p)
                for label, p, m in zip(group[LABEL], group["predicted"], missing, strict=True)
            ]
            labels = group[LABEL].tolist()
        else:
            predicted = group.loc[~missing, "predicted"].astype(bool).tolist()
            labels = group.loc[~missing, LABEL].tolist()
        expected = _sklearn(labels, predicted)
        rows = table[(table["agent"] == agent) & (table["ratio"] == ratio)].set_index("metric")
        assert set(rows.index) >= set(expected)
        for metric, value in expected.items():
            assert rows.loc[metric, "mean"] == pytest.approx(value), (agent, ratio, metric)
            assert rows.loc[metric, "n"] == len(labels)
            assert rows.loc[metric, "unanswered"] == int(missing.sum()) > 0


def test_simulation_metrics_failures_as_wrong_lowers_accuracy():
    judgements = pd.DataFrame(
        {
            "agent": "AFL",
            USER: "u",
            "ratio": "1:1",
            ITEM: ["a", "b", "c", "d"],
            LABEL: [1, 0, 1, 0],
            "predicted": [True, False, None, None],
        }
    )
    kept = simulation_metrics(judgements, n_boot=50).set_index("metric")
    assert kept.loc["accuracy", "mean"] == 1.0 and kept.loc["accuracy", "n"] == 2
    assert kept.loc["accuracy", "unanswered"] == 2
    wrong = simulation_metrics(judgements, n_boot=50, failures_as_wrong=True).set_index("metric")
    assert wrong.loc["accuracy", "mean"] == 0.5 and wrong.loc["accuracy", "n"] == 4
    assert wrong.loc["recall", "mean"] == 0.5
    assert wrong.loc["precision", "mean"] == 0.5, "the missing negative becomes a yes"
    # nothing answered: no row
    empty = simulation_metrics(judgements.assign(predicted=None), n_boot=50)
    assert empty.empty and "unanswered" in empty.columns


def test_relative_gain():
    assert relative_gain([0.2, 0.3, 0.5], [0.1, 0.0, 0.25]) == pytest.approx(100.0)
    assert relative_gain([0.1, 0.3], [0.2, 0.2]) == pytest.approx((-50 + 50) / 2)
    assert math.isnan(relative_gain([0.5], [0.0]))
    with pytest.raises(ValueError, match="length"):
        relative_gain([0.1, 0.2], [0.1])


# ------------------------------------------------------------------------------ bias


def test_chosen_items():
    samples = [_sample("u", target_at=2, prior_at=0), _sample("v", target_at=4, prior_at=1)]
    method = pd.DataFrame({USER: ["u", "v"], ITEM: ["u-i3", None]})
    chosen = chosen_items(samples, {"AFL": method})
    assert list(chosen.columns) == ["method", USER, ITEM, "position"]
    got = {(m, u): (i, p) for m, u, i, p in chosen.itertuples(index=False)}
    assert got == {
        ("Ground truth", "u"): ("u-i2", 3),
        ("Tool (SASRec)", "u"): ("u-i0", 1),
        ("Ground truth", "v"): ("v-i4", 5),
        ("Tool (SASRec)", "v"): ("v-i1", 2),
        ("AFL", "u"): ("u-i3", 4),
    }
    # the frame predictions() returns (None for no prediction, NaN positions) also works
    chosen = chosen_items(samples, {"AFL": predictions(_rounds_for(samples), 1)})
    assert (chosen["method"] == "AFL").sum() == 1


def _rounds_for(samples):
    first = samples[0]
    return pd.DataFrame(
        [
            _row(first.user, 1, first.candidates[1], 1, 0, stop="limit"),
            _row(samples[1].user, 1, stop="rec_failed"),
        ]
    )


def test_bias_measures_percentiles():
    chosen = pd.DataFrame(
        {"method": "M", USER: ["u1", "u2", "u3", "u4"], ITEM: ["a", "b", "z", "c"], "position": 1}
    )
    popularity = pd.Series({"a": 5, "b": 2, "c": 2})
    measures = bias_measures(chosen, popularity, n_items=6)  # counts: 0 0 0 2 2 5
    assert measures["popularity"].tolist() == [5.0, 2.0, 0.0, 2.0]
    assert measures["pop_percentile"].tolist() == pytest.approx([500 / 6, 50.0, 0.0, 50.0])
    assert measures[ITEM].tolist() == chosen[ITEM].tolist()


def _bias_setup(n_users=40, n_candidates=10):
    rng = np.random.default_rng(0)
    samples = [
        _sample(f"u{k:02d}", n=n_candidates, target_at=int(rng.integers(n_candidates)))
        for k in range(n_users)
    ]
    loop = pd.DataFrame({USER: [s.user for s in samples], ITEM: [s.candidates[0] for s in samples]})
    single = pd.DataFrame(
        {
            USER: [s.user for s in samples],
            ITEM: [s.candidates[int(rng.integers(n_candidates))] for s in samples],
        }
    )
    items = [i for s in samples for i in s.candidates]
    popularity = pd.Series(rng.integers(0, 20, len(items)), index=items)
    return samples, loop, single, popularity


def test_bias_tests_detect_position_bias_and_not_identical_methods():
    samples, loop, single, popularity = _bias_setup()
    chosen = chosen_items(samples, {"AFL": loop, "Rec Agent": single})
    measures = bias_measures(chosen, popularity, n_items=len(popularity))
    tests = bias_tests(measures, loop="AFL", single="Rec Agent", n_boot=500).set_index("measure")
    assert set(tests.index) == {"popularity percentile", "mean position", "share at position 1"}
    assert tests.loc["mean position", "loop"] == 1.0
    assert tests.loc["share at position 1", "loop"] == 1.0
    assert bool(tests.loc["mean position", "amplifies"])
    assert bool(tests.loc["share at position 1", "amplifies"])
    assert (tests["n"] == len(samples)).all()

    same = chosen_items(samples, {"AFL": single, "Rec Agent": single})
    measures = bias_measures(same, popularity, n_items=len(popularity))
    tests = bias_tests(measures, loop="AFL", single="Rec Agent", n_boot=200)
    assert not tests["amplifies"].any()
    assert (tests["diff"] == 0).all()
    assert identical_choices(measures) == [
        f"AFL and Rec Agent chose the same item in all {len(samples)} samples (they coincide)"
    ]
    fig = bias_figure(measures, n_candidates=10, title="bias")
    try:
        assert "AFL and Rec Agent chose the same item" in fig._suptitle.get_text()
    finally:
        plt.close(fig)
    differ = bias_measures(chosen_items(samples, {"AFL": loop, "Rec Agent": single}), popularity,
                           n_items=len(popularity))  # fmt: skip
    assert not any("AFL and Rec Agent" in note for note in identical_choices(differ))


def test_bias_and_rounds_figures():
    samples, loop, single, popularity = _bias_setup(n_users=8)
    chosen = chosen_items(samples, {"AFL": loop, "Rec Agent": single})
    measures = bias_measures(chosen, popularity, n_items=len(popularity))
    fig = bias_figure(measures, n_candidates=10, title="bias")
    try:
        assert isinstance(fig, Figure)
        assert len(fig.axes) == 2
    finally:
        plt.close(fig)
    curve = pd.DataFrame(
        {
            "limit": [1, 2, 3],
            "mean": [0.2, 0.3, 0.35],
            "low": [0.1, 0.2, 0.25],
            "high": [0.3, 0.4, 0.45],
        }
    )
    fig = rounds_curve_figure(curve, {"SASRec": 0.25})
    try:
        assert isinstance(fig, Figure)
        labels = fig.axes[0].get_legend_handles_labels()[1]
        assert "SASRec" in labels
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------ teaching trace


def test_dialogue_trace():
    rounds = _rounds()
    titles = {i: f"Film {i}" for i in ("a1", "a2", "c1", "c2")}
    trace = dialogue_trace(rounds, "a", titles)
    assert "=== round 1" in trace and "=== round 2" in trace
    assert trace.index("=== round 1") < trace.index("=== round 2")
    assert "recommends #4 Film a1 [not the target]" in trace
    assert "recommends #1 Film a2 [TARGET]" in trace
    assert "user agent rejects" in trace and "user agent ACCEPTS" in trace
    assert trace.rstrip().endswith("-> dialogue ends: accepted")
    assert "no usable reply" in dialogue_trace(rounds, "b", titles)
    assert "dialogue ends: rec_failed" in dialogue_trace(rounds, "c", titles)
    with pytest.raises(KeyError):
        dialogue_trace(rounds, "nobody", titles)


def test_always_yes_floor_is_recall_one_and_precision_the_positive_share():
    rows = []
    for agent in ("User Agent", "AFL"):
        for ratio, positives in (("1:1", 10), ("1:9", 2)):
            for k in range(20):
                rows.append((agent, "u1", ratio, f"i{k}", int(k < positives), 0.0, False, ""))
    judged = pd.DataFrame(
        rows, columns=["agent", USER, "ratio", ITEM, LABEL, "score", "predicted", "reason"]
    )
    floor = always_yes_metrics(judged, n_boot=50).set_index(["ratio", "metric"])["mean"]
    assert set(always_yes_metrics(judged, n_boot=50)["agent"]) == {"Always yes"}
    assert floor[("1:1", "recall")] == 1.0 and floor[("1:9", "recall")] == 1.0
    assert floor[("1:1", "precision")] == pytest.approx(0.5)
    assert floor[("1:9", "precision")] == pytest.approx(0.1)
    assert floor[("1:1", "f1")] == pytest.approx(2 / 3)
    assert floor[("1:9", "f1")] == pytest.approx(2 * 0.1 / 1.1)
