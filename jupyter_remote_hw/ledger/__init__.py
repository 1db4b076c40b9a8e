"""SQLite state shared by the server, kernels and CLI; it survives restarts."""

from .store import (
    ACTIVE_STATES,
    FINAL_STATES,
    KernelRecord,
    Ledger,
    MachineEvent,
    MachineExistsError,
    MachineRecord,
)

__all__ = [
    "ACTIVE_STATES",
    "FINAL_STATES",
    "KernelRecord",
    "Ledger",
    "MachineEvent",
    "MachineExistsError",
    "MachineRecord",
]
