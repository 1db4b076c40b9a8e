"""What a pickle from a kernel that someone else can run code in may name: exact
``(module, qualname)`` pairs of data types and the functions that rebuild them (see
:mod:`.restricted`, which checks each call and state besides).

Python 3.8 syntax: it runs where the restricted loader does.
"""

from __future__ import annotations

from typing import Final

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
