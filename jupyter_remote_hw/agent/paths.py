"""Where the agent keeps its files inside its state directory."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from .protocol import BAD_REQUEST, AgentError

SOCKET_PATH_MAX = 107
"""Longest path a unix socket can be bound at on Linux (sun_path is 108 bytes)."""


@dataclass(frozen=True)
class StatePaths:
    """File layout of one agent's state directory.

    Attributes:
        root: The state directory (mode 0700).
    """

    root: str

    @property
    def socket(self) -> str:
        """The unix socket the agent listens on (mode 0600)."""
        return os.path.join(self.root, "agent.sock")

    @property
    def pid(self) -> str:
        """The file holding the serving agent's pid."""
        return os.path.join(self.root, "agent.pid")

    @property
    def log(self) -> str:
        """The daemon's log (its stdout and stderr)."""
        return os.path.join(self.root, "agent.log")

    @property
    def lock(self) -> str:
        """The lock file a live agent holds an exclusive flock on for its lifetime."""
        return os.path.join(self.root, "agent.lock")

    @property
    def kernels(self) -> str:
        """The directory of kernel connection files, pid files and logs."""
        return os.path.join(self.root, "kernels")

    def connection_file(self, kernel_id: str) -> str:
        """The connection file of a kernel (mode 0600)."""
        return os.path.join(self.kernels, kernel_id + ".json")

    def kernel_pid(self, kernel_id: str) -> str:
        """The file holding a kernel's pid, for re-adoption."""
        return os.path.join(self.kernels, kernel_id + ".pid")

    def kernel_launch(self, kernel_id: str) -> str:
        """The file recording how a kernel was launched, so it can be restarted."""
        return os.path.join(self.kernels, kernel_id + ".launch")

    def kernel_log(self, kernel_id: str) -> str:
        """The kernel process's stdout and stderr."""
        return os.path.join(self.kernels, kernel_id + ".log")


def prepare_state_dir(root: str) -> StatePaths:
    """Create the state directory (0700) and its kernels directory.

    Args:
        root: The state directory; ``~`` is expanded and the path made absolute.

    Returns:
        The layout of the prepared directory.

    Raises:
        AgentError: The directory belongs to another user, or its socket path
            would be too long to bind.
    """
    root = os.path.abspath(os.path.expanduser(root))
    paths = StatePaths(root)
    if len(os.fsencode(paths.socket)) > SOCKET_PATH_MAX:
        raise AgentError(
            BAD_REQUEST,
            f"state directory {root} is too long for a unix socket "
            f"({len(os.fsencode(paths.socket))} > {SOCKET_PATH_MAX} bytes): "
            "choose a shorter --state-dir",
        )
    os.makedirs(root, mode=0o700, exist_ok=True)
    info = os.stat(root)
    if not stat.S_ISDIR(info.st_mode):
        raise AgentError(BAD_REQUEST, f"state directory {root} is not a directory")
    if info.st_uid != os.getuid():
        raise AgentError(
            BAD_REQUEST,
            f"state directory {root} belongs to uid {info.st_uid}, not to this user "
            f"(uid {os.getuid()}): choose a --state-dir of your own",
        )
    os.chmod(root, 0o700)
    os.makedirs(paths.kernels, mode=0o700, exist_ok=True)
    os.chmod(paths.kernels, 0o700)
    return paths
