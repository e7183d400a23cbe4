"""Strict reading of RecBole atomic files: each malformed-file probe of the hardening issue.

Every test builds a small bad dataset in ``tmp_path`` and checks the documented rule of
``recagents.data.atomic.read_atomic`` / ``load_dataset``: one clear error line naming the file
and the line, or rows dropped and counted in ``Dataset.report`` with one warning.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from recagents.columns import ITEM, RATING, TIMESTAMP, USER
from recagents.data import load_dataset
from recagents.data.atomic import DatasetError, read_atomic
from recagents.data.datasets import (
    DUPLICATE,
    EMPTY_ITEM,
    EMPTY_USER,
    MISSING_TIMESTAMP,
    Dataset,
    DatasetWarning,
    LoadReport,
    leave_one_out,
    sample_users,
)

HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float"
COLUMNS = "user_id, item_id, rating, timestamp"


def _rows() -> list[str]:
    """Three users with four items each, in time order; row k is file line k + 2."""
    return [f"{u}\ti{u}{k}\t4\t{100 * u + k}" for u in (1, 2, 3) for k in range(4)]


def _write(folder: Path, lines: list[str], suffix: str = ".inter", end: str = "\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{folder.name}{suffix}"
    path.write_bytes((end.join(lines) + end).encode())
    return path


def _load_quietly(target: Path) -> Dataset:
    """Load, failing the test on any DatasetWarning (nothing may be dropped)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DatasetWarning)
        return load_dataset(target)


def _error(target: Path, *fragments: str) -> str:
    with pytest.raises(DatasetError) as caught:
        load_dataset(target)
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


@pytest.fixture
def clean(tmp_path: Path) -> Dataset:
    return _load_quietly(_write(tmp_path / "clean", [HEADER, *_rows()]).parent)


# ------------------------------------------------------------------ 1. field counts, index


@pytest.mark.parametrize("header_tab", [False, True], ids=["data-lines", "every-line"])
def test_trailing_tab_on_every_line_is_ignored(tmp_path, clean, header_tab):
    lines = [HEADER + ("\t" if header_tab else ""), *(row + "\t" for row in _rows())]
    dataset = _load_quietly(_write(tmp_path / "tabs", lines).parent)
    pd.testing.assert_frame_equal(dataset.interactions, clean.interactions)
    assert len(leave_one_out(dataset).test) == 3
    assert dataset.report.dropped == {}


def test_trailing_tab_on_some_lines_names_the_line(tmp_path):
    rows = _rows()
    rows[2] += "\t"  # file line 4
    path = _write(tmp_path / "ds", [HEADER, *rows])
    hint = "trailing tab is ignored only when every data line has one"
    _error(
        path.parent, str(path), "line 4", "5 tab-separated field(s)", "expected 4", COLUMNS, hint
    )


@pytest.mark.parametrize(
    ("edit", "line", "found"),
    [
        (lambda rows: [r + "\tx" for r in rows], 2, 5),  # an extra column: once the index
        (lambda rows: rows[:5] + [rows[5].rsplit("\t", 1)[0]] + rows[6:], 7, 3),  # short
    ],
    ids=["extra-field", "short-line"],
)
def test_field_count_differing_from_header_names_file_and_line(tmp_path, edit, line, found):
    path = _write(tmp_path / "ds", [HEADER, *edit(_rows())])
    _error(path.parent, str(path), f"line {line} ", f"{found} tab-separated", COLUMNS)


def test_read_atomic_never_uses_a_column_as_index(tmp_path):
    path = _write(tmp_path / "ds", ["item_id:token\tmovie_title:token_seq", "7\tHamlet\t"], ".item")
    frame = read_atomic(path, (ITEM,))
    assert list(frame.columns) == [ITEM, "movie_title"]
    assert frame.index.tolist() == [0]
    assert frame.loc[0, ITEM] == "7" and frame.loc[0, "movie_title"] == "Hamlet"


def test_crlf_and_empty_lines_load_like_the_clean_file(tmp_path, clean):
    rows = _rows()
    path = _write(tmp_path / "crlf", [HEADER, *rows[:4], "", *rows[4:]], end="\r\n")
    dataset = _load_quietly(path.parent)
    pd.testing.assert_frame_equal(dataset.interactions, clean.interactions)


def test_line_numbers_count_skipped_empty_lines(tmp_path):
    rows = _rows()
    path = _write(tmp_path / "ds", [HEADER, "", rows[0], "", "1\tx\t4"])
    _error(path.parent, "line 5 has 3")


# ------------------------------------------------------------------ 2. encoding


@pytest.mark.parametrize("rows_before", [1, 2_000], ids=["first-8kb", "far-in"])
def test_non_utf8_byte_names_file_line_and_offset(tmp_path, rows_before):
    path = tmp_path / "ds" / "ds.inter"
    path.parent.mkdir()
    head = (HEADER + "\n" + "".join(f"1\ti{k}\t4\t{k}\n" for k in range(rows_before))).encode()
    path.write_bytes(head + b"2\tcaf\xe9\t4\t2\n")
    offset = len(head) + len(b"2\tcaf")
    line = f"line {rows_before + 2} "
    _error(path.parent, str(path), line, f"byte offset {offset}", "0xe9", "UTF-8")


def test_non_utf8_item_file_names_that_file(tmp_path):
    folder = _write(tmp_path / "ds", [HEADER, *_rows()]).parent
    latin = "item_id:token\tmovie_title:token_seq\n1\tCafé\n".encode("cp1252")
    (folder / "ds.item").write_bytes(latin)
    _error(folder, str(folder / "ds.item"), "line 2", "not valid UTF-8")


def test_byte_order_mark_is_ignored(tmp_path, clean):
    path = _write(tmp_path / "bom", [HEADER, *_rows()])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    pd.testing.assert_frame_equal(_load_quietly(path.parent).interactions, clean.interactions)


# ------------------------------------------------------------------ 3. duplicates


def test_duplicates_keep_the_earliest_and_are_reported(tmp_path):
    rows = _rows()
    rows += [
        "1\ti12\t2\t50",  # line 14: re-rating of i12 dated before the original (t=102)
        "1\ti10\t4\t100",  # line 15: exact copy of line 2
        "2\ti21\t5\t999",  # line 16: a later re-interaction, would have been the test item
    ]
    path = _write(tmp_path / "ds", [HEADER, *rows])
    with pytest.warns(DatasetWarning, match=r"dropped 3 of 15 rows: 3 with duplicate") as seen:
        dataset = load_dataset(path.parent)
    assert len(seen) == 1
    report = dataset.report
    assert report.dropped == {DUPLICATE: 3}
    assert report.lines[DUPLICATE] == (4, 15, 16)  # the later copies, in file order
    assert (report.rows_read, report.rows_dropped, report.rows_kept) == (15, 3, 12)
    frame = dataset.interactions
    assert not frame.duplicated([USER, ITEM]).any() and len(frame) == 12
    kept = frame[(frame[USER] == "1") & (frame[ITEM] == "i12")]
    assert kept[[RATING, TIMESTAMP]].values.tolist() == [[2.0, 50.0]]  # the earliest
    split = leave_one_out(dataset)
    history = split.history()
    assert split.test.set_index(USER)[ITEM].to_dict() == {"1": "i13", "2": "i23", "3": "i33"}
    assert split.test.merge(history, on=[USER, ITEM]).empty  # no test item in the history


def test_duplicates_without_timestamps_keep_the_first_in_file(tmp_path):
    lines = ["user_id:token\titem_id:token", "1\ta", "1\tb", "1\tc", "1\ta", "1\td"]
    with pytest.warns(DatasetWarning, match="1 with duplicate"):
        dataset = load_dataset(_write(tmp_path / "ds", lines).parent)
    assert dataset.interactions[ITEM].tolist() == ["a", "b", "c", "d"]
    assert dataset.report.lines == {DUPLICATE: (5,)}


# ------------------------------------------------------------------ 4. missing timestamps


def test_missing_timestamp_is_dropped_not_the_test_item(tmp_path):
    rows = [*_rows(), "1\tlate\t4\t"]  # line 14: would sort last and become the test item
    with pytest.warns(DatasetWarning, match=r"1 with missing timestamp \(line 14\)"):
        dataset = load_dataset(_write(tmp_path / "ds", [HEADER, *rows]).parent)
    assert dataset.report.dropped == {MISSING_TIMESTAMP: 1}
    assert "late" not in set(dataset.interactions[ITEM])
    assert dataset.interactions[TIMESTAMP].notna().all()
    assert leave_one_out(dataset).test.set_index(USER).loc["1", ITEM] == "i13"


def test_all_timestamps_missing_is_an_error_with_the_counts(tmp_path):
    path = _write(tmp_path / "ds", [HEADER, "1\ta\t4\t", "1\tb\t4\t"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DatasetWarning)  # the error says it; no extra warning
        _error(path.parent, str(path), "no interactions", "2 with missing timestamp")


def test_without_timestamp_column_file_order_decides(tmp_path):
    lines = ["user_id:token\titem_id:token", "1\tc", "1\ta", "1\tb"]
    dataset = _load_quietly(_write(tmp_path / "ds", lines).parent)
    split = leave_one_out(dataset)
    assert (split.valid[ITEM].item(), split.test[ITEM].item()) == ("a", "b")


# ------------------------------------------------------------------ 5. empty ids


def test_empty_ids_are_dropped_and_counted_per_reason(tmp_path):
    rows = [*_rows(), "\ti99\t4\t500", " \ti98\t4\t501", "2\t\t4\t502", "\t\t4\t503"]
    with pytest.warns(DatasetWarning, match="empty user_id") as seen:
        dataset = load_dataset(_write(tmp_path / "ds", [HEADER, *rows]).parent)
    assert len(seen) == 1 and "empty item_id" in str(seen[0].message)
    assert dataset.report.dropped == {EMPTY_USER: 3, EMPTY_ITEM: 1}
    assert dataset.report.lines == {EMPTY_USER: (14, 15, 17), EMPTY_ITEM: (16,)}
    assert dataset.n_users == 3 and len(dataset.interactions) == 12
    assert not dataset.interactions[[USER, ITEM]].isin(["", " "]).any().any()


# ------------------------------------------------------------------ 6. impossible ratings


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "-7", ""])
def test_impossible_rating_rejects_the_file(tmp_path, value):
    rows = _rows()
    rows[6] = f"2\ti22\t{value}\t202"  # file line 8
    rows[9] = "3\ti31\t-1\t301"  # line 11: a second bad row, counted in the message
    path = _write(tmp_path / "ds", [HEADER, *rows])
    _error(path.parent, str(path), "line 8:", f"rating {value!r}", "finite number >= 0", "2 such")


def test_infinite_timestamp_rejects_the_file(tmp_path):
    rows = _rows()
    rows[0] = "1\ti10\t4\tinf"
    _error(_write(tmp_path / "ds", [HEADER, *rows]).parent, "line 2:", "timestamp 'inf'")


def test_unparsable_float_names_the_line(tmp_path):
    rows = _rows()
    rows[3] = "1\ti13\tfour\t103"
    path = _write(tmp_path / "ds", [HEADER, *rows])
    _error(path.parent, str(path), "line 5:", "cannot parse 'four'", "rating:float")


# ------------------------------------------------------------------ 7. empty files


@pytest.mark.parametrize("content", [b"", b"\n\n", b"  \r\n"], ids=["0-bytes", "newlines", "blank"])
def test_empty_inter_file_says_so_and_gives_the_header(tmp_path, content):
    path = tmp_path / "ds" / "ds.inter"
    path.parent.mkdir()
    path.write_bytes(content)
    message = _error(path.parent, str(path), "is empty", "user_id:token, item_id:token")
    assert "no type" not in message


def test_empty_item_file_says_so(tmp_path):
    folder = _write(tmp_path / "ds", [HEADER, *_rows()]).parent
    (folder / "ds.item").write_bytes(b"")
    _error(folder, str(folder / "ds.item"), "is empty", "item_id:token")


def test_unknown_field_type_is_an_error(tmp_path):
    path = _write(tmp_path / "ds", ["user_id:token\titem_id:int", "1\t2"])
    _error(path.parent, str(path), "'item_id:int'", "token, token_seq, float, float_seq")


# ------------------------------------------------------------------ reports


def test_clean_files_report_nothing(clean, tiny_path):
    assert clean.report == LoadReport(path=clean.path / "clean.inter", rows_read=12)
    assert clean.report.summary().endswith("kept all 12 rows")
    tiny = _load_quietly(tiny_path)
    assert tiny.report.dropped == {} and tiny.report.rows_read == 574


def test_ml100k_loads_with_nothing_dropped():
    dataset = _load_quietly("ml-100k")
    assert dataset.report.rows_read == dataset.report.rows_kept == 100_000
    assert dataset.report.dropped == {}
    assert (dataset.n_users, dataset.n_items, len(dataset.items)) == (943, 1_682, 1_682)


def test_report_travels_with_user_samples_and_hand_built_datasets_have_none(clean):
    assert sample_users(clean, 2).report is clean.report
    assert Dataset("hand", Path("."), clean.interactions, None, None).report is None
