"""What the restricted unpickler checks before it calls an allowed function or sets a state.

An allowed name is not enough: numpy, pandas and the builtins take their
arguments and states on trust, and some trust them with memory. A ``numpy.dtype``
whose state says it holds no objects while a field is an object makes numpy read
pointers from the sender's bytes; a ``numpy.dtype`` made with ``copy=False`` is
numpy's own shared one, so setting its state would change every float64 of the
process. So, in :class:`~.restricted.RestrictedUnpickler`:

- every call (``REDUCE``, ``NEWOBJ``, ``INST``, ``OBJ``) goes through
  :meth:`Checks.call`: ``numpy.dtype`` only of a plain type string and as a new
  object; arrays only through numpy's own pickle form (``_reconstruct`` and
  ``_mareconstruct`` of an empty array, ``_frombuffer`` and ``scalar`` of a layout
  without objects); never an array class called directly; ``bytes`` and
  ``bytearray`` never of a size;
- every ``BUILD`` goes through :meth:`Checks.build`: a dtype's state is never set
  on the dtype (it is read, checked and a new dtype made from it, which replaces
  the old one on the stack and in the memo); an array's state only once, on the
  empty array numpy's pickle form made, with data of exactly its size, and objects
  only as a list of objects this loader rebuilt; pandas, numpy random and uuid
  states only of the shapes they pickle; any other state only on a type the owner
  allowed by name;
- ``SETITEMS``, ``APPENDS`` and ``ADDITEMS`` only on the builtin containers.

A dtype or an array whose memory would hold objects read from bytes is refused,
however it is named or built.

Python 3.8 syntax: it runs where the restricted loader does, our side and the
owner's kernels.
"""

from __future__ import annotations

import collections
import pickle
import re
import sys
import types
from collections.abc import Callable
from typing import Any


class RefusedGlobalError(pickle.UnpicklingError):
    """A restricted pickle names, calls or builds something that is not allowed.

    Attributes:
        refused: ``module.qualname`` of what it names.
        how: How it names it, when not by a plain global (`` through builtins.getattr``).
        allowable: Whether the setting can allow it (patching a class never is).
    """

    def __init__(self, refused: str, how: str = "", allowable: bool = True) -> None:
        super().__init__(f"{refused}{how} is not allowed")
        self.refused = refused
        self.how = how
        self.allowable = allowable


#: A numpy type string as numpy's pickles spell one: ``f8``, ``<U3``, ``V24``, ``M8``, ``O``.
_TYPE_STRING = re.compile(r"[<>|=]?[A-Za-z?]\d*")
_BYTES = (bytes, bytearray, memoryview, pickle.PickleBuffer)
_DICTS = (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)
_STATE_VERSIONS = (3, 4)


def name_of(value: Any) -> str:
    """``module.qualname`` of a class or function, or of an instance's type."""
    plain = isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType))
    kind = value if plain else type(value)
    module = getattr(kind, "__module__", None) or "?"
    qualname = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", "?")
    return f"{module}.{qualname}"


def refuse(what: Any, how: str) -> RefusedGlobalError:
    """The error for a call or a state no setting can allow."""
    return RefusedGlobalError(what if isinstance(what, str) else name_of(what), how, False)


def _numpy() -> Any:
    return sys.modules.get("numpy")


def _multiarray() -> Any:
    """numpy's ``multiarray`` module (``numpy._core`` since numpy 2, ``numpy.core`` before)."""
    for core in ("_core", "core"):
        module = sys.modules.get(f"numpy.{core}.multiarray")
        if module is not None:
            return module
    raise refuse("numpy", " (not imported)")


def holds_objects(dtype: Any) -> bool:
    """Whether a dtype's layout holds objects anywhere: read from its fields and kinds,
    never from its flags (a forged state sets those)."""
    if dtype.kind == "O":
        return True
    if dtype.subdtype is not None and holds_objects(dtype.subdtype[0]):
        return True
    return any(holds_objects(field[0]) for field in (dtype.fields or {}).values())


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value
    ):
        raise refuse("numpy.ndarray", " (a shape that is not a tuple of sizes)")
    return value


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def _plain_dtype(dtype: Any, objects: bool = False) -> Any:
    """``dtype`` if it is one, and holds no objects (or, with ``objects``, is exactly
    the object dtype, whose arrays come as lists of rebuilt objects)."""
    np = _numpy()
    if np is None or not isinstance(dtype, np.dtype):
        raise refuse("numpy.dtype", f" (a {name_of(dtype)} where a dtype belongs)")
    if holds_objects(dtype) and not (objects and dtype.kind == "O" and dtype.fields is None):
        raise refuse("numpy.dtype", " (a layout that holds objects)")
    return dtype


class Checks:
    """The checks of one load: which arrays still await their one state, which types the
    owner allowed (see :class:`~.restricted.SharedKernelPulls`)."""

    def __init__(self, extra: Callable[[Any], bool]) -> None:
        self._extra = extra
        # Arrays just made empty, awaiting their one state, by id (kept, so ids stay theirs).
        self._fresh: dict[int, Any] = {}
        # What the pickle named, by id (kept, so ids stay theirs), with what calling it
        # runs: the check of its arguments, decided once when it is named.
        self._named: dict[int, tuple[Any, Callable[..., Any]]] = {}

    def named(self, found: Any) -> Any:
        """``found``, which the loader allowed by name: the only things it may call."""
        self._named[id(found)] = (found, self._checked_call(found))
        return found

    def _callable(self, func: Any) -> Callable[..., Any]:
        named = self._named.get(id(func))
        if named is None:
            raise refuse(func, " (called without being named: only named types are called)")
        return named[1]

    # ------------------------------------------------------------------ calls

    def call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
        """``func(*args, **kwargs)`` for a function or class the loader allowed, checked."""
        return self._callable(func)(*args, **(kwargs or {}))

    def _checked_call(self, func: Any) -> Callable[..., Any]:
        """What calling ``func`` runs: ``func`` itself, or its check (numpy's module that
        holds ``func`` is imported by the time the pickle names it)."""
        plain: Callable[..., Any] = func
        if func is bytes or func is bytearray:

            def of_no_size(*args: Any, **kwargs: Any) -> Any:
                if any(isinstance(a, int) for a in args):
                    raise refuse(func, " (of a size)")
                return func(*args, **kwargs)

            return of_no_size
        np = _numpy()
        if np is None:
            return plain
        check = self._numpy_calls(np).get(id(func))
        if check is not None:
            return check
        if isinstance(func, type) and issubclass(func, np.ndarray):

            def directly(*args: Any, **kwargs: Any) -> Any:
                raise refuse(func, " (called directly: arrays come only as numpy pickles them)")

            return directly
        return plain

    def new(self, cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
        """``cls.__new__(cls, *args, **kwargs)`` (``NEWOBJ``), checked as a call of ``cls``."""
        self._callable(cls)
        if not isinstance(cls, type):
            raise refuse(cls, " (NEWOBJ of something that is not a class)")
        np = _numpy()
        if np is not None and (cls is np.dtype or issubclass(cls, (np.ndarray, np.dtype))):
            raise refuse(cls, " (made without its constructor)")
        return cls.__new__(cls, *args, **(kwargs or {}))

    def _numpy_calls(self, np: Any) -> dict[int, Callable[..., Any]]:
        calls: dict[int, Callable[..., Any]] = {id(np.dtype): self._dtype}
        for core in ("_core", "core"):
            multiarray = sys.modules.get(f"numpy.{core}.multiarray")
            numeric = sys.modules.get(f"numpy.{core}.numeric")
            if multiarray is not None:
                calls[id(multiarray._reconstruct)] = self._reconstruct
                calls[id(multiarray.scalar)] = self._scalar
            if numeric is not None and hasattr(numeric, "_frombuffer"):
                calls[id(numeric._frombuffer)] = self._frombuffer
        masked = sys.modules.get("numpy.ma.core")
        if masked is not None:
            calls[id(masked._mareconstruct)] = self._mareconstruct
        return calls

    @staticmethod
    def _dtype(obj: Any, align: Any = False, copy: Any = True) -> Any:
        np = _numpy()
        if not isinstance(obj, str) or not _TYPE_STRING.fullmatch(obj):
            raise refuse("numpy.dtype", f" (of {type(obj).__name__} {str(obj)[:40]!r})")
        if copy is not True or not isinstance(align, bool):
            raise refuse("numpy.dtype", " (numpy's own shared dtype, whose state is not ours)")
        return _plain_dtype(np.dtype(obj, align, True), objects=True)

    def _fresh_array(self, array: Any) -> Any:
        self._fresh[id(array)] = array
        return array

    def _reconstruct(self, subtype: Any, shape: Any, typecode: Any) -> Any:
        np = _numpy()
        kinds = (np.ndarray, np.matrix, np.ma.MaskedArray)
        if subtype not in kinds or shape != (0,) or typecode not in (b"b", "b"):
            raise refuse("numpy._core.multiarray._reconstruct", " (other than an empty array)")
        return self._fresh_array(_multiarray()._reconstruct(subtype, (0,), b"b"))

    def _mareconstruct(self, subtype: Any, baseclass: Any, shape: Any, basetype: Any) -> Any:
        np = _numpy()
        if (
            subtype is not np.ma.MaskedArray
            or baseclass is not np.ndarray
            or shape != (0,)
            or basetype not in (b"b", "b")
        ):
            raise refuse("numpy.ma.core._mareconstruct", " (other than an empty masked array)")
        return self._fresh_array(np.ma.core._mareconstruct(subtype, baseclass, (0,), "b"))

    @staticmethod
    def _frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> Any:
        np = _numpy()
        _plain_dtype(dtype)
        shape = _shape(shape)
        if not isinstance(buffer, _BYTES) or order not in ("C", "F"):
            raise refuse("numpy._core.numeric._frombuffer", " (of something not bytes)")
        if memoryview(buffer).nbytes != _count(shape) * dtype.itemsize:
            raise refuse("numpy._core.numeric._frombuffer", " (bytes not of the array's size)")
        return np.frombuffer(buffer, dtype=dtype).reshape(shape, order=order)

    @staticmethod
    def _scalar(dtype: Any, data: Any = None) -> Any:
        _plain_dtype(dtype)
        if not isinstance(data, (bytes, bytearray)) or len(data) != dtype.itemsize:
            raise refuse("numpy._core.multiarray.scalar", " (bytes not of the dtype's size)")
        return _multiarray().scalar(dtype, bytes(data))

    # ------------------------------------------------------------------ states

    def build(self, target: Any, state: Any) -> Any:
        """Set ``state`` on ``target`` where its check allows; the object that stands for
        ``target`` from now on (a new one for a dtype)."""
        if isinstance(target, type) or type(target).__name__ == "module":
            raise refuse(target, " (setting attributes of a class or module)")
        np = _numpy()
        if np is not None and isinstance(target, np.dtype):
            return _dtype_from_state(np, target, state)
        if np is not None and isinstance(target, np.ndarray):
            return self._array_state(np, target, state)
        if self._extra(type(target)):
            _set_state(target, state)
            return target
        module = type(target).__module__.split(".")[0]
        if module == "pandas" and _pandas_state(target, state):
            _set_state(target, state)
            return target
        if name_of(target) in _SHAPED_STATES and _SHAPED_STATES[name_of(target)](state):
            _set_state(target, state)
            return target
        raise refuse(target, " (setting its state: not a state this loader checks)")

    def _array_state(self, np: Any, target: Any, state: Any) -> Any:
        if self._fresh.pop(id(target), None) is not target:
            raise refuse(target, " (setting the state of an array not just made empty)")
        masked = isinstance(target, np.ma.MaskedArray)
        if not isinstance(state, tuple) or len(state) != (7 if masked else 5):
            raise refuse(target, " (a state not of the form numpy pickles)")
        version, shape, dtype, fortran, data = state[:5]
        shape = _shape(shape)
        _plain_dtype(dtype, objects=True)
        if version != 1 or not isinstance(fortran, bool):
            raise refuse(target, " (a state not of the form numpy pickles)")
        _check_data(dtype, shape, data)
        if masked:
            mask, fill = state[5], state[6]
            _check_data(np.ma.make_mask_descr(dtype), shape, mask)
            if fill is not None and not isinstance(fill, (int, float, complex, str, bytes)):
                _plain_dtype(getattr(fill, "dtype", None))
        target.__setstate__(state)
        return target


def _check_data(dtype: Any, shape: tuple[int, ...], data: Any) -> None:
    """An array's data: a list of exactly its items for objects, else bytes of its size."""
    if holds_objects(dtype):
        if not isinstance(data, list) or len(data) != _count(shape):
            raise refuse("numpy.ndarray", " (objects not as a list of its items)")
    elif not isinstance(data, _BYTES) or memoryview(data).nbytes != _count(shape) * dtype.itemsize:
        raise refuse("numpy.ndarray", " (data not bytes of its size)")


def _dtype_from_state(np: Any, target: Any, state: Any) -> Any:
    """A new dtype made by numpy's constructor from a checked dtype state; ``target`` is
    never changed (an array may already use it)."""
    if not isinstance(state, tuple) or len(state) not in (8, 9) or state[0] not in _STATE_VERSIONS:
        raise refuse("numpy.dtype", " (a state not of the form numpy pickles)")
    endian, subarray, names, fields = state[1:5]
    if not isinstance(endian, str) or endian not in "<>|=" or len(endian) != 1:
        raise refuse("numpy.dtype", " (a byte order that is none)")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in state[5:8]):
        raise refuse("numpy.dtype", " (sizes that are not numbers)")
    if subarray is not None:
        if not isinstance(subarray, tuple) or len(subarray) != 2:
            raise refuse("numpy.dtype", " (a subarray not of the form numpy pickles)")
        base = _plain_dtype(subarray[0])
        made = np.dtype((base, _shape(subarray[1])))
    elif names is not None or fields is not None:
        made = _structured(np, names, fields, state[5])
    else:
        scratch = np.dtype(target, copy=True)  # a copy takes the unit of a datetime
        scratch.__setstate__(state[:7] + (0,) + state[8:])  # its flags are numpy's
        made = np.dtype(scratch.str)
    return _plain_dtype(made, objects=True)


def _structured(np: Any, names: Any, fields: Any, itemsize: int) -> Any:
    if not isinstance(names, tuple) or not isinstance(fields, dict) or set(names) != set(fields):
        raise refuse("numpy.dtype", " (fields not of the form numpy pickles)")
    formats, offsets, titles = [], [], []
    for name in names:
        field = fields[name]
        if not isinstance(name, str) or not isinstance(field, tuple) or len(field) not in (2, 3):
            raise refuse("numpy.dtype", " (fields not of the form numpy pickles)")
        if not isinstance(field[1], int) or (len(field) == 3 and not isinstance(field[2], str)):
            raise refuse("numpy.dtype", " (fields not of the form numpy pickles)")
        formats.append(_plain_dtype(field[0]))
        offsets.append(field[1])
        titles.append(field[2] if len(field) == 3 else None)
    spec: dict[str, Any] = {"names": list(names), "formats": formats, "offsets": offsets}
    if any(title is not None for title in titles):
        spec["titles"] = titles
    if itemsize >= 0:
        spec["itemsize"] = itemsize
    try:
        return np.dtype(spec)
    except (TypeError, ValueError) as exc:
        raise refuse("numpy.dtype", f" (fields numpy refuses: {exc})") from None


def _set_state(target: Any, state: Any) -> None:
    """What pickle's ``BUILD`` does."""
    setstate = getattr(target, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        target.__dict__.update(state)
    for key, value in (slots or {}).items():
        setattr(target, key, value)


def _plain_keys(state: Any) -> bool:
    return isinstance(state, dict) and all(
        isinstance(key, str) and key.isidentifier() and not key.startswith("__") for key in state
    )


def _pandas_state(target: Any, state: Any) -> bool:
    """A pandas object's state as pandas pickles it: attributes by plain names, or a
    backing array's ``(dtype, values[, attributes])``; a categorical's codes in range."""
    if _plain_keys(state):
        return True
    if isinstance(state, tuple) and len(state) == 1:
        return _plain_keys(state[0])
    np = _numpy()
    if not isinstance(state, tuple) or not 2 <= len(state) <= 4:
        return False
    if isinstance(target, sys.modules["pandas"].Categorical):
        codes = state[1]
        categories = getattr(state[0], "categories", None)
        if not isinstance(codes, np.ndarray) or codes.dtype.kind not in "iu" or categories is None:
            return False
        return codes.size == 0 or (int(codes.min()) >= -1 and int(codes.max()) < len(categories))
    return True


def _seed_sequence_state(state: Any) -> bool:
    return isinstance(state, tuple) and len(state) == 5


def _bit_generator_state(state: Any) -> bool:
    return isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict)


def _uuid_state(state: Any) -> bool:
    return _plain_keys(state) and set(state) <= {"int", "is_safe"} and isinstance(state["int"], int)


_SHAPED_STATES: dict[str, Callable[[Any], bool]] = {
    "numpy.random.bit_generator.SeedSequence": _seed_sequence_state,
    "uuid.UUID": _uuid_state,
    **{
        f"numpy.random._{name.lower()}.{name}": _bit_generator_state
        for name in ("MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64")
    },
}


def container_of(target: Any, kinds: tuple[type, ...], extra: Callable[[Any], bool]) -> None:
    """``SETITEMS``, ``APPENDS`` and ``ADDITEMS`` only on the builtin containers (or a type
    the owner allowed): on anything else they call its methods with the sender's values."""
    if type(target) not in kinds and not extra(type(target)):
        raise refuse(target, " (items added to something not a builtin container)")


DICTS = _DICTS
LISTS: tuple[type, ...] = (list, collections.deque)
SETS: tuple[type, ...] = (set,)
