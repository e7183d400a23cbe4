"""Dataset files and cached split files that must not change results in silence (issue #34).

A NUL byte in an atomic file, a float beyond a double's range, and a benchmark file of the
model cache edited by hand: each is an error naming the file (and line), or is repaired
with a warning naming it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from recagents import baselines
from recagents.data import load_dataset
from recagents.data.atomic import DatasetError, read_atomic
from recagents.data.datasets import CandidateCacheWarning, Dataset, candidate_sets, leave_one_out

HEADER = b"user_id:token\titem_id:token\trating:float\ttimestamp:float\n"


def _rows() -> list[bytes]:
    """Three users with four items each; row k is file line k + 2."""
    return [b"%d\ti%d%d\t4\t%d" % (u, u, k, 100 * u + k) for u in (1, 2, 3) for k in range(4)]


def _dataset(folder: Path, rows: list[bytes], header: bytes = HEADER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{folder.name}.inter").write_bytes(header + b"\n".join(rows) + b"\n")
    return folder


def _error(target: Path, *fragments: str) -> str:
    with pytest.raises(DatasetError) as caught:
        load_dataset(target)
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.mark.parametrize("line", [2, 7, 13])
def test_a_nul_byte_in_a_field_names_file_and_line(tmp_path: Path, line: int) -> None:
    rows = _rows()
    user, item, rest = rows[line - 2].split(b"\t", 2)
    rows[line - 2] = b"\t".join([user, item + b"\x00-EXTRA", rest])
    folder = _dataset(tmp_path / "nul", rows)
    _error(folder, str(folder / "nul.inter"), f"line {line}", "NUL")


def test_a_nul_byte_in_the_header_or_an_item_file_is_named(tmp_path: Path) -> None:
    folder = _dataset(tmp_path / "hdr", _rows(), HEADER.replace(b"rating", b"rat\x00ing"))
    _error(folder, "hdr.inter", "line 1", "NUL")
    item_file = tmp_path / "items.item"
    item_file.write_bytes(b"item_id:token\ttitle:token_seq\ni10\tA\x00B\n")
    with pytest.raises(DatasetError, match=r"items\.item: line 2 .*NUL"):
        read_atomic(item_file, ("item_id",))


@pytest.mark.parametrize(
    "column, index, value",
    [("rating", 2, b"1e400"), ("timestamp", 3, b"1e400"), ("timestamp", 3, b"-1e400")],
)
def test_a_float_beyond_range_names_file_line_and_column(
    tmp_path: Path, column: str, index: int, value: bytes
) -> None:
    rows = _rows()
    fields = rows[4].split(b"\t")
    fields[index] = value
    rows[4] = b"\t".join(fields)
    folder = _dataset(tmp_path / "big", rows)
    _error(folder, str(folder / "big.inter"), "line 6", column, value.decode())


# --------------------------------------------------------------------------- model cache


def test_benchmark_files_record_their_checksums(tmp_path: Path, tiny: Dataset) -> None:
    folder = baselines.write_benchmark_files(leave_one_out(tiny), tmp_path / "b", None)
    sums = json.loads((folder / "data" / baselines.BENCHMARK_SUMS).read_text())
    assert sorted(sums) == ["data.test.inter", "data.train.inter", "data.valid.inter"]


@pytest.mark.parametrize("seq_len", [None, 5])
def test_a_hand_edited_benchmark_file_is_written_again(
    tmp_path: Path, tiny: Dataset, seq_len: int | None
) -> None:
    split = leave_one_out(tiny)
    folder = baselines.write_benchmark_files(split, tmp_path / "b", seq_len)
    train = folder / "data" / "data.train.inter"
    original = train.read_bytes()
    header, first, *rest = original.split(b"\n")
    train.write_bytes(b"\n".join([header, *([first] * 50), *rest]))  # one item counted 50x
    with pytest.warns(
        UserWarning,
        match=r"data\.train\.inter differs .*writing the benchmark files again from the split",
    ):
        baselines.write_benchmark_files(split, tmp_path / "b", seq_len)
    assert train.read_bytes() == original
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        baselines.write_benchmark_files(split, tmp_path / "b", seq_len)  # verified, reused


def test_a_missing_or_garbled_checksum_record_rewrites_the_files(
    tmp_path: Path, tiny: Dataset
) -> None:
    split = leave_one_out(tiny)
    folder = baselines.write_benchmark_files(split, tmp_path / "b", None)
    sums = folder / "data" / baselines.BENCHMARK_SUMS
    test_file = folder / "data" / "data.test.inter"
    original = test_file.read_bytes()
    sums.unlink()  # a cache written before checksums were recorded
    test_file.write_bytes(original[: len(original) // 2])
    baselines.write_benchmark_files(split, tmp_path / "b", None)
    assert test_file.read_bytes() == original and sums.is_file()
    sums.write_text("{not json")
    with pytest.warns(UserWarning, match="not a checksum record"):
        baselines.write_benchmark_files(split, tmp_path / "b", None)
    assert json.loads(sums.read_text())["data.test.inter"]


def test_a_hand_edited_train_file_does_not_change_what_pop_learns(
    tmp_path: Path, tiny: Dataset
) -> None:
    split = leave_one_out(tiny)
    first = baselines.train_baseline("Pop", split, cache_dir=tmp_path, progress=False)
    counts = first.model.item_cnt.view(-1).tolist()
    (train,) = tmp_path.rglob("data.train.inter")
    header, row, *rest = train.read_text().splitlines()
    train.write_text("\n".join([header, *[row] * 200, *rest]) + "\n")  # one item 200 times
    for weights in tmp_path.rglob("weights.pt"):
        weights.unlink()  # retrain from the (edited) files
    with pytest.warns(UserWarning, match=r"data\.train\.inter differs"):
        again = baselines.train_baseline("Pop", split, cache_dir=tmp_path, progress=False)
    assert again.model.item_cnt.view(-1).tolist() == counts


def test_a_hand_edited_candidate_file_is_drawn_again(tmp_path: Path, tiny: Dataset) -> None:
    split = leave_one_out(tiny)
    first = candidate_sets(split, 3, seed=1, cache_dir=tmp_path)
    saved = next((tmp_path / "candidates").glob("*.csv"))
    assert saved.with_name(saved.name + ".sha256").is_file()
    pd.testing.assert_frame_equal(candidate_sets(split, 3, seed=1, cache_dir=tmp_path), first)
    edited = saved.read_text().splitlines()
    fields = edited[1].split(",")
    fields[2] = "1" if fields[2] == "0" else "0"  # one candidate's label flipped by hand
    edited[1] = ",".join(fields)
    saved.write_text("\n".join(edited) + "\n")
    with pytest.warns(CandidateCacheWarning, match="SHA-256 mismatch"):
        again = candidate_sets(split, 3, seed=1, cache_dir=tmp_path)
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(candidate_sets(split, 3, seed=1, cache_dir=tmp_path), first)


def test_a_candidate_file_saved_without_a_checksum_is_drawn_again_quietly(
    tmp_path: Path, tiny: Dataset, recwarn: pytest.WarningsRecorder
) -> None:
    split = leave_one_out(tiny)
    first = candidate_sets(split, 3, seed=1, cache_dir=tmp_path)
    saved = next((tmp_path / "candidates").glob("*.csv"))
    saved.with_name(saved.name + ".sha256").unlink()
    saved.write_text("user_id,item_id,label\n")  # an older, unchecked file: not trusted
    pd.testing.assert_frame_equal(candidate_sets(split, 3, seed=1, cache_dir=tmp_path), first)
    assert not [w for w in recwarn if issubclass(w.category, CandidateCacheWarning)]
