"""RecBole baselines: training on our split, scoring candidates, recommending, caching."""

import sys
import threading

import numpy as np
import pytest

from recagents import baselines, locks
from recagents.columns import ITEM, LABEL, RANK, SCORE, USER
from recagents.data import datasets, load_dataset


@pytest.fixture(scope="module")
def small_split():
    dataset = datasets.sample_users(load_dataset("ml-100k"), 60, seed=1)
    return datasets.leave_one_out(dataset)


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def quick():
    return baselines.TrainConfig(epochs=2, stopping_step=2)


@pytest.mark.parametrize("name", baselines.MODELS)
def test_each_model_scores_candidates_and_recommends(name, small_split, module_cache, quick):
    model = baselines.train_baseline(
        name, small_split, quick, cache_dir=module_cache, progress=False
    )
    candidates = datasets.sample_candidates(small_split, 9, seed=0)
    ranked = model.score(candidates)
    assert list(ranked.columns[:4]) == [USER, ITEM, SCORE, RANK]
    assert len(ranked) == len(candidates)
    assert np.isfinite(ranked[SCORE]).all()
    ranks = ranked.groupby(USER)[RANK].agg(sorted)
    assert all(r == list(range(1, 11)) for r in ranks)

    top = model.recommend(k=20)
    assert (top.groupby(USER).size() == 20).all()
    seen = small_split.history("test").merge(top, on=[USER, ITEM])
    assert seen.empty, "recommendations must exclude the user's history"
    assert len(model.valid_curve) >= (0 if name == "Pop" else 1)


def test_second_training_call_is_a_cache_hit_with_identical_scores(small_split, tmp_path, quick):
    first = baselines.train_baseline("BPR", small_split, quick, cache_dir=tmp_path, progress=False)
    second = baselines.train_baseline("BPR", small_split, quick, cache_dir=tmp_path, progress=False)
    assert not first.from_cache and second.from_cache
    candidates = datasets.sample_candidates(small_split, 9, seed=3)
    assert first.score(candidates)[SCORE].tolist() == second.score(candidates)[SCORE].tolist()
    assert not list(tmp_path.glob("recbole/models/BPR-*/*.pth")), "no pickles are cached"
    (weights,) = tmp_path.glob("recbole/models/BPR-*/weights.pt")
    weights.write_bytes(weights.read_bytes()[:100])  # an interrupted write
    with pytest.warns(UserWarning, match="refused cached weights"):
        again = baselines.train_baseline("BPR", small_split, quick, cache_dir=tmp_path)
    assert not again.from_cache, "unreadable weights are retrained"
    assert again.score(candidates)[SCORE].tolist() == first.score(candidates)[SCORE].tolist()
    other = baselines.TrainConfig(epochs=1, stopping_step=2)
    third = baselines.train_baseline("BPR", small_split, other, cache_dir=tmp_path, progress=False)
    assert not third.from_cache, "a different configuration must retrain"


def test_a_model_another_process_is_training_is_waited_for(small_split, tmp_path, quick):
    first = baselines.train_baseline("Pop", small_split, quick, cache_dir=tmp_path)
    (workdir,) = tmp_path.glob("recbole/models/Pop-*[!k]")  # the folder, not its .lock
    results = []
    with locks.cache_lock(workdir):  # as if another notebook were training it now
        waiting = threading.Thread(
            target=lambda: results.append(
                baselines.train_baseline("Pop", small_split, quick, cache_dir=tmp_path)
            )
        )
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive() and not results, "it must wait for the lock"
    waiting.join(timeout=60)
    assert results and results[0].from_cache
    assert results[0].recommend(k=3).equals(first.recommend(k=3))


def test_pop_ranks_by_training_popularity(small_split, module_cache, quick):
    model = baselines.train_baseline(
        "Pop", small_split, quick, cache_dir=module_cache, progress=False
    )
    counts = small_split.train[ITEM].value_counts()
    top = model.recommend(k=1)
    history = small_split.history("test").groupby(USER)[ITEM].agg(set)
    for user, item in top[[USER, ITEM]].itertuples(index=False):
        seen = history[user]
        best_unseen = counts[~counts.index.isin(seen)].max()
        assert counts[item] == best_unseen


def test_foreign_command_line_options_do_not_reach_recbole(small_split, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["pytest", "--epochs=50", "--learning_rate=9"])
    config = baselines.TrainConfig(epochs=1, stopping_step=1)
    model = baselines.train_baseline("BPR", small_split, config, cache_dir=tmp_path, progress=False)
    assert len(model.valid_curve) == 1
    assert sys.argv == ["pytest", "--epochs=50", "--learning_rate=9"]


def test_training_leaves_no_files_in_the_working_directory(small_split, tmp_path, monkeypatch):
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    config = baselines.TrainConfig(epochs=1, stopping_step=1)
    baselines.train_baseline("BPR", small_split, config, cache_dir=tmp_path / "c", progress=False)
    assert list(workdir.iterdir()) == []


def test_random_scores_are_seeded_and_near_chance():
    split = datasets.leave_one_out(load_dataset("ml-100k"))
    candidates = datasets.sample_candidates(split, 9, seed=0)
    first = baselines.random_scores(candidates, seed=5)
    assert first.equals(baselines.random_scores(candidates, seed=5))
    positives = first.merge(candidates[candidates[LABEL] == 1], on=[USER, ITEM])
    assert abs(positives[RANK].mean() - 5.5) < 0.5


def test_bad_requests_fail_clearly(small_split, module_cache, quick):
    with pytest.raises(baselines.BaselineError, match="unknown baseline"):
        baselines.train_baseline("ItemKNN2", small_split)
    model = baselines.train_baseline(
        "Pop", small_split, quick, cache_dir=module_cache, progress=False
    )
    candidates = datasets.sample_candidates(small_split, 9, seed=0)
    candidates.loc[0, ITEM] = "no-such-item"
    with pytest.raises(baselines.BaselineError, match="unknown to the model"):
        model.score(candidates)
    users = candidates[USER].unique().tolist()
    with pytest.raises(baselines.BaselineError, match="no test interaction"):
        model.full_scores([*users[:2], "no-such-user"])
