"""Tests for recagents.data: loading, error messages, item text, splits and candidates.

Most tests use the committed tiny dataset (tests/fixtures/tiny, see make_tiny.py for the
edge cases it holds); a few check published facts of the real ml-100k shipped in the
recbole wheel (loads in ~0.1 s).
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagents.columns import GENRES, ITEM, LABEL, RATING, TIMESTAMP, TITLE, USER, YEAR
from recagents.data import datasets, load_dataset
from recagents.data.atomic import DatasetError, read_atomic
from recagents.data.datasets import (
    POSITION,
    Dataset,
    Split,
    candidate_sets,
    chronological_order,
    describe,
    item_text,
    leave_one_out,
    readable_title,
    resolve_dataset,
    sample_candidates,
    sample_users,
    subsample_users,
)

TIE_STAT = "users whose last two interactions tie in time"


@pytest.fixture(scope="module")
def ml100k() -> Dataset:
    return load_dataset("ml-100k")


@pytest.fixture(scope="module")
def ml100k_split(ml100k: Dataset) -> Split:
    return leave_one_out(ml100k)


@pytest.fixture
def tiny_split(tiny: Dataset) -> Split:
    return leave_one_out(tiny)


def _by_file_position(frame: pd.DataFrame) -> dict[str, list[tuple[float, int, str]]]:
    """{user: [(timestamp, file position, item), ...]} sorted by time, then file position."""
    rows: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for position, (user, item, stamp) in enumerate(
        frame[[USER, ITEM, TIMESTAMP]].itertuples(index=False)
    ):
        rows[user].append((stamp, position, item))
    return {user: sorted(history) for user, history in rows.items()}


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values([USER, ITEM, TIMESTAMP]).reset_index(drop=True)


def _held_out(frame: pd.DataFrame) -> dict[str, str]:
    return dict(zip(frame[USER], frame[ITEM], strict=True))


# ------------------------------------------------------------------------------ ml-100k


def test_ml100k_sizes(ml100k):
    assert ml100k.name == "ml-100k"
    assert len(ml100k.interactions) == 100_000
    assert ml100k.n_users == 943
    assert ml100k.n_items == 1_682
    assert ml100k.interactions.groupby(USER).size().min() >= 20
    assert len(ml100k.items) == 1_682


def test_ml100k_leave_one_out_sizes(ml100k_split):
    assert len(ml100k_split.valid) == 943
    assert len(ml100k_split.test) == 943
    assert len(ml100k_split.train) == 98_114
    assert ml100k_split.valid[USER].is_unique and ml100k_split.test[USER].is_unique


def test_ml100k_describe_counts_415_tied_users(ml100k):
    stats = describe(ml100k)
    assert stats["interactions"] == 100_000
    assert stats["users"] == 943 and stats["items"] == 1_682
    assert stats["interactions per user (min)"] == 20
    assert stats[TIE_STAT] == 415


def test_ml100k_tied_test_item_is_later_in_file_order(ml100k, ml100k_split):
    frame = ml100k.interactions
    at_last_time = frame[frame[TIMESTAMP] == frame.groupby(USER)[TIMESTAMP].transform("max")]
    tied = at_last_time.groupby(USER).size().loc[lambda s: s > 1].index
    assert len(tied) == 415
    # groupby keeps file order within a group: last() is the later row in the file.
    expected_test = at_last_time.groupby(USER)[ITEM].last()
    expected_valid = at_last_time[at_last_time[USER].isin(tied)].groupby(USER)[ITEM].nth(-2)
    test = _held_out(ml100k_split.test)
    valid = _held_out(ml100k_split.valid)
    assert test == expected_test.to_dict()
    assert {u: valid[u] for u in tied} == dict(
        zip(at_last_time.loc[expected_valid.index, USER], expected_valid, strict=True)
    )
    # The tie-break matters: ordering ties by item id would pick other test items.
    by_id = at_last_time.loc[at_last_time[USER].isin(tied)].groupby(USER)[ITEM].max()
    assert (by_id != expected_test.loc[tied]).any()


def test_ml100k_titles_are_not_unique(ml100k):
    titles = ml100k.items[TITLE]
    assert titles.duplicated(keep=False).sum() == 45
    # Even title + year + genres collide (duplicate catalogue entries), so ids matter.
    assert item_text(ml100k.items).duplicated().any()
    assert ml100k.items[ITEM].is_unique


def test_ml100k_no_trailing_article_left(ml100k):
    readable = ml100k.items[TITLE].map(readable_title)
    left = readable[readable.str.contains(r", (?:The|A|An)(?: \(|$)")]
    assert left.empty, left.tolist()


def test_resolve_embedded_name():
    name, folder = resolve_dataset("ml-100k")
    assert name == "ml-100k"
    assert (folder / "ml-100k.inter").is_file()


# ------------------------------------------------------------------------------ loading


def test_tiny_fixture_shape(tiny):
    per_user = tiny.interactions.groupby(USER).size()
    assert tiny.n_users == 40 and len(per_user) == 40
    assert per_user.between(8, 20).all()
    assert not tiny.interactions.duplicated([USER, ITEM]).any()
    assert tiny.n_items == 59 and len(tiny.items) == 60  # item 060 is never interacted with
    assert len(tiny.interactions) == 574


def test_tiny_fixture_popularity_is_skewed(tiny):
    stats = describe(tiny)
    assert stats["share of interactions on the top 20% items"] > 0.45
    counts = tiny.interactions[ITEM].value_counts()
    assert counts.iloc[0] >= 5 * counts.median()


def test_load_by_folder_or_inter_file(tiny_path, tiny):
    by_file = load_dataset(str(tiny_path / "tiny.inter"))
    assert tiny.name == by_file.name == "tiny"
    assert tiny.path == by_file.path == tiny_path
    pd.testing.assert_frame_equal(tiny.interactions, by_file.interactions)


def test_interactions_keep_file_order_and_string_ids(tiny_path, tiny):
    frame = tiny.interactions
    assert list(frame.columns) == [USER, ITEM, RATING, TIMESTAMP]
    assert frame[RATING].dtype == float and frame[TIMESTAMP].dtype == float
    assert frame[USER].map(type).eq(str).all() and frame[ITEM].map(type).eq(str).all()
    with (tiny_path / "tiny.inter").open() as handle:
        rows = list(csv.reader(handle, delimiter="\t"))[1:]
    assert frame[USER].tolist() == [r[0] for r in rows]
    assert frame[ITEM].tolist() == [r[1] for r in rows]  # zero-padded ids stay "003"
    assert frame[TIMESTAMP].tolist() == [float(r[3]) for r in rows]


def test_items_are_tidy(tiny):
    items = tiny.items.set_index(ITEM)
    assert list(tiny.items.columns[:4]) == [ITEM, TITLE, YEAR, GENRES]
    assert not {"movie_title", "release_year", "class"} & set(tiny.items.columns)
    assert str(items[YEAR].dtype) == "Int64"
    assert items.loc["001", TITLE] == "Usual Suspects, The"
    assert items.loc["001", YEAR] == 1995
    assert pd.isna(items.loc["008", YEAR])  # empty release year
    assert items.loc["009", GENRES] == ()  # empty genre field
    assert items.loc["010", GENRES] == ("Animation", "Children's", "Comedy")
    assert all(isinstance(g, tuple) for g in items[GENRES])


def test_users_keep_leading_zeros(tiny):
    users = tiny.users.set_index(USER)
    assert len(users) == 40
    assert users.loc["1", "zip_code"] == "02139"


def test_fingerprint_is_stable_and_content_based(tiny_path, tiny):
    again = load_dataset(tiny_path)
    assert re.fullmatch(r"[0-9a-f]{12}", tiny.fingerprint)
    assert again.fingerprint == tiny.fingerprint
    assert sample_users(tiny, 10).fingerprint != tiny.fingerprint


def test_repr_gives_sizes(tiny):
    assert repr(tiny) == "Dataset('tiny': 574 interactions, 40 users, 59 items)"


def test_read_atomic_types(tiny_path):
    frame = read_atomic(tiny_path / "tiny.item", required=(ITEM,))
    assert list(frame.columns) == [ITEM, "movie_title", "release_year", "class"]
    assert all(pd.api.types.is_object_dtype(dtype) for dtype in frame.dtypes)
    assert frame.loc[frame[ITEM] == "008", "release_year"].item() == ""


def test_load_without_item_and_user_files(tmp_path, tiny_path):
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "bare.inter").write_bytes((tiny_path / "tiny.inter").read_bytes())
    bare = load_dataset(folder)
    assert bare.items is None and bare.users is None
    assert bare.fingerprint == load_dataset(tiny_path).fingerprint


# ------------------------------------------------------------------------------ item text


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Usual Suspects, The", "The Usual Suspects"),
        ("American in Paris, An", "An American in Paris"),
        ("Few Good Men, A", "A Few Good Men"),
        (
            "Horseman on the Roof, The (Hussard sur le toit, Le)",
            "The Horseman on the Roof (Hussard sur le toit, Le)",
        ),
        ("Good, The Bad and The Ugly, The", "The Good, The Bad and The Ugly"),
        ("Double vie de Véronique, La (Double Life of Veronique, The)", None),
        ("Postino, Il", None),
        ("Toy Story", None),
        ("Them!", None),
        ("Theodore Rex", None),
    ],
)
def test_readable_title(title, expected):
    assert readable_title(title) == (title if expected is None else expected)


def test_readable_title_can_keep_article():
    assert readable_title("Usual Suspects, The", move_article=False) == "Usual Suspects, The"


def test_item_text_format(tiny):
    text = item_text(tiny.items)
    assert text.name == "text"
    assert text.index.tolist() == tiny.items[ITEM].tolist()
    assert text["001"] == "The Usual Suspects (1995) - Crime, Thriller"
    assert text["002"] == "The Horseman on the Roof (Hussard sur le toit, Le) (1995) - Drama"
    assert text["003"] == "An American in Paris (1951) - Comedy, Musical, Romance"
    assert text["008"] == "Lost Reel - Documentary"  # no year
    assert text["009"] == "Untitled Short (1999)"  # no genres


def test_item_text_options(tiny):
    plain = item_text(tiny.items, with_year=False, with_genres=False)
    assert plain["001"] == "The Usual Suspects"
    catalogue = item_text(tiny.items, move_article=False)
    assert catalogue["001"] == "Usual Suspects, The (1995) - Crime, Thriller"
    assert item_text(tiny.items, with_genres=False)["010"] == "Toy Story (1995)"
    assert (plain["006"], plain["007"]) == ("Hamlet", "Hamlet")  # same title, two ids


# ------------------------------------------------------------------------------ errors


def _inter(folder: Path, header: str, body: str = "1\t2\n", name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or folder.name}.inter"
    path.write_text(header + "\n" + body)
    return path


def _unknown_name(tmp_path):
    return "ml-1m", ["'ml-1m'", "ml-100k", "path"]


def _folder_without_inter(tmp_path):
    folder = tmp_path / "shop"
    _inter(folder, "user_id:token\titem_id:token", name="other")
    return folder, [str(folder), "shop.inter", "user_id:token", "item_id:token", "other.inter"]


def _empty_folder(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    return folder, [str(folder), "empty.inter", "user_id:token", "item_id:token"]


def _missing_folder(tmp_path):
    path = tmp_path / "nowhere" / "ds"
    return path, ["not found", str(path)]


def _missing_inter_file(tmp_path):
    path = tmp_path / "ds" / "ds.inter"
    return path, ["not found", str(path)]


def _missing_item_column(tmp_path):
    path = _inter(tmp_path / "ds", "user_id:token\trating:float", "1\t4\n")
    return path.parent, [str(path), "missing", "item_id", "found user_id, rating"]


def _untyped_header(tmp_path):
    path = _inter(tmp_path / "ds", "user_id:token\titem_id")
    return path.parent, [str(path), "'item_id'", "no type", "name:type"]


def _header_only(tmp_path):
    path = _inter(tmp_path / "ds", "user_id:token\titem_id:token", "")
    return path.parent, [str(path), "no interactions"]


def _bad_float(tmp_path):
    path = _inter(tmp_path / "ds", "user_id:token\titem_id:token\trating:float", "1\t2\tgood\n")
    return path.parent, [str(path), "cannot parse", "good"]


def _item_file_without_id(tmp_path):
    folder = _inter(tmp_path / "ds", "user_id:token\titem_id:token").parent
    (folder / "ds.item").write_text("movie_title:token_seq\nToy Story\n")
    return folder, [str(folder / "ds.item"), "item_id"]


def _plain_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    return path, [str(path), "neither"]


@pytest.mark.parametrize(
    "case",
    [
        _unknown_name,
        _folder_without_inter,
        _empty_folder,
        _missing_folder,
        _missing_inter_file,
        _missing_item_column,
        _untyped_header,
        _header_only,
        _bad_float,
        _item_file_without_id,
        _plain_file,
    ],
    ids=lambda case: case.__name__.strip("_"),
)
def test_load_errors_are_one_clear_line(tmp_path, case):
    target, fragments = case(tmp_path)
    with pytest.raises(DatasetError) as caught:
        load_dataset(target)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_ragged_row_error_is_one_line(tmp_path):
    folder = _inter(tmp_path / "ds", "user_id:token\titem_id:token", "1\t2\n3\t4\t5\n").parent
    with pytest.raises(DatasetError) as caught:
        load_dataset(folder)
    assert "\n" not in str(caught.value)


def test_load_current_directory(tiny_path, monkeypatch):
    monkeypatch.chdir(tiny_path)
    assert load_dataset(".").name == "tiny"


# ------------------------------------------------------------------------------ splits


def test_chronological_order_breaks_ties_by_file_order():
    frame = pd.DataFrame(
        {USER: ["b", "a", "a", "a"], ITEM: ["x", "z", "y", "w"], TIMESTAMP: [1.0, 5.0, 5.0, 2.0]}
    )
    ordered = chronological_order(frame)
    assert list(zip(ordered[USER], ordered[ITEM], strict=True)) == [
        ("a", "w"),
        ("a", "z"),
        ("a", "y"),
        ("b", "x"),
    ]


def test_leave_one_out_holds_out_last_two(tiny, tiny_split):
    expected = _by_file_position(tiny.interactions)
    assert _held_out(tiny_split.test) == {u: h[-1][2] for u, h in expected.items()}
    assert _held_out(tiny_split.valid) == {u: h[-2][2] for u, h in expected.items()}


def test_leave_one_out_tied_users_follow_file_order(tiny_split):
    test, valid = _held_out(tiny_split.test), _held_out(tiny_split.valid)
    assert (valid["1"], test["1"]) == ("050", "003")
    assert (valid["2"], test["2"]) == ("004", "051")
    assert (valid["3"], test["3"]) == ("005", "053")
    assert "052" in set(tiny_split.train.loc[tiny_split.train[USER] == "3", ITEM])


def test_tiny_describe_counts_tied_users(tiny):
    assert describe(tiny)[TIE_STAT] == 3  # users 1, 2, 3; user 4's tie is mid-history


def test_leave_one_out_partitions_interactions(tiny, tiny_split):
    parts = [tiny_split.train, tiny_split.valid, tiny_split.test]
    assert sum(map(len, parts)) == len(tiny.interactions)
    pd.testing.assert_frame_equal(
        _canonical(pd.concat(parts, ignore_index=True)), _canonical(tiny.interactions)
    )
    assert tiny_split.summary().loc["test", "users"] == 40


def test_leave_one_out_is_chronological(tiny_split):
    last_train = tiny_split.train.groupby(USER)[TIMESTAMP].max()
    valid = tiny_split.valid.set_index(USER)[TIMESTAMP]
    test = tiny_split.test.set_index(USER)[TIMESTAMP]
    assert (last_train <= valid.reindex(last_train.index)).all()
    assert (valid <= test.reindex(valid.index)).all()


def test_short_histories_stay_in_train():
    frame = pd.DataFrame(
        {
            USER: ["a", "a", "b", "c", "c", "c"],
            ITEM: ["1", "2", "1", "1", "2", "3"],
            TIMESTAMP: [1.0, 2.0, 1.0, 1.0, 2.0, 3.0],
        }
    )
    split = leave_one_out(frame)
    assert split.test[USER].tolist() == ["c"] and split.valid[USER].tolist() == ["c"]
    assert sorted(split.train[USER]) == ["a", "a", "b", "c"]
    assert split.name == "loo"


def test_leave_one_out_min_rating(tiny):
    split = leave_one_out(tiny, min_rating=4)
    liked = tiny.interactions[tiny.interactions[RATING] >= 4]
    parts = [split.train, split.valid, split.test]
    assert all((part[RATING] >= 4).all() for part in parts)
    pd.testing.assert_frame_equal(
        _canonical(pd.concat(parts, ignore_index=True)), _canonical(liked)
    )
    # User 5 has only two ratings >= 4: too few to hold out, so train only.
    assert "5" not in set(split.test[USER]) and "5" not in set(split.valid[USER])
    assert (split.train[USER] == "5").sum() == 2
    assert split.name == "loo-r4"
    assert split.fingerprint != leave_one_out(tiny).fingerprint


def test_min_rating_needs_rating_column(tiny):
    with pytest.raises(DatasetError, match="rating"):
        leave_one_out(tiny.interactions.drop(columns=RATING), min_rating=4)


def test_split_history_and_truth(tiny_split):
    assert tiny_split.history("valid") is tiny_split.train
    assert len(tiny_split.history("test")) == len(tiny_split.train) + len(tiny_split.valid)
    assert list(tiny_split.truth("test").columns) == [USER, ITEM]
    assert _held_out(tiny_split.truth("valid")) == _held_out(tiny_split.valid)


# ------------------------------------------------------------------------------ candidates


def test_candidates_one_positive_and_n_negatives(tiny, tiny_split):
    n = 9
    cands = sample_candidates(tiny_split, n, seed=0)
    assert list(cands.columns) == [USER, ITEM, LABEL, POSITION]
    assert len(cands) == 40 * (n + 1)
    assert cands.groupby(USER).size().eq(n + 1).all()
    assert cands.groupby(USER)[LABEL].sum().eq(1).all()
    positives = cands[cands[LABEL] == 1]
    assert _held_out(positives) == _held_out(tiny_split.test)
    assert not cands.duplicated([USER, ITEM]).any()


def test_negatives_are_unseen(tiny, tiny_split):
    for phase in ("test", "valid"):
        negatives = sample_candidates(tiny_split, 20, seed=3, phase=phase)
        negatives = negatives[negatives[LABEL] == 0]
        clash = negatives.merge(tiny.interactions, on=[USER, ITEM])
        assert clash.empty, clash
        assert set(negatives[ITEM]) <= set(tiny.interactions[ITEM])  # 060 never drawn


def test_valid_phase_uses_valid_item(tiny_split):
    cands = sample_candidates(tiny_split, 5, phase="valid")
    assert _held_out(cands[cands[LABEL] == 1]) == _held_out(tiny_split.valid)


def test_candidates_are_seeded(tiny_split):
    first = sample_candidates(tiny_split, 9, seed=7)
    pd.testing.assert_frame_equal(first, sample_candidates(tiny_split, 9, seed=7))
    assert not first.equals(sample_candidates(tiny_split, 9, seed=8))


def test_positions_are_a_permutation(tiny_split):
    n = 9
    cands = sample_candidates(tiny_split, n, seed=0)
    per_user = cands.groupby(USER)[POSITION].agg(sorted)
    assert all(positions == list(range(n + 1)) for positions in per_user)
    positive_at = cands.loc[cands[LABEL] == 1, POSITION]
    assert positive_at.nunique() >= 5 and (positive_at != 0).any()


def test_positive_position_is_spread_on_ml100k(ml100k_split):
    cands = sample_candidates(ml100k_split, 9, seed=0)
    counts = cands.loc[cands[LABEL] == 1, POSITION].value_counts()
    assert sorted(counts.index) == list(range(10))
    # 943 users over 10 positions: ~94 each, sd ~9; the bounds are ~5 sd wide.
    assert counts.between(50, 140).all(), counts


def test_popularity_negatives_favour_popular_items(ml100k_split):
    popularity = ml100k_split.train[ITEM].value_counts()
    top = set(popularity.index[: len(popularity) // 10])
    mean_pop, top_share = {}, {}
    for distribution in ("uniform", "popularity"):
        cands = sample_candidates(ml100k_split, 49, seed=0, distribution=distribution)
        negatives = cands.loc[cands[LABEL] == 0, ITEM]
        mean_pop[distribution] = negatives.map(popularity).fillna(0).mean()
        top_share[distribution] = negatives.isin(top).mean()
    # Observed: mean popularity ~51 vs ~136, top-10% share ~0.08 vs ~0.33.
    assert mean_pop["popularity"] > 2 * mean_pop["uniform"]
    assert top_share["popularity"] > 2 * top_share["uniform"]
    assert 0.05 < top_share["uniform"] < 0.12


def test_candidates_for_chosen_users(tiny_split):
    cands = sample_candidates(tiny_split, 4, users=["3", "12"])
    assert sorted(cands[USER].unique()) == ["12", "3"]
    assert len(cands) == 10


@pytest.mark.parametrize(
    ("n_negatives", "kwargs", "match"),
    [
        (59, {}, "needs more than 59 items"),
        (200, {}, "needs more than 59 items"),
        (45, {}, "fewer than 45 unseen items"),  # a user with 20 items has 39 unseen
        (0, {}, "at least 1"),
        (5, {"distribution": "zipf"}, "distribution"),
    ],
)
def test_candidate_arguments_are_checked(tiny_split, n_negatives, kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_candidates(tiny_split, n_negatives, **kwargs)


def test_candidate_sets_saved_and_reused(tiny_split, cache_dir, monkeypatch):
    first = candidate_sets(tiny_split, 9, seed=1)
    files = list((cache_dir / "candidates").glob("*.csv"))
    assert len(files) == 1
    assert files[0].name == f"{tiny_split.fingerprint}-test-1+9-uniform-seed1.csv"

    def no_sampling(*args, **kwargs):
        raise AssertionError("candidate_sets should read the saved file")

    monkeypatch.setattr(datasets, "sample_candidates", no_sampling)
    again = candidate_sets(tiny_split, 9, seed=1)
    pd.testing.assert_frame_equal(again, first)
    assert again[USER].map(type).eq(str).all() and again[ITEM].map(type).eq(str).all()
    assert set(again[ITEM]) <= set(pd.concat([tiny_split.history(), tiny_split.test])[ITEM])


def test_candidate_sets_keyed_by_split_and_seed(tiny, tiny_split, cache_dir):
    base = candidate_sets(tiny_split, 9, seed=1)
    liked = candidate_sets(leave_one_out(tiny, min_rating=4), 9, seed=1)
    reseeded = candidate_sets(tiny_split, 9, seed=2)
    assert len(list((cache_dir / "candidates").glob("*.csv"))) == 3
    assert not base.equals(liked) and not base.equals(reseeded)


def test_candidate_sets_explicit_cache_dir(tiny_split, cache_dir, tmp_path):
    other = tmp_path / "elsewhere"
    candidate_sets(tiny_split, 3, cache_dir=other)
    assert len(list((other / "candidates").glob("*.csv"))) == 1
    assert not (cache_dir / "candidates").exists()


def test_candidate_sets_round_trip_na_like_ids(cache_dir):
    histories = {"a": ["NA", "x1", "x2"], "b": ["x3", "x4", "null"], "c": ["x5", "x6", "x7"]}
    frame = pd.DataFrame(
        [(u, i, float(t)) for u, items in histories.items() for t, i in enumerate(items)],
        columns=[USER, ITEM, TIMESTAMP],
    )
    split = leave_one_out(frame)
    first = candidate_sets(split, 2)
    pd.testing.assert_frame_equal(candidate_sets(split, 2), first)


# ------------------------------------------------------------------------------ user samples


def test_sample_users_keeps_whole_histories(tiny):
    small = sample_users(tiny, 10, seed=0)
    assert small.name == "tiny-u10"
    assert small.n_users == 10
    kept = set(small.interactions[USER])
    full = tiny.interactions[tiny.interactions[USER].isin(kept)].reset_index(drop=True)
    pd.testing.assert_frame_equal(small.interactions, full)
    assert small.items is tiny.items and small.users is tiny.users


def test_sample_users_is_seeded(tiny):
    users = lambda seed: set(sample_users(tiny, 10, seed=seed).interactions[USER])  # noqa: E731
    assert users(0) == users(0)
    assert users(0) != users(1)


@pytest.mark.parametrize("n_users", [None, 40, 100])
def test_sample_users_all_returns_dataset(tiny, n_users):
    assert sample_users(tiny, n_users) is tiny


def test_sample_users_rejects_zero(tiny):
    with pytest.raises(ValueError, match="positive"):
        sample_users(tiny, 0)


def test_subsample_users(tiny_split):
    chosen = subsample_users(tiny_split, 10, seed=0)
    assert len(chosen) == len(set(chosen)) == 10
    assert chosen == sorted(chosen)
    assert all(type(u) is str for u in chosen)
    assert set(chosen) <= set(tiny_split.test[USER])
    assert chosen == subsample_users(tiny_split, 10, seed=0)
    assert chosen != subsample_users(tiny_split, 10, seed=1)
    assert subsample_users(tiny_split, None) == sorted(tiny_split.test[USER])
    assert subsample_users(tiny_split, 1000) == sorted(tiny_split.test[USER])


def test_describe_fields(tiny):
    stats = describe(tiny)
    assert stats.name == "tiny"
    assert stats["interactions"] == 574
    assert stats["density"] == pytest.approx(574 / (40 * 59))
    assert stats["interactions per user (min)"] == 8
    assert stats["mean rating"] == pytest.approx(tiny.interactions[RATING].mean())
    assert np.isfinite(stats.to_numpy(float)).all()
