"""One rank's engine: runs the cells ``%%ranks`` sends it and answers on its standard
output, which is its channel to the controller (SLURM carries it from the step).

What the cell prints, at the level of file descriptors (so a C library's output too),
goes to the controller as whole lines. A separate thread reads the channel: it
interrupts the running cell, reports its stack, and ends the engine when the
controller is gone (end of input, or no word from it for the heartbeat's time).
"""

from __future__ import annotations

import functools
import os
import queue
import signal
import socket
import sys
import threading
import time
import traceback
from typing import IO, Any, ClassVar

from . import link as keyed
from .wire import Channel, Message, decode, pack_value, unpack_value

#: Seconds without a message from the controller after which the engine ends itself.
DEFAULT_HEARTBEAT = 60.0

#: Seconds the engine's channel waits to write a burst of messages at once (see
#: :class:`.wire.Channel`).
LINGER = 0.002

#: Bytes of an unfinished line sent as they are (a line that long is not waited for).
LONGEST_LINE = 65536


class _Capture:
    """Reads what is written to one file descriptor and sends it as whole lines."""

    def __init__(self, fd: int, name: str, channel: Channel) -> None:
        self.name = name
        self.channel = channel
        self.fd = fd
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        self._read_end = read_end
        self._marker: bytes | None = None
        self._reached = threading.Event()
        self._draining = threading.Lock()
        self._drains = 0
        threading.Thread(target=self._run, name=f"capture-{name}", daemon=True).start()

    def _send(self, data: bytes) -> None:
        if data:
            text = data.decode("utf-8", "replace")
            self.channel.send({"ev": "stream", "name": self.name, "text": text})

    def _run(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._read_end, 65536)
            except OSError:
                return
            if not chunk:
                self._send(pending)
                return
            pending += chunk
            marker = self._marker
            if marker is not None and marker in pending:
                before, _, pending = pending.partition(marker)
                self._send(before)
                self._reached.set()
                continue
            cut = pending.rfind(b"\n") + 1
            if cut == 0 and len(pending) >= LONGEST_LINE:
                cut = len(pending)
            self._send(pending[:cut])
            pending = pending[cut:]

    def drain(self, timeout: float = 5.0) -> None:
        """Send everything written so far, the unfinished last line included, before
        returning (so a message sent next comes after it)."""
        with self._draining:
            self._drains += 1
            marker = f"\x00jrhw-drain-{self._drains}\x00".encode()
            self._reached.clear()
            self._marker = marker
            os.write(self.fd, marker)
            self._reached.wait(timeout)
            self._marker = None


def drain_all(captures: list[_Capture]) -> None:
    """Send what the cell printed so far on every descriptor (before a rich output, so
    that it keeps its place among the cell's lines)."""
    sys.stdout.flush()
    sys.stderr.flush()
    for capture in captures:
        capture.drain()


def _shell_classes() -> Any:
    """An IPython shell whose results, displays and errors become messages."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    class RankDisplayHook(DisplayHook):
        channel: Channel | None = None
        captures: ClassVar[list[_Capture]] = []

        def write_output_prompt(self) -> None:
            pass

        def write_format_data(self, format_dict: Any, md_dict: Any = None) -> None:
            drain_all(RankDisplayHook.captures)
            if RankDisplayHook.channel is not None:
                RankDisplayHook.channel.send(
                    {"ev": "result", "data": _jsonable(format_dict), "metadata": md_dict or {}}
                )

        def finish_displayhook(self) -> None:
            sys.stdout.flush()

    class RankDisplayPublisher(DisplayPublisher):
        channel: Channel | None = None
        captures: ClassVar[list[_Capture]] = []

        def publish(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:
            drain_all(RankDisplayPublisher.captures)
            if RankDisplayPublisher.channel is not None:
                RankDisplayPublisher.channel.send(
                    {"ev": "display", "data": _jsonable(data), "metadata": metadata or {}}
                )

        def clear_output(self, wait: bool = False) -> None:
            pass

    class RankShell(InteractiveShell):
        last_error: dict[str, Any] | None = None

        def _showtraceback(self, etype: Any, evalue: Any, stb: list[str]) -> None:
            self.last_error = {
                "ename": getattr(etype, "__name__", str(etype)),
                "evalue": str(evalue),
                "traceback": list(stb),
            }

    return RankShell, RankDisplayHook, RankDisplayPublisher


def _jsonable(data: Any) -> dict[str, Any]:
    """A display's MIME bundle with only what JSON can carry."""
    return {str(k): v for k, v in dict(data or {}).items() if isinstance(v, (str, dict, list, int))}


def rerunnable_distributed() -> None:
    """Make ``torch.distributed.init_process_group`` end the group it finds first, so
    that running its cell again starts a new one instead of failing (where torch is
    loaded)."""
    dist: Any = sys.modules.get("torch.distributed")
    init = getattr(dist, "init_process_group", None)
    if init is None or getattr(init, "_jrhw_rerunnable", False):
        return

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if dist.is_initialized():
            dist.destroy_process_group()
        return init(*args, **kwargs)

    init_process_group._jrhw_rerunnable = True  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group
    c10d: Any = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is not None:
        c10d.init_process_group = init_process_group


def release_collectives() -> None:
    """End this rank's process group (where torch.distributed has one): the ranks still
    waiting for it in a collective see the connection close and fail, instead of
    waiting for ever."""
    dist: Any = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001, S110 (a broken group's connections are gone anyway)
        pass


def own_device() -> None:
    """Keep only this rank's GPU visible when the step sees all of its node's."""
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
    local = int(os.environ.get("LOCAL_RANK", "0"))
    count = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if len(visible) >= count > 1 or (len(visible) > 1 and count == 1):
        os.environ["CUDA_VISIBLE_DEVICES"] = visible[local % len(visible)]


class Engine:
    """The engine of one rank (see the module's description)."""

    def __init__(
        self,
        channel: Channel,
        stdin: IO[bytes],
        heartbeat: float,
        link: keyed.Link | None = None,
        unlinked: str = "",
    ) -> None:
        self.channel = channel
        self.link = link
        self.unlinked = unlinked
        self.stdin = stdin
        self.heartbeat = heartbeat
        self.heard = time.monotonic()
        self.busy = False
        self.main = threading.get_ident()
        self.work: queue.Queue[Message] = queue.Queue()
        self.port_set: str | None = None
        shell_class, hook, publisher = _shell_classes()
        hook.channel = channel
        publisher.channel = channel
        self.shell = shell_class.instance(
            displayhook_class=hook, display_pub_class=publisher, colors="Linux"
        )
        self.captures = [
            _Capture(1, "stdout", channel),
            _Capture(2, "stderr", channel),
        ]
        hook.captures = publisher.captures = self.captures
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]

    # -------------------------------------------------------------- the channel

    def listen(self) -> None:
        """Read the controller's messages (a thread): interrupts and stacks at once,
        the rest in order on the main thread."""
        for line in self.stdin:
            self.heard = time.monotonic()
            message = decode(line)
            if message is None:
                continue
            op = message.get("op")
            if op == "interrupt":
                if self.busy:
                    os.kill(os.getpid(), signal.SIGINT)
            elif op == "stacks":
                self.channel.send({"ev": "stacks", "text": self.stack()})
            elif op == "release":
                if not self.busy:
                    release_collectives()
            elif op == "ping":
                continue
            else:
                self.work.put(message)
        os._exit(0)  # the controller is gone: so is this rank

    def watch(self) -> None:
        """End the engine when the controller has said nothing for the heartbeat's time
        (a thread): its kernel is gone or stuck, and nobody will read this rank."""
        while True:
            time.sleep(min(5.0, self.heartbeat / 4))
            if time.monotonic() - self.heard > self.heartbeat:
                os._exit(3)

    def stack(self) -> str:
        """Where the main thread is now."""
        frame = sys._current_frames().get(self.main)
        if frame is None:
            return "(no stack)"
        frames = traceback.extract_stack(frame)
        cells = [i for i, f in enumerate(frames) if f.filename.startswith("<ipython-input")]
        return "".join(traceback.format_list(frames[cells[0] :] if cells else frames[-8:]))

    # -------------------------------------------------------------- the work

    def serve(self) -> None:
        """Run what comes, in order, until told to exit."""
        self.channel.send(
            {
                "ev": "ready",
                "rank": int(os.environ.get("RANK", "0")),
                "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
                "pid": os.getpid(),
                "devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "bulk": self.link is not None,
                "unlinked": self.unlinked,
            }
        )
        while True:
            try:
                message = self.work.get()
                op = message.get("op")
                if op == "execute":
                    self.execute(message)
                elif op == "get":
                    self.get(message)
                elif op == "save":
                    self.save(message)
                elif op == "exit":
                    return
            except KeyboardInterrupt:  # an interrupt that came as the cell ended
                continue

    def execute(self, message: Message) -> None:
        cell = int(message.get("id", 0))
        for name, value in dict(message.get("env") or {}).items():
            if name == "MASTER_PORT":
                if self.port_set is not None and os.environ.get(name) != self.port_set:
                    continue  # the user chose a port: theirs stays
                self.port_set = str(value)
            os.environ[name] = str(value)
        reply: Message = {"ev": "done", "id": cell, "status": "ok"}
        self.busy = True
        try:
            try:
                for name, text in dict(message.get("inputs") or {}).items():
                    self.shell.user_ns[name] = unpack_value(text, self.link)
                if self.link is not None:
                    # A value an interrupted cell had begun to send came whole, and
                    # before this cell's: it is nobody's now.
                    self.link.store.clear()
            except Exception as exc:  # noqa: BLE001 (unpickling raises anything; named)
                reply.update(
                    status="error",
                    ename=type(exc).__name__,
                    evalue=f"the input could not be read here: {exc}",
                    traceback=[],
                )
            else:
                rerunnable_distributed()
                self.shell.last_error = None
                result = self.shell.run_cell(str(message.get("code", "")), store_history=True)
                rerunnable_distributed()
                if not result.success:
                    error = self.shell.last_error or {
                        "ename": type(result.error_in_exec or result.error_before_exec).__name__,
                        "evalue": str(result.error_in_exec or result.error_before_exec),
                        "traceback": [],
                    }
                    reply.update(status="error", **error)
        except KeyboardInterrupt:
            reply.update(
                status="error", ename="KeyboardInterrupt", evalue="interrupted", traceback=[]
            )
        finally:
            self.busy = False
        drain_all(self.captures)
        self.channel.send(reply)

    def get(self, message: Message) -> None:
        rank = int(os.environ.get("RANK", "0"))
        values: dict[str, str | Message] = {}
        errors: dict[str, str] = {}
        for name in message.get("names") or []:
            if name not in self.shell.user_ns:
                errors[name] = f"{name!r} is not defined"
                continue
            try:
                ident = f"out-{rank}-{message.get('id')}-{name}"
                values[name] = pack_value(self.shell.user_ns[name], ident, self.link)
            except Exception as exc:  # noqa: BLE001 (pickling raises anything; named)
                errors[name] = f"{name!r} cannot be sent: {type(exc).__name__}: {exc}"
        self.channel.send(
            {"ev": "values", "id": message.get("id"), "values": values, "errors": errors}
        )

    def save(self, message: Message) -> None:
        """Everything of this rank a hibernation keeps: each user variable's pickle
        (over the link when large), the modules bound to names, and what cannot be
        kept, with the reason (see :func:`.magic.save_ranks`)."""
        from ..kernel_handler import module_entry, user_items
        from ..pickling import type_name

        rank = int(os.environ.get("RANK", "0"))
        values: dict[str, str | Message] = {}
        types: dict[str, str] = {}
        modules: list[dict[str, Any]] = []
        left_out: list[dict[str, str]] = []
        for name, value in user_items(self.shell.user_ns, self.shell):
            if type(value).__name__ == "module":
                entry = module_entry(name, value)
                if entry["importable"]:
                    modules.append({"name": name, "module": entry["module"]})
                else:
                    left_out.append(
                        {"name": name, "module": entry["module"], "reason": entry["reason"]}
                    )
                continue
            types[name] = type_name(value)
            try:
                values[name] = pack_value(
                    value, f"save-{rank}-{message.get('id')}-{name}", self.link
                )
            except Exception as exc:  # noqa: BLE001 (pickling raises anything; named)
                left_out.append(
                    {
                        "name": name,
                        "type": types.pop(name),
                        "reason": f"{type(exc).__name__}: {exc}",
                    }
                )
        self.channel.send(
            {
                "ev": "saved",
                "id": message.get("id"),
                "values": values,
                "types": types,
                "modules": modules,
                "left_out": left_out,
            }
        )


def main() -> None:
    """Run this rank's engine on the step's standard input and output."""
    own_device()
    channel = Channel(os.fdopen(os.dup(1), "wb"), linger=LINGER)
    stdin = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # a cell that reads its input must not read the channel
    os.close(devnull)
    heartbeat = float(os.environ.get("JRHW_RANKS_HEARTBEAT") or DEFAULT_HEARTBEAT)
    link, unlinked = None, ""
    address = os.environ.pop(keyed.ADDRESS_ENV, "")  # the key: not for the cells' eyes
    if address:
        try:
            link = keyed.connect(address, int(os.environ.get("RANK", "0")), keyed.Store())
        except (OSError, ValueError) as exc:
            unlinked = f"{type(exc).__name__}: {exc}"
    engine = Engine(channel, stdin, heartbeat, link, unlinked)
    threading.Thread(target=engine.listen, name="channel", daemon=True).start()
    threading.Thread(target=engine.watch, name="heartbeat", daemon=True).start()
    engine.serve()


if __name__ == "__main__":
    main()
