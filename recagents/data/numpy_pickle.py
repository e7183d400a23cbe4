"""Numpy arrays and scalars in released pickles, rebuilt by guarded stand-ins.

numpy's own pickle format calls ``_reconstruct(ndarray, shape, dtype)``, which allocates
``shape`` before any data is read, and ``ndarray.__setstate__``, which zero-fills an object
array of any shape a list names. :data:`NUMPY_PLAIN` hands :func:`recagents.data.safepickle.load`
guarded stand-ins for them instead, each allocation charged to the load's budget
(:class:`~recagents.data.safepickle.LoadGuard`), and admits plain dtypes only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, NoReturn, cast

import numpy as np

from recagents.data.safepickle import PLAIN, AllowList, LoadGuard, brief

#: numpy's own constructors, taken from its pickles so that no version's module path (numpy.core
#: in 1.x, numpy._core in 2.x, each warning about the other) needs importing.
#: numpy's stubs type ``__reduce__`` as ``object``'s (a string or a tuple); for arrays and
#: scalars it is always a tuple whose first item is the constructor, hence the casts.
_RECONSTRUCT = cast("Callable[..., np.ndarray]", np.ndarray.__reduce__(np.empty(0))[0])
_SCALAR = cast("Callable[..., np.generic]", np.int64(0).__reduce__()[0])
_NUMPY_CORES = ("numpy.core", "numpy._core")
#: dtype codes numpy writes when it pickles a plain dtype: kind letter and size.
_DTYPE_SPEC = re.compile(r"[biufcSUVMm]\d{0,12}")
_MAX_DIMS = 32
#: Bound on each dimension, so that multiplying them stays cheap (numpy's own is 2**63).
_MAX_DIM = 1 << 63


class _NdarrayToken:
    """What a pickle gets for ``numpy.ndarray``: accepted by ``_reconstruct``, refused as a call.

    The real class would let ``REDUCE`` call ``ndarray((huge,), object)`` directly.
    """

    def __init__(self, guard: LoadGuard) -> None:
        self._guard = guard

    def __call__(self, *args: Any) -> NoReturn:
        self._guard.refuse("calling numpy.ndarray", "it allocates any shape it is given")

    def __repr__(self) -> str:
        return "<numpy.ndarray (only as _reconstruct's first argument)>"


def _dims(guard: LoadGuard, what: str, shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints, or a refusal."""
    if not isinstance(shape, tuple) or len(shape) > _MAX_DIMS:
        guard.refuse(what, f"shape {brief(shape)} is not a tuple of at most {_MAX_DIMS} ints")
    if not all(type(n) is int and 0 <= n < _MAX_DIM for n in shape):
        guard.refuse(what, f"shape {brief(shape)} holds something other than ints in [0, 2**63)")
    return shape


def _cost(dims: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes charged for an array: its size, and at least one per element.

    An array of zero-width items ('S0') takes no memory however many elements it has, but
    anything that walks it (``tolist``) pays per element.
    """
    return math.prod(dims) * max(dtype.itemsize, 1)


def _plain_dtype(guard: LoadGuard, what: str, dtype: Any) -> np.dtype:
    """``dtype`` if it is a numpy dtype without objects, fields or sub-arrays, else refuse."""
    if not isinstance(dtype, np.dtype):
        guard.refuse(what, f"{brief(dtype)} is not a numpy dtype")
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        guard.refuse(what, f"dtype {dtype} is not a plain (number, string, date) dtype")
    if not 0 <= dtype.itemsize <= guard.left:
        guard.refuse(what, f"dtype {dtype} has an item size of {dtype.itemsize:,} bytes")
    return dtype


def _guarded_dtype(guard: LoadGuard) -> Callable[..., np.dtype]:
    what = "numpy.dtype"

    def dtype(spec: Any, align: Any = False, copy: Any = True) -> np.dtype:
        if not isinstance(spec, str) or not _DTYPE_SPEC.fullmatch(spec):
            guard.refuse(what, f"{brief(spec)} is not a plain dtype code such as 'i8' or 'U40'")
        if not isinstance(align, bool) or not isinstance(copy, bool):
            guard.refuse(what, "align and copy must be booleans")
        # Sizes are checked before numpy parses them: numpy 1.26 wraps 'V4000000000' round
        # to a negative item size.
        if 4 * int(spec[1:] or 0) > guard.left:
            guard.refuse(what, f"an item of {brief(spec)} is larger than the file's budget")
        # Always a fresh copy: BUILD then sets its state, and must never touch numpy's shared
        # built-in dtype objects (which copy=False would return).
        return _plain_dtype(guard, what, np.dtype(spec, align, True))

    return dtype


def _is_date_unit(meta: Any) -> bool:
    """Whether ``meta`` is numpy's pickled date unit: ``({}, (b'ns', 1, 1, 1))``."""
    if not (isinstance(meta, tuple) and len(meta) == 2 and meta[0] == {}):
        return False
    unit = meta[1]
    return (
        isinstance(unit, tuple)
        and len(unit) == 4
        and type(unit[0]) is bytes
        and all(type(n) is int for n in unit[1:])
    )


def _build_dtype(dtype: np.dtype, state: Any, guard: LoadGuard) -> None:
    """Set a dtype's byte order (and a date's unit) from its pickled state, nothing more.

    numpy writes ``(3, byteorder, None, None, None, elsize, alignment, flags)`` for a plain
    dtype (version 4 adds date metadata). Sub-arrays, fields, other flags or a larger item
    size would change how much memory its arrays take, so they are refused.
    """
    what = f"the state of numpy.dtype {dtype}"
    if not isinstance(state, tuple) or len(state) not in (8, 9):
        guard.refuse(what, "it is not numpy's 8- or 9-field dtype state")
    version, order, subarray, names, fields, elsize, alignment, flags = state[:8]
    if version not in (3, 4) or order not in ("<", ">", "|", "="):
        guard.refuse(what, f"version {brief(version)} / byte order {brief(order)} unknown")
    if subarray is not None or names is not None or fields is not None:
        guard.refuse(what, "structured and sub-array dtypes are not plain data")
    if type(elsize) is not int or not (elsize == -1 or 0 <= elsize <= dtype.itemsize):
        guard.refuse(what, f"item size {brief(elsize)} exceeds the dtype's own {dtype.itemsize}")
    if dtype.kind == "U" and elsize % 4:
        guard.refuse(what, f"item size {elsize} is not a whole number of characters")
    if type(alignment) is not int or alignment not in (-1, dtype.alignment):
        guard.refuse(what, f"alignment {brief(alignment)} is not the dtype's own")
    if type(flags) is not int or flags != dtype.flags:
        guard.refuse(what, f"flags {brief(flags)} differ from the dtype's own {dtype.flags}")
    if len(state) == 9 and not (dtype.kind in "mM" and _is_date_unit(state[8])):
        guard.refuse(what, f"metadata {brief(state[8])} is not a date unit")
    dtype.__setstate__(state)  # type: ignore[attr-defined]  # numpy's stubs omit it
    _plain_dtype(guard, what, dtype)


def _guarded_reconstruct(guard: LoadGuard) -> Callable[..., np.ndarray]:
    what = "numpy.core.multiarray._reconstruct"

    def reconstruct(subtype: Any, shape: Any, code: Any) -> np.ndarray:
        if not isinstance(subtype, _NdarrayToken):
            guard.refuse(what, f"{brief(subtype)} is not numpy.ndarray (no subclasses)")
        if isinstance(code, bytes | str) and len(code) == 1:
            # numpy reads a one-byte bytes code as it reads the str; its stubs admit str only.
            dtype = np.dtype(cast(str, code))
        else:
            dtype = code
        dtype = _plain_dtype(guard, what, dtype)
        dims = _dims(guard, what, shape)
        guard.charge(f"{what} of shape {dims}", _cost(dims, dtype))
        return _RECONSTRUCT(np.ndarray, dims, dtype)

    return reconstruct


def _build_array(array: np.ndarray, state: Any, guard: LoadGuard) -> None:
    """Give an array its shape and bytes, only when the pickle carries all of those bytes.

    ``ndarray.__setstate__`` allocates the shape it is given before it looks at the data
    (and zero-fills it for object arrays), so the shape is checked against the data first.
    """
    what = "the state of a numpy.ndarray"
    if type(array) is not np.ndarray:
        guard.refuse(what, f"{type(array).__name__} is not numpy.ndarray")
    if not isinstance(state, tuple) or len(state) != 5:
        guard.refuse(what, "it is not numpy's 5-field array state")
    version, shape, dtype, fortran, data = state
    dims = _dims(guard, what, shape)
    dtype = _plain_dtype(guard, what, dtype)
    if version != 1 or type(fortran) not in (bool, int):
        guard.refuse(what, f"version {brief(version)} / order flag {brief(fortran)} unknown")
    nbytes = math.prod(dims) * dtype.itemsize
    if not isinstance(data, bytes) or len(data) != nbytes:
        size = len(data) if isinstance(data, bytes) else type(data).__name__
        guard.refuse(what, f"shape {dims} of {dtype} needs {nbytes:,} bytes, the file has {size}")
    guard.charge(f"an array of shape {dims}", _cost(dims, dtype))
    array.__setstate__(state)


def _guarded_scalar(guard: LoadGuard) -> Callable[..., np.generic]:
    what = "numpy.core.multiarray.scalar"

    def scalar(dtype: Any, data: Any = None) -> np.generic:
        dtype = _plain_dtype(guard, what, dtype)
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            guard.refuse(what, f"a {dtype} scalar needs exactly {dtype.itemsize} bytes of data")
        guard.charge(what, dtype.itemsize)
        return _SCALAR(dtype, data)

    return scalar


def _guarded_frombuffer(guard: LoadGuard) -> Callable[..., np.ndarray]:
    what = "numpy.core.numeric._frombuffer"

    def frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
        dtype = _plain_dtype(guard, what, dtype)
        dims = _dims(guard, what, shape)
        nbytes = math.prod(dims) * dtype.itemsize
        if not isinstance(buffer, bytes | bytearray) or len(buffer) != nbytes:
            guard.refuse(what, f"shape {dims} of {dtype} needs {nbytes:,} bytes of buffer")
        if order not in ("C", "F"):
            guard.refuse(what, f"order {brief(order)} is neither 'C' nor 'F'")
        guard.charge(what, _cost(dims, dtype))
        return np.frombuffer(buffer, dtype=dtype).reshape(dims, order=order)

    return frombuffer


#: Numpy arrays and scalars of plain dtypes (numbers, booleans, fixed-width strings and
#: bytes, dates), in the containers pickle builds itself plus sets and complex numbers.
#: Object arrays, structured dtypes, subclasses (matrix, memmap, recarray) are refused.
NUMPY_PLAIN = AllowList(
    name="numpy-plain",
    globals=MappingProxyType(
        dict(PLAIN.globals)
        | {("numpy", "ndarray"): _NdarrayToken, ("numpy", "dtype"): _guarded_dtype}
        | {(f"{core}.multiarray", "_reconstruct"): _guarded_reconstruct for core in _NUMPY_CORES}
        | {(f"{core}.multiarray", "scalar"): _guarded_scalar for core in _NUMPY_CORES}
        | {(f"{core}.numeric", "_frombuffer"): _guarded_frombuffer for core in _NUMPY_CORES}
    ),
    builders=((np.ndarray, _build_array), (np.dtype, _build_dtype)),
)
