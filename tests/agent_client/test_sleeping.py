"""A kernel's relay while the kernel hibernates: what it answers itself, what it holds, and
how held requests reach the kernel that wakes, in order and each from its own client.

The host side is the agent's real relay (:mod:`jupyter_remote_hw.agent.relay`) served on a
UNIX socket; behind it, a small kernel made of ZMQ sockets that answers every request and
records what it got. The clients are jupyter_client's own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.session import Session

from jupyter_remote_hw.agent.protocol import encode, ok_response
from jupyter_remote_hw.agent.relay import KernelRelays
from jupyter_remote_hw.agent_client.relay import KernelRelayClient

from ..testhosts import free_port

KEY = secrets.token_hex(32)
log = logging.getLogger("sleeping-test")


class SmallKernel:
    """Answers every request on its shell, control and stdin ports (kernel_info with its
    own name), publishes busy and idle around each, and records what it got."""

    def __init__(self, name: str, context: zmq.asyncio.Context) -> None:
        self.name = name
        self.session = Session(key=KEY.encode())
        self.got: list[tuple[str, str]] = []  # (msg_type, code or "")
        self.connection: dict[str, Any] = {
            "transport": "tcp",
            "ip": "127.0.0.1",
            "key": KEY,
            "signature_scheme": "hmac-sha256",
        }
        self.sockets: dict[str, zmq.asyncio.Socket] = {}
        for channel in ("shell", "control", "stdin", "iopub"):
            sock = context.socket(zmq.PUB if channel == "iopub" else zmq.ROUTER)
            sock.setsockopt(zmq.LINGER, 0)
            self.connection[f"{channel}_port"] = sock.bind_to_random_port("tcp://127.0.0.1")
            self.sockets[channel] = sock
        self.connection["hb_port"] = 0
        self.tasks = [asyncio.ensure_future(self._serve(c)) for c in ("shell", "control", "stdin")]

    async def _serve(self, channel: str) -> None:
        sock = self.sockets[channel]
        while True:
            idents, rest = self.session.feed_identities(await sock.recv_multipart())
            message = self.session.deserialize(rest)
            msg_type = message["header"]["msg_type"]
            self.got.append((msg_type, message["content"].get("code", "")))
            if message["content"].get("code") == "hang":
                continue  # a cell that never ends
            await self._publish("status", {"execution_state": "busy"}, message["header"])
            reply_type = msg_type.replace("_request", "_reply")
            content: dict[str, Any] = {"status": "ok"}
            if msg_type == "kernel_info_request":
                content = {
                    "status": "ok",
                    "implementation": self.name,
                    "banner": self.name,
                    "protocol_version": "5.3",
                    "language_info": {"name": "python"},
                    "supported_features": ["kernel subshells", "debugger"],
                }
            elif msg_type == "execute_request":
                content = {"status": "ok", "execution_count": len(self.got)}
            reply = self.session.msg(reply_type, content, parent=message["header"])
            await sock.send_multipart(self.session.serialize(reply, ident=idents))
            await self._publish("status", {"execution_state": "idle"}, message["header"])

    async def _publish(
        self, msg_type: str, content: dict[str, Any], parent: dict[str, Any]
    ) -> None:
        message = self.session.msg(msg_type, content, parent=parent)
        await self.sockets["iopub"].send_multipart(self.session.serialize(message))

    def executed(self) -> list[str]:
        return [code for kind, code in self.got if kind == "execute_request"]

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        for sock in self.sockets.values():
            sock.close(linger=0)


class Host:
    """The agent's relays for one small kernel, reached over a UNIX socket."""

    def __init__(self, kernel: SmallKernel, path: Path, context: zmq.asyncio.Context) -> None:
        self.kernel = kernel
        self.path = path
        self.relays = KernelRelays(context, lambda _kernel_id: kernel.connection)
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            line = await reader.readline()
            if not line:  # a stream closed before it attached (the relay went to sleep)
                writer.close()
                return
            request = json.loads(line)

            async def answer(result: dict[str, Any]) -> None:
                writer.write(encode(ok_response(request["id"], result)))
                await writer.drain()

            await self.relays.attach(request["args"], reader, writer, answer)

        self.server = await asyncio.start_unix_server(serve, str(self.path))

    async def open_stream(self) -> tuple[Any, Any]:
        return await asyncio.open_unix_connection(str(self.path))

    async def close(self) -> None:
        await self.relays.close()
        if self.server is not None:
            self.server.close()
        self.kernel.close()


@pytest.fixture
async def context() -> AsyncIterator[zmq.asyncio.Context]:
    ctx = zmq.asyncio.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture
async def hosts(context: zmq.asyncio.Context, short_tmp: Path) -> AsyncIterator[list[Host]]:
    """The kernel before hibernation and the one that wakes, each behind a host relay."""
    made = [
        Host(SmallKernel(name, context), short_tmp / f"{name}.sock", context)
        for name in ("first-kernel", "woken-kernel")
    ]
    for host in made:
        await host.start()
    yield made
    for host in made:
        await host.close()


@pytest.fixture
async def relay(hosts: list[Host]) -> AsyncIterator[KernelRelayClient]:
    relay = KernelRelayClient("k-sleep", hosts[0].kernel.connection, hosts[0].open_stream, log)
    await relay.start()
    yield relay
    await relay.close()


@pytest.fixture
async def client(relay: KernelRelayClient) -> AsyncIterator[Any]:
    """Opens jupyter_client clients of the relay's ports; each has its own identity."""
    opened: list[AsyncKernelClient] = []

    async def open_client() -> AsyncKernelClient:
        kc = AsyncKernelClient()
        kc.load_connection_info(
            {
                "transport": "tcp",
                "ip": "127.0.0.1",
                "key": KEY,
                "signature_scheme": "hmac-sha256",
                **relay.ports,
            }
        )
        kc.start_channels(hb=False)
        opened.append(kc)
        await asyncio.sleep(0.2)  # its IOPub subscription reaches the relay
        return kc

    yield open_client
    for kc in opened:
        kc.stop_channels()


async def replies(
    kc: AsyncKernelClient, msg_ids: list[str], timeout: float = 10
) -> dict[str, dict[str, Any]]:
    """The shell replies to ``msg_ids``, by request id."""
    found: dict[str, dict[str, Any]] = {}
    while len(found) < len(msg_ids):
        reply = await kc.get_shell_msg(timeout=timeout)
        found[reply["parent_header"]["msg_id"]] = reply
    return found


async def iopub_of(
    kc: AsyncKernelClient, msg_id: str, until: str = "idle", timeout: float = 10
) -> list[dict[str, Any]]:
    """IOPub messages whose parent is ``msg_id``, up to its status ``until``."""
    seen = []
    while True:
        message = await kc.get_iopub_msg(timeout=timeout)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == until:
            return seen


async def asleep(relay: KernelRelayClient, wakes: list[int]) -> None:
    relay.hold(lambda: wakes.append(1))
    await relay.sleep()


async def test_answers_while_asleep_come_from_the_relay(
    relay: KernelRelayClient,
    client: Any,
    hosts: list[Host],
) -> None:
    early = await client()
    msg_id = early.kernel_info()
    assert (await replies(early, [msg_id]))[msg_id]["content"]["implementation"] == "first-kernel"
    wakes: list[int] = []
    await asleep(relay, wakes)
    before = len(hosts[0].kernel.got)

    late = await client()  # a client that connects while the kernel hibernates
    for kc in (early, late):
        msg_id = kc.kernel_info()
        reply = (await replies(kc, [msg_id]))[msg_id]
        # The kernel's own last answer, signed with its key (the client checked it).
        assert reply["content"]["implementation"] == "first-kernel"
        statuses = [
            m["content"]["execution_state"]
            for m in await iopub_of(kc, msg_id)
            if m["msg_type"] == "status"
        ]
        assert statuses == ["busy", "idle"]

    asked = {
        late.complete("np.ar", 5): ("ok", {"matches": [], "cursor_start": 5}),
        late.inspect("x", 1): ("ok", {"found": False}),
        late.is_complete("for x in y:"): ("unknown", {}),
        late.history(): ("ok", {"history": []}),
        late.comm_info(): ("ok", {"comms": {}}),
    }
    got = await replies(late, list(asked))
    for msg_id, (status, fields) in asked.items():
        assert got[msg_id]["content"]["status"] == status
        assert fields.items() <= got[msg_id]["content"].items()
    # The kernel's own answer, less subshells: a front end that sees them asks for one
    # as it connects, which must not wake the kernel.
    assert reply["content"]["supported_features"] == ["debugger"]
    for kind, status in [
        ("create_subshell_request", "error"),
        ("list_subshell_request", "ok"),
        ("delete_subshell_request", "error"),
    ]:
        late.control_channel.send(late.session.msg(kind, {"subshell_id": "s1"}))
        answer = await late.get_control_msg(timeout=10)
        assert answer["msg_type"] == kind.replace("_request", "_reply")
        assert answer["content"]["status"] == status
    assert "hibernated" in answer["content"]["evalue"]
    message = late.session.msg("shutdown_request", {"restart": False})
    late.control_channel.send(message)
    reply = await late.get_control_msg(timeout=10)
    assert reply["msg_type"] == "shutdown_reply" and reply["content"]["status"] == "ok"

    # Nothing reached a kernel, and nothing asked for one.
    await asyncio.sleep(0.3)
    assert len(hosts[0].kernel.got) == before
    assert wakes == []


async def test_held_requests_reach_the_woken_kernel_in_order_after_release(
    relay: KernelRelayClient,
    client: Any,
    hosts: list[Host],
) -> None:
    first, second = await client(), await client()
    wakes: list[int] = []
    await asleep(relay, wakes)
    a1 = first.execute("a1")
    await asyncio.sleep(0.1)
    b1 = second.execute("b1")
    await asyncio.sleep(0.1)
    a2 = first.execute("a2")
    await asyncio.sleep(0.3)
    assert wakes == [1]  # once, however many requests wait
    assert relay.held == 3

    await relay.wake(hosts[1].open_stream)
    # A client that connects now (a restore's transfer client) reaches the new kernel;
    # the held ones wait.
    restorer = await client()
    msg_id = restorer.kernel_info()
    assert (await replies(restorer, [msg_id]))[msg_id]["content"][
        "implementation"
    ] == "woken-kernel"
    assert hosts[1].kernel.executed() == []
    # A held client's next request waits behind its earlier ones.
    a3 = first.execute("a3")
    await asyncio.sleep(0.3)
    assert hosts[1].kernel.executed() == []

    await relay.release()
    got_first = await replies(first, [a1, a2, a3])
    got_second = await replies(second, [b1])
    assert hosts[1].kernel.executed() == ["a1", "b1", "a2", "a3"]
    assert all(r["content"]["status"] == "ok" for r in [*got_first.values(), *got_second.values()])
    assert hosts[0].kernel.executed() == []
    # Awake again: requests go straight to the kernel.
    msg_id = first.kernel_info()
    assert (await replies(first, [msg_id]))[msg_id]["content"]["implementation"] == "woken-kernel"


async def test_a_failed_wake_answers_the_waiting_cell_and_the_next_one_retries(
    relay: KernelRelayClient,
    client: Any,
    hosts: list[Host],
) -> None:
    kc = await client()
    wakes: list[int] = []
    await asyncio.sleep(0.1)
    await asleep(relay, wakes)
    msg_id = kc.execute("x")
    await asyncio.sleep(0.3)
    assert wakes == [1]
    await relay.refuse_held("the host cannot be reached")
    reply = (await replies(kc, [msg_id]))[msg_id]
    assert reply["content"]["status"] == "error"
    assert "the host cannot be reached" in reply["content"]["evalue"]
    assert "run the cell again" in reply["content"]["evalue"]
    errors = [m for m in await iopub_of(kc, msg_id) if m["msg_type"] == "error"]
    assert errors and errors[0]["content"]["ename"] == "KernelWakeError"
    assert relay.held == 0

    again = kc.execute("x")
    await asyncio.sleep(0.3)
    assert wakes == [1, 1]  # the next cell wakes it again
    await relay.wake(hosts[1].open_stream)
    await relay.release()
    assert (await replies(kc, [again]))[again]["content"]["status"] == "ok"
    assert hosts[1].kernel.executed() == ["x"]


async def test_a_cancelled_hibernation_releases_held_requests_to_the_same_kernel(
    relay: KernelRelayClient,
    client: Any,
    hosts: list[Host],
) -> None:
    kc = await client()
    msg_id = kc.kernel_info()  # as a front end does when it connects
    await replies(kc, [msg_id])
    wakes: list[int] = []
    relay.hold(lambda: wakes.append(1))  # a save under way: the kernel is still there
    msg_id = kc.execute("during the save")
    await asyncio.sleep(0.3)
    assert wakes == [1] and hosts[0].kernel.executed() == []
    await relay.release()
    assert (await replies(kc, [msg_id]))[msg_id]["content"]["status"] == "ok"
    assert hosts[0].kernel.executed() == ["during the save"]


@pytest.mark.parametrize("lead", [0.0, 0.002, 0.01, 0.05])
async def test_a_cell_sent_as_hibernation_begins_runs_once(
    relay: KernelRelayClient,
    client: Any,
    hosts: list[Host],
    lead: float,
) -> None:
    kc = await client()
    msg_id = kc.kernel_info()
    await replies(kc, [msg_id])
    # The cell leaves the front end ``lead`` seconds before the hibernation begins: it
    # is held, or on its way to the host, or there, or run already.
    cell = kc.execute("just before")
    await asyncio.sleep(lead)
    relay.hold(lambda: None)
    # The save: a client of its own, whose requests follow the cell on the same stream.
    saver = await client()
    asked = saver.kernel_info()
    await replies(saver, [asked])
    await relay.sleep()
    await relay.wake(hosts[1].open_stream)
    await relay.release()
    assert (await replies(kc, [cell]))[cell]["content"]["status"] == "ok"
    after = kc.execute("after the wake")
    await replies(kc, [after])
    # Once, on one kernel or the other, however the timing fell; never twice.
    ran = hosts[0].kernel.executed() + hosts[1].kernel.executed()
    assert ran.count("just before") == 1
    assert hosts[1].kernel.executed()[-1] == "after the wake"


async def test_heartbeats_are_echoed_while_asleep(
    relay: KernelRelayClient,
    context: zmq.asyncio.Context,
) -> None:
    port = free_port()
    await asleep(relay, [])
    await relay.echo_heartbeats(port)
    ping = context.socket(zmq.REQ)
    ping.setsockopt(zmq.LINGER, 0)
    ping.connect(f"tcp://127.0.0.1:{port}")
    try:
        await ping.send(b"ping")
        async with asyncio.timeout(5):
            assert await ping.recv() == b"ping"
    finally:
        ping.close(linger=0)


async def test_a_kernel_whose_hardware_ended_answers_every_cell_with_the_reason(
    relay: KernelRelayClient,
    client: Any,
    hosts: list[Host],
) -> None:
    kc = await client()
    first = kc.execute("x")
    assert (await replies(kc, [first]))[first]["content"]["status"] == "ok"
    hanging = kc.execute("hang")  # the kernel got it and never answers
    for _ in range(50):
        if "hang" in hosts[0].kernel.executed():
            break
        await asyncio.sleep(0.1)
    reason = "SLURM job 5 ended: TIMEOUT (it reached its time limit)"
    await relay.sleep()
    await relay.refuse_held(reason, dead=True)
    reply = (await replies(kc, [hanging], timeout=5))[hanging]["content"]
    assert reply["status"] == "error" and reply["ename"] == "KernelDead"
    assert reason in reply["evalue"] and "start a new kernel" in reply["evalue"]
    seen = await iopub_of(kc, hanging, until="dead", timeout=5)
    assert [m["content"]["ename"] for m in seen if m["msg_type"] == "error"] == ["KernelDead"]
    # A cell sent now is answered at once, and never reaches a kernel; a client that
    # connects now is told too.
    later = await client()
    after = later.execute("y")
    assert (await replies(later, [after], timeout=5))[after]["content"]["ename"] == "KernelDead"
    states = [
        m["content"]["execution_state"]
        for m in await iopub_of(later, after, until="dead", timeout=5)
        if m["msg_type"] == "status"
    ]
    assert states == ["dead"]  # never idle again: Jupyter's listing keeps it dead
    info = later.kernel_info()
    assert (await replies(later, [info], timeout=5))[info]["content"]["status"] == "ok"
    assert hosts[0].kernel.executed() == ["x", "hang"]
