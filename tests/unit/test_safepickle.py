"""recagents.data.safepickle: plain data loads; code, memory bombs and crafted numpy states do not.

The bombs are written opcode by opcode (as an attacker would), each a few dozen bytes.
"""

import os
import pickle
import struct
import time
import tracemalloc

import numpy as np
import pytest

from recagents.data import numpy_pickle, safepickle

# --------------------------------------------------------------------------- pickle builders


def _global(module: str, name: str) -> bytes:
    """STACK_GLOBAL module.name (protocol 4)."""
    return _short_str(module) + _short_str(name) + b"\x93"


def _short_str(text: str) -> bytes:
    return b"\x8c" + bytes([len(text)]) + text.encode()


def _long(n: int) -> bytes:
    return b"\x8a\x08" + struct.pack("<q", n)


def _dtype(code: bytes) -> bytes:
    """numpy.dtype(code, False, True), on the stack."""
    return _global("numpy", "dtype") + b"\x8c" + bytes([len(code)]) + code + b"\x89\x88\x87R"


def _empty_array() -> bytes:
    """numpy's own first step: _reconstruct(ndarray, (0,), b'b'), on the stack."""
    return (
        _global("numpy.core.multiarray", "_reconstruct")
        + _global("numpy", "ndarray")
        + b"K\x00\x85C\x01b\x87R"
    )


class _System:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _load_small(payload, limit_mib=16):
    """Load ``payload``, asserting that it allocated little and took little time."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        return safepickle.load(payload)
    finally:
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < limit_mib << 20, f"peak {peak:,} bytes"
        assert seconds < 2.0


# --------------------------------------------------------------------------- refusals


def test_a_pickle_that_runs_a_command_is_refused_and_names_file_and_global(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(_System(marker)))
    global_name = f"{os.system.__module__}.system"
    with pytest.raises(safepickle.UnsafePickleError, match=f"evil.pkl.*{global_name}"):
        safepickle.load(path)
    assert not marker.exists()
    assert issubclass(safepickle.UnsafePickleError, pickle.UnpicklingError)
    for harmful in (eval, exec, getattr, __import__, os.popen):
        with pytest.raises(safepickle.UnsafePickleError, match="refusing global"):
            safepickle.load(pickle.dumps(harmful))


def test_bytearray_bomb_is_refused_quickly_with_little_memory():
    bomb = b"\x80\x04" + _global("builtins", "bytearray") + b"J\x00\x00\x00\xc0\x85R."  # 3 GiB
    assert len(bomb) < 40
    with pytest.raises(safepickle.UnsafePickleError, match="builtins.bytearray"):
        _load_small(bomb)
    bytes_bomb = b"\x80\x04" + _global("builtins", "bytes") + b"J\x00\x00\x00\xc0\x85R."
    with pytest.raises(safepickle.UnsafePickleError, match="builtins.bytes"):
        _load_small(bytes_bomb)


def test_numpy_huge_shape_in_reconstruct_is_refused():
    for core in ("numpy.core", "numpy._core"):
        bomb = (
            b"\x80\x04"
            + _global(f"{core}.multiarray", "_reconstruct")
            + _global("numpy", "ndarray")
            + _long(1 << 40)
            + b"\x85C\x01b\x87R."
        )
        with pytest.raises(safepickle.UnsafePickleError, match="_reconstruct.*would allocate"):
            _load_small(bomb)


def test_numpy_huge_shape_in_setstate_is_refused():
    # numpy fills the state's shape before reading its data; with a list for an object
    # array it zero-fills (or crashes reading past the list).
    # A zero-width dtype needs no data for any shape, yet tolist() would pay per element.
    for code, data in ((b"O8", b"]"), (b"i8", b"C\x00"), (b"S0", b"C\x00")):
        state = b"(K\x01" + _long(1 << 36) + b"\x85" + _dtype(code) + b"\x89" + data + b"t"
        bomb = b"\x80\x04" + _empty_array() + state + b"b."
        with pytest.raises(safepickle.UnsafePickleError, match="refusing"):
            _load_small(bomb)


def test_calling_ndarray_or_constructing_classes_directly_is_refused():
    call = b"\x80\x04" + _global("numpy", "ndarray") + _long(1 << 36) + b"\x85\x85R."
    with pytest.raises(safepickle.UnsafePickleError, match="calling numpy.ndarray"):
        _load_small(call)
    newobj = b"\x80\x04" + _global("numpy", "ndarray") + _long(1 << 36) + b"\x85\x85\x81."
    with pytest.raises(safepickle.UnsafePickleError, match="direct class construction"):
        _load_small(newobj)


def test_huge_dtypes_and_scalars_are_refused():
    void = b"\x80\x04" + _dtype(b"V4000000000") + b"."
    with pytest.raises(safepickle.UnsafePickleError, match="numpy.dtype"):
        _load_small(void)
    scalar = b"\x80\x04" + _global("numpy.core.multiarray", "scalar") + _dtype(b"i8") + b"\x85R."
    with pytest.raises(safepickle.UnsafePickleError, match="scalar"):
        _load_small(scalar)


def test_crafted_dtype_states_are_refused():
    for state in (
        b"(K\x03\x8c\x01<NNNJ\x00\x00\x00\x01J\xff\xff\xff\xffK\x00t",  # item size 16 MiB
        b"(K\x03\x8c\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?t",  # object flags
        b"(K\x03\x8c\x01<N\x8c\x01a\x85NJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t",  # names
    ):
        with pytest.raises(safepickle.UnsafePickleError, match="state of numpy.dtype"):
            _load_small(b"\x80\x04" + _dtype(b"i8") + state + b"b.")


def test_shared_bytes_cannot_multiply_memory():
    # One memoized 100 kB buffer, byte-swapped so numpy copies it for each of 200 arrays:
    # 20 MB from a 100 kB file.
    reconstruct = numpy_pickle._RECONSTRUCT
    raw = bytes(100_000)
    dtype = np.dtype(">i4")

    class Copy:
        def __reduce__(self):
            return (reconstruct, (np.ndarray, (0,), b"b"), (1, (25_000,), dtype, False, raw))

    payload = pickle.dumps([Copy() for _ in range(200)], protocol=4)
    assert len(payload) < 110_000
    assert len(pickle.loads(payload)) == 200  # what plain pickle would build
    with pytest.raises(safepickle.UnsafePickleError, match="budget"):
        _load_small(payload)


def test_oversized_and_unreadable_inputs(tmp_path):
    path = tmp_path / "big.pkl"
    path.write_bytes(pickle.dumps(list(range(1000))))
    with pytest.raises(safepickle.UnsafePickleError, match="big.pkl.*max_bytes"):
        safepickle.load(path, max_bytes=100)
    truncated = tmp_path / "cut.pkl"
    truncated.write_bytes(pickle.dumps({"a": np.arange(100)})[:60])
    with pytest.raises(pickle.UnpicklingError, match="cut.pkl"):
        safepickle.load(truncated)


def test_plain_allow_list_refuses_numpy():
    with pytest.raises(safepickle.UnsafePickleError, match="not in the plain allow-list"):
        safepickle.load(pickle.dumps(np.arange(3)), allow=safepickle.PLAIN)
    assert safepickle.load(pickle.dumps({"a": {1, 2}}, protocol=2), allow=safepickle.PLAIN) == {
        "a": {1, 2}
    }


# --------------------------------------------------------------------------- real data


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_plain_numpy_data_and_containers_load(tmp_path, protocol):
    value = {
        1: [np.int64(3), np.arange(3)],
        "x": {2.5, 1.5},
        "frozen": frozenset({"a"}),
        "titles": np.array(["Babe (1995)", "Heat"]),
        "matrix": np.arange(6.0).reshape(2, 3).T,
        "swapped": np.arange(3, dtype=">i4"),
        "when": np.array(["2020-01-01"], dtype="datetime64[D]"),
        "flags": np.array([True, False]),
        "scalars": (np.float32(0.5), np.str_("hé"), np.bool_(True), 1 + 2j, b"\x00\xff"),
        "empty": np.zeros((0, 4)),
    }
    path = tmp_path / "fine.pkl"
    path.write_bytes(pickle.dumps(value, protocol=protocol))
    loaded = safepickle.load(path)
    assert loaded.keys() == value.keys()
    for key in value:
        if key in ("scalars", 1):
            assert [type(v) for v in loaded[key]] == [type(v) for v in value[key]]
        np.testing.assert_equal(loaded[key], value[key])
    assert loaded["matrix"].flags.f_contiguous
    assert loaded["titles"].dtype == np.dtype("<U11")
