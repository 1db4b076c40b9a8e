"""The tags that mark an EC2 resource as ours, and whose it is."""

from __future__ import annotations

import getpass
import os
import socket

CREATED_BY_TAG = "created-by"
CREATED_BY = "jupyter-remote-hw"
OWNER_TAG = "jupyter-remote-hw:owner"
LEDGER_TAG = "jupyter-remote-hw:ledger-id"
TARGET_TAG = "jupyter-remote-hw:target"


def default_owner() -> str:
    """``user@host`` of whoever runs this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"
