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
a module that is already imported, without importing anything new. A pickle
cannot set attributes on a class or module (``BUILD`` on one is refused), so it
cannot patch a library either.

This module runs only on our side (it is not shipped to hosts); it uses the
pure-Python unpickler, whose opcodes can be checked one by one.
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

from .errors import TransferError
from .pickling import Pickled, rebuild_error

SETTING: Final = "c.SharedKernelPulls.allowed_types"
"""The setting that allows more types, as written in ``jupyter_server_config.py``."""

_BUILTINS: Final = (
    "bool",
    "bytearray",
    "bytes",
    "complex",
    "dict",
    "float",
    "frozenset",
    "int",
    "list",
    "object",
    "range",
    "set",
    "slice",
    "str",
    "tuple",
    "Ellipsis",
    "NotImplemented",
)

_PANDAS_TOP: Final = (
    "ArrowDtype",
    "BooleanDtype",
    "Categorical",
    "CategoricalDtype",
    "CategoricalIndex",
    "DataFrame",
    "DateOffset",
    "DatetimeIndex",
    "DatetimeTZDtype",
    "Float32Dtype",
    "Float64Dtype",
    "Index",
    "Int8Dtype",
    "Int16Dtype",
    "Int32Dtype",
    "Int64Dtype",
    "Interval",
    "IntervalDtype",
    "IntervalIndex",
    "MultiIndex",
    "NA",
    "NaT",
    "Period",
    "PeriodDtype",
    "PeriodIndex",
    "RangeIndex",
    "Series",
    "SparseDtype",
    "StringDtype",
    "Timedelta",
    "TimedeltaIndex",
    "Timestamp",
    "UInt8Dtype",
    "UInt16Dtype",
    "UInt32Dtype",
    "UInt64Dtype",
)

_PANDAS_ARRAYS: Final = (
    "ArrowExtensionArray",
    "ArrowStringArray",
    "BooleanArray",
    "DatetimeArray",
    "FloatingArray",
    "IntegerArray",
    "IntervalArray",
    "NumpyExtensionArray",
    "PeriodArray",
    "SparseArray",
    "StringArray",
    "TimedeltaArray",
)

_PANDAS_OFFSETS: Final = (
    "BDay",
    "BMonthBegin",
    "BMonthEnd",
    "BQuarterBegin",
    "BQuarterEnd",
    "BYearBegin",
    "BYearEnd",
    "BusinessDay",
    "BusinessHour",
    "CustomBusinessDay",
    "Day",
    "DateOffset",
    "Easter",
    "FY5253",
    "Hour",
    "Micro",
    "Milli",
    "Minute",
    "MonthBegin",
    "MonthEnd",
    "Nano",
    "QuarterBegin",
    "QuarterEnd",
    "Second",
    "SemiMonthBegin",
    "SemiMonthEnd",
    "Tick",
    "Week",
    "WeekOfMonth",
    "YearBegin",
    "YearEnd",
)

ALLOWED: Final[frozenset[tuple[str, str]]] = frozenset(
    [("builtins", name) for name in _BUILTINS]
    + [
        ("collections", name)
        for name in ("OrderedDict", "defaultdict", "Counter", "deque", "ChainMap")
    ]
    + [("datetime", name) for name in ("date", "datetime", "time", "timedelta", "timezone")]
    + [
        ("decimal", "Decimal"),
        ("fractions", "Fraction"),
        ("uuid", "UUID"),
        ("uuid", "SafeUUID"),
        ("zoneinfo", "ZoneInfo"),
    ]
    + [
        (module, name)
        for module in ("pathlib", "pathlib._local")
        for name in (
            "Path",
            "PosixPath",
            "WindowsPath",
            "PurePath",
            "PurePosixPath",
            "PureWindowsPath",
        )
    ]
    # numpy 2 and numpy 1 spell the same functions differently.
    + [
        (f"numpy.{core}.multiarray", name)
        for core in ("_core", "core")
        for name in ("_reconstruct", "scalar")
    ]
    + [(f"numpy.{core}.numeric", "_frombuffer") for core in ("_core", "core")]
    + [
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy", "matrix"),
        ("numpy.ma", "MaskedArray"),
        ("numpy.ma.core", "MaskedArray"),
        ("numpy.ma.core", "_mareconstruct"),
        ("numpy.random._pickle", "__bit_generator_ctor"),
        ("numpy.random._pickle", "__generator_ctor"),
        ("numpy.random._pickle", "__randomstate_ctor"),
        ("numpy.random.bit_generator", "SeedSequence"),
        ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    ]
    + [
        (f"numpy.random._{name.lower()}", name)
        for name in ("MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64")
    ]
    + [("pandas", name) for name in _PANDAS_TOP]
    + [("pandas.arrays", name) for name in _PANDAS_ARRAYS]
    + [("pandas._libs.tslibs.offsets", name) for name in _PANDAS_OFFSETS]
    + [
        ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"),
        ("pandas._libs.internals", "_unpickle_block"),
        ("pandas._libs.interval", "__pyx_unpickle_IntervalMixin"),
        ("pandas._libs.sparse", "IntIndex"),
        ("pandas._libs.sparse", "BlockIndex"),
        ("pandas._libs.tslibs.nattype", "_nat_unpickle"),
        ("pandas._libs.tslibs.timedeltas", "_timedelta_unpickle"),
        ("pandas._libs.tslibs.timestamps", "_unpickle_timestamp"),
        ("pandas.core.indexes.base", "_new_Index"),
        ("pandas.core.indexes.datetimes", "_new_DatetimeIndex"),
        ("pandas.core.indexes.interval", "_new_IntervalIndex"),
        ("pandas.core.indexes.period", "_new_PeriodIndex"),
        ("pandas.core.indexes.timedeltas", "_new_TimedeltaIndex"),
        ("pandas.core.internals.blocks", "new_block"),
        ("pandas.core.internals.managers", "BlockManager"),
        ("pandas.core.internals.managers", "SingleBlockManager"),
        ("dateutil.relativedelta", "relativedelta"),
        ("dateutil.tz.tz", "tzutc"),
        ("dateutil.tz.tz", "tzoffset"),
        ("pytz", "_p"),
        ("pytz", "_UTC"),
    ]
    + [("torch", name) for name in ("Size", "device", "Tensor")]
    + [("torch._C", name) for name in ("TensorBase", "_TensorBase", "_VariableFunctionsClass")]
    + [("torch._utils", name) for name in ("_rebuild_parameter", "_rebuild_parameter_with_state")]
    + [("torch.nn.parameter", "Parameter")]
)
"""The ``(module, qualname)`` pairs a restricted pickle may name."""

ALLOWED_ATTRIBUTES: Final[frozenset[tuple[str, str, str]]] = frozenset(
    [("torch._C", "_VariableFunctionsClass", "from_numpy")]
    + [
        ("torch._C", base, method)
        for base in ("TensorBase", "_TensorBase")
        for method in ("requires_grad_", "clone", "view")
    ]
    + [("zoneinfo", "ZoneInfo", "_unpickle")]
)
"""``getattr(cls, name)`` a restricted pickle may call: ``(module, class qualname, name)``."""

_PLAIN_BUILD: Final[Callable[[Any], None]] = getattr(pickle._Unpickler, "load_build")  # noqa: B009
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


class RefusedGlobalError(pickle.UnpicklingError):
    """A restricted pickle names something that is not allowed.

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

    def __init__(
        self, file: io.BytesIO, *, buffers: Iterable[Any] = (), allowed_types: Iterable[str] = ()
    ) -> None:
        super().__init__(file, buffers=buffers)
        self._extra = frozenset(allowed_types)

    def _allowed(self, module: str, qualname: str) -> bool:
        return (module, qualname) in ALLOWED or f"{module}.{qualname}" in self._extra

    def find_class(self, module: str, name: str) -> Any:
        """The object ``module.name`` if it is allowed.

        Raises:
            RefusedGlobalError: It is not.
        """
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
        return getattr(owner, name)

    def _load_build(self) -> None:
        """``BUILD``, except on a class or module: a pickle never patches a library."""
        stack: list[Any] = getattr(self, "stack")  # noqa: B009 (untyped in typeshed)
        target = stack[-2] if len(stack) > 1 else None
        if isinstance(target, (type, ModuleType)):
            name = getattr(target, "__qualname__", getattr(target, "__name__", "?"))
            raise RefusedGlobalError(
                f"{getattr(target, '__module__', '')}.{name}",
                " (setting attributes of a class or module)",
                allowable=False,
            )
        _PLAIN_BUILD(self)

    dispatch[pickle.BUILD[0]] = _load_build


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
        TransferError: A variable's pickle names something not allowed (the
            message names the variable, what it names, and the setting), or
            it could not be rebuilt here.
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
            raise TransferError(_refusal(item, source, exc, extra), item.name) from None
        except Exception as exc:
            raise rebuild_error(item, exc) from exc
    return values
