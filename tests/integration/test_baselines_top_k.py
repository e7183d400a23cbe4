"""Tests for Baseline.user_scores and Baseline.top_k: recommending from the user id alone.

Models are trained on the tiny fixture for two epochs (seconds). The split is a seeded
per-row 40/30/30 split made here, so users have several validation and test items (the
case ``user_scores`` exists for). Expectations come from the split itself (Pop's counts)
or from ``user_scores`` (which items a correct top-k must hold), never from a past run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagents.baselines import Baseline, BaselineError, TrainConfig, train_baseline
from recagents.columns import ITEM, RANK, SCORE, USER
from recagents.data import load_dataset
from recagents.data.datasets import Split, leave_one_out

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
K = 10
TOL = 1e-6  # float32 scores differ in the last bits with the batch they are computed in
QUICK = TrainConfig(epochs=2, stopping_step=2)


# ------------------------------------------------------------------------------ fixtures


def _random_split(interactions: pd.DataFrame, seed: int = 7) -> Split:
    """Each row goes to train / valid / test with chance .4 / .3 / .3; held-out items known."""
    draw = np.random.default_rng(seed).random(len(interactions))
    part = np.digitize(draw, [0.4, 0.7])
    train = interactions[part == 0]
    known = interactions[ITEM].isin(set(train[ITEM]))
    return Split(
        train=train.reset_index(drop=True),
        valid=interactions[(part == 1) & known].reset_index(drop=True),
        test=interactions[(part == 2) & known].reset_index(drop=True),
        name=f"test-random-s{seed}",
    )


@pytest.fixture(scope="module")
def split() -> Split:
    return _random_split(load_dataset(TINY).interactions)


@pytest.fixture(scope="module")
def models(split, tmp_path_factory) -> dict[str, Baseline]:
    """Pop and BPR trained once for the module, in an isolated cache folder."""
    cache = tmp_path_factory.mktemp("cache")
    return {
        name: train_baseline(name, split, QUICK, cache_dir=cache, progress=False)
        for name in ("Pop", "BPR")
    }


@pytest.fixture(scope="module")
def users(split) -> list[str]:
    return sorted(split.train[USER].unique())


def _history(split: Split) -> pd.DataFrame:
    """What Agent4Rec masks: the user's train and test items (valid stays eligible)."""
    return pd.concat([split.train, split.test])[[USER, ITEM]]


def _pairs(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return set(frame[[USER, ITEM]].itertuples(index=False, name=None))


def _item_index(model: Baseline, items) -> np.ndarray:
    token2id = model.dataset.field2token_id[model.dataset.iid_field]
    return np.array([token2id[i] for i in items])


def _pop_counts(split: Split) -> pd.Series:
    return split.train[ITEM].value_counts()


# ------------------------------------------------------------------------------ user_scores


def test_the_split_has_many_held_out_items_per_user(split, models, users):
    assert split.valid.groupby(USER).size().max() > 1
    with pytest.raises(BaselineError):
        models["BPR"].full_scores(users[:3], phase="valid")  # one held-out row per user only
    scores = models["BPR"].user_scores(users[:3])
    assert scores.shape == (3, models["BPR"].dataset.item_num)


@pytest.mark.parametrize("name", ["Pop", "BPR"])
def test_user_scores_shape_padding_and_user_order(models, users, name):
    model = models[name]
    scores = model.user_scores(users)
    assert scores.shape == (len(users), model.dataset.item_num)
    assert np.isneginf(scores[:, 0]).all(), "column 0 is RecBole's padding item"
    assert np.isfinite(scores[:, 1:]).all()
    picked = [users[5], users[0], users[5]]
    again = model.user_scores(picked)
    np.testing.assert_allclose(again, scores[[5, 0, 5]], atol=TOL)
    small_batches = model.user_scores(users, batch_size=3)
    np.testing.assert_allclose(small_batches, scores, atol=TOL)


def test_bpr_user_scores_differ_between_users(models, users):
    scores = models["BPR"].user_scores(users[:2])
    assert not np.allclose(scores[0, 1:], scores[1, 1:]), "BPR is personalised"


def test_pop_user_scores_are_training_counts_over_the_maximum(split, models, users):
    model = models["Pop"]
    counts = _pop_counts(split)
    scores = model.user_scores(users[:4])
    items = model.dataset.field2id_token[model.dataset.iid_field][1:]
    expected = np.array([counts.get(item, 0) / counts.max() for item in items])
    for row in scores:
        np.testing.assert_allclose(row[1:], expected)


def test_user_scores_match_full_scores_on_a_leave_one_out_split(tiny, cache_dir):
    loo = leave_one_out(tiny)
    model = train_baseline("BPR", loo, TrainConfig(epochs=1, stopping_step=1), progress=False)
    assert any((cache_dir / "recbole").iterdir()), "trained inside the isolated cache"
    users = sorted(loo.test[USER].unique())[:8]
    np.testing.assert_allclose(model.user_scores(users), model.full_scores(users, "test"), atol=TOL)


@pytest.mark.parametrize("name", ["Pop", "BPR"])
def test_user_scores_reject_unknown_users(models, users, name):
    with pytest.raises(BaselineError, match="no-such-user"):
        models[name].user_scores([users[0], "no-such-user"])
    with pytest.raises(BaselineError, match="unknown"):
        models[name].top_k(["no-such-user"], K)


def test_user_scores_reject_a_sequential_model(tiny, cache_dir):
    model = train_baseline("SASRec", leave_one_out(tiny), QUICK, progress=False)
    user = sorted(model.split.test[USER].unique())[0]
    assert model.full_scores([user]).shape[0] == 1  # it can score histories
    with pytest.raises(BaselineError, match="SASRec"):
        model.user_scores([user])
    with pytest.raises(BaselineError, match="SASRec"):
        model.top_k([user], K)


# ------------------------------------------------------------------------------ top_k


@pytest.mark.parametrize("name", ["Pop", "BPR"])
def test_top_k_lists_have_k_ranked_items_with_falling_scores(split, models, users, name):
    top = models[name].top_k(users, K, exclude=_history(split))
    assert list(top.columns) == [USER, ITEM, SCORE, RANK]
    assert top[USER].drop_duplicates().tolist() == users, "users in the order asked"
    for _, group in top.groupby(USER, sort=False):
        assert len(group) == K
        assert group[RANK].tolist() == list(range(1, K + 1))
        assert group[ITEM].is_unique
        assert (np.diff(group[SCORE].to_numpy()) <= 0).all()
    assert np.isfinite(top[SCORE]).all()
    assert top[RANK].dtype.kind == "i"


@pytest.mark.parametrize("name", ["Pop", "BPR"])
def test_top_k_never_recommends_an_excluded_pair(split, models, users, name):
    exclude = _history(split)
    top = models[name].top_k(users, K, exclude=exclude)
    assert not _pairs(top) & _pairs(exclude)
    # Without the mask the same model does recommend some of those pairs.
    unmasked = models[name].top_k(users, K)
    assert _pairs(unmasked) & _pairs(exclude)


@pytest.mark.parametrize("name", ["Pop", "BPR"])
def test_top_k_holds_the_best_scored_eligible_items(split, models, users, name):
    model = models[name]
    exclude = _history(split)
    scores = model.user_scores(users)
    top = model.top_k(users, K, exclude=exclude)
    excluded = exclude.groupby(USER)[ITEM].agg(set)
    catalogue = model.dataset.field2id_token[model.dataset.iid_field][1:]
    for row, user in enumerate(users):
        listed = top[top[USER] == user]
        columns = _item_index(model, listed[ITEM])
        np.testing.assert_allclose(listed[SCORE].to_numpy(), scores[row, columns], atol=TOL)
        others = [
            i for i in catalogue if i not in set(listed[ITEM]) and i not in excluded.get(user, ())
        ]
        best_left = scores[row, _item_index(model, others)].max()
        assert listed[SCORE].min() >= best_left - TOL


def test_top_k_masks_per_user_only(split, models, users):
    model = models["Pop"]
    leader = _pop_counts(split).index[0]
    plain = model.top_k(users[:3], K)
    assert (plain[plain[RANK] == 1][ITEM] == leader).all()
    exclude = pd.DataFrame({USER: [users[0]], ITEM: [leader]})
    masked = model.top_k(users[:3], K, exclude=exclude)
    assert leader not in set(masked[masked[USER] == users[0]][ITEM])
    for user in users[1:3]:
        assert masked[masked[USER] == user][ITEM].tolist() == (
            plain[plain[USER] == user][ITEM].tolist()
        ), "another user's exclusion must not change this list"


def test_top_k_lists_follow_the_users_asked_in_their_order(split, models, users):
    model = models["BPR"]  # no ties, so a list does not depend on its row's tie-break noise
    exclude = _history(split)
    asked = [users[7], users[2], users[11]]
    top = model.top_k(asked, K, exclude=exclude)
    assert top[USER].drop_duplicates().tolist() == asked
    for user in asked:
        alone = model.top_k([user], K, exclude=exclude)
        assert top[top[USER] == user][ITEM].tolist() == alone[ITEM].tolist()


def test_top_k_ignores_exclusions_of_other_users_and_unknown_items(models, users):
    model = models["BPR"]
    plain = model.top_k(users[:2], K)
    exclude = pd.DataFrame(
        {USER: [users[5], users[0], "stranger"], ITEM: [plain[ITEM].iloc[0], "no-such-item", "x"]}
    )
    assert model.top_k(users[:2], K, exclude=exclude).equals(plain)
    assert model.top_k(users[:2], K, exclude=exclude.iloc[:0]).equals(plain)


def test_pop_top_k_follows_training_popularity(split, models, users):
    counts = _pop_counts(split)
    exclude = _history(split)
    excluded = exclude.groupby(USER)[ITEM].agg(set)
    top = models["Pop"].top_k(users, K, exclude=exclude)
    for user, group in top.groupby(USER):
        listed = counts.reindex(group[ITEM]).fillna(0).to_numpy()
        assert (np.diff(listed) <= 0).all(), "most popular first"
        np.testing.assert_allclose(group[SCORE].to_numpy(), listed / counts.max())
        eligible = counts[~counts.index.isin(excluded.get(user, set()))]
        expected = np.sort(eligible.to_numpy())[::-1][:K]
        np.testing.assert_array_equal(listed, expected)


def test_top_k_tie_break_is_seeded(models, users, split):
    model = models["Pop"]
    counts = _pop_counts(split)
    assert counts.iloc[:K].duplicated().any(), "Pop's top items include ties on tiny"
    first = model.top_k(users, K, seed=3)
    assert first.equals(model.top_k(users, K, seed=3))
    others = [model.top_k(users, K, seed=s) for s in (4, 5, 6)]
    assert any(not other[ITEM].equals(first[ITEM]) for other in others)
    for other in others:  # only tied items swap places: the scores by rank are the same
        np.testing.assert_array_equal(other[SCORE].to_numpy(), first[SCORE].to_numpy())


def test_top_k_breaks_ties_differently_per_user(models, users):
    top = models["Pop"].top_k(users, K, seed=0)
    lists = top.groupby(USER)[ITEM].agg(tuple)
    assert lists.nunique() > 1, "Pop's ties are not broken the same way for every user"


# ------------------------------------------------------------------------------ known defects


def test_top_k_longer_than_the_eligible_items_never_returns_excluded_ones(split, models, users):
    model = models["Pop"]
    user = users[0]
    exclude = _history(split)
    excluded = set(exclude[exclude[USER] == user][ITEM])
    k = model.dataset.item_num - 1 - len(excluded) + 2  # two more than can be recommended
    try:
        top = model.top_k([user], k, exclude=exclude)
    except BaselineError:
        return  # refusing is acceptable
    assert not set(top[ITEM]) & excluded
    assert "[PAD]" not in set(top[ITEM])


def test_top_k_masks_every_row_of_a_repeated_user(split, models, users):
    model = models["Pop"]
    exclude = _history(split)
    try:
        top = model.top_k([users[0], users[0]], K, exclude=exclude)
    except BaselineError:
        return  # refusing repeated users is acceptable
    assert not _pairs(top) & _pairs(exclude)


class _FixedScores:
    """A stand-in network whose every user gets the same given scores (float32)."""

    device = "cpu"

    def __init__(self, scores: np.ndarray):
        self.scores = scores

    def eval(self):
        return self

    def full_sort_predict(self, interaction):
        import torch

        n_users = len(next(iter(interaction.interaction.values())))
        return torch.tensor(np.tile(self.scores, (n_users, 1)), dtype=torch.float32).view(-1)


def test_top_k_keeps_distinct_small_scores_in_order(models, users):
    pop = models["Pop"]
    n_items = pop.dataset.item_num
    scores = (np.float32(1e-4) + np.arange(n_items, dtype=np.float32) * np.float32(1e-11)).astype(
        np.float32
    )
    assert np.unique(scores).size == n_items, "all scores are distinct in float32"
    stub = replace(pop, name="Stub", model=_FixedScores(scores))
    top = stub.top_k(users[:5], K)
    for _, group in top.groupby(USER):
        assert (np.diff(group[SCORE].to_numpy()) < 0).all()


def test_sequential_model_refuses_a_split_with_several_held_out_items(split, cache_dir):
    with pytest.raises(BaselineError, match="one valid and one test item per user"):
        train_baseline("SASRec", split, TrainConfig(epochs=1), progress=False)


def test_offline_accuracy_scores_test_items_among_unseen_ones(split, models):
    """Agent4Rec's offline check: Recall/NDCG@k on test, train and valid items excluded."""
    from recagents import metrics
    from recagents.papers.agent4rec.evaluate import offline_accuracy

    users = sorted(split.test[USER].unique())
    table = offline_accuracy(models["Pop"], split, users, k=5, n_boot=50).set_index("metric")
    seen = pd.concat([split.train, split.valid])
    ranked = models["Pop"].top_k(users, 5, exclude=seen, seed=101)
    expected = metrics.ranking_metrics(ranked, split.test, ks=(5,), metrics=("recall", "ndcg"))
    assert table.loc["recall@5", "mean"] == pytest.approx(expected["recall@5"].mean())
    assert table.loc["ndcg@5", "n"] == len(users)
    unmasked = models["Pop"].top_k(users, 5, seed=101)
    assert not _pairs(ranked) & _pairs(seen), "seen items must not be recommended"
    assert _pairs(unmasked) & _pairs(seen), "without the mask Pop would recommend seen items"
    random_table = offline_accuracy(None, split, users, k=5, n_boot=50).set_index("metric")
    assert 0.0 <= random_table.loc["recall@5", "mean"] <= 1.0
