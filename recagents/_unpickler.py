"""The bounded pickle machine behind :func:`recagents.safepickle.load` (private).

Why a module of its own: the opcode-level accounting (length prefixes checked against the
bytes left, every built object measured as the tree it expands to, hashing work charged,
nesting capped) is most of the loader's code; :mod:`recagents.safepickle` keeps the public
contract (allow-lists, budgets, :func:`~recagents.safepickle.load`) and imports this when it
loads. The budgets and the reasons behind them are documented there.
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
import struct
from collections.abc import Callable, Iterable, Sized
from typing import Any, NoReturn

import numpy as np

from recagents.safepickle import AllowList, LoadGuard, brief

__all__ = ["BoundedUnpickler"]

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


class BoundedUnpickler(pickle._Unpickler):  # type: ignore[name-defined]
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

    dispatch = dict(pickle._Unpickler.dispatch)  # type: ignore[attr-defined]
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
