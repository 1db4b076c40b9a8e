"""Kernel connection info: free loopback ports, a fresh key, a 0600 connection file."""

from __future__ import annotations

import json
import os
import secrets
import socket
from typing import Any, Collection

LOOPBACK = "127.0.0.1"


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


def new_connection_info(avoid: Collection[int] = ()) -> dict[str, Any]:
    """Make connection info for a new kernel: five free ports and a random key.

    Args:
        avoid: Ports that must not be used.

    Returns:
        A connection dict in the format of a Jupyter connection file.
    """
    info: dict[str, Any] = {"ip": LOOPBACK, "transport": "tcp"}
    info.update(zip(PORT_NAMES, pick_ports(len(PORT_NAMES), avoid)))
    info.update(key=secrets.token_hex(32), signature_scheme="hmac-sha256", kernel_name="")
    return info


def ports_of(info: dict[str, Any]) -> list[int]:
    """The five ports of a connection dict.

    Args:
        info: A connection dict.

    Returns:
        The ports in :data:`PORT_NAMES` order.
    """
    return [int(info[name]) for name in PORT_NAMES]


def write_private_json(path: str, data: dict[str, Any]) -> None:
    """Write JSON to ``path`` atomically, never readable by anyone but the owner.

    The data goes to a sibling temporary file created with mode 0600 by
    ``os.open`` and is then renamed over ``path``.

    Args:
        path: Destination file.
        data: JSON-serializable dict.
    """
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
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
