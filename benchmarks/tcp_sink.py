"""A TCP sink for throughput benchmarks: ``python tcp_sink.py HOST PORT``.

Run on a test host. For each accepted connection (one at a time) it reads
until the client half-closes, then answers with the byte count as one ASCII
line and closes, so the sender learns that every byte arrived. Reads go into
one preallocated buffer, so the sink costs little CPU next to the SSH
processes it measures. Exits on SIGTERM.
"""

from __future__ import annotations

import socket
import sys

_BUF = 1 << 20


def _drain(conn: socket.socket, buf: memoryview) -> int:
    total = 0
    while n := conn.recv_into(buf):
        total += n
    return total


def main(host: str, port: int) -> None:
    buf = memoryview(bytearray(_BUF))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host, port))
        server.listen(8)
        while True:
            conn, _ = server.accept()
            with conn:
                try:
                    count = _drain(conn, buf)
                    conn.sendall(f"{count}\n".encode())
                except OSError:
                    continue


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
