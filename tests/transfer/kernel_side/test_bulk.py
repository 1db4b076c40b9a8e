"""The bulk stream of a transfer: only the token's holder gets in, on 127.0.0.1 only, a cut
stream assigns nothing, and a client that cannot open one falls back to chunk messages; a
large one goes in parts over several SSH channels of a real sshd, all or nothing."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_remote_hw.transfer import TransferError, dump_variables, load_variables
from jupyter_remote_hw.transfer.client import TransferClient
from jupyter_remote_hw.transfer.kernel_side import bulk
from jupyter_remote_hw.transfer.kernel_side.bulk import BulkStream
from jupyter_remote_hw.transport import SSHConnection, TransportSettings

from ...testhosts import SSHTestHost
from ..conftest import StartKernel, evaluate, run

PENDING = "get_ipython().kernel.shell_handlers['remote_hw_transfer_request'].__self__.pending"
#: The kernel's bulk stream threads still running.
BULK_THREADS = (
    "sum(t.name.startswith('remote-hw-bulk') for t in __import__('threading').enumerate())"
)
SHA = "__import__('hashlib').sha256({}.tobytes()).hexdigest()"

#: Bytes of an array large enough to be split into parts.
LARGE = 40 * 1024 * 1024


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def dropped(sock: socket.socket) -> bool:
    """Whether the other end closed the connection (a reset, with our bytes unread)."""
    try:
        return sock.recv(16) == b""
    except ConnectionResetError:
        return True


def test_a_receiving_stream_takes_only_the_token_holder() -> None:
    segments = [bytearray(5), bytearray(300_000)]
    stream = BulkStream(segments, sending=False).start()
    try:
        # Bound to loopback only.
        assert stream._listener.getsockname()[0] == "127.0.0.1"
        with connect(stream.port) as intruder:
            intruder.sendall(b"0" * len(stream.token) + b"\n" + b"x" * 100)
            assert dropped(intruder)
        payload = bytes(range(5)) + bytes(300_000)
        with connect(stream.port) as client:
            client.sendall(stream.token.encode() + b"\n" + payload)
            client.shutdown(socket.SHUT_WR)
            assert client.recv(64) == b"300005\n"
        assert stream.wait(10)
        assert stream.done and stream.error is None
        assert bytes(segments[0]) == bytes(range(5))
    finally:
        stream.close()


def test_a_stream_cut_short_is_not_done_and_says_how_far_it_got() -> None:
    stream = BulkStream([bytearray(1000)], sending=False).start()
    with connect(stream.port) as client:
        client.sendall(stream.token.encode() + b"\n" + b"y" * 400)
    assert stream.wait(10)
    assert not stream.done
    assert stream.error == "the client closed the transfer after 400 of 1000 bytes"


def test_a_sending_stream_sends_every_segment_in_order() -> None:
    stream = BulkStream(
        [memoryview(b"head"), memoryview(b"-" * 70_000 + b"tail")], sending=True
    ).start()
    received = bytearray()
    with connect(stream.port) as client:
        client.sendall(stream.token.encode() + b"\n")
        while data := client.recv(65536):
            received += data
    assert stream.wait(10) and stream.done
    assert bytes(received) == b"head" + b"-" * 70_000 + b"tail"


def test_nobody_connecting_ends_the_stream_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "CONNECT_TIMEOUT", 0.3)
    stream = BulkStream([bytearray(10)], sending=False).start()
    assert stream.wait(10)
    assert stream.error == "no client connected within 0.3 s"
    with pytest.raises(OSError):
        connect(stream.port).close()


async def test_a_kernel_without_reachable_streams_gets_chunk_messages(
    start_kernel: StartKernel,
) -> None:
    kernel = await start_kernel()
    tried: list[int] = []

    async def refuse(port: int) -> Any:
        tried.append(port)
        raise ConnectionRefusedError(f"port {port} is not reachable from here")

    client = TransferClient(kernel.link, "the kernel", chunk_size=256 * 1024, opener=refuse)
    array = np.arange(1_000_000, dtype=np.float64)
    assert [a["name"] for a in await client.push(dump_variables({"a": array}, ["a"]))] == ["a"]
    back = load_variables(await client.pull(["a"]))
    np.testing.assert_array_equal(back["a"], array)
    assert len(tried) == 2  # one push, one pull: each tried the stream first
    assert await evaluate(kernel.link, PENDING) == "0"


async def test_a_stream_that_breaks_midway_assigns_nothing(start_kernel: StartKernel) -> None:
    kernel = await start_kernel(streams=True)
    cut: list[Any] = []

    async def open_and_cut(port: int) -> Any:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        real_write = writer.write

        def write(data: Any) -> None:
            real_write(data)
            if memoryview(data).nbytes > 1000 and not cut:  # the first piece of data
                cut.append(True)
                writer.transport.abort()

        writer.write = write  # type: ignore[method-assign]
        return reader, writer

    client = TransferClient(kernel.link, "the kernel", opener=open_and_cut)
    values = {"a": np.ones(3_000_000), "b": 7}
    with pytest.raises(
        TransferError,
        match=r"sending 'a', 'b' to the kernel: the bulk stream broke "
        r"after \d+ of \d+ bytes \(ConnectionResetError.*Nothing was assigned",
    ):
        await client.push(dump_variables(values, ["a", "b"]))
    assert cut
    assert await evaluate(kernel.link, "'a' in globals() or 'b' in globals()") == "False"
    assert await evaluate(kernel.link, PENDING) == "0"


def test_a_stream_in_a_directory_listens_on_a_unix_socket_there(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    stream = BulkStream([bytearray(data)], sending=True, directory=str(tmp_path)).start()
    try:
        assert stream.port == 0 and stream.path is not None
        assert os.path.dirname(stream.path) == str(tmp_path)
        with socket.socket(socket.AF_UNIX) as intruder:  # no token: dropped
            intruder.connect(stream.path)
            intruder.sendall(b"not-the-token\n")
            assert intruder.recv(10) == b""
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(stream.path)
            client.sendall(stream.token.encode() + b"\n")
            received = b""
            while chunk := client.recv(65536):
                received += chunk
        assert received == data
        assert stream.wait(10) and stream.done
    finally:
        stream.close()
    assert not os.path.exists(stream.path)


def test_parts_are_equal_ranges_and_views_cross_segments() -> None:
    assert bulk.part_ranges(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert bulk.part_count(bulk.PARTS_FROM - 1, 8) == 1
    assert bulk.part_count(bulk.PARTS_FROM, 8) == min(8, bulk.PARTS_FROM // bulk.PART_MIN)
    assert bulk.part_count(10 * bulk.PARTS_FROM, 99) == bulk.MAX_PARTS
    segments = [b"abc", b"", b"defgh", b"ij"]
    assert [bytes(v) for v in bulk.part_views(segments, 2, 9)] == [b"c", b"defgh", b"i"]
    assert b"".join(bulk.part_views(segments, 0, 10)) == b"abcdefghij"


def test_a_stream_in_parts_takes_each_part_on_its_own_connection_in_any_order() -> None:
    segments = [bytearray(5), bytearray(300_000), bytearray(7)]
    payload = (bytes(range(256)) * 1200)[:300_012]
    stream = BulkStream(segments, sending=False, parts=3).start()
    ranges = bulk.part_ranges(len(payload), 3)
    try:
        clients = [connect(stream.port) for _ in ranges]
        for index in (2, 0, 1):  # the parts arrive in any order
            start, end = ranges[index]
            clients[index].sendall(stream.token.encode() + b" %d\n" % index + payload[start:end])
            clients[index].shutdown(socket.SHUT_WR)
        for client, (start, end) in zip(clients, ranges):
            assert client.recv(64) == b"%d\n" % (end - start)
            client.close()
        assert stream.wait(10)
        assert stream.done and stream.error is None
        assert b"".join(segments) == payload
    finally:
        stream.close()


def test_a_sending_stream_in_parts_sends_each_range() -> None:
    payload = bytes(range(256)) * 400
    stream = BulkStream(
        [memoryview(payload[:1000]), memoryview(payload[1000:])], sending=True, parts=4
    ).start()
    received = []
    for index in range(4):
        with connect(stream.port) as client:
            client.sendall(stream.token.encode() + b" %d\n" % index)
            data = b""
            while chunk := client.recv(65536):
                data += chunk
            received.append(data)
    assert stream.wait(10) and stream.done
    assert [len(r) for r in received] == [
        end - start for start, end in bulk.part_ranges(len(payload), 4)
    ]
    assert b"".join(received) == payload


def test_one_part_cut_short_ends_every_part_and_the_stream_is_not_done() -> None:
    stream = BulkStream([bytearray(3000)], sending=False, parts=3).start()
    with connect(stream.port) as whole, connect(stream.port) as cut:
        whole.sendall(stream.token.encode() + b" 0\n" + b"x" * 500)  # waits for more
        cut.sendall(stream.token.encode() + b" 1\n" + b"y" * 400)
        # A second claim of a part is refused; an index past the last too.
        for line in (b" 1\n", b" 3\n", b" x\n"):
            with connect(stream.port) as again:
                again.sendall(stream.token.encode() + line)
                assert dropped(again)
        cut.shutdown(socket.SHUT_WR)
        assert stream.wait(10)
        assert dropped(whole)  # the other part's connection was ended too
    assert not stream.done
    assert stream.error is not None and stream.error.startswith(
        "the client closed the transfer after 900 of 3000 bytes"
    )


class ThroughSSH:
    """Opens bulk streams as the product does: a direct-tcpip channel of a real sshd per stream."""

    def __init__(self, conn: SSHConnection) -> None:
        self.conn = conn
        self.writers: list[Any] = []
        self.readers: list[Any] = []

    async def __call__(self, where: int | str) -> Any:
        if isinstance(where, str):
            reader, writer = await self.conn.open_unix_connection(where)
        else:
            reader, writer = await self.conn.open_connection("127.0.0.1", where)
        self.readers.append(reader)
        self.writers.append(writer)
        return reader, writer

    async def all_closed(self) -> None:
        """Every channel opened has closed (both ends), within 10 s."""
        for writer in self.writers:
            await asyncio.wait_for(writer.channel.wait_closed(), 10)


async def no_bulk_left(kernel: TransferClient) -> None:
    """The kernel holds no transfer and, soon, no bulk stream thread."""
    assert await evaluate(kernel.link, PENDING) == "0"
    for _ in range(50):
        if await evaluate(kernel.link, BULK_THREADS) == "0":
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the kernel's bulk stream threads are still running")


async def test_a_large_transfer_goes_over_several_ssh_channels_byte_for_byte(
    start_kernel: StartKernel,
    ssh_host: SSHTestHost,
    ssh_settings: TransportSettings,
) -> None:
    kernel = await start_kernel()
    array = np.random.default_rng(1).random(LARGE // 8)
    async with SSHConnection(ssh_host.alias, ssh_settings) as conn:
        opener = ThroughSSH(conn)
        client = TransferClient(kernel.link, "the kernel", opener=opener, channels=4)
        pushed = await client.push(dump_variables({"a": array, "b": "small"}, ["a", "b"]))
        assert [v["name"] for v in pushed] == ["a", "b"]
        assert len(opener.writers) == 4  # one channel per part
        digest = await evaluate(kernel.link, SHA.format("a"))
        assert digest == repr(__import__("hashlib").sha256(array.tobytes()).hexdigest())
        back = load_variables(await client.pull(["a", "b"]))
        assert len(opener.writers) == 8
        np.testing.assert_array_equal(back["a"], array)
        assert back["b"] == "small"
        # A small transfer takes one channel.
        await client.push(dump_variables({"c": np.ones(1_000_000)}, ["c"]))
        assert len(opener.writers) == 9
        await opener.all_closed()
    await no_bulk_left(kernel)


async def test_one_ssh_channel_closed_midway_fails_the_push_and_assigns_nothing(
    start_kernel: StartKernel,
    ssh_host: SSHTestHost,
    ssh_settings: TransportSettings,
) -> None:
    kernel = await start_kernel()
    async with SSHConnection(ssh_host.alias, ssh_settings) as conn:
        opener = ThroughSSH(conn)

        async def open_and_close_the_third(port: int) -> Any:
            reader, writer = await opener(port)
            if len(opener.writers) == 3:
                real_write = writer.write

                def write(data: Any) -> None:
                    real_write(data)
                    if memoryview(data).nbytes > 1000:  # the part's first piece of data
                        writer.channel.close()

                writer.write = write
            return reader, writer

        client = TransferClient(
            kernel.link, "the kernel", opener=open_and_close_the_third, channels=4
        )
        values = {"a": np.ones(LARGE // 8), "b": 7}
        with pytest.raises(
            TransferError,
            match=r"sending 'a', 'b' to the kernel: the bulk "
            r"stream broke after \d+ of \d+ bytes \(BrokenPipeError.*Nothing "
            r"was assigned",
        ):
            await client.push(dump_variables(values, ["a", "b"]))
        assert len(opener.writers) == 4
        await opener.all_closed()
    assert await evaluate(kernel.link, "'a' in globals() or 'b' in globals()") == "False"
    await no_bulk_left(kernel)


async def test_one_ssh_channel_closed_midway_fails_the_pull(
    start_kernel: StartKernel,
    ssh_host: SSHTestHost,
    ssh_settings: TransportSettings,
) -> None:
    kernel = await start_kernel()
    reply, _ = await run(kernel.link, f"import numpy as np; a = np.ones({LARGE // 8})")
    assert reply["status"] == "ok"
    async with SSHConnection(ssh_host.alias, ssh_settings) as conn:
        opener = ThroughSSH(conn)

        async def open_and_close_the_second(port: int) -> Any:
            reader, writer = await opener(port)
            if len(opener.writers) == 2:
                real_read = reader.read

                async def read(n: int = -1) -> bytes:
                    data: bytes = await real_read(n)
                    writer.channel.close()
                    return data

                reader.read = read
            return reader, writer

        client = TransferClient(
            kernel.link, "the kernel", opener=open_and_close_the_second, channels=4
        )
        with pytest.raises(
            TransferError,
            match=r"reading 'a' from the kernel: the bulk stream "
            r"(ended|broke) after \d+ of \d+ bytes.*Nothing was assigned",
        ):
            await client.pull(["a"])
        assert len(opener.writers) == 4
        await opener.all_closed()
    await no_bulk_left(kernel)


async def test_a_large_copy_pipes_each_part_to_the_same_part_of_the_other_kernel(
    start_kernel: StartKernel,
) -> None:
    kernels = [await start_kernel(), await start_kernel()]
    opened: list[int] = []

    async def counting(port: int) -> Any:
        opened.append(port)
        return await asyncio.open_connection("127.0.0.1", port)

    source, destination = (
        TransferClient(k.link, f"kernel {i}", opener=counting, channels=3)
        for i, k in enumerate(kernels)
    )
    reply, _ = await run(
        source.link, f"import numpy as np\nx = np.random.default_rng(2).random({LARGE // 8})"
    )
    assert reply["status"] == "ok"
    assert [a["name"] for a in await source.copy_to(destination, ["x"])] == ["x"]
    assert len(opened) == 6 and len(set(opened)) == 2  # three parts out, three in
    assert await evaluate(destination.link, SHA.format("x")) == await evaluate(
        source.link, SHA.format("x")
    )
    for kernel in kernels:
        await no_bulk_left(kernel)
