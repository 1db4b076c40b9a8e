"""Moving variables between kernels: serialization, all-or-nothing."""

from .errors import (
    MissingVariableError,
    NoTransferHandlerError,
    NotSerializableError,
    TransferError,
)
from .pickling import Pickled, dump_variable, dump_variables, load_variables, type_name

__all__ = [
    "MissingVariableError",
    "NoTransferHandlerError",
    "NotSerializableError",
    "Pickled",
    "TransferError",
    "dump_variable",
    "dump_variables",
    "load_variables",
    "type_name",
]
