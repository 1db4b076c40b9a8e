"""SQLite state shared by the server, kernels and CLI; it survives restarts."""

from .store import KernelRecord, Ledger

__all__ = ["KernelRecord", "Ledger"]
