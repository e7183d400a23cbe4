"""recagents.data.released: AgentCF's CDs subsets and AFL's LastFM from the offline mirror."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagents import paper_numbers
from recagents.columns import GENRES, ITEM, TITLE, USER
from recagents.data import load_dataset
from recagents.data.datasets import Dataset, Split
from recagents.data.released import (
    LASTFM_PADDING,
    cds_item_memory_versions,
    cds_user_memories,
    lastfm_candidates,
    lastfm_picks_listed,
    load_cds,
    load_lastfm,
    sasrec_hit_at_1,
)
from recagents.data.released_pickles import load_frame, load_npy_object
from recagents.data.releases import MIRROR_ENV, URL_ENV, ReleaseError
from recagents.data.safepickle import UnsafePickleError
from recagents.papers.agentcf.subsets import RELEASED_SUBSETS

REAL_MIRROR = Path(__file__).resolve().parents[3] / "shared" / "mirror"

pytestmark = pytest.mark.skipif(not REAL_MIRROR.is_dir(), reason="no offline mirror")


@pytest.fixture(scope="module", autouse=True)
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The real mirror, one cache for the module, and no network (a closed loopback port)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(REAL_MIRROR))
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        patch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield REAL_MIRROR


@pytest.fixture(scope="module")
def dense() -> tuple[Dataset, Split]:
    return load_cds("dense")


@pytest.fixture(scope="module")
def lastfm() -> tuple[Dataset, pd.DataFrame, pd.DataFrame]:
    return load_lastfm()


# --------------------------------------------------------------------------- CDs


@pytest.mark.parametrize("variant", ["dense", "sparse"])
def test_cds_stats_match_the_released_subsets(variant: str) -> None:
    dataset, split = load_cds(variant)  # type: ignore[arg-type]
    expected = RELEASED_SUBSETS.set_index("subset").loc[f"CDs-{variant}"]
    targets = split.train[split.train.groupby(USER).cumcount() > 0]
    assert dataset.n_users == expected["users"] == split.test[USER].nunique()
    assert dataset.n_items == expected["items"]
    assert targets[ITEM].nunique() == expected["distinct_targets"]
    assert split.test[ITEM].isin(set(targets[ITEM])).sum() == expected["test_items_trained"]
    assert split.summary()["interactions"].tolist() == [600, 100, 100]
    assert dataset.domain == "CD" and dataset.name == f"cds-{variant}"


def test_cds_split_is_the_released_one(dense: tuple[Dataset, Split]) -> None:
    _, split = dense
    user = "2867"  # first row of each file: train 10410 -> 4233, valid ... -> 3510, test -> 1370
    assert split.train[split.train[USER] == user][ITEM].tolist()[:2] == ["10410", "4233"]
    assert split.valid.set_index(USER).loc[user, ITEM] == "3510"
    assert split.test.set_index(USER).loc[user, ITEM] == "1370"


def test_cds_titles_unescaped_and_categories_whole(dense: tuple[Dataset, Split]) -> None:
    items = dense[0].items
    assert items is not None
    row = items.set_index(ITEM).loc["33"]
    assert row[TITLE] == "Tom Petty & The Heartbreakers: Greatest Hits"
    assert row[GENRES] == ("Classic Rock", "Album-Oriented Rock (AOR)")
    assert row["category"] == "Classic Rock; Album-Oriented Rock (AOR)"
    assert not items[TITLE].str.contains("&amp;").any()
    assert not items[GENRES].map(lambda g: "Rock;" in g or "(AOR)" in g).any()


def test_named_datasets_delegate() -> None:
    dataset = load_dataset("cds-sparse")
    assert (dataset.name, dataset.n_users, dataset.domain) == ("cds-sparse", 100, "CD")


def test_user_memories() -> None:
    memories = cds_user_memories("dense")
    assert len(memories) == 100 and "[PAD]" not in set(memories[USER])
    assert memories.set_index(USER).loc["2867", "memory"].startswith("I have discovered")


def test_item_77_memory_versions() -> None:
    versions = cds_item_memory_versions(77)
    assert versions["version"].tolist() == list(range(6))
    assert versions["description"][0].startswith("The CD is called 'Tapestry'.")
    assert versions["description"].nunique() == 6
    for vector in versions["embedding"]:
        assert vector.shape == (1536,) and vector.dtype == np.float32
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3  # ada-002 vectors are unit


def test_item_file_outside_the_sample_is_named() -> None:
    with pytest.raises(ReleaseError, match=r"item_embeddings_12345\.npy is missing.*sample"):
        cds_item_memory_versions(12345)


def test_file_absent_from_the_mirror_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "empty"))
    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ReleaseError, match=r"missing: .*item_embeddings_77\.npy"):
        cds_item_memory_versions(77)


class _Evil:
    def __reduce__(self) -> tuple:
        return (os.system, ("echo pwned",))


def test_tampered_pickles_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "item_embeddings_1.npy"
    np.save(path, np.array({"a description": _Evil()}, dtype=object), allow_pickle=True)
    with pytest.raises(UnsafePickleError, match=r"item_embeddings_1\.npy.*system"):
        load_npy_object(path)
    frame = tmp_path / "Test_data.df"
    frame.write_bytes(pickle.dumps([_Evil()], protocol=5))
    with pytest.raises(UnsafePickleError, match=r"Test_data\.df.*system"):
        load_frame(frame)
    shape_bomb = tmp_path / "bomb.npy"
    np.save(shape_bomb, np.array({"x": np.empty(0, object)}, dtype=object), allow_pickle=True)
    data = shape_bomb.read_bytes()  # an empty object array that claims 10**8 elements
    state = b"K\x01K\x00\x85"  # the inner array's state: version 1, shape (0,)
    assert data.count(state) == 1
    shape_bomb.write_bytes(data.replace(state, b"K\x01J\x00\xe1\xf5\x05\x85"))
    with pytest.raises(UnsafePickleError, match=r"bomb\.npy.*needs 100000000 elements"):
        load_npy_object(shape_bomb)


# --------------------------------------------------------------------------- LastFM


def test_lastfm_samples_and_artists(lastfm: tuple[Dataset, pd.DataFrame, pd.DataFrame]) -> None:
    dataset, samples, predictions = lastfm
    assert len(samples) == len(predictions) == 122
    assert samples["history"].map(len).min() >= 3
    assert not samples["history"].map(lambda h: str(LASTFM_PADDING) in h).any()
    assert (samples["target_name"] == predictions["target_name"].str.strip()).all()
    titles = dataset.items.set_index(ITEM)[TITLE]  # type: ignore[union-attr]
    assert titles["0"] == "Morcheeba" and titles["2"] == "Café Del Mar"
    assert dataset.domain == "artist" and dataset.n_items == len(titles) == LASTFM_PADDING
    assert dataset.n_users == 976 and len(dataset.interactions) == 50_800


def test_lastfm_training_users_are_whole_sequences(
    lastfm: tuple[Dataset, pd.DataFrame, pd.DataFrame],
) -> None:
    first = lastfm[0].interactions.groupby(USER, sort=False)[ITEM].agg(list).iloc[0]
    assert first[:3] == ["0", "1", "2"]  # train_data.df rows 0-2: [] -> 0, [0] -> 1, [0, 1] -> 2


def test_sasrec_hit_at_1_against_the_release(
    lastfm: tuple[Dataset, pd.DataFrame, pd.DataFrame],
) -> None:
    result = sasrec_hit_at_1(lastfm[2])
    released = paper_numbers.table("AFL-T4-released")
    shipped = float(
        released.loc[released["measure"].str.startswith("SASRec prior"), "value"].iloc[0]
    )
    assert result["n"] == 122 and result["hits"] == round(result["hr@1"] * 122)
    assert round(result["hr@1"], 4) == shipped
    assert result["low"] < result["hr@1"] < result["high"]
    paper = paper_numbers.table("AFL-T4")
    base = float(paper.loc[paper["dataset"] == "LastFM", "Base"].iloc[0])
    assert result["low"] <= base <= result["high"]


def test_lastfm_candidates_are_the_released_evaluations_lists(
    lastfm: tuple[Dataset, pd.DataFrame, pd.DataFrame],
) -> None:
    """Re-drawn with the released seed, every list holds the pick SASRec made from it."""
    dataset, samples, predictions = lastfm
    drawn = lastfm_candidates(samples)
    lists = drawn.groupby("sample")[ITEM].agg(list)
    assert (
        len(lists) == 122 and lists.map(len).eq(20).all() and lists.map(set).map(len).eq(20).all()
    )
    by_sample = samples.set_index("sample")
    assert all(by_sample.loc[k, "target"] in lists[k] for k in lists.index)
    assert not any(set(by_sample.loc[k, "history"]) & set(lists[k]) for k in lists.index)
    titles = dataset.items.set_index(ITEM)[TITLE]  # type: ignore[union-attr]

    assert lastfm_picks_listed(drawn, predictions, titles) == 122
    # Another seed: only the hits (the pick is the target, always listed) and chance remain.
    other = lastfm_candidates(samples, seed=304)
    assert lastfm_picks_listed(other, predictions, titles) < 50
    from recagents.papers.afl.samples import released_samples

    built = released_samples(samples, drawn, predictions, titles.to_dict())
    assert len(built) == 122 and all(s.prior in s.candidates and s.focus == (s.prior,)
                                     for s in built)  # fmt: skip
    assert built[0].candidates == tuple(lists[0]) and built[0].target == samples["target"][0]
    with pytest.raises(ValueError, match="not among its candidates"):
        released_samples(samples, lastfm_candidates(samples, seed=304), predictions,
                             titles.to_dict())  # fmt: skip
