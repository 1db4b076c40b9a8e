"""The sending end of throughput benchmarks: ``python tcp_push.py TARGET SIZE``.

Sends SIZE bytes, one random 4 MiB chunk repeated, from a plain blocking
socket. Running it as its own process keeps the sender from competing for the
GIL with the code under test.

TARGET is a port on 127.0.0.1: the bytes go there, the write side is shut,
and the receiver must answer with the byte count as one line (``tcp_sink.py``
does, also through a forward). The seconds from the first byte to that answer
are printed on stdout. TARGET ``-`` writes the bytes to stdout instead (to
feed another process's stdin) and prints nothing else.
"""

from __future__ import annotations

import os
import socket
import sys
import time

CHUNK = 4 << 20


def push_to_port(port: int, size: int, chunk: memoryview) -> float:
    """Send ``size`` bytes to 127.0.0.1:``port``; return seconds until they are confirmed."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        start = time.perf_counter()
        left = size
        while left:
            n = min(left, len(chunk))
            sock.sendall(chunk[:n])
            left -= n
        sock.shutdown(socket.SHUT_WR)
        reply = b""
        while not reply.endswith(b"\n"):
            part = sock.recv(64)
            if not part:
                break
            reply += part
        elapsed = time.perf_counter() - start
    if reply.strip() != str(size).encode():
        raise SystemExit(f"receiver confirmed {reply.strip()!r} bytes, expected {size}")
    return elapsed


def push_to_fd(fd: int, size: int, chunk: memoryview) -> None:
    """Write ``size`` bytes to file descriptor ``fd``."""
    left = size
    while left:
        view = chunk[: min(left, len(chunk))]
        while view:
            written = os.write(fd, view)
            view = view[written:]
            left -= written


def main(target: str, size: int) -> None:
    chunk = memoryview(os.urandom(CHUNK))
    if target == "-":
        push_to_fd(sys.stdout.fileno(), size, chunk)
    else:
        print(f"{push_to_port(int(target), size, chunk):.6f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
