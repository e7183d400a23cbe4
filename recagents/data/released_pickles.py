"""Allow-lists for the papers' released pickles: numpy object arrays, torch tensors, frames.

:mod:`recagents.data.safepickle` admits plain numpy data. The released files hold more, and each
kind gets guarded stand-ins here, added to :data:`recagents.data.numpy_pickle.NUMPY_PLAIN`:

* :data:`OBJECT_ARRAYS`: numpy arrays of dtype ``object`` whose elements the pickle builds
  itself (lists, dicts, strings): ``np.save`` of a dict (AgentCF's ``saved/1000/*.npy``) is
  a 0-d one, a pandas block of lists (AFL's ``seq`` column) a 2-d one. Their shape must
  match the elements the file carries, so none is zero-filled from a tiny input.
* :data:`TORCH_AS_NUMPY`: the torch tensors in AgentCF's item memories (an embedding of each
  description version). ``torch.storage._load_from_bytes`` holds a legacy torch file; it is
  parsed by its structure (:func:`pickletools.genops` reads opcodes and runs nothing), its
  storage becomes a float numpy array and ``_rebuild_tensor_v2`` a copied numpy view of it.
  torch is never imported.
* :data:`PANDAS_FRAMES`: pandas ``DataFrame`` pickles (AFL's LastFM ``*.df``). Stand-ins
  record the blocks, placements and axes, and :func:`load_frame` builds the frame itself;
  pandas' own unpickling code never runs.

pandas writes the frame itself with ``NEWOBJ`` (make an instance without calling it), which
safepickle refuses as an opcode. :func:`load_frame` rewrites each ``NEWOBJ`` opcode, found by
:func:`pickletools.genops`, to ``REDUCE``: both take the same two stack items (a global and
its arguments), and for the stand-ins admitted here "make an instance" and "call" are the
same thing; a ``NEWOBJ`` of anything else still fails in safepickle's ``find_class``.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
from numpy.lib import format as npy_format

from recagents.data import numpy_pickle, safepickle
from recagents.data.safepickle import AllowList, LoadGuard, UnsafePickleError, brief

_PLAIN_BUILD = dict(numpy_pickle.NUMPY_PLAIN.builders)
#: numpy's pickled state of its object dtype: version 3, no byte order, item size -1.
_OBJECT_DTYPE_STATE = (3, "|", None, None, None, -1, -1, 63)
_MAX_DIMS = 32


def _const(obj: Any) -> Callable[[LoadGuard], Any]:
    return lambda guard: obj


def _dims(guard: LoadGuard, what: str, shape: Any) -> tuple[int, ...]:
    if not (isinstance(shape, tuple) and len(shape) <= _MAX_DIMS):
        guard.refuse(what, f"shape {brief(shape)} is not a tuple of at most {_MAX_DIMS} ints")
    if not all(type(n) is int and 0 <= n < 1 << 63 for n in shape):
        guard.refuse(what, f"shape {brief(shape)} holds something other than ints in [0, 2**63)")
    return shape


# --------------------------------------------------------------------------- object arrays


def _object_dtype(guard: LoadGuard) -> Callable[..., np.dtype]:
    plain = numpy_pickle.NUMPY_PLAIN.globals[("numpy", "dtype")](guard)

    def dtype(spec: Any, align: Any = False, copy: Any = True) -> np.dtype:
        if spec == "O8" and align is False and copy is True:
            return np.dtype(object)  # the shared instance: its BUILD below changes nothing
        return plain(spec, align, copy)

    return dtype


def _build_dtype(dtype: np.dtype, state: Any, guard: LoadGuard) -> None:
    """The object dtype takes numpy's own state unchanged; other dtypes as safepickle does."""
    if dtype.hasobject:
        if dtype != np.dtype(object) or state != _OBJECT_DTYPE_STATE:
            guard.refuse(f"the state {brief(state)} of dtype {dtype}", "not numpy's object dtype")
        return
    _PLAIN_BUILD[np.dtype](dtype, state, guard)


def _build_array(array: np.ndarray, state: Any, guard: LoadGuard) -> None:
    """An object array gets exactly the elements the pickle carries; others as safepickle."""
    kind = state[2] if isinstance(state, tuple) and len(state) == 5 else None
    if not (isinstance(kind, np.dtype) and kind.hasobject):
        _PLAIN_BUILD[np.ndarray](array, state, guard)
        return
    what = "the state of a numpy object array"
    version, shape, _, fortran, data = state
    dims = _dims(guard, what, shape)
    if type(array) is not np.ndarray or version != 1 or type(fortran) is not bool:
        guard.refuse(what, "not numpy's version-1 state of a plain ndarray")
    if not isinstance(data, list) or len(data) != math.prod(dims):
        guard.refuse(what, f"shape {dims} needs {math.prod(dims)} elements in a list")
    guard.charge(f"an object array of shape {dims}", 8 * len(data))
    array.__setstate__((1, dims, np.dtype(object), fortran, data))


#: numpy arrays of dtype ``object`` holding what the pickle builds (with NUMPY_PLAIN).
OBJECT_ARRAYS = AllowList(
    name="numpy-objects",
    globals=MappingProxyType({("numpy", "dtype"): _object_dtype}),
    builders=((np.ndarray, _build_array), (np.dtype, _build_dtype)),
)


# --------------------------------------------------------------------------- torch tensors

#: torch's legacy file magic number and protocol version (``torch.serialization``).
_TORCH_MAGIC = 0x1950A86A20F9469CFC6C
_TORCH_PROTOCOL = 1001
_STORAGES: dict[str, np.dtype] = {
    "torch FloatStorage": np.dtype("<f4"),
    "torch DoubleStorage": np.dtype("<f8"),
}
_DESCRIPTOR_OPS = {
    "PROTO", "MARK", "BINUNICODE", "SHORT_BINUNICODE", "BINPUT", "GLOBAL", "BININT",
    "BININT1", "BININT2", "NONE", "TUPLE", "BINPERSID", "STOP",
}  # fmt: skip


def _next_pickle(data: bytes, stream: io.BytesIO, guard: LoadGuard) -> tuple[list, bytes]:
    """The opcodes ``(name, arg)`` of the next pickle in ``stream`` and its bytes."""
    start = stream.tell()
    try:
        ops = [(op.name, arg) for op, arg, _ in pickletools.genops(stream)]
    except ValueError as error:
        guard.refuse("torch.storage._load_from_bytes", f"not a torch file ({error})")
    return ops, data[start : stream.tell()]


def _storage(guard: LoadGuard) -> Callable[[bytes], np.ndarray]:
    what = "torch.storage._load_from_bytes"

    def load_from_bytes(data: Any) -> np.ndarray:
        if not isinstance(data, bytes):
            guard.refuse(what, "its argument is not bytes")
        stream = io.BytesIO(data)
        header = [safepickle.load(_next_pickle(data, stream, guard)[1]) for _ in range(3)]
        magic, version, info = header
        if magic != _TORCH_MAGIC or version != _TORCH_PROTOCOL or not isinstance(info, dict):
            guard.refuse(what, "not a legacy torch file (magic number, protocol version)")
        if info.get("little_endian") is not True:
            guard.refuse(what, "only little-endian torch files are read")
        ops, _ = _next_pickle(data, stream, guard)
        names = {name for name, _ in ops}
        strings = [arg for name, arg in ops if name.endswith("BINUNICODE")]
        sizes = [arg for name, arg in ops if name.startswith("BININT")]
        kinds = [arg for name, arg in ops if name == "GLOBAL"]
        if not (names <= _DESCRIPTOR_OPS and "BINPERSID" in names and len(strings) == 3):
            guard.refuse(what, f"not one storage descriptor (opcodes {sorted(names)})")
        if strings[0::2] != ["storage", "cpu"] or len(kinds) != 1 or kinds[0] not in _STORAGES:
            guard.refuse(what, f"storage type {brief(kinds)} is not one of {sorted(_STORAGES)}")
        keys = safepickle.load(_next_pickle(data, stream, guard)[1])
        if keys != [strings[1]] or len(sizes) != 1:
            guard.refuse(what, f"keys {brief(keys)} are not the one storage {brief(strings[1])}")
        dtype, rest = _STORAGES[kinds[0]], stream.read()
        count = struct.unpack("<q", rest[:8])[0] if len(rest) >= 8 else -1
        if count != sizes[0] or len(rest) != 8 + count * dtype.itemsize:
            guard.refuse(what, f"storage of {sizes[0]} elements; the data says {count}")
        guard.charge(what, count * dtype.itemsize)
        return np.frombuffer(rest, dtype, count, 8)

    return load_from_bytes


def _ordered_dict(guard: LoadGuard) -> Callable[..., OrderedDict]:
    def ordered_dict(*args: Any) -> OrderedDict:
        if args:
            guard.refuse("collections.OrderedDict", "only an empty one (a tensor's hooks)")
        return OrderedDict()

    return ordered_dict


def _tensor(guard: LoadGuard) -> Callable[..., np.ndarray]:
    what = "torch._utils._rebuild_tensor_v2"

    def rebuild(storage: Any, offset: Any, size: Any, stride: Any, grad: Any, hooks: Any) -> Any:
        dims = _dims(guard, what, size)
        steps = _dims(guard, what, stride)
        if not isinstance(storage, np.ndarray) or storage.ndim != 1 or len(steps) != len(dims):
            guard.refuse(what, "not a 1-d storage with one stride per dimension")
        if type(offset) is not int or offset < 0 or type(grad) is not bool or hooks != {}:
            guard.refuse(
                what, f"offset {brief(offset)}, requires_grad {brief(grad)}, hooks {brief(hooks)}"
            )
        last = offset + sum((n - 1) * s for n, s in zip(dims, steps, strict=True))
        if math.prod(dims) and last >= len(storage):
            guard.refuse(what, f"element {last} is outside a storage of {len(storage)}")
        guard.charge(what, math.prod(dims) * storage.itemsize)
        strides = tuple(s * storage.itemsize for s in steps)
        view = np.lib.stride_tricks.as_strided(storage[offset:], dims, strides, writeable=False)
        return view.copy()  # not a view: the storage is often a whole batch's

    return rebuild


#: torch tensors in CPU float storages, rebuilt as numpy arrays (with NUMPY_PLAIN).
TORCH_AS_NUMPY = AllowList(
    name="torch-as-numpy",
    globals=MappingProxyType(
        {
            ("torch.storage", "_load_from_bytes"): _storage,
            ("torch._utils", "_rebuild_tensor_v2"): _tensor,
            ("collections", "OrderedDict"): _ordered_dict,
        }
    ),
)


def load_npy_object(path: Path, allow: AllowList = OBJECT_ARRAYS) -> Any:
    """The object that ``np.save`` wrapped in a 0-d object array, through safepickle.

    Args:
        path: An ``.npy`` file of shape ``()`` and dtype ``object``.
        allow: What its pickle may hold besides plain numpy data and object arrays.

    Raises:
        UnsafePickleError: The header is not a 0-d object array, or the pickle asks for
            something ``allow`` refuses (the message names the file).
        pickle.UnpicklingError: The file is not a readable ``.npy`` file (cut short,
            corrupt); the message names it.
    """
    with path.open("rb") as handle:
        try:
            version = npy_format.read_magic(handle)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(handle)
            else:
                shape, fortran, dtype = npy_format.read_array_header_2_0(handle)
        except (ValueError, SyntaxError, TypeError) as error:  # numpy's header parse errors
            raise pickle.UnpicklingError(
                f"{path}: not a readable .npy file, cut short or corrupt ({str(error)[:200]})"
            ) from None
        if shape != () or not dtype.hasobject:
            raise UnsafePickleError(f"{path}: shape {shape} of {dtype}, not a 0-d object array")
        payload = safepickle.read_at_most(handle, safepickle.DEFAULT_MAX_BYTES)
    array = _load_named(path, payload, numpy_pickle.NUMPY_PLAIN | OBJECT_ARRAYS | allow)
    if not (isinstance(array, np.ndarray) and array.shape == () and array.dtype.hasobject):
        raise UnsafePickleError(f"{path}: holds a {type(array).__name__}, not a 0-d object array")
    return array[()]


def _load_named(path: Path, payload: bytes, allow: AllowList) -> Any:
    """:func:`recagents.data.safepickle.load` on bytes, with errors naming ``path``."""
    try:
        return safepickle.load(payload, allow)
    except pickle.UnpicklingError as error:
        message = str(error).removeprefix("<bytes>: ")
        raise type(error)(f"{path}: {message}") from None


# --------------------------------------------------------------------------- pandas frames


@dataclass
class _Frame:
    """What the pickle says a DataFrame is: its block manager (set by ``BUILD``)."""

    manager: _Manager | None = None


@dataclass(frozen=True)
class _Manager:
    blocks: tuple[_Block, ...]
    axes: tuple[pd.Index, ...]


@dataclass(frozen=True)
class _Block:
    values: np.ndarray
    columns: slice | np.ndarray
    ndim: int = 2


@dataclass(frozen=True)
class _IndexClass:
    """``Index`` or ``RangeIndex``: only ever ``_new_Index``'s first argument."""

    name: str
    keys: frozenset[str] = field(default_factory=frozenset)


_INDEX = _IndexClass("Index", frozenset({"data", "name"}))
_RANGE_INDEX = _IndexClass("RangeIndex", frozenset({"start", "stop", "step", "name"}))


def _new_frame(guard: LoadGuard) -> Callable[..., _Frame]:
    def frame(*args: Any) -> _Frame:
        if args:
            guard.refuse("pandas.core.frame.DataFrame", "only DataFrame.__new__ without arguments")
        return _Frame()

    return frame


def _build_frame(frame: _Frame, state: Any, guard: LoadGuard) -> None:
    allowed = {"_mgr", "_typ", "_metadata", "attrs", "_flags"}
    if not (isinstance(state, dict) and set(state) <= allowed and "_mgr" in state):
        guard.refuse("the state of a DataFrame", f"keys beyond {sorted(allowed)}")
    if not isinstance(state["_mgr"], _Manager) or state.get("_typ", "dataframe") != "dataframe":
        guard.refuse("the state of a DataFrame", "its _mgr is not a BlockManager")
    frame.manager = state["_mgr"]


def _manager(guard: LoadGuard) -> Callable[..., _Manager]:
    def manager(blocks: Any, axes: Any) -> _Manager:
        if not all(isinstance(b, _Block) for b in blocks) or not isinstance(axes, list):
            guard.refuse("pandas BlockManager", "not (blocks, axes)")
        if len(axes) != 2 or not all(isinstance(a, pd.Index) for a in axes):
            guard.refuse("pandas BlockManager", "not two axes (columns, rows)")
        return _Manager(tuple(blocks), tuple(axes))

    return manager


def _block(guard: LoadGuard) -> Callable[..., _Block]:
    def unpickle_block(values: Any, placement: Any, ndim: Any) -> _Block:
        if not isinstance(values, np.ndarray) or values.ndim != 2 or ndim != 2:
            guard.refuse("pandas _unpickle_block", "not a 2-d block of a frame")
        if not isinstance(placement, slice | np.ndarray):
            guard.refuse("pandas _unpickle_block", f"placement {type(placement).__name__}")
        return _Block(values, placement, ndim)

    return unpickle_block


def _slice(guard: LoadGuard) -> Callable[..., slice]:
    def make_slice(*args: Any) -> slice:
        if len(args) != 3 or not all(a is None or type(a) is int for a in args):
            guard.refuse("builtins.slice", f"{brief(args)} is not (start, stop, step) of ints")
        return slice(*args)

    return make_slice


def _new_index(guard: LoadGuard) -> Callable[..., pd.Index]:
    def new_index(cls: Any, state: Any) -> pd.Index:
        if not isinstance(cls, _IndexClass) or not isinstance(state, dict):
            guard.refuse("pandas _new_Index", "only Index and RangeIndex with a dict")
        if not set(state) <= cls.keys or not isinstance(state.get("name"), str | None):
            guard.refuse(
                f"pandas {cls.name}", f"keys {brief(list(state))} beyond {sorted(cls.keys)}"
            )
        if cls is _INDEX:
            if not isinstance(state.get("data"), np.ndarray):
                guard.refuse("pandas Index", "its data is not an array")
            return pd.Index(state["data"], name=state.get("name"))
        bounds: list[Any] = [state.get(key) for key in ("start", "stop", "step")]
        if not all(type(b) is int for b in bounds) or bounds[2] == 0:
            guard.refuse("pandas RangeIndex", f"start, stop, step {brief(bounds)}")
        guard.charge("pandas RangeIndex", 8 * len(range(*bounds)))
        return pd.RangeIndex(*bounds, name=state.get("name"))

    return new_index


#: pandas DataFrames of numpy blocks, rebuilt by :func:`load_frame` (with NUMPY_PLAIN and
#: OBJECT_ARRAYS).
PANDAS_FRAMES = AllowList(
    name="pandas-frames",
    globals=MappingProxyType(
        {
            ("pandas.core.frame", "DataFrame"): _new_frame,
            ("pandas.core.internals.managers", "BlockManager"): _manager,
            ("pandas._libs.internals", "_unpickle_block"): _block,
            ("pandas.core.indexes.base", "_new_Index"): _new_index,
            ("pandas.core.indexes.base", "Index"): _const(_INDEX),
            ("pandas.core.indexes.range", "RangeIndex"): _const(_RANGE_INDEX),
            ("builtins", "slice"): _slice,
        }
    ),
    builders=((_Frame, _build_frame),),
)


def _newobj_as_reduce(path: Path, data: bytes) -> bytes:
    """``data`` with every ``NEWOBJ`` opcode made ``REDUCE`` (see the module docstring)."""
    out = bytearray(data)
    try:
        for op, _, pos in pickletools.genops(data):
            if op.name == "NEWOBJ":
                assert pos is not None  # genops knows every position in bytes (a BytesIO)
                out[pos] = pickle.REDUCE[0]
    except ValueError as error:
        raise pickle.UnpicklingError(f"{path}: not a readable pickle ({error})") from None
    return bytes(out)


def load_frame(path: Path) -> pd.DataFrame:
    """A pickled pandas DataFrame, rebuilt from its blocks without pandas' unpickling code.

    Raises:
        UnsafePickleError: The pickle holds anything but a frame of numpy blocks (plain or
            object arrays) with an ``Index`` or ``RangeIndex`` on each axis.
        pickle.UnpicklingError: The file is not a readable pickle.
    """
    with path.open("rb") as handle:
        data = safepickle.read_at_most(handle, safepickle.DEFAULT_MAX_BYTES)
    allow = numpy_pickle.NUMPY_PLAIN | OBJECT_ARRAYS | PANDAS_FRAMES
    frame = _load_named(path, _newobj_as_reduce(path, data), allow)
    if not isinstance(frame, _Frame) or frame.manager is None:
        raise UnsafePickleError(f"{path}: holds a {type(frame).__name__}, not a DataFrame")
    columns, rows = frame.manager.axes
    values: dict[int, Any] = {}
    for block in frame.manager.blocks:
        places = block.columns
        positions = range(len(columns))[places] if isinstance(places, slice) else places
        if len(positions) != block.values.shape[0] or block.values.shape[1] != len(rows):
            raise UnsafePickleError(f"{path}: a block's shape does not match the frame's axes")
        for j, position in enumerate(positions):
            values[int(position)] = block.values[j]
    if sorted(values) != list(range(len(columns))):
        raise UnsafePickleError(f"{path}: the blocks do not cover every column once")
    result = pd.DataFrame({i: values[i] for i in range(len(columns))}, index=rows)
    result.columns = columns
    return result
