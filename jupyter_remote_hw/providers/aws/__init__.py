"""The ``aws`` provider: EC2 instances launched for the user, reached over SSH.

:class:`AWSProvider` (``provider``: its targets, and the machine for a kernel) holds
the settings (``account``: ``c.AWSProvider.*``, boto3 clients, the ledger, the
machines this process holds) and one object per concern, each given the account and
the parts it uses:

- ``access``: the security group (``network``) and key pair (``key_pair``);
- ``instances``: an instance's state (sync, stop, start, terminate);
- ``reach``: SSH to a running instance with its known host key (``host_keys``),
  and the held :class:`AWSMachine` (``machine``);
- ``launch``: RunInstances with its options (``launch_options``);
- ``reaping``: our instances that nothing live claims.

Beside them: ``tags`` (what marks a resource as ours), ``credentials``,
``upkeep`` (the server's periodic sync and terminate timer) and ``errors``.

The names below are loaded when first used, so that importing one part (its
errors, say) does not import the whole provider.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .account import DEFAULT_AMI_PARAMETER
    from .errors import AWSError
    from .machine import AWSMachine
    from .provider import AWSProvider
    from .reaping import ReapCandidate
    from .tags import CREATED_BY, CREATED_BY_TAG, LEDGER_TAG, OWNER_TAG, TARGET_TAG
    from .upkeep import CloudUpkeep

_WHERE = {
    "AWSError": "errors",
    "AWSMachine": "machine",
    "AWSProvider": "provider",
    "CREATED_BY": "tags",
    "CREATED_BY_TAG": "tags",
    "CloudUpkeep": "upkeep",
    "DEFAULT_AMI_PARAMETER": "account",
    "LEDGER_TAG": "tags",
    "OWNER_TAG": "tags",
    "ReapCandidate": "reaping",
    "TARGET_TAG": "tags",
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
