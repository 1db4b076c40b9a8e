"""Large values over the link of an engine to its controller: proven before read,
every frame checked before it is kept, and an engine that uses it for what it
gathers and is given."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from jupyter_remote_hw.transfer.kernel_side.ranks import link as keyed
from jupyter_remote_hw.transfer.kernel_side.ranks.wire import pack_value, unpack_value

from .test_engine import EngineProcess


@pytest.fixture
def server() -> Iterator[keyed.Server]:
    made = keyed.Server("127.0.0.1")
    yield made
    made.close()


def host_port(server: keyed.Server) -> tuple[str, int]:
    host, port, _ = server.address.rsplit(":", 2)
    return host, int(port)


def test_frames_go_both_ways_and_large_values_leave_the_message(server: keyed.Server) -> None:
    engine_side = keyed.connect(server.address, 3, keyed.Store())
    link = server.link(3, timeout=5)
    assert link is not None
    big = bytes(range(256)) * 4096  # 1 MiB
    field = pack_value(big, "out-3-1-big", engine_side)
    assert isinstance(field, dict) and field["bulk"] == "out-3-1-big"
    assert field["n"] > len(big)  # the pickle's size
    assert unpack_value(field, link) == big
    # Small values stay in the message; the other way works the same.
    assert isinstance(pack_value(7, "in-1-k", link), str)
    assert unpack_value(pack_value(big, "in-1-k", link), engine_side) == big
    engine_side.close()


def test_a_connection_without_the_key_is_never_read(server: keyed.Server) -> None:
    with socket.create_connection(host_port(server)) as sock:
        nonce = sock.recv(16)
        wrong = hmac.new(b"x" * 32, nonce + struct.pack("!I", 0), hashlib.sha256).digest()
        sock.sendall(struct.pack("!I", 0) + wrong)
        assert sock.recv(1) == b""  # closed at once
    assert server.link(0, timeout=0.5) is None
    with pytest.raises(ConnectionRefusedError, match="refused this rank"):
        keyed.connect(server.address.rsplit(":", 1)[0] + ":" + "00" * 32, 1, keyed.Store())


def test_a_connection_that_proves_nothing_is_dropped(
    server: keyed.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyed, "PROOF_TIMEOUT", 0.3)
    began = time.monotonic()
    with socket.create_connection(host_port(server)) as sock:
        sock.settimeout(5)
        assert len(sock.recv(16)) == 16
        assert sock.recv(1) == b""
    assert time.monotonic() - began < 3


def test_a_frame_that_fails_its_check_is_not_kept_and_ends_the_link(server: keyed.Server) -> None:
    engine_side = keyed.connect(server.address, 2, keyed.Store())
    link = server.link(2, timeout=5)
    assert link is not None
    # A frame signed as if the controller had sent it (a reflection) is refused too.
    payload = b"cos\nsystem\n(S'echo owned'\ntR."
    forged = {"id": "out-2-1-x", "n": len(payload), "mac": keyed._mac(b"k" * 32, b"e", "x", b"")}
    engine_side.sock.sendall(json.dumps(forged).encode() + b"\n" + payload)
    with pytest.raises(keyed.BulkError, match="failed its check"):
        link.store.take("out-2-1-x", timeout=5)
    reflected = {"id": "r", "n": 1, "mac": keyed._mac(link.key, b"c", "r", b"a")}
    other = keyed.connect(server.address, 4, keyed.Store())
    link4 = server.link(4, timeout=5)
    assert link4 is not None
    other.sock.sendall(json.dumps(reflected).encode() + b"\na")
    with pytest.raises(keyed.BulkError, match="failed its check"):
        link4.store.take("r", timeout=5)


def test_an_interrupt_during_a_large_send_stops_the_wait_not_the_frame() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        theirs = listener.accept()[0]
    key = b"k" * 32
    link = keyed.Link(ours, ours.makefile("rb"), key, b"c", keyed.Store())
    big = bytes(range(256)) * 32768  # 8 MiB: far more than the socket holds unread
    # The user's interrupt lands while the other end reads nothing, mid-frame.
    timer = threading.Timer(
        0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)
    )
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            link.send("in-1-big", big)
    finally:
        timer.cancel()
    # Nothing of the frame was lost: it is read whole, checks, and the link goes on.
    theirs.settimeout(10)
    rfile = theirs.makefile("rb")
    for ident, payload in (("in-1-big", big), ("in-2-small", b"after")):
        if ident == "in-2-small":
            link.send(ident, payload)
        header = json.loads(rfile.readline())
        assert header["id"] == ident and header["n"] == len(payload)
        got = rfile.read(header["n"])
        assert got == payload
        assert header["mac"] == keyed._mac(key, b"c", ident, got)
    rfile.close()
    theirs.close()
    link.close()


def test_an_engine_sends_and_takes_large_values_over_its_link(server: keyed.Server) -> None:
    engine = EngineProcess({"RANK": "5", keyed.ADDRESS_ENV: server.address})
    try:
        ready = engine.until("ready")[-1]
        assert ready["bulk"] is True and ready["unlinked"] == ""
        link = server.link(5, timeout=5)
        assert link is not None
        data = list(range(200_000))
        engine.send(
            {
                "op": "execute",
                "id": 1,
                "code": "import os\nprint(len(xs), sum(xs), 'JRHW_RANKS_BULK' in os.environ)\n"
                "ys = [x * 2 for x in xs]",
                "inputs": {"xs": pack_value(data, "in-1-xs", link)},
            }
        )
        seen = engine.until("done")
        assert seen[-1]["status"] == "ok", seen[-1]
        printed = "".join(m["text"] for m in seen if m.get("ev") == "stream")
        # The key left the environment before any cell ran.
        assert printed == f"{len(data)} {sum(data)} False\n"
        engine.send({"op": "get", "id": 2, "names": ["ys"]})
        values = engine.until("values")[-1]
        assert values["values"]["ys"]["bulk"] == "out-5-2-ys"
        assert unpack_value(values["values"]["ys"], link) == [x * 2 for x in data]
    finally:
        engine.close()


def test_an_engine_that_cannot_reach_its_controller_says_why_and_uses_the_channel() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    engine = EngineProcess({keyed.ADDRESS_ENV: f"127.0.0.1:{port}:{'ab' * 32}"})
    try:
        ready = engine.until("ready")[-1]
        assert ready["bulk"] is False
        assert "ConnectionRefusedError" in ready["unlinked"]
        engine.send({"op": "execute", "id": 1, "code": "big = b'x' * 200_000"})
        assert engine.until("done")[-1]["status"] == "ok"
        engine.send({"op": "get", "id": 2, "names": ["big"]})
        field = engine.until("values")[-1]["values"]["big"]
        assert isinstance(field, str) and unpack_value(field) == b"x" * 200_000
    finally:
        engine.close()
