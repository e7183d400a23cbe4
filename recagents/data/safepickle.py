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
size: an array can be no larger than the bytes the file could have carried.

Nor is the pickle machine itself bounded by the input's size. A length prefix (``BYTEARRAY8``
and its kin) can name more bytes than the file holds, so every length is checked against the
input left before anything is read or allocated. And memo references let a few bytes describe
an exponentially large object: ``t = (t, t)`` repeated thirty times is a tree of a billion
nodes, which hashing (as a dict key), comparing, copying or converting to plain lists walks
node by node. So the loader measures each object it builds as that tree, its *expanded
size* (a shared reference counts again wherever it appears; an array counts its elements),
and refuses any object larger than :data:`WORK_FACTOR` times the input's size (plus
:data:`WORK_SLACK`) or nested deeper than :data:`MAX_DEPTH`; the work of hashing dict keys
and set items (equal hashes, which make every insertion compare, included) is charged to a
budget of the same size. A container may not grow once it sits inside another, so the sizes
measured stay true (and reference cycles are refused). Whatever the file says, loading it
takes time and memory linear in its size.

Why the pure-Python unpickler (``pickle._Unpickler``): the C one cannot intercept ``BUILD``,
the opcode that hands an object its state, and numpy arrays and dtypes get their shape and
layout through it. Here ``BUILD`` is admitted only for objects whose type the allow-list
names a checker for, and ``NEWOBJ``/``INST``/``OBJ`` (direct class construction) and
persistent ids are refused outright. The pure-Python machine is slower, which does not
matter for the small released files this serves. It lives in :mod:`recagents.data.safepickle`
(``BoundedUnpickler``), which :func:`load` imports.
"""

from __future__ import annotations

import _compat_pickle
import io
import os
import pickle
import reprlib
import struct
from collections.abc import Callable, Iterable, Mapping, Sized
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, NoReturn

import numpy as np

#: Largest input :func:`load` reads unless told otherwise (256 MiB).
DEFAULT_MAX_BYTES = 256 << 20

#: Guarded constructors may allocate at most this many times the input's size, in total
#: (plus :data:`ALLOC_SLACK`). numpy's pickles carry every array's bytes, so real files
#: stay near a factor of 1.
ALLOC_FACTOR = 4

#: Allocation allowed on top of ``ALLOC_FACTOR`` times the input's size (64 KiB), so that a
#: tiny file may still hold, say, an empty wide string array.
ALLOC_SLACK = 64 << 10

#: Any one object a pickle builds may have an expanded size (its nodes counted as a tree:
#: a shared reference again wherever it appears, an array once per element) of at most this
#: many times the input's size in bytes, plus :data:`WORK_SLACK`; the work of hashing dict
#: keys and set items is charged to a second budget of the same size. Plain pickles stay
#: under 1 node per byte (each node takes an opcode of at least one byte); shared references
#: in real files add little.
WORK_FACTOR = 8

#: Expanded size (and hashing work) allowed on top of :data:`WORK_FACTOR` times the input's
#: size: 65,536 nodes, so that a small file may still share a few modest objects.
WORK_SLACK = 1 << 16

#: Deepest nesting of containers a pickle may build. Deeper ones (two bytes a level) make
#: any recursive walk of the result (``repr``, ``copy.deepcopy``, conversion to plain
#: lists) fail with RecursionError.
MAX_DEPTH = 100


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle that asked for something the allow-list refuses; the message names both."""


class _BriefRepr(reprlib.Repr):
    """``reprlib`` with short limits, and numpy arrays by shape and dtype only."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = self.maxother = 60

    def repr_ndarray(self, array: np.ndarray, level: int) -> str:
        return f"<numpy array of shape {array.shape}, dtype {array.dtype}>"


_BRIEF = _BriefRepr()


def brief(obj: Any) -> str:
    """A short ``repr`` of anything a pickle built, for error messages.

    The full ``repr`` of an object with shared references is as large as its expanded size,
    and that of an int with more than 4,300 digits raises; this one stays under a few hundred
    characters.
    """
    try:
        return _BRIEF.repr(obj)
    except Exception:  # noqa: BLE001 - any repr may fail; the message must not
        return f"<a {type(obj).__name__}>"


class LoadGuard:
    """What one :func:`load` call lets guarded constructors do: the file's name and budgets.

    Guarded stand-ins (see :class:`AllowList`) receive it, charge every allocation to it
    and refuse through it, so that each refusal names the file. The unpickler charges the
    expanded size of what it builds and the work of hashing to it too.

    Args:
        source: The file's name, shown in every refusal.
        budget: Bytes that guarded constructors may allocate.
        work: Largest expanded size of any one object, and steps of hashing in all
            (default: ``budget``).
    """

    def __init__(self, source: str, budget: int, work: int | None = None) -> None:
        self.source = source
        self.budget = budget
        self.left = budget
        self.max_size = budget if work is None else work
        self.work_left = self.max_size

    def refuse(self, what: str, why: str) -> NoReturn:
        """Raise the one refusal error, naming the file, what was asked and why not."""
        raise UnsafePickleError(f"{self.source}: refusing {what}: {why}")

    def check_size(self, what: str, size: int, depth: int) -> None:
        """Refuse ``what`` if its expanded size or its nesting is beyond this file's limits."""
        if size > self.max_size:
            self.refuse(
                what,
                f"it would expand to {size:,} objects, counting every shared reference "
                f"again (as hashing, comparing or converting it does), more than this file's "
                f"limit of {self.max_size:,} ({WORK_FACTOR}x its size + {WORK_SLACK:,})",
            )
        if depth > MAX_DEPTH:
            self.refuse(what, f"it nests containers {depth} deep, more than MAX_DEPTH={MAX_DEPTH}")

    def charge_work(self, what: str, steps: int) -> None:
        """Take ``steps`` of hashing work from the budget before they are done, or refuse."""
        if steps > self.work_left:
            self.refuse(
                what,
                f"hashing it takes {steps:,} steps (shared references and equal hashes "
                f"counted), more than the {self.work_left:,} left of this file's work budget "
                f"({WORK_FACTOR}x its size + {WORK_SLACK:,})",
            )
        self.work_left -= steps

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


# --------------------------------------------------------------------------- the loader


#: How much :func:`read_at_most` reads at a time (1 MiB).
_CHUNK = 1 << 20


def read_at_most(handle: BinaryIO, limit: int) -> bytes:
    """The first ``limit + 1`` bytes of ``handle`` at most, allocating only what it holds.

    ``handle.read(limit + 1)`` would allocate ``limit + 1`` bytes before reading (256 MiB
    for every small file under :data:`DEFAULT_MAX_BYTES`), so it reads 1 MiB at a time.
    """
    chunks, total = [], 0
    while total <= limit:
        chunk = handle.read(min(limit + 1 - total, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


#: Errors the unpickler raises on input it cannot read; reported as one UnpicklingError.
_UNREADABLE = (
    EOFError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    ArithmeticError,
    struct.error,
)


# --------------------------------------------------------------------------- the pickle machine


#: Objects that hold no references to other objects the pickle built: their expanded size
#: is 1 however they were made.
_ATOMS = (type(None), bool, int, float, complex, str, bytes, bytearray, np.generic, np.dtype)
#: Expanded size and depth of an atom (anything the unpickler has not measured).
_LEAF = (1, 0)
#: Opcodes whose argument is a length followed by that many bytes: the length's struct
#: format and what the bytes become.
_COUNTED: dict[str, tuple[str, Callable[[Any, bytes], Any]]] = {
    "LONG1": ("<B", lambda self, data: pickle.decode_long(data)),
    "LONG4": ("<i", lambda self, data: pickle.decode_long(data)),
    "SHORT_BINSTRING": ("<B", lambda self, data: self._decode_string(data)),
    "BINSTRING": ("<i", lambda self, data: self._decode_string(data)),
    "SHORT_BINBYTES": ("<B", lambda self, data: data),
    "BINBYTES": ("<I", lambda self, data: data),
    "BINBYTES8": ("<Q", lambda self, data: data),
    "SHORT_BINUNICODE": ("<B", lambda self, data: str(data, "utf-8", "surrogatepass")),
    "BINUNICODE": ("<I", lambda self, data: str(data, "utf-8", "surrogatepass")),
    "BINUNICODE8": ("<Q", lambda self, data: str(data, "utf-8", "surrogatepass")),
    "BYTEARRAY8": ("<Q", lambda self, data: bytearray(data)),
}


if TYPE_CHECKING:

    class _Unframer:
        """What the unpickler below uses of ``pickle._Unframer``, which typeshed omits."""

        current_frame: io.BytesIO | None

        def load_frame(self, frame_size: int) -> None: ...

    class _PurePythonUnpickler(pickle._Unpickler):
        """``pickle._Unpickler`` with the undocumented parts this module uses declared.

        typeshed declares only its public methods, and types ``dispatch`` as taking the C
        ``Unpickler``; the pure-Python machine's own state and helpers are these.
        """

        dispatch: ClassVar[dict[int, Callable[[Any], None]]]
        proto: int
        stack: list[Any]
        _unframer: _Unframer

        def read(self, n: int, /) -> bytes: ...
        def append(self, obj: Any, /) -> None: ...
        def pop_mark(self) -> list[Any]: ...
        def _decode_string(self, value: bytes) -> Any: ...

else:
    _PurePythonUnpickler = pickle._Unpickler


class BoundedUnpickler(_PurePythonUnpickler):
    """The pure-Python unpickler, with globals and ``BUILD`` limited to an allow-list.

    Every opcode that makes or fills a container is replaced here so that the container's
    expanded size and depth are measured (``_shape``, by ``id``) and checked before it is
    built; the objects measured are kept alive (``_kept``) so that no ``id`` is reused
    during the load. An object placed inside another (``_inside``) may not grow any more.
    """

    def __init__(self, data: bytes, allow: AllowList, guard: LoadGuard) -> None:
        self._input = io.BytesIO(data)
        super().__init__(self._input)
        self._allow = allow
        self._guard = guard
        self._length = len(data)
        self._shape: dict[int, tuple[int, int]] = {}
        self._kept: list[Any] = []
        self._inside: set[int] = set()
        self._hashes: dict[int, dict[int, int]] = {}

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
        self._guard.refuse(f"persistent id {brief(pid)}", "only self-contained pickles load")

    # ------------------------------------------------------------------ reading

    def _remaining(self) -> int:
        """Bytes the next read can return: the rest of the current frame, else of the input."""
        frame = self._unframer.current_frame
        if frame is not None:
            with frame.getbuffer() as view:
                left = view.nbytes - frame.tell()
            if left:
                return left
        return self._length - self._input.tell()

    def _read_counted(self, opcode: str, fmt: str) -> bytes:
        """The bytes after a length prefix, refused before reading if the input is shorter."""
        width = struct.calcsize(fmt)
        head = self.read(width)
        if len(head) != width:
            raise EOFError(f"{opcode} cut short")
        (length,) = struct.unpack(fmt, head)
        if length < 0:
            self._guard.refuse(opcode, f"its length prefix is negative ({length})")
        if length > 0xFF and length > self._remaining():
            self._guard.refuse(
                opcode,
                f"its length prefix says {length:,} bytes, only {self._remaining():,} are left",
            )
        data = self.read(length)
        if len(data) != length:
            raise EOFError(f"{opcode} cut short")
        return data

    def _load_frame(self) -> None:
        head = self.read(8)
        if len(head) != 8:
            raise EOFError("FRAME cut short")
        (length,) = struct.unpack("<Q", head)
        left = self._length - self._input.tell()  # a frame is read from the input itself
        if length > left:
            self._guard.refuse(
                "FRAME", f"its length prefix says {length:,} bytes, only {left:,} are left"
            )
        self._unframer.load_frame(length)

    # ------------------------------------------------------------------ measuring

    def _take(
        self, what: str, children: Iterable[Any], size: int = 1, depth: int = 0, into: Any = None
    ) -> tuple[int, int]:
        """A container's expanded size and depth once ``children`` join it, or a refusal.

        ``size`` and ``depth`` are the container's before (a new one: 1 and 0). The children
        are marked as inside another object: they may no longer grow. ``into`` is the
        container when it exists already: finding it among its children is a cycle.
        """
        shape, inside = self._shape, self._inside
        deepest = 0
        for child in children:
            measured = shape.get(id(child))
            if measured is None:  # an atom
                size += 1
                continue
            if child is into:
                self._guard.refuse(what, "the container would hold itself (a reference cycle)")
            size += measured[0]
            if measured[1] > deepest:
                deepest = measured[1]
            inside.add(id(child))
        depth = max(depth, deepest + 1)
        self._guard.check_size(what, size, depth)
        return size, depth

    def _keep(self, obj: Any, shape: tuple[int, int]) -> None:
        """Record a new container's measure and push it."""
        self._shape[id(obj)] = shape
        self._kept.append(obj)
        self.append(obj)

    def _place(self, obj: Any) -> None:
        """Mark ``obj`` as used by another object (``REDUCE`` arguments, ``BUILD`` state)."""
        if id(obj) in self._shape:
            self._inside.add(id(obj))

    def _hash_in(self, owner: int | None, keys: list[Any], what: str) -> None:
        """Charge the work of hashing ``keys`` into a dict or set before it is done.

        Hashing a key walks its expanded size; a key whose hash equals ``n`` keys already
        in the container (``owner``, an ``id``; ``None`` for a new one) is compared with
        each of them.
        """
        shape = self._shape
        sizes = [shape.get(id(key), _LEAF)[0] for key in keys]
        self._guard.charge_work(what, sum(sizes))
        seen = self._hashes.setdefault(owner, {}) if owner is not None else {}
        for key, size in zip(keys, sizes, strict=True):
            digest = hash(key)
            equal = seen.get(digest, 0)
            if equal:
                self._guard.charge_work(what, equal * size)
            seen[digest] = equal + 1

    def _grow(self, kind: type, items: list[Any], what: str) -> Any:
        """The container on top of the stack, checked and re-measured before ``items`` join it."""
        target = self.stack[-1]
        if not isinstance(target, kind):
            self._guard.refuse(what, f"it adds items to a {type(target).__name__}")
        if not items:
            return target
        key = id(target)
        if key in self._inside:
            self._guard.refuse(
                what, "the container already sits inside another one (a reference cycle?)"
            )
        measured = self._shape.get(key)
        if measured is None:
            measured = _LEAF
            self._kept.append(target)
        self._shape[key] = self._take(what, items, measured[0], measured[1], into=target)
        return target

    def _note(self, obj: Any, inputs: tuple[int, int], what: str) -> None:
        """Measure what ``REDUCE`` or ``BUILD`` made of inputs measuring ``inputs``.

        Atoms refer to nothing; a plain array is its elements; anything else may refer to
        all of its inputs, and its own elements (``len``) come on top.
        """
        if isinstance(obj, _ATOMS):
            return
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                shape = (1 + inputs[0] + obj.size, 1 + inputs[1])
            else:
                shape = (1 + obj.size, 1)
        else:
            own = len(obj) if isinstance(obj, Sized) else 0
            shape = (1 + inputs[0] + own, 1 + inputs[1])
        key = id(obj)
        old = self._shape.get(key)
        if old is not None:
            if shape[0] <= old[0] and shape[1] <= old[1]:
                return
            if key in self._inside:
                self._guard.refuse(what, "it changes an object that already sits inside another")
            shape = (max(shape[0], old[0]), max(shape[1], old[1]))
        self._guard.check_size(what, *shape)
        self._shape[key] = shape
        self._kept.append(obj)

    # ------------------------------------------------------------------ opcodes

    def _load_empty_list(self) -> None:
        self._keep([], (1, 1))

    def _load_empty_dict(self) -> None:
        self._keep({}, (1, 1))

    def _load_empty_set(self) -> None:
        self._keep(set(), (1, 1))

    def _load_tuple(self) -> None:
        items = self.pop_mark()
        self._keep(tuple(items), self._take("a tuple", items))

    def _tuple_of(self, count: int) -> None:
        items = self.stack[-count:]
        if len(items) != count:
            raise IndexError(f"TUPLE{count} on a stack of {len(items)}")
        del self.stack[-count:]
        self._keep(tuple(items), self._take("a tuple", items))

    def _load_tuple1(self) -> None:
        self._tuple_of(1)

    def _load_tuple2(self) -> None:
        self._tuple_of(2)

    def _load_tuple3(self) -> None:
        self._tuple_of(3)

    def _load_list(self) -> None:
        items = self.pop_mark()
        self._keep(items, self._take("a list", items))

    def _load_dict(self) -> None:
        items = self.pop_mark()
        if len(items) % 2:
            raise IndexError("DICT with a key but no value")
        shape = self._take("a dict", items)
        keys = items[0::2]
        self._hash_in(None, keys, "a dict")
        self._keep(dict(zip(keys, items[1::2], strict=True)), shape)

    def _load_frozenset(self) -> None:
        items = self.pop_mark()
        shape = self._take("a frozenset", items)
        self._hash_in(None, items, "a frozenset")
        self._keep(frozenset(items), shape)

    def _load_append(self) -> None:
        value = self.stack.pop()
        self._grow(list, [value], "APPEND").append(value)

    def _load_appends(self) -> None:
        items = self.pop_mark()
        self._grow(list, items, "APPENDS").extend(items)

    def _load_setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        target = self._grow(dict, [key, value], "SETITEM")
        self._hash_in(id(target), [key], "a dict key")
        target[key] = value

    def _load_setitems(self) -> None:
        items = self.pop_mark()
        if len(items) % 2:
            raise IndexError("SETITEMS with a key but no value")
        target = self._grow(dict, items, "SETITEMS")
        keys = items[0::2]
        self._hash_in(id(target), keys, "dict keys")
        for key, value in zip(keys, items[1::2], strict=True):
            target[key] = value

    def _load_additems(self) -> None:
        items = self.pop_mark()
        target = self._grow(set, items, "ADDITEMS")
        self._hash_in(id(target), items, "set items")
        target.update(items)

    def _load_reduce(self) -> None:
        args = self.stack.pop()
        func = self.stack[-1]
        what = f"the result of {getattr(func, '__name__', type(func).__name__)}"
        if not isinstance(args, tuple):
            self._guard.refuse(what, "REDUCE's arguments are not a tuple")
        if func is set or func is frozenset:  # pickle's set([...]): the items get hashed
            if args and not (len(args) == 1 and type(args[0]) in (list, tuple)):
                self._guard.refuse(f"builtins.{func.__name__}", "only of a list of items")
            if args:
                self._hash_in(None, list(args[0]), f"builtins.{func.__name__}")
        inputs = self._shape.get(id(args), _LEAF)
        result = func(*args)
        self._place(args)
        self.stack[-1] = result
        self._note(result, inputs, what)

    def _load_build(self) -> None:
        state = self.stack.pop()
        obj = self.stack[-1]
        for kind, hook in self._allow.builders:
            if isinstance(obj, kind):
                inputs = self._shape.get(id(state), _LEAF)
                hook(obj, state, self._guard)
                self._place(state)
                self._note(obj, inputs, f"the state of a {type(obj).__name__}")
                return
        kinds = ", ".join(kind.__name__ for kind, _ in self._allow.builders) or "nothing"
        self._guard.refuse(
            f"setting the state of a {type(obj).__name__}",
            f"the {self._allow.name} allow-list sets state only on: {kinds}",
        )

    def _refuse_opcode(self) -> NoReturn:
        self._guard.refuse("direct class construction (NEWOBJ/INST/OBJ)", "not plain data")

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)
    for _opcode in (pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.INST, pickle.OBJ):
        dispatch[_opcode[0]] = _refuse_opcode
    for _opcode, _method in (
        (pickle.FRAME, _load_frame),
        (pickle.EMPTY_LIST, _load_empty_list),
        (pickle.EMPTY_DICT, _load_empty_dict),
        (pickle.EMPTY_SET, _load_empty_set),
        (pickle.TUPLE, _load_tuple),
        (pickle.TUPLE1, _load_tuple1),
        (pickle.TUPLE2, _load_tuple2),
        (pickle.TUPLE3, _load_tuple3),
        (pickle.LIST, _load_list),
        (pickle.DICT, _load_dict),
        (pickle.FROZENSET, _load_frozenset),
        (pickle.APPEND, _load_append),
        (pickle.APPENDS, _load_appends),
        (pickle.SETITEM, _load_setitem),
        (pickle.SETITEMS, _load_setitems),
        (pickle.ADDITEMS, _load_additems),
        (pickle.REDUCE, _load_reduce),
        (pickle.BUILD, _load_build),
    ):
        dispatch[_opcode[0]] = _method
    del _opcode, _method


def _counted_loader(opcode: str, fmt: str, make: Callable[[Any, bytes], Any]) -> Any:
    def load_counted(self: BoundedUnpickler) -> None:
        self.append(make(self, self._read_counted(opcode, fmt)))

    return load_counted


for _name, (_fmt, _make) in _COUNTED.items():
    BoundedUnpickler.dispatch[getattr(pickle, _name)[0]] = _counted_loader(_name, _fmt, _make)
del _name, _fmt, _make


def load(
    source: str | os.PathLike[str] | bytes,
    allow: AllowList | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Any:
    """Unpickle a file (or bytes) rebuilding only what ``allow`` admits.

    Time and memory are linear in the input's size: see the module docstring.

    Args:
        source: A path, or the pickle's bytes.
        allow: What the pickle may name: :data:`~recagents.data.numpy_pickle.NUMPY_PLAIN`
            (``None``, the default), :data:`PLAIN`, or a union of allow-lists (``a | b``).
        max_bytes: Largest input read; guarded constructors may then allocate at most
            :data:`ALLOC_FACTOR` times the input's actual size (plus :data:`ALLOC_SLACK`),
            and any object built may expand to :data:`WORK_FACTOR` times it (plus
            :data:`WORK_SLACK`).

    Returns:
        The unpickled object.

    Raises:
        UnsafePickleError: The input is larger than ``max_bytes``, names a global outside
            ``allow``, sets state it does not admit, claims more bytes than it holds, or
            would allocate, expand, nest or hash beyond its budgets.
        pickle.UnpicklingError: The input is not a readable pickle (truncated, corrupt).
    """
    if allow is None:
        from recagents.data.numpy_pickle import NUMPY_PLAIN

        allow = NUMPY_PLAIN
    if isinstance(source, bytes):
        name, data = "<bytes>", source
        if len(data) > max_bytes:
            raise UnsafePickleError(f"{name}: refusing {len(data):,} bytes: max_bytes={max_bytes}")
    else:
        name = str(source)
        with Path(source).open("rb") as handle:
            data = read_at_most(handle, max_bytes)
        if len(data) > max_bytes:
            raise UnsafePickleError(f"{name}: refusing a file over max_bytes={max_bytes:,}")
    guard = LoadGuard(
        name, ALLOC_FACTOR * len(data) + ALLOC_SLACK, WORK_FACTOR * len(data) + WORK_SLACK
    )
    try:
        return BoundedUnpickler(data, allow, guard).load()
    except UnsafePickleError:
        raise
    except pickle.UnpicklingError as error:
        raise pickle.UnpicklingError(f"{name}: not a readable pickle ({_reason(error)})") from None
    except _UNREADABLE as error:
        raise pickle.UnpicklingError(f"{name}: not a readable pickle ({_reason(error)})") from None


def _reason(error: BaseException) -> str:
    """``error``'s type and message, cut to 300 characters."""
    args = error.args
    text = args[0] if len(args) == 1 and isinstance(args[0], str) else brief(args)
    return f"{type(error).__name__}: {text[:300]}"
