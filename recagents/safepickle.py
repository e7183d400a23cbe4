"""Load pickles from outside the project without running their code or exhausting memory.

Papers release data as pickles (Agent4Rec's per-agent behaviour files hold numpy arrays and
scalars in plain containers; AFL's LastFM files hold pandas frames). ``pickle.load`` on such a
file runs whatever callables it names, so a tampered download could run a shell command.
:func:`load` rebuilds only what the caller's :class:`AllowList` admits, and refuses the rest
with one :class:`UnsafePickleError` that names the file and what it asked for.

Admitting a callable is not enough to be safe: ``bytearray(3 << 30)`` runs no code, yet a
pickle of a few dozen bytes makes it allocate 3 GiB; and numpy's own pickle format calls
``_reconstruct(ndarray, shape, dtype)`` (which allocates ``shape`` before any data is read)
and ``ndarray.__setstate__`` (which zero-fills an object array of any shape a list names).
So the allow-lists here hand the unpickler *guarded* stand-ins for numpy's functions, and
every guarded allocation is charged to a budget of :data:`ALLOC_FACTOR` times the input's
size: an array can be no larger than the bytes the file could have carried. Whatever else
the pickle machine builds (lists, dicts, strings) is already bounded by the input's size.

Why the pure-Python unpickler (``pickle._Unpickler``): the C one cannot intercept ``BUILD``,
the opcode that hands an object its state, and numpy arrays and dtypes get their shape and
layout through it. Here ``BUILD`` is admitted only for objects whose type the allow-list
names a checker for, and ``NEWOBJ``/``INST``/``OBJ`` (direct class construction) and
persistent ids are refused outright. The pure-Python machine is slower, which does not
matter for the small released files this serves.
"""

from __future__ import annotations

import _compat_pickle
import io
import math
import os
import pickle
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

import numpy as np

__all__ = [
    "ALLOC_FACTOR",
    "DEFAULT_MAX_BYTES",
    "NUMPY_PLAIN",
    "PLAIN",
    "AllowList",
    "LoadGuard",
    "UnsafePickleError",
    "load",
]

#: Largest input :func:`load` reads unless told otherwise (256 MiB).
DEFAULT_MAX_BYTES = 256 << 20

#: Guarded constructors may allocate at most this many times the input's size, in total
#: (plus :data:`ALLOC_SLACK`). numpy's pickles carry every array's bytes, so real files
#: stay near a factor of 1.
ALLOC_FACTOR = 4

#: Allocation allowed on top of ``ALLOC_FACTOR`` times the input's size (64 KiB), so that a
#: tiny file may still hold, say, an empty wide string array.
ALLOC_SLACK = 64 << 10


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle that asked for something the allow-list refuses; the message names both."""


class LoadGuard:
    """What one :func:`load` call lets guarded constructors do: the file's name and a budget.

    Guarded stand-ins (see :class:`AllowList`) receive it, charge every allocation to it
    and refuse through it, so that each refusal names the file.
    """

    def __init__(self, source: str, budget: int) -> None:
        self.source = source
        self.budget = budget
        self.left = budget

    def refuse(self, what: str, why: str) -> NoReturn:
        """Raise the one refusal error, naming the file, what was asked and why not."""
        raise UnsafePickleError(f"{self.source}: refusing {what}: {why}")

    def charge(self, what: str, nbytes: int) -> None:
        """Take ``nbytes`` from the budget before ``what`` allocates them, or refuse."""
        if not 0 <= nbytes <= self.left:
            self.refuse(
                what,
                f"it would allocate {nbytes:,} bytes, more than the {self.left:,} left of "
                f"this file's budget ({ALLOC_FACTOR}x its size + {ALLOC_SLACK:,})",
            )
        self.left -= nbytes


#: Makes what ``find_class`` returns for one admitted global, given the load's guard.
GlobalFactory = Callable[[LoadGuard], Any]
#: Applies a ``BUILD`` state to an object of an admitted type, checking it first.
BuildHook = Callable[[Any, Any, LoadGuard], None]


@dataclass(frozen=True)
class AllowList:
    """The globals a pickle may name and the objects whose state it may set.

    Attributes:
        name: Shown in refusals ("not in the numpy-plain allow-list").
        globals: ``(module, name)`` to a factory of what the unpickler gets for it: the
            harmless object itself (``lambda guard: frozenset``) or a guarded stand-in.
        builders: ``(type, hook)`` pairs; ``BUILD`` on an instance of ``type`` calls
            ``hook(obj, state, guard)``, on anything else it is refused.
    """

    name: str
    globals: Mapping[tuple[str, str], GlobalFactory] = field(default_factory=dict)
    builders: tuple[tuple[type, BuildHook], ...] = ()

    def __or__(self, other: AllowList) -> AllowList:
        """Both allow-lists at once (``other``'s entries win on a clash)."""
        return AllowList(
            name=f"{self.name}+{other.name}",
            globals=MappingProxyType({**self.globals, **other.globals}),
            builders=other.builders + self.builders,
        )


def _const(obj: Any) -> GlobalFactory:
    return lambda guard: obj


def _guarded_encode(guard: LoadGuard) -> Callable[..., bytes]:
    def encode(text: Any, encoding: Any = "utf-8") -> bytes:
        if not isinstance(text, str) or encoding != "latin1":
            guard.refuse("_codecs.encode", "only pickle's own encode(str, 'latin1') is admitted")
        return text.encode("latin1")

    return encode


def _guarded_bytes(guard: LoadGuard) -> Callable[..., bytes]:
    def make_bytes(*args: Any) -> bytes:
        if args and not (len(args) == 1 and isinstance(args[0], bytes)):
            guard.refuse("builtins.bytes", "only bytes() and bytes(b'...'): bytes(n) allocates n")
        return bytes(*args)

    return make_bytes


#: Built-ins that pickle protocols 0-2 name for sets, complex numbers and bytes. Not
#: ``bytearray``: ``bytearray(n)`` allocates ``n`` zero bytes from a tiny input, as would
#: ``bytes(n)``, so bytes is admitted only as pickle itself calls it.
PLAIN = AllowList(
    name="plain",
    globals=MappingProxyType(
        {
            ("builtins", "set"): _const(set),
            ("builtins", "frozenset"): _const(frozenset),
            ("builtins", "complex"): _const(complex),
            ("_codecs", "encode"): _guarded_encode,
            ("builtins", "bytes"): _guarded_bytes,
        }
    ),
)


# --------------------------------------------------------------------------- numpy

#: numpy's own constructors, taken from its pickles so that no version's module path (numpy.core
#: in 1.x, numpy._core in 2.x, each warning about the other) needs importing.
_RECONSTRUCT = np.ndarray.__reduce__(np.empty(0))[0]
_SCALAR = np.int64(0).__reduce__()[0]
_NUMPY_CORES = ("numpy.core", "numpy._core")
#: dtype codes numpy writes when it pickles a plain dtype: kind letter and size.
_DTYPE_SPEC = re.compile(r"[biufcSUVMm]\d{0,12}")
_MAX_DIMS = 32


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
        guard.refuse(what, f"shape {shape!r} is not a tuple of at most {_MAX_DIMS} ints")
    if not all(type(n) is int and n >= 0 for n in shape):
        guard.refuse(what, f"shape {shape!r} holds something other than non-negative ints")
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
        guard.refuse(what, f"{dtype!r} is not a numpy dtype")
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        guard.refuse(what, f"dtype {dtype} is not a plain (number, string, date) dtype")
    if not 0 <= dtype.itemsize <= guard.left:
        guard.refuse(what, f"dtype {dtype} has an item size of {dtype.itemsize:,} bytes")
    return dtype


def _guarded_dtype(guard: LoadGuard) -> Callable[..., np.dtype]:
    what = "numpy.dtype"

    def dtype(spec: Any, align: Any = False, copy: Any = True) -> np.dtype:
        if not isinstance(spec, str) or not _DTYPE_SPEC.fullmatch(spec):
            guard.refuse(what, f"{spec!r} is not a plain dtype code such as 'i8' or 'U40'")
        if not isinstance(align, bool) or not isinstance(copy, bool):
            guard.refuse(what, "align and copy must be booleans")
        # Sizes are checked before numpy parses them: numpy 1.26 wraps 'V4000000000' round
        # to a negative item size.
        if 4 * int(spec[1:] or 0) > guard.left:
            guard.refuse(what, f"an item of {spec!r} is larger than the file's budget")
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
        guard.refuse(what, f"version {version!r} / byte order {order!r} unknown")
    if subarray is not None or names is not None or fields is not None:
        guard.refuse(what, "structured and sub-array dtypes are not plain data")
    if type(elsize) is not int or not (elsize == -1 or 0 <= elsize <= dtype.itemsize):
        guard.refuse(what, f"item size {elsize!r} exceeds the dtype's own {dtype.itemsize}")
    if dtype.kind == "U" and elsize % 4:
        guard.refuse(what, f"item size {elsize} is not a whole number of characters")
    if type(alignment) is not int or alignment not in (-1, dtype.alignment):
        guard.refuse(what, f"alignment {alignment!r} is not the dtype's own")
    if type(flags) is not int or flags != dtype.flags:
        guard.refuse(what, f"flags {flags!r} differ from the dtype's own {dtype.flags}")
    if len(state) == 9 and not (dtype.kind in "mM" and _is_date_unit(state[8])):
        guard.refuse(what, f"metadata {state[8]!r} is not a date unit")
    dtype.__setstate__(state)
    _plain_dtype(guard, what, dtype)


def _guarded_reconstruct(guard: LoadGuard) -> Callable[..., np.ndarray]:
    what = "numpy.core.multiarray._reconstruct"

    def reconstruct(subtype: Any, shape: Any, code: Any) -> np.ndarray:
        if not isinstance(subtype, _NdarrayToken):
            guard.refuse(what, f"{subtype!r} is not numpy.ndarray (no subclasses)")
        if isinstance(code, bytes | str) and len(code) == 1:
            dtype = np.dtype(code)
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
        guard.refuse(what, f"version {version!r} / order flag {fortran!r} unknown")
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
            guard.refuse(what, f"order {order!r} is neither 'C' nor 'F'")
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


# --------------------------------------------------------------------------- the loader


class _Unpickler(pickle._Unpickler):  # type: ignore[name-defined]
    """The pure-Python unpickler, with globals and ``BUILD`` limited to an allow-list."""

    def __init__(self, data: bytes, allow: AllowList, guard: LoadGuard) -> None:
        super().__init__(io.BytesIO(data))
        self._allow = allow
        self._guard = guard

    def find_class(self, module: str, name: str) -> Any:
        """What the allow-list gives for ``module.name``; every other global is refused."""
        if self.proto < 3:  # Python 2 names (``__builtin__.set``), as pickle itself maps them
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        factory = self._allow.globals.get((module, name))
        if factory is None:
            self._guard.refuse(
                f"global {module}.{name}", f"it is not in the {self._allow.name} allow-list"
            )
        return factory(self._guard)

    def persistent_load(self, pid: Any) -> NoReturn:
        """Refuse persistent ids: they name objects outside the file."""
        self._guard.refuse(f"persistent id {pid!r}", "only self-contained pickles load")

    def _load_build(self) -> None:
        state = self.stack.pop()
        obj = self.stack[-1]
        for kind, hook in self._allow.builders:
            if isinstance(obj, kind):
                hook(obj, state, self._guard)
                return
        kinds = ", ".join(kind.__name__ for kind, _ in self._allow.builders) or "nothing"
        self._guard.refuse(
            f"setting the state of a {type(obj).__name__}",
            f"the {self._allow.name} allow-list sets state only on: {kinds}",
        )

    def _refuse_opcode(self) -> NoReturn:
        self._guard.refuse("direct class construction (NEWOBJ/INST/OBJ)", "not plain data")

    dispatch = dict(pickle._Unpickler.dispatch)  # type: ignore[attr-defined]
    dispatch[pickle.BUILD[0]] = _load_build
    for _opcode in (pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.INST, pickle.OBJ):
        dispatch[_opcode[0]] = _refuse_opcode
    del _opcode


def load(
    source: str | os.PathLike[str] | bytes,
    allow: AllowList = NUMPY_PLAIN,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Any:
    """Unpickle a file (or bytes) rebuilding only what ``allow`` admits.

    Args:
        source: A path, or the pickle's bytes.
        allow: What the pickle may name: :data:`NUMPY_PLAIN`, :data:`PLAIN`, or a union of
            allow-lists (``a | b``).
        max_bytes: Largest input read; guarded constructors may then allocate at most
            :data:`ALLOC_FACTOR` times the input's actual size (plus :data:`ALLOC_SLACK`).

    Returns:
        The unpickled object.

    Raises:
        UnsafePickleError: The input is larger than ``max_bytes``, names a global outside
            ``allow``, sets state it does not admit, or would allocate beyond its budget.
        pickle.UnpicklingError: The input is not a readable pickle (truncated, corrupt).
    """
    if isinstance(source, bytes):
        name, data = "<bytes>", source
        if len(data) > max_bytes:
            raise UnsafePickleError(f"{name}: refusing {len(data):,} bytes: max_bytes={max_bytes}")
    else:
        name = str(source)
        with Path(source).open("rb") as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise UnsafePickleError(f"{name}: refusing a file over max_bytes={max_bytes:,}")
    guard = LoadGuard(name, ALLOC_FACTOR * len(data) + ALLOC_SLACK)
    try:
        return _Unpickler(data, allow, guard).load()
    except pickle.UnpicklingError:
        raise
    except (EOFError, ValueError, TypeError, KeyError, IndexError, struct.error) as error:
        raise pickle.UnpicklingError(f"{name}: not a readable pickle ({error!r})") from error
