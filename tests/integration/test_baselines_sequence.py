"""Baseline.sequence_scores and Baseline.item_index: a sequential model scores any history.

SASRec is trained briefly on the tiny fixture's leave-one-out split. Scoring a test user's
own history (train + valid items, time order, the last MAX_ITEM_LIST_LENGTH) must give the
same scores as RecBole's own test rows (``full_scores``); other histories and bad inputs are
checked against that anchor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagents import baselines
from recagents.baselines import BaselineError
from recagents.columns import ITEM, SCORE, USER
from recagents.data import datasets, load_dataset
from recagents.papers.afl.samples import tool_scores

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
QUICK = baselines.TrainConfig(epochs=2, stopping_step=2)
MAX_LEN = baselines.MODEL_DEFAULTS["SASRec"]["MAX_ITEM_LIST_LENGTH"]


@pytest.fixture(scope="module")
def split():
    return datasets.leave_one_out(load_dataset(TINY))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("sequence-cache")


@pytest.fixture(scope="module")
def sasrec(split, cache):
    return baselines.train_baseline("SASRec", split, QUICK, cache_dir=cache, progress=False)


@pytest.fixture(scope="module")
def histories(split):
    """Each test user's train items (split order = time order) then the valid item."""
    users = sorted(split.test[USER].unique())
    train = split.train.groupby(USER, sort=False)[ITEM].agg(list)
    valid = split.valid.set_index(USER)[ITEM]
    return {u: train[u] + [valid[u]] for u in users}


def test_own_history_scores_equal_full_scores(sasrec, histories):
    assert int(sasrec.model.max_seq_length) == MAX_LEN
    users = list(histories)
    assert any(len(h) > MAX_LEN for h in histories.values()), "some histories need cutting"
    got = sasrec.sequence_scores([histories[u][-MAX_LEN:] for u in users])
    expected = sasrec.full_scores(users, "test")
    assert got.shape == expected.shape == (len(users), sasrec.dataset.item_num)
    assert np.isneginf(got[:, 0]).all() and np.isneginf(expected[:, 0]).all()
    assert np.isfinite(got[:, 1:]).all()
    np.testing.assert_allclose(got[:, 1:], expected[:, 1:], atol=1e-5, rtol=0)
    # the whole history, uncut, scores the same: only the last MAX_LEN items count
    np.testing.assert_allclose(
        sasrec.sequence_scores([histories[u] for u in users])[:, 1:], got[:, 1:], atol=1e-6
    )


def test_a_long_history_scores_as_its_tail(sasrec, histories):
    user, history = max(histories.items(), key=lambda kv: len(kv[1]))
    known = [i for i in sasrec.dataset.field2token_id[sasrec.dataset.iid_field] if i != "[PAD]"]
    longer = known[:15] + history[-MAX_LEN:]
    assert len(longer) > MAX_LEN
    tail, full = sasrec.sequence_scores([history[-MAX_LEN:], longer])
    np.testing.assert_allclose(full[1:], tail[1:], atol=1e-6)
    # and a different (short) history scores differently: the history matters
    other = sasrec.sequence_scores([history[:2]])[0]
    assert not np.allclose(other[1:], tail[1:])


def test_results_do_not_depend_on_batching(sasrec, histories):
    batch = [h[-MAX_LEN:] for h in histories.values()]
    np.testing.assert_allclose(
        sasrec.sequence_scores(batch, batch_size=3)[:, 1:],
        sasrec.sequence_scores(batch)[:, 1:],
        atol=1e-6,
    )


def test_bad_histories_raise(sasrec, histories):
    good = next(iter(histories.values()))
    with pytest.raises(BaselineError, match="empty"):
        sasrec.sequence_scores([good, []])
    with pytest.raises(BaselineError, match="never saw"):
        sasrec.sequence_scores([[*good[:3], "no-such-item"]])


def test_a_general_model_cannot_score_histories(split, cache, histories):
    bpr = baselines.train_baseline(
        "BPR", split, baselines.TrainConfig(epochs=1, stopping_step=1), cache_dir=cache,
        progress=False,
    )  # fmt: skip
    with pytest.raises(BaselineError, match="histories"):
        bpr.sequence_scores([next(iter(histories.values()))])


def test_item_index(sasrec, split, histories):
    token2id = sasrec.dataset.field2token_id[sasrec.dataset.iid_field]
    items = ["001", "ghost", "002", "also-missing"]
    assert "001" in token2id and "002" in token2id
    columns = sasrec.item_index(items, unknown=-1)
    assert columns.dtype == np.int64
    assert columns.tolist() == [token2id["001"], -1, token2id["002"], -1]
    assert sasrec.item_index(["001", "002"]).tolist() == [token2id["001"], token2id["002"]]
    with pytest.raises(BaselineError, match="unknown"):
        sasrec.item_index(items)
    # the columns index the score matrices: they agree with the model's own candidate scores
    candidates = datasets.sample_candidates(split, 5, seed=0)
    scored = sasrec.score(candidates)
    users = list(histories)
    matrix = sasrec.full_scores(users, "test")
    row = {u: k for k, u in enumerate(users)}
    expected = matrix[scored[USER].map(row).to_numpy(), sasrec.item_index(scored[ITEM].tolist())]
    np.testing.assert_allclose(scored[SCORE].to_numpy(), expected, atol=1e-6)


def test_afl_tool_scores_use_sequence_scores_and_mark_unknown_items(sasrec, histories):
    users = list(histories)[:3]
    recent = {u: tuple(histories[u][-MAX_LEN:]) for u in users}
    frame = pd.DataFrame(
        [(u, item) for u in users for item in ("001", "ghost", "003")], columns=[USER, ITEM]
    ).iloc[::-1]  # any row order
    scored = tool_scores(sasrec, frame, recent)
    assert list(scored.columns) == [USER, ITEM, "score"]
    assert scored.loc[scored[ITEM] == "ghost", "score"].isna().all()
    matrix = sasrec.sequence_scores([list(recent[u]) for u in users])
    for user, item, score in scored[scored[ITEM] != "ghost"].itertuples(index=False):
        column = sasrec.item_index([item])[0]
        assert score == pytest.approx(matrix[users.index(user), column], abs=1e-9)
