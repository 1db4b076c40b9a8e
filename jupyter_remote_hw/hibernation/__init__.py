"""Hibernating kernels: where a kernel's saved state lives on our side
(:class:`.store.HibernationStore`)."""

from .errors import (
    CorruptEntryError,
    EntryNotFoundError,
    HibernationError,
    RestoreError,
    SaveError,
    StoreFullError,
    UnsavableStateError,
)
from .progress import Progress
from .store import EntryInfo, HibernationStore

__all__ = [
    "CorruptEntryError",
    "EntryInfo",
    "EntryNotFoundError",
    "HibernationError",
    "HibernationStore",
    "Progress",
    "RestoreError",
    "SaveError",
    "StoreFullError",
    "UnsavableStateError",
]
