"""How a kernel is launched: its command line, environment and working directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import IO, Any

from .connection import StateFileError, write_private_json

CONNECTION_FILE_PLACEHOLDER = "{connection_file}"

#: Variables never given to a kernel: with them ipykernel ends the kernel when its
#: parent process (the agent) goes, so a replaced agent could not re-adopt it. A
#: kernel's life is the agent's business (shutdown, orphan grace), not its parent's.
PARENT_LINK_VARIABLES = ("JPY_PARENT_PID", "JPY_INTERRUPT_EVENT", "IPY_INTERRUPT_EVENT")

#: Variables of the SSH session that started the agent: stale once it has ended.
SESSION_VARIABLES = ("SSH_AUTH_SOCK", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY")


def base_environment() -> dict[str, str]:
    """What a kernel that inherits the agent's environment starts from.

    That is the environment the agent got when it was started (on a remote
    host, the login environment of a non-interactive SSH command: PATH, HOME,
    USER, SHELL, ...), without the SSH session's variables. The parent-link
    variables go in :meth:`LaunchSpec.environment`, whatever the environment's source.
    """
    return {name: value for name, value in os.environ.items() if name not in SESSION_VARIABLES}


#: Where the kernel side of transfers sits inside the agent zipapp, and its name there
#: (a private name, so it never shadows a jupyter_remote_hw installed on the host).
ZIPAPP_KERNEL_DIR = "kernel"
ZIPAPP_KERNEL_PACKAGE = "_jupyter_remote_hw_kernel"


def kernel_support() -> tuple[str, str]:
    """Where the kernels' transfer extension is imported from, and its module name.

    Returns:
        ``(sys.path entry, module)``: inside the zipapp the agent runs from, or
        the source tree the agent itself was imported from.
    """
    loader = globals().get("__loader__")
    archive = getattr(loader, "archive", None)
    if archive:
        return (os.path.join(archive, ZIPAPP_KERNEL_DIR), f"{ZIPAPP_KERNEL_PACKAGE}.kernel_handler")
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return package_parent, "jupyter_remote_hw.transfer.kernel_side.kernel_handler"


def default_argv() -> list[str]:
    """The command line of an ipykernel run by the agent's own python.

    Returns:
        ``[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]``.
    """
    return [sys.executable, "-m", "ipykernel_launcher", "-f", CONNECTION_FILE_PLACEHOLDER]


@dataclass
class LaunchSpec:
    """What is needed to start (and restart) a kernel process.

    Attributes:
        argv: Command line; :data:`CONNECTION_FILE_PLACEHOLDER` stands for the
            connection file's path.
        env: Variables set over the agent's environment, or the kernel's whole
            environment when ``inherit_env`` is false.
        cwd: Working directory, or None for the agent's.
        is_default: Whether ``argv`` is the agent's own default.
        inherit_env: Whether the kernel starts from :func:`base_environment`;
            false when the client sends a whole environment (a kernel on the
            client's own machine gets the client's environment, as jupyter_client
            gives it, never that of whichever process started the agent).
        owner: Who started the kernel (see :class:`.holds.Owner`), as sent.
        orphan_grace: Seconds the kernel may stay without a client before the
            agent shuts it down; 0: never.
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    is_default: bool = False
    inherit_env: bool = True
    owner: dict[str, Any] | None = None
    orphan_grace: float = 0.0

    def ipykernel_python(self) -> str | None:
        """The python that must be able to import ipykernel, if this runs ipykernel.

        Returns:
            ``argv[0]`` when the command is ``<python> -m ipykernel...``, else None
            (a custom launcher whose needs the agent cannot know).
        """
        if len(self.argv) >= 3 and self.argv[1] == "-m" and self.argv[2].startswith("ipykernel"):
            return self.argv[0]
        return None

    def resolved_python(self) -> str:
        """``argv[0]`` as a full path when it can be found on PATH, for messages."""
        found = shutil.which(self.argv[0], path=self.env.get("PATH", os.environ.get("PATH")))
        return found or self.argv[0]

    def command(self, connection_file: str) -> list[str]:
        """The command line with the connection file's path filled in.

        Args:
            connection_file: Absolute path of the kernel's connection file.

        Returns:
            The argv to execute; an ipykernel also loads the transfer extension.
        """
        argv = [part.replace(CONNECTION_FILE_PLACEHOLDER, connection_file) for part in self.argv]
        if self.ipykernel_python() is not None:
            argv.append(f"--IPKernelApp.extra_extensions={kernel_support()[1]}")
        return argv

    def environment(self) -> dict[str, str]:
        """The kernel's environment: this spec's variables over the base environment.

        Returns:
            The kernel's full environment.
        """
        env = base_environment() if self.inherit_env else {}
        env.update(self.env)
        for name in PARENT_LINK_VARIABLES:
            env.pop(name, None)
        if self.ipykernel_python() is not None:
            path = kernel_support()[0]
            env["PYTHONPATH"] = os.pathsep.join(p for p in (path, env.get("PYTHONPATH")) if p)
        return env

    def spawn(self, connection_file: str, log: IO[bytes]) -> subprocess.Popen[bytes]:
        """Start the kernel process in its own session, detached from the agent.

        Args:
            connection_file: Absolute path of the kernel's connection file.
            log: Open file that receives the kernel's stdout and stderr.

        Returns:
            The started process.

        Raises:
            OSError: The command could not be executed.
        """
        return subprocess.Popen(
            self.command(connection_file),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.environment(),
            cwd=self.cwd,
            start_new_session=True,
            close_fds=True,
        )

    def save(self, path: str, pid: int, start_time: int | None) -> None:
        """Record the spec and the process identity for restart and re-adoption.

        Args:
            path: The kernel's launch file (written 0600: env may hold secrets).
            pid: The kernel process's pid.
            start_time: Its start time in clock ticks, when known.
        """
        write_private_json(
            path,
            {
                "argv": self.argv,
                "env": self.env,
                "cwd": self.cwd,
                "is_default": self.is_default,
                "inherit_env": self.inherit_env,
                "owner": self.owner,
                "orphan_grace": self.orphan_grace,
                "pid": pid,
                "start_time": start_time,
            },
        )

    @classmethod
    def load(cls, path: str) -> LoadedLaunch:
        """Read a launch file written by :meth:`save`.

        Args:
            path: The launch file.

        Returns:
            The spec and recorded process identity.

        Raises:
            OSError: The file cannot be read.
            StateFileError: The file is malformed.
        """
        with open(path) as handle:
            data: Any = json.load(handle)
        if not isinstance(data, dict):
            raise StateFileError(f"{path} is not a JSON object")
        argv = data.get("argv")
        env = data.get("env") or {}
        cwd = data.get("cwd")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise StateFileError(f"{path} has no argv")
        if not isinstance(env, dict):
            raise StateFileError(f"{path} has a malformed env")
        start_time = data.get("start_time")
        owner = data.get("owner")
        grace = data.get("orphan_grace")
        spec = cls(
            argv=argv,
            env={str(k): str(v) for k, v in env.items()},
            cwd=cwd if isinstance(cwd, str) else None,
            is_default=bool(data.get("is_default", False)),
            inherit_env=bool(data.get("inherit_env", True)),
            owner=owner if isinstance(owner, dict) else None,
            orphan_grace=float(grace) if isinstance(grace, (int, float)) else 0.0,
        )
        return LoadedLaunch(spec, start_time if isinstance(start_time, int) else None)


@dataclass
class LoadedLaunch:
    """A launch file's contents.

    Attributes:
        spec: How the kernel was launched.
        start_time: The recorded process start time, if any.
    """

    spec: LaunchSpec
    start_time: int | None
