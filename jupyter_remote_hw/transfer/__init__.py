"""Moving variables between kernels: serialization, all-or-nothing."""

from .kernel_side.errors import (
    MissingVariableError,
    NoTransferHandlerError,
    NotSerializableError,
    TransferError,
)
from .kernel_side.pickling import Pickled, dump_variable, dump_variables, load_variables, type_name

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
