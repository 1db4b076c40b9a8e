"""A TCP proxy on 127.0.0.1 that makes a loopback service look far away.

    python3 benchmarks/delay_proxy.py --target 127.0.0.1:PORT --delays 0,50,100

One listener per one-way delay (milliseconds), each on a port the OS picks,
all forwarding to TARGET. It prints one JSON line, ``{"0": port, "50": port,
...}``, then serves until SIGTERM or SIGINT. Used by ``wide_area.py``.

What it models: a link with that one-way delay in each direction, no loss and
no bandwidth limit of its own. Every chunk read from one side is written to
the other at its arrival time plus the delay, in order; chunks that are due
together go out together. Nothing else is slowed: throughput is whatever the
endpoints' windows allow over the delay (as on a real long link, where an SSH
channel's window divided by the round trip time caps it), plus what one
asyncio process can copy. At most ``--buffer-mib`` (64) per direction may be
in flight; the SSH windows measured are far below that.

The TCP handshake: the kernel completes a client's ``connect()`` at once,
without the round trip a real link costs. To make up for it the proxy connects
to the target only 3 one-way delays after accepting (the SYN, SYN-ACK and ACK
of a real link), and the client's first bytes are held until then. What the
client sees is then what it would see on a real link once its ``connect()``
returns: its first bytes reach the target one delay later, and the target's
first answer (sshd's banner) arrives 2 round trips after the ``connect()``
began.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import signal
import socket
import sys

CHUNK = 256 * 1024
MIB = 1 << 20


class _Direction:
    """Bytes of one direction of one connection, each held until its time is due."""

    def __init__(self, delay: float, limit: int) -> None:
        self.delay = delay
        self.limit = limit
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.queued = 0
        self.have = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()

    async def receive(self, reader: asyncio.StreamReader) -> None:
        """Read until EOF; an empty chunk in the queue stands for the EOF."""
        loop = asyncio.get_running_loop()
        while True:
            await self.room.wait()
            try:
                data = await reader.read(CHUNK)
            except OSError:
                data = b""
            self.queue.append((loop.time() + self.delay, data))
            self.queued += len(data)
            if self.queued >= self.limit:
                self.room.clear()
            self.have.set()
            if not data:
                return

    async def deliver(self, writer: asyncio.StreamWriter) -> None:
        """Write each chunk when it is due; half-close after the last."""
        loop = asyncio.get_running_loop()
        while True:
            while not self.queue:
                self.have.clear()
                await self.have.wait()
            wait = self.queue[0][0] - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            now = loop.time()
            batch: list[bytes] = []
            eof = False
            while self.queue and self.queue[0][0] <= now:
                _, data = self.queue.popleft()
                if not data:
                    eof = True
                    break
                batch.append(data)
                self.queued -= len(data)
            if self.queued < self.limit:
                self.room.set()
            if batch:
                writer.writelines(batch)
                await writer.drain()
            if eof:
                with contextlib.suppress(OSError):
                    if writer.can_write_eof():
                        writer.write_eof()
                return


def _nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _relay(
    client_r: asyncio.StreamReader,
    client_w: asyncio.StreamWriter,
    target: tuple[str, int],
    delay: float,
    limit: int,
) -> None:
    _nodelay(client_w)
    upstream = _Direction(delay, limit)
    downstream = _Direction(delay, limit)
    tasks = [asyncio.ensure_future(upstream.receive(client_r))]
    server_w: asyncio.StreamWriter | None = None
    try:
        await asyncio.sleep(3 * delay)  # the handshake the kernel skipped
        server_r, server_w = await asyncio.open_connection(*target)
        _nodelay(server_w)
        tasks += [
            asyncio.ensure_future(upstream.deliver(server_w)),
            asyncio.ensure_future(downstream.receive(server_r)),
            asyncio.ensure_future(downstream.deliver(client_w)),
        ]
        # Done when both directions have delivered their EOF, or one fails.
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            if any(t.exception() for t in done if not t.cancelled()):
                break
    except OSError:
        pass
    finally:
        for task in tasks:
            task.cancel()
        for writer in (client_w, server_w):
            if writer is not None:
                writer.close()
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await writer.wait_closed()


async def serve(target: tuple[str, int], delays_ms: list[int], buffer_mib: int) -> None:
    servers = []
    ports: dict[str, int] = {}
    for ms in delays_ms:

        async def handle(
            r: asyncio.StreamReader, w: asyncio.StreamWriter, delay: float = ms / 1000
        ) -> None:
            await _relay(r, w, target, delay, buffer_mib * MIB)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        ports[str(ms)] = server.sockets[0].getsockname()[1]
    print(json.dumps(ports), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="HOST:PORT to forward to (loopback)")
    parser.add_argument(
        "--delays", default="0,50,100", help="one-way delays in ms, one listener each"
    )
    parser.add_argument(
        "--buffer-mib", type=int, default=64, help="most MiB in flight per direction"
    )
    args = parser.parse_args()
    host, _, port = args.target.rpartition(":")
    if host != "127.0.0.1":
        sys.exit("the target must be on 127.0.0.1")
    delays = [int(d) for d in args.delays.split(",") if d.strip()]
    asyncio.run(serve((host, int(port)), delays, args.buffer_mib))


if __name__ == "__main__":
    main()
