"""Rebuilding variables from a kernel that someone else can run code in, without running theirs.

A pickle is a program: unpickling calls whatever functions the stream names.
Variables pulled from a kernel that only its owner can run code in come back
with plain :func:`pickle.loads`; from a shared kernel (one whose host agent
has given someone else's key a role that executes) or a kernel joined from
someone else's share, they are rebuilt by :class:`RestrictedUnpickler`, which
calls only what data science moves around:

- builtins data types, ``collections``, ``datetime``, ``decimal``,
  ``fractions``, ``uuid``, ``pathlib`` and ``zoneinfo`` values;
- numpy arrays, scalars, dtypes, masked arrays and random generators;
- pandas frames, series, indexes, categoricals, timestamps, periods,
  intervals, offsets and the extension arrays behind them;
- torch tensors as our pickler reduces them (``torch.from_numpy`` and three
  tensor methods), dtypes, sizes, devices and ``nn.Parameter``;
- the ``module.Qualname`` entries of ``c.SharedKernelPulls.allowed_types``.

Everything else is refused before it is called, with an error naming the
variable, what its pickle would have called, and the setting that allows it.
Each entry is an exact ``(module, qualname)`` pair (whole modules are never
allowed: ``numpy`` holds ``numpy.f2py``, ``builtins`` holds ``eval``);
``getattr`` is allowed only for the exact class attributes listed, and
``type`` only for ``type(None)`` and the like. A name at another path of the
same library (``pandas.core.frame.DataFrame`` from a host with an older
pandas) is allowed when it is the very object an allowed pair names, found in
a module that is already imported, without importing anything new.

An allowed name is not enough: each call, state and item added is checked too
(:mod:`.restricted_checks`). Only what the pickle named is called; a dtype or an
array whose memory would hold objects read from bytes is refused however it is
built; a state is set only where its form is checked (never on a class or module,
so a pickle cannot patch a library), and items are added only to builtin
containers.

It runs on our side (``%remote_pull``) and inside the owner's kernels, which
rebuild what a hardware switch carries or a wake restores from such a kernel
(shipped to hosts with the kernel side of transfers: Python 3.8 syntax). It uses
the pure-Python unpickler, whose opcodes can be checked one by one.
"""

from __future__ import annotations

import importlib
import io
import pickle
import pickletools
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, ClassVar, Final

from traitlets import List, TraitError, Unicode, validate
from traitlets.config import Configurable

from .allowlist import ALLOWED, ALLOWED_ATTRIBUTES
from .errors import RefusedVariableError
from .pickling import Pickled, rebuild_error
from .restricted_checks import DICTS, LISTS, SETS, Checks, RefusedGlobalError, container_of

SETTING: Final = "c.SharedKernelPulls.allowed_types"
"""The setting that allows more types, as written in ``jupyter_server_config.py``."""


_SAME_OBJECT_PACKAGES: Final = ("numpy", "pandas", "torch", "pathlib")
_SINGLETON_TYPES: Final = (None, Ellipsis, NotImplemented)


class SharedKernelPulls(Configurable):
    """How variables pulled from a kernel someone else can run code in are rebuilt."""

    allowed_types = List(
        Unicode(),
        config=True,
        help="Types and functions (module.Qualname, for example 'sklearn.linear_model."
        "_base.LinearRegression') that a pickle pulled from a shared kernel, or from a "
        "kernel joined from someone else's share, may name beyond the data types of "
        "builtins, numpy, pandas and torch. Unpickling calls them with arguments that "
        "whoever can run code in that kernel chooses: list only what cannot run code "
        "or touch files (never builtins.eval, os.system, pickle.loads ...).",
    )

    @validate("allowed_types")
    def _check_allowed_types(self, proposal: Any) -> list[str]:
        entries: list[str] = list(proposal["value"])
        for entry in entries:
            parts = entry.split(".")
            if len(parts) < 2 or not all(part.isidentifier() for part in parts):
                raise TraitError(
                    f"{entry!r} is not module.Qualname (such as 'mypackage.models.Result')"
                )
        return entries


def _walk(owner: Any, qualname: str, static: bool) -> Any:
    """The object at ``qualname`` inside ``owner``; None if there is none.

    ``static`` looks only in ``__dict__`` (no ``__getattr__`` hook of a module
    runs, so nothing is imported).
    """
    for part in qualname.split("."):
        if not part or part == "<locals>":
            return None
        if static:
            namespace = getattr(owner, "__dict__", None)
            if namespace is None or part not in namespace:
                return None
            owner = namespace[part]
        else:
            owner = getattr(owner, part, None)
            if owner is None:
                return None
    return owner


def _import(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


class RestrictedUnpickler(pickle._Unpickler):
    """An unpickler that calls nothing outside :data:`ALLOWED` and ``allowed_types``.

    Args:
        file: The pickle stream.
        buffers: Its out-of-band buffers (protocol 5).
        allowed_types: Extra ``module.Qualname`` entries (see :class:`SharedKernelPulls`).
    """

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)
    # pickle._Unpickler's own state, which typeshed leaves out.
    stack: list[Any]
    metastack: list[list[Any]]
    memo: dict[int, Any]
    append: Callable[[Any], None]

    def __init__(
        self, file: io.BytesIO, *, buffers: Iterable[Any] = (), allowed_types: Iterable[str] = ()
    ) -> None:
        super().__init__(file, buffers=buffers)
        self._extra = frozenset(allowed_types)
        self._checks = Checks(self._allowed_type)

    def _allowed_type(self, kind: Any) -> bool:
        """Whether the owner allowed ``kind`` by name (its states are then set as they come)."""
        module, qualname = getattr(kind, "__module__", None), getattr(kind, "__qualname__", None)
        return f"{module}.{qualname}" in self._extra

    def _allowed(self, module: str, qualname: str) -> bool:
        return (module, qualname) in ALLOWED or f"{module}.{qualname}" in self._extra

    def find_class(self, module: str, name: str) -> Any:
        """The object ``module.name`` if it is allowed.

        Raises:
            RefusedGlobalError: It is not.
        """
        return self._checks.named(self._find_class(module, name))

    def _find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("builtins", "getattr"):
            return self._getattr
        if (module, name) == ("builtins", "type"):
            return _type_of
        if self._allowed(module, name):
            imported = _import(module)
            found = _walk(imported, name, static=False) if imported is not None else None
            if found is None:
                raise pickle.UnpicklingError(f"cannot find {module}.{name} here")
            return found
        found = self._same_object(module, name)
        if found is None:
            raise RefusedGlobalError(f"{module}.{name}")
        return found

    def _same_object(self, module: str, name: str) -> Any:
        """An allowed object named at another path of its library, else None."""
        top = module.split(".")[0]
        if top not in _SAME_OBJECT_PACKAGES or _import(top) is None:
            return None
        imported = sys.modules.get(module)  # never imported here: it may be a script
        if imported is None:
            return None
        found = _walk(imported, name, static=True)
        if found is None:
            return None
        if module == "torch" and _is_torch_dtype(found):
            return found
        home, qualname = getattr(found, "__module__", None), getattr(found, "__qualname__", None)
        if not isinstance(home, str) or not isinstance(qualname, str):
            return None
        if not self._allowed(home, qualname) or home not in sys.modules:
            return None
        return found if _walk(sys.modules[home], qualname, static=True) is found else None

    def _getattr(self, owner: Any, name: str, *default: Any) -> Any:
        """``getattr`` of the exact class attributes allowed.

        Raises:
            RefusedGlobalError: Any other.
        """
        module = getattr(owner, "__module__", None) if isinstance(owner, type) else None
        qualname = getattr(owner, "__qualname__", None)
        key = (module, qualname, name)
        if module is None or (
            key not in ALLOWED_ATTRIBUTES and f"{module}.{qualname}.{name}" not in self._extra
        ):
            where = f"{module}.{qualname}" if module else type(owner).__name__
            raise RefusedGlobalError(f"{where}.{name}", " (through builtins.getattr)")
        if (
            not isinstance(module, str)
            or not isinstance(qualname, str)
            or _walk(sys.modules.get(module), qualname, static=True) is not owner
        ):
            raise RefusedGlobalError(
                f"{module}.{qualname}.{name}",
                " (on a class that is not the one its name says)",
                allowable=False,
            )
        return self._checks.named(getattr(owner, name))

    # Every opcode that calls something, sets a state or adds items goes through the
    # checks of restricted_checks (pickle._Unpickler's own, with the check added).
    def _load_reduce(self) -> None:
        stack = self.stack
        args = stack.pop()
        stack[-1] = self._checks.call(stack[-1], tuple(args), None)

    def _load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._checks.new(cls, tuple(args), None))

    def _load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._checks.new(cls, tuple(args), kwargs))

    def _instantiate(self, klass: Any, args: list[Any]) -> None:
        self.append(self._checks.call(klass, tuple(args), None))

    def _load_build(self) -> None:
        """``BUILD`` where :meth:`.Checks.build` allows it: a pickle never patches a library,
        and sets only the states it checks (a dtype's becomes a new dtype)."""
        stack = self.stack
        state = stack.pop()
        target = stack[-1]
        built = self._checks.build(target, state)
        if built is not target:
            stack[-1] = built
            for key, value in list(self.memo.items()):
                if value is target:
                    self.memo[key] = built

    def _adding_to(self, kinds: tuple[type, ...], depth: int) -> None:
        """Check the container items are added to: ``depth`` down the stack, or (0) the
        object under the last mark."""
        try:
            target = self.metastack[-1][-1] if depth == 0 else self.stack[-depth]
        except IndexError:
            raise pickle.UnpicklingError("unpickling stack underflow") from None
        container_of(target, kinds, self._allowed_type)

    def _load_setitem(self) -> None:
        self._adding_to(DICTS, 3)
        pickle._Unpickler.load_setitem(self)  # type: ignore[attr-defined]

    def _load_setitems(self) -> None:
        self._adding_to(DICTS, 0)
        pickle._Unpickler.load_setitems(self)  # type: ignore[attr-defined]

    def _load_append(self) -> None:
        self._adding_to(LISTS, 2)
        pickle._Unpickler.load_append(self)  # type: ignore[attr-defined]

    def _load_appends(self) -> None:
        self._adding_to(LISTS, 0)
        pickle._Unpickler.load_appends(self)  # type: ignore[attr-defined]

    def _load_additems(self) -> None:
        self._adding_to(SETS, 0)
        pickle._Unpickler.load_additems(self)  # type: ignore[attr-defined]

    dispatch[pickle.REDUCE[0]] = _load_reduce
    dispatch[pickle.NEWOBJ[0]] = _load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = _load_newobj_ex
    dispatch[pickle.BUILD[0]] = _load_build
    dispatch[pickle.SETITEM[0]] = _load_setitem
    dispatch[pickle.SETITEMS[0]] = _load_setitems
    dispatch[pickle.APPEND[0]] = _load_append
    dispatch[pickle.APPENDS[0]] = _load_appends
    dispatch[pickle.ADDITEMS[0]] = _load_additems


def _type_of(*args: Any) -> type:
    """``type(x)`` for ``x`` among None, Ellipsis and NotImplemented (how they pickle).

    Raises:
        RefusedGlobalError: Anything else (``type`` with three arguments makes classes).
    """
    if len(args) != 1 or not any(args[0] is kept for kept in _SINGLETON_TYPES):
        raise RefusedGlobalError("builtins.type", " (other than type(None))", allowable=False)
    return type(args[0])


def _is_torch_dtype(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.dtype)


def _globals_named(data: bytes | bytearray | memoryview) -> list[str]:
    """Every ``module.qualname`` a pickle stream names, in order, as far as a scan can tell.

    Only for error messages: what the unpickler allows is decided in ``find_class``.
    """
    named: list[str] = []
    memo: dict[int, Any] = {}
    recent: list[Any] = []
    try:
        for opcode, arg, _ in pickletools.genops(io.BytesIO(bytes(data))):
            if opcode.name == "GLOBAL" or opcode.name == "INST":
                named.append(str(arg).replace(" ", "."))
            elif opcode.name == "STACK_GLOBAL":
                if len(recent) >= 2 and all(isinstance(v, str) for v in recent[-2:]):
                    named.append(f"{recent[-2]}.{recent[-1]}")
            elif opcode.name == "MEMOIZE":
                memo[len(memo)] = recent[-1] if recent else None
            elif opcode.name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(str(arg))] = recent[-1] if recent else None
            elif opcode.name in ("GET", "BINGET", "LONG_BINGET"):
                recent.append(memo.get(int(str(arg))))
                continue
            if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                recent.append(arg)
            elif opcode.name not in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "FRAME"):
                recent.append(None)
            del recent[:-2]
    except (ValueError, EOFError):  # a malformed stream: say what was seen
        pass
    return list(dict.fromkeys(named))


def _refused(
    data: bytes | bytearray | memoryview, allowed_types: Iterable[str], first: str
) -> list[str]:
    """What a refused stream names that is not allowed, ``first`` first."""
    probe = RestrictedUnpickler(io.BytesIO(b""), allowed_types=allowed_types)
    refused = [first]
    for entry in _globals_named(data):
        module, _, qualname = entry.rpartition(".")
        if entry in refused or (module, qualname) in (
            ("builtins", "getattr"),
            ("builtins", "type"),
        ):
            continue
        if not probe._allowed(module, qualname) and probe._same_object(module, qualname) is None:
            refused.append(entry)
    return refused


def _refusal(
    item: Pickled, source: str, exc: RefusedGlobalError, allowed_types: Iterable[str]
) -> str:
    """The message for a refused variable: what its pickle calls, and how to allow it."""
    start = (
        f"refused to rebuild {item.name!r} ({item.type_name}) from {source}: its pickle "
        f"calls {exc.refused}{exc.how}, which is not among the types allowed from a kernel "
        "that someone else can run code in (unpickling runs what a pickle calls, with "
        "arguments they choose). Nothing was assigned."
    )
    if not exc.allowable:
        return f"{start} This cannot be allowed."
    refused = _refused(item.data, allowed_types, exc.refused)
    listed = ", ".join(repr(name) for name in refused)
    return (
        f"{start} If you trust the code behind {'them' if len(refused) > 1 else 'it'}, add "
        f"{listed} to {SETTING} in jupyter_server_config.py "
        f"({SETTING} = [{listed}]) and restart this kernel."
    )


def load_variables_restricted(
    pickled: list[Pickled], source: str, allowed_types: Iterable[str] = ()
) -> dict[str, Any]:
    """Rebuild every variable calling only what is allowed; the caller assigns them
    only if all came back.

    Args:
        pickled: The variables, serialized.
        source: Where they come from, in words (``ssh-gpu-box, a shared kernel``).
        allowed_types: Extra ``module.Qualname`` entries from the setting.

    Raises:
        RefusedVariableError: A variable's pickle names something not allowed (the
            message names the variable, what it names, and the setting).
        TransferError: It could not be rebuilt here.
    """
    extra = tuple(allowed_types)
    values: dict[str, Any] = {}
    for item in pickled:
        unpickler = RestrictedUnpickler(
            io.BytesIO(item.data), buffers=item.buffers, allowed_types=extra
        )
        try:
            values[item.name] = unpickler.load()
        except RefusedGlobalError as exc:
            raise RefusedVariableError(_refusal(item, source, exc, extra), item.name) from None
        except Exception as exc:
            raise rebuild_error(item, exc) from exc
    return values


def restriction(source: str, allowed_types: Iterable[str] = ()) -> dict[str, Any]:
    """What a transfer client's ``restricted`` is set to when the variables it sends come
    from a kernel that someone else can run code in: the kernel receiving them rebuilds
    them with :func:`load_variables_restricted`.

    Args:
        source: That kernel, in words, for the messages.
        allowed_types: The owner's ``c.SharedKernelPulls.allowed_types``.
    """
    return {"source": source, "allowed_types": list(allowed_types)}
