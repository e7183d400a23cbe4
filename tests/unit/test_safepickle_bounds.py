"""recagents.data.safepickle: what a tiny file may cost to load is bounded by its size.

The bombs of issue #34 are written opcode by opcode: length prefixes that claim more bytes
than the file holds, and memo references that make a few hundred bytes describe an
exponentially large tree (as a dict key, or when converted to plain lists). Each must be
refused in milliseconds, naming the file; a failure (a regression) runs under an
address-space cap so that it cannot take the machine's memory.
"""

import contextlib
import gc
import io
import pickle
import re
import resource
import struct
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recagents.data import safepickle
from recagents.data.released_pickles import load_frame, load_npy_object
from recagents.papers.agent4rec.recorded import load_official_pickle

# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _memory_cap(extra: int = 256 << 20) -> Iterator[None]:
    """Make allocations beyond ``extra`` more bytes of address space fail, while inside."""
    status = Path("/proc/self/status")
    if not sys.platform.startswith("linux") or not status.exists():
        yield
        return
    size = int(re.search(r"VmSize:\s+(\d+) kB", status.read_text()).group(1)) << 10
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + extra if hard == resource.RLIM_INFINITY else min(size + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _refused(
    load: Callable[[], Any], match: str, seconds: float = 0.5, mib: int = 16
) -> pytest.ExceptionInfo:
    """Assert ``load()`` raises UnsafePickleError matching ``match``, quickly and small.

    The cyclic garbage collector is paused while timing: inside a full test session a
    collection of everything earlier tests left behind can take longer than the load itself
    (a CI run measured 0.63 s here, 0.02 s alone), which says nothing about the loader.
    """
    gc.collect()
    gc.disable()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with _memory_cap(), pytest.raises(safepickle.UnsafePickleError, match=match) as info:
            load()
    finally:
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        gc.enable()
    assert elapsed < seconds, f"took {elapsed:.2f} s"
    assert peak < mib << 20, f"peak {peak:,} bytes"
    assert len(str(info.value)) < 1000
    return info


def _length_bomb(opcode: bytes, fmt: str, length: int) -> bytes:
    return b"\x80\x05" + opcode + struct.pack(fmt, length) + b"."


def _tuple_key(levels: int) -> bytes:
    """``{t: None}`` with ``t_k = (t_k-1, t_k-1)``, ``t_0 = ()``: a tree of 2**levels nodes."""
    out = b"\x80\x02}q\x00)q\x010"
    for k in range(1, levels + 1):
        out += b"h" + bytes([k]) + b"h" + bytes([k]) + b"\x86q" + bytes([k + 1]) + b"0"
    return out + b"h" + bytes([levels + 1]) + b"Ns."


def _shared_lists(levels: int) -> bytes:
    """``L_k = [L_k-1, L_k-1]``, ``L_0 = [1, 2.5]``."""
    out = b"\x80\x02]q\x00(K\x01G@\x04\x00\x00\x00\x00\x00\x00e"
    for k in range(levels):
        out += b"(h" + bytes([k]) + b"h" + bytes([k]) + b"lq" + bytes([k + 1])
    return out + b"."


def _npy(payload: bytes) -> bytes:
    """A version 1.0 ``.npy`` header of a 0-d object array, then ``payload``."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "|O", "fortran_order": False, "shape": ()}
    )
    return header.getvalue() + payload


# --------------------------------------------------------------------------- length prefixes

_GIB = 1 << 30
_LENGTH_BOMBS = [
    ("BYTEARRAY8", b"\x96", "<Q", _GIB),  # issue #34: zero-filled 1 GiB in 0.5 s
    ("BYTEARRAY8", b"\x96", "<Q", (1 << 64) - 1),
    ("BINBYTES8", b"\x8e", "<Q", _GIB),
    ("BINUNICODE8", b"\x8d", "<Q", _GIB),
    ("LONG4", b"\x8b", "<i", (1 << 31) - 1),
    ("LONG4", b"\x8b", "<i", -1),
    ("BINSTRING", b"T", "<i", (1 << 31) - 1),
    ("BINBYTES", b"B", "<I", (1 << 32) - 1),
    ("BINUNICODE", b"X", "<I", (1 << 32) - 1),
    ("FRAME", b"\x95", "<Q", _GIB),
]


@pytest.mark.parametrize(("name", "opcode", "fmt", "length"), _LENGTH_BOMBS)
def test_a_length_beyond_the_input_is_refused_before_reading(name, opcode, fmt, length):
    bomb = _length_bomb(opcode, fmt, length)
    assert len(bomb) <= 12
    _refused(lambda: safepickle.load(bomb), rf"<bytes>: refusing {name}: its length prefix")


def test_a_length_beyond_the_current_frame_is_refused():
    inner = b"\x8e" + struct.pack("<Q", _GIB) + b"."
    bomb = b"\x80\x05\x95" + struct.pack("<Q", len(inner)) + inner
    _refused(lambda: safepickle.load(bomb), "BINBYTES8: its length prefix")


def test_a_truncated_string_is_not_read_short():
    cut = pickle.dumps("x" * 1000, protocol=3)[:-200]
    with pytest.raises(safepickle.UnsafePickleError, match="BINUNICODE: its length prefix"):
        safepickle.load(cut)
    short = b"\x80\x04\x8c\xc8" + b"x" * 100  # SHORT_BINUNICODE of 200, 100 there
    with pytest.raises(pickle.UnpicklingError, match="not a readable pickle.*cut short"):
        safepickle.load(short)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_every_length_prefixed_value_still_loads(protocol):
    value = [b"x" * 300, b"y", "é" * 300, "z", 2**2000, -(2**70), 7, (b"", "")]
    if protocol >= 5:
        value.append(bytearray(b"ab" * 200))
    payload = pickle.dumps(value, protocol=protocol)
    assert safepickle.load(payload, allow=safepickle.PLAIN) == value


def test_an_npy_bytearray_bomb_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "bomb.npy"
    path.write_bytes(_npy(_length_bomb(b"\x96", "<Q", _GIB)[:-1] + b"."))
    assert path.stat().st_size == 140
    _refused(lambda: load_npy_object(path), r"bomb\.npy: refusing BYTEARRAY8: its length prefix")


def test_a_frame_bomb_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "Test_data.df"
    path.write_bytes(_length_bomb(b"\x96", "<Q", _GIB))
    started = time.perf_counter()
    with _memory_cap(), pytest.raises(pickle.UnpicklingError, match=r"Test_data\.df: not a"):
        load_frame(path)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("cut", [3, 20, 100])
def test_a_truncated_npy_names_the_file(tmp_path, cut):
    path = tmp_path / "item_embeddings_1.npy"
    path.write_bytes(_npy(pickle.dumps(np.array({"a": 1}, dtype=object)))[:cut])
    with pytest.raises(pickle.UnpicklingError, match=r"item_embeddings_1\.npy: not a readable"):
        load_npy_object(path)


# --------------------------------------------------------------------------- shared references


def test_shared_tuples_as_a_dict_key_are_refused_quickly(tmp_path):
    # 27 levels (230 bytes): 2**28 nodes to hash, 2 s before the fix; each level doubles it.
    path = tmp_path / "key.pkl"
    path.write_bytes(_tuple_key(27))
    assert len(path.read_bytes()) == 230
    _refused(lambda: safepickle.load(path), r"key\.pkl: refusing a tuple: it would expand")
    path.write_bytes(_tuple_key(120))
    _refused(lambda: safepickle.load(path), r"key\.pkl: refusing a tuple: it would expand")


def test_shared_lists_are_refused_before_conversion_to_plain(tmp_path):
    # 20 levels: before the fix the plain conversion took 2.7 s and 280 MB (22: 15 s, 860 MB).
    path = tmp_path / "lists.pkl"
    path.write_bytes(_shared_lists(20))
    assert len(path.read_bytes()) < 200
    match = r"lists\.pkl: refusing a list: it would expand to [\d,]+ objects"
    _refused(lambda: load_official_pickle(path, plain=True), match)
    _refused(lambda: safepickle.load(path), match)


def test_hashing_work_is_budgeted_across_containers():
    # One shared tuple of 8,191 nodes, the key of 40 dicts (each dropped at once): every
    # dict is within the size limit (WORK_SLACK + 8 per byte), hashing them all is not.
    levels = 12
    tuple_ops = b")q\x010" + b"".join(
        b"h" + bytes([k]) + b"h" + bytes([k]) + b"\x86q" + bytes([k + 1]) + b"0"
        for k in range(1, levels + 1)
    )
    one_dict = b"}h" + bytes([levels + 1]) + b"Ns0"  # {t: None}, popped
    bomb = b"\x80\x02" + tuple_ops + one_dict * 40 + b"N."
    assert pickle.loads(bomb) is None
    _refused(lambda: safepickle.load(bomb, allow=safepickle.PLAIN), "dict key: hashing it takes")
    assert safepickle.load(bomb[: -len(one_dict) * 36 - 2] + b"N.") is None  # 4 dicts fit


def test_equal_hashes_are_charged_as_the_comparisons_they_cost():
    # Every key k * (2**61 - 1) hashes to 0: each insertion compares with all before it.
    # 20,000 keys (220 kB) took 4 s before the fix.
    keys = b"".join(
        b"\x8a\x0b" + (k * (2**61 - 1)).to_bytes(11, "little", signed=True) + b"N"
        for k in range(1, 20_001)
    )
    bomb = b"\x80\x04}(" + keys + b"u."
    _refused(lambda: safepickle.load(bomb, allow=safepickle.PLAIN), "dict keys: hashing", 1.0)


def test_reference_cycles_and_growth_after_placement_are_refused():
    loop: list[Any] = []
    loop.append(loop)
    table: dict[str, Any] = {}
    table["self"] = table
    for value in (loop, table, [[loop]]):
        with pytest.raises(safepickle.UnsafePickleError, match="reference cycle"):
            safepickle.load(pickle.dumps(value, protocol=4))
    # L = []; M = (L, L); then 1000 items appended to L: M would grow unseen.
    grown = b"\x80\x04]\x94h\x00h\x00\x86\x940(" + b"K\x01" * 1000 + b"e0h\x01."
    with pytest.raises(safepickle.UnsafePickleError, match="APPENDS: the container already"):
        safepickle.load(grown)


def test_deep_nesting_is_refused(tmp_path):
    path = tmp_path / "deep.pkl"
    path.write_bytes(b"\x80\x04" + b"]" * 10_000 + b"a" * 9_999 + b".")
    match = r"deep\.pkl: refusing APPEND: it nests containers 101 deep, more than MAX_DEPTH=100"
    _refused(lambda: load_official_pickle(path, plain=True), match)
    fine = [[[[[[1]]]]]] * 3
    assert safepickle.load(pickle.dumps(fine)) == fine


def test_refusals_describe_huge_objects_briefly():
    # A "shape" of 40 references to one 1 MB string: its repr alone would be 40 MB.
    text = "x" * 1_000_000
    payload = (
        b"\x80\x04\x8c\x15numpy.core.multiarray\x8c\x0c_reconstruct\x93"
        + b"\x8c\x05numpy\x8c\x07ndarray\x93"
        + b"X" + struct.pack("<I", len(text)) + text.encode() + b"\x940"
        + b"(" + b"h\x00" * 40 + b"t"
        + b"C\x01b\x87R."
    )  # fmt: skip
    info = _refused(lambda: safepickle.load(payload), r"shape \('xxx", mib=64)
    assert len(str(info.value)) < 500


# --------------------------------------------------------------------------- what still loads


def test_shared_and_repeated_values_within_the_limits_load():
    array = np.arange(1000.0)
    names = [f"movie {i}" for i in range(50)]
    value = {
        "pages": [{"title": names[i % 50], "score": i / 7, "seen": {i, -i}} for i in range(1000)],
        "same": (array, array, array),
        "frozen": frozenset(names),
        "wide": list(range(5000)),
    }
    for protocol in (2, 5):
        loaded = safepickle.load(pickle.dumps(value, protocol=protocol))
        assert loaded.keys() == value.keys()
        assert [p["title"] for p in loaded["pages"]] == [p["title"] for p in value["pages"]]
        assert loaded["pages"][7]["seen"] == {7, -7}
        np.testing.assert_equal(loaded["same"], value["same"])
        assert loaded["frozen"] == value["frozen"] and loaded["wide"] == value["wide"]
