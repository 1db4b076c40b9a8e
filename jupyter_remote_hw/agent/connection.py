"""Kernel connection info: where a kernel's channels are, a fresh key, a 0600 connection file.

An ipykernel on a host gets UNIX sockets (ZMQ's ``ipc`` transport) in the
agent's state directory, which only its owner can enter: another user of the
host cannot reach them. Kernels started by a custom command line may not speak
``ipc``; they get free ports on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
from typing import Any, Collection

LOOPBACK = "127.0.0.1"

IPC_STEM_PREFIX = "k"
"""First letter of a kernel's socket names in the state directory: ``k<6 hex>-<n>``."""


class StateFileError(ValueError):
    """A file in the state directory does not hold what it should."""


PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def pick_ports(count: int, avoid: Collection[int] = ()) -> list[int]:
    """Find ``count`` distinct free TCP ports on the loopback interface.

    All sockets are held open together while choosing so that the kernel's ports
    differ from one another; ports in ``avoid`` (those of this agent's other
    kernels, which may be between restarts) are skipped.

    Args:
        count: How many ports.
        avoid: Ports that must not be returned.

    Returns:
        The ports, in the order they were found.
    """
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
            if port not in avoid and port not in ports:
                ports.append(port)
    finally:
        for sock in held:
            sock.close()
    return ports


def new_ipc_stem(directory: str) -> str:
    """A path prefix for a new kernel's five UNIX sockets, none of which exists yet.

    Args:
        directory: The owner-only directory the sockets go in.

    Returns:
        ``<directory>/k<6 hex>``; the sockets are that plus ``-1`` to ``-5``.
    """
    while True:
        stem = os.path.join(directory, IPC_STEM_PREFIX + secrets.token_hex(3))
        if not any(os.path.lexists(f"{stem}-{n}") for n in range(1, len(PORT_NAMES) + 1)):
            return stem


def new_connection_info(avoid: Collection[int] = (), ipc_dir: str | None = None) -> dict[str, Any]:
    """Make connection info for a new kernel: where its channels listen, and a random key.

    Args:
        avoid: TCP ports that must not be used.
        ipc_dir: An owner-only directory for the kernel's UNIX sockets, or None
            for five free TCP ports on 127.0.0.1.

    Returns:
        A connection dict in the format of a Jupyter connection file.
    """
    info: dict[str, Any]
    if ipc_dir is not None:
        info = {"ip": new_ipc_stem(ipc_dir), "transport": "ipc"}
        info.update(zip(PORT_NAMES, range(1, len(PORT_NAMES) + 1)))
    else:
        info = {"ip": LOOPBACK, "transport": "tcp"}
        info.update(zip(PORT_NAMES, pick_ports(len(PORT_NAMES), avoid)))
    info.update(key=secrets.token_hex(32), signature_scheme="hmac-sha256", kernel_name="")
    return info


def ports_of(info: dict[str, Any]) -> list[int]:
    """The five TCP ports of a connection dict.

    Args:
        info: A connection dict.

    Returns:
        The ports in :data:`PORT_NAMES` order; none for a kernel on UNIX sockets.
    """
    if is_ipc(info):
        return []
    return [int(info[name]) for name in PORT_NAMES]


def is_ipc(info: dict[str, Any]) -> bool:
    """Whether a kernel's channels are UNIX sockets (ZMQ's ``ipc`` transport)."""
    return info.get("transport") == "ipc"


def channel_path(info: dict[str, Any], name: str) -> str | None:
    """The UNIX socket of one channel, or None when the kernel uses TCP.

    Args:
        info: A connection dict.
        name: A key of :data:`PORT_NAMES`.
    """
    if not is_ipc(info):
        return None
    return f"{info['ip']}-{int(info[name])}"


def channel_url(info: dict[str, Any], name: str) -> str:
    """The ZMQ address of one channel (``ipc://<path>`` or ``tcp://<ip>:<port>``).

    Args:
        info: A connection dict.
        name: A key of :data:`PORT_NAMES`.
    """
    path = channel_path(info, name)
    if path is not None:
        return f"ipc://{path}"
    return f"tcp://{info['ip']}:{int(info[name])}"


async def open_channel(
    info: dict[str, Any], name: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a byte stream to one of a kernel's channels (for relaying its ZMTP bytes).

    Args:
        info: A connection dict.
        name: A key of :data:`PORT_NAMES`.

    Raises:
        OSError: Nothing listens there.
    """
    path = channel_path(info, name)
    if path is not None:
        return await asyncio.open_unix_connection(path)
    return await asyncio.open_connection(str(info["ip"]), int(info[name]))


def remove_ipc_sockets(info: dict[str, Any]) -> None:
    """Remove a stopped kernel's UNIX sockets (a killed kernel leaves them behind)."""
    for name in PORT_NAMES:
        path = channel_path(info, name)
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def write_private_json(path: str, data: dict[str, Any]) -> None:
    """Write JSON to ``path`` atomically, never readable by anyone but the owner.

    The data goes to a sibling temporary file created with mode 0600 by
    ``os.open`` and is then renamed over ``path``.

    Args:
        path: Destination file.
        data: JSON-serializable dict.
    """
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_connection_file(path: str) -> dict[str, Any]:
    """Read a connection file and check it has what a client needs.

    Args:
        path: The connection file.

    Returns:
        The connection dict, normalized to the keys this agent reports.

    Raises:
        OSError: The file cannot be read.
        StateFileError: The file is not a usable connection file.
    """
    with open(path) as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise StateFileError(f"{path} is not a JSON object")
    info: dict[str, Any] = {
        "ip": str(data.get("ip", LOOPBACK)),
        "transport": str(data.get("transport", "tcp")),
    }
    if info["transport"] not in ("tcp", "ipc"):
        raise StateFileError(f"{path} names an unknown transport {info['transport']!r}")
    for name in PORT_NAMES:
        value = data.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
            raise StateFileError(f"{path} has no valid {name}")
        info[name] = value
    key = data.get("key")
    if not isinstance(key, str):
        raise StateFileError(f"{path} has no key")
    info["key"] = key
    info["signature_scheme"] = str(data.get("signature_scheme", "hmac-sha256"))
    info["kernel_name"] = str(data.get("kernel_name", ""))
    return info
