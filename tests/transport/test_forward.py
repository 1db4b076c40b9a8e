"""Local forwards through a real sshd: data both ways, and the same port after a cut link."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from pathlib import Path

import asyncssh
import pytest

from jupyter_remote_hw.transport import ConnectionState, LocalForward, SSHConnection, StateChange
from jupyter_remote_hw.transport.forward import ConnectionGetter

from ..conftest import settings_for
from ..testhosts import NetnsTestHost, SSHTestHost

LOG = logging.getLogger(__name__)


async def echo_roundtrip(port: int, payload: bytes, timeout: float = 10.0) -> bytes:
    """Send ``payload`` to 127.0.0.1:port and read back as many bytes."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            send = asyncio.create_task(_send(writer, payload))
            received = await reader.readexactly(len(payload))
            await send
            return received
        finally:
            writer.close()
            await writer.wait_closed()


async def _send(writer: asyncio.StreamWriter, payload: bytes) -> None:
    for start in range(0, len(payload), 1 << 16):
        writer.write(payload[start : start + (1 << 16)])
        await writer.drain()


async def test_forward_carries_data_both_ways(ssh_host: SSHTestHost) -> None:
    echo_port = ssh_host.start_echo_server()
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        forward = await conn.forward_local_port(echo_port)
        payload = os.urandom(4 * 1024 * 1024)
        assert await echo_roundtrip(forward.local_port, payload) == payload
        # Two clients at once share the one SSH connection.
        small = [os.urandom(1000) for _ in range(2)]
        got = await asyncio.gather(*(echo_roundtrip(forward.local_port, p) for p in small))
        assert got == small


async def test_forward_listens_on_loopback_only(ssh_host: SSHTestHost) -> None:
    echo_port = ssh_host.start_echo_server()
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        forward = await conn.forward_local_port(echo_port)
        table = await asyncio.to_thread(Path("/proc/net/tcp").read_text)
        listeners = [
            line.split()[1]
            for line in table.splitlines()[1:]
            if line.split()[3] == "0A"  # LISTEN
            and int(line.split()[1].split(":")[1], 16) == forward.local_port
        ]
        assert listeners == [f"0100007F:{forward.local_port:04X}"]


async def test_forward_closes_with_connection(ssh_host: SSHTestHost) -> None:
    echo_port = ssh_host.start_echo_server()
    conn = await SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)).open()
    forward = await conn.forward_local_port(echo_port)
    await conn.close()
    assert not forward.active
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
    except ConnectionRefusedError:
        pass
    else:
        writer.close()
        raise AssertionError("the local port still accepts after close")


async def test_forward_keeps_its_port_across_a_cut_link(ns_host: NetnsTestHost) -> None:
    assert ns_host.link is not None
    echo_port = ns_host.start_echo_server()
    changes: list[StateChange] = []
    async with SSHConnection(ns_host.alias, settings_for(ns_host.ssh_config)) as conn:
        conn.add_listener(changes.append)
        forward = await conn.forward_local_port(echo_port)
        port = forward.local_port
        assert await echo_roundtrip(port, b"before the cut") == b"before the cut"

        ns_host.link.cut()
        try:
            await asyncio.sleep(10)
            assert conn.state == ConnectionState.RECONNECTING, changes
        finally:
            ns_host.link.restore()
        restored = time.monotonic()

        deadline = restored + 5.0
        reply = b""
        while time.monotonic() < deadline:
            try:
                reply = await echo_roundtrip(
                    port, b"after the cut", timeout=deadline - time.monotonic()
                )
                break
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                await asyncio.sleep(0.1)
        took = time.monotonic() - restored
        assert reply == b"after the cut", f"no echo within 5 s of restore; changes: {changes}"
        assert took < 5.0
        assert forward.local_port == port and forward.active
        states = [c.state for c in changes]
        assert ConnectionState.RECONNECTING in states
        assert states[-1] == ConnectionState.CONNECTED
        lost = next(c for c in changes if c.state == ConnectionState.RECONNECTING)
        assert lost.reason


def _gated(conn: SSHConnection) -> tuple[asyncio.Event, ConnectionGetter]:
    """A connection getter that waits for the returned event: the tunnel opens late."""
    gate = asyncio.Event()

    async def get_connection() -> asyncssh.SSHClientConnection:
        await gate.wait()
        return await conn.wait_connected()

    return gate, get_connection


async def test_bytes_sent_before_the_tunnel_opens_arrive(ssh_host: SSHTestHost) -> None:
    # A kernel client writes as soon as it is connected, before the tunnel to
    # the host is open (the connection getter still waits).
    echo_port = ssh_host.start_echo_server()
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        gate, get_connection = _gated(conn)
        forward = LocalForward(ssh_host.alias, get_connection, echo_port, log=LOG)
        async with await forward.start():
            reader, writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
            try:
                writer.write(b"sent at once")
                await writer.drain()
                await asyncio.sleep(0.3)  # the loop may read them now: nowhere to go yet
                gate.set()
                async with asyncio.timeout(10):
                    assert await reader.readexactly(12) == b"sent at once"
                writer.write(b" and later")
                async with asyncio.timeout(10):
                    assert await reader.readexactly(10) == b" and later"
            finally:
                writer.close()
                await writer.wait_closed()


async def test_bytes_and_eof_read_before_the_tunnel_opens_arrive(ssh_host: SSHTestHost) -> None:
    # Some event loops (Python 3.11.2's) read from a socket whose protocol
    # paused reading in connection_made; resuming here does the same on any
    # Python: the bytes and the end of file reach the forward before its tunnel.
    echo_port = ssh_host.start_echo_server()
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        gate, get_connection = _gated(conn)
        forward = LocalForward(ssh_host.alias, get_connection, echo_port, log=LOG)
        async with await forward.start():
            reader, writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
            try:
                payload = os.urandom(200_000)
                writer.write(payload)
                writer.write_eof()
                await writer.drain()
                async with asyncio.timeout(5):
                    while not forward._clients:
                        await asyncio.sleep(0.01)
                for client in forward._clients:
                    client.resume_reading()
                await asyncio.sleep(0.3)
                gate.set()
                async with asyncio.timeout(10):
                    # The echo server closes once it saw the end of file.
                    assert await reader.read() == payload
            finally:
                writer.close()
                await writer.wait_closed()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _close_wait_sockets(port: int) -> int:
    """Sockets on 127.0.0.1:port that the other end closed and this one did not."""
    table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(
        1
        for line in table
        if line.split()[3] == "08" and int(line.split()[1].split(":")[1], 16) == port
    )


async def _wait_state(conn: SSHConnection, state: ConnectionState, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while conn.state != state:
            await asyncio.sleep(0.05)


async def test_cut_links_leave_no_socket_behind(
    ns_host: NetnsTestHost, caplog: pytest.LogCaptureFixture
) -> None:
    assert ns_host.link is not None
    echo_port = ns_host.start_echo_server()
    settings = settings_for(ns_host.ssh_config, forward_wait_timeout=2.0)
    async with SSHConnection(ns_host.alias, settings) as conn:
        forward = await conn.forward_local_port(echo_port)
        port = forward.local_port
        assert await echo_roundtrip(port, b"warm up") == b"warm up"
        counts = [_open_fds()]
        for _ in range(3):
            # A client whose tunnel is open when the link is cut.
            tunnelled = await asyncio.open_connection("127.0.0.1", port)
            tunnelled[1].write(b"x")
            assert await asyncio.wait_for(tunnelled[0].readexactly(1), 10) == b"x"
            ns_host.link.cut()
            try:
                await _wait_state(conn, ConnectionState.RECONNECTING, 15)
                # Clients that come while the host is unreachable: some give up
                # at once, the others are dropped when the wait for a connection
                # runs out.
                for _ in range(3):
                    _, quitter = await asyncio.open_connection("127.0.0.1", port)
                    quitter.write(b"hello")
                    quitter.close()
                    await quitter.wait_closed()
                waiters = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
                for _, writer in waiters:
                    writer.write(b"hello")
                async with asyncio.timeout(settings.forward_wait_timeout + 10):
                    for reader, _ in [*waiters, tunnelled]:
                        assert await reader.read() == b""
                for _, writer in [*waiters, tunnelled]:
                    writer.close()
                    await writer.wait_closed()
            finally:
                ns_host.link.restore()
            await conn.wait_connected(timeout=20)
            assert await echo_roundtrip(port, b"back") == b"back"
            await asyncio.sleep(0.2)
            counts.append(_open_fds())
        assert _close_wait_sockets(port) == 0
        assert counts[-1] <= counts[0] + 2, f"open file descriptors after each cut: {counts}"
    gc.collect()
    await asyncio.sleep(0)
    assert not [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR]
