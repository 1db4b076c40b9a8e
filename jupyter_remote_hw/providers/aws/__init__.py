"""The ``aws`` provider: EC2 instances launched for the user, reached over SSH.

Its parts: the provider and its machines (``provider``), the instance's launch
options (``instance``), key pairs (``key_pair``) and SSH host keys
(``host_keys``), the security group (``network``), credentials
(``credentials``), the periodic sync and terminate timer (``upkeep``), and its
errors (``errors``).

The names below are loaded when first used, so that importing one part (its
errors, say) does not import the whole provider.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import AWSError
    from .provider import (
        CREATED_BY,
        CREATED_BY_TAG,
        DEFAULT_AMI_PARAMETER,
        LEDGER_TAG,
        OWNER_TAG,
        TARGET_TAG,
        AWSMachine,
        AWSProvider,
        ReapCandidate,
    )
    from .upkeep import CloudUpkeep

_WHERE = {
    "AWSError": "errors",
    "AWSMachine": "provider",
    "AWSProvider": "provider",
    "CREATED_BY": "provider",
    "CREATED_BY_TAG": "provider",
    "CloudUpkeep": "upkeep",
    "DEFAULT_AMI_PARAMETER": "provider",
    "LEDGER_TAG": "provider",
    "OWNER_TAG": "provider",
    "ReapCandidate": "provider",
    "TARGET_TAG": "provider",
}

__all__ = [
    "CREATED_BY",
    "CREATED_BY_TAG",
    "DEFAULT_AMI_PARAMETER",
    "LEDGER_TAG",
    "OWNER_TAG",
    "TARGET_TAG",
    "AWSError",
    "AWSMachine",
    "AWSProvider",
    "CloudUpkeep",
    "ReapCandidate",
]


def __getattr__(name: str) -> Any:
    """Load ``name`` from the part that defines it."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value
