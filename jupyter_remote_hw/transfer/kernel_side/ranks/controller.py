"""The engines of one kernel's ranks, and one cell run on them with every failure
answered: an error on any rank, a rank that dies, ranks left blocked in a collective
the others have left, an interrupt.

Each engine is a step of the job (``srun --overlap`` on its node) whose standard
input and output carry the messages of :mod:`.wire`. A thread per engine reads them
into one queue; the cell's own thread (the kernel's main thread) takes them from it
and shows them, so outputs appear in the cell that ran, in each rank's order.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import link as keyed
from .wire import (
    Channel,
    Message,
    decode,
    dumps,
    pack_pickle,
    pack_value,
    unpack_value,
)
from .world import Rank, World

#: Seconds between the controller's signs of life to its engines.
PING_INTERVAL = 10.0


class RanksError(Exception):
    """A cell failed on some ranks; shown as the first failing rank's traceback, then
    a line for each other rank."""

    def __init__(self, summary: str, first: list[str] | None = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.first = list(first or [])

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of ours
        return [*self.first, f"RanksError: {self.summary}"]


@dataclass
class Engine:
    """One rank's engine process, as the controller sees it."""

    rank: Rank
    process: subprocess.Popen  # type: ignore[type-arg]
    channel: Channel
    said: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    """srun's last lines on its standard error (SLURM's own words when a step ends)."""
    ready: Message | None = None
    link: keyed.Link | None = None
    """Its connection for large values, when it made one."""
    ended: str | None = None
    """Why the engine is gone, once it is."""

    def cause(self) -> str:
        """Why the engine ended, in SLURM's words where it said any."""
        code = self.process.poll()
        slurm = [line for line in self.said if "CANCELLED" in line or "DUE TO" in line]
        if slurm:
            text = slurm[-1].strip().strip("*").strip()
            return text.replace("slurmstepd: error: ", "")
        killed = [line for line in self.said if "Killed" in line or "oom" in line.lower()]
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else ""
            return f"its step was ended by signal {-code} {name}".strip()
        if killed:
            return killed[-1].strip()
        if code == 137:
            return "its process was killed (SIGKILL: by someone, or for lack of memory)"
        if code is not None:
            last = self.said[-1].strip() if self.said else ""
            return f"it exited with status {code}" + (f": {last}" if last else "")
        return "its channel closed"


class Controller:
    """Starts, drives and ends the engines of one world.

    Args:
        world: The ranks.
        command: The engine's command line (a python running :mod:`.engine`).
        heartbeat: Seconds an engine lives on without word from this controller.
    """

    def __init__(self, world: World, command: list[str], heartbeat: float = 60.0) -> None:
        self.world = world
        self.command = command
        self.heartbeat = heartbeat
        self.engines: dict[int, Engine] = {}
        self.events: queue.Queue[tuple[int, Message]] = queue.Queue()
        self.cell = 0
        self.link_server: keyed.Server | None = None
        self.unlinked = ""
        """Why values go over the channel only, when they do."""
        self._stop = threading.Event()

    # ------------------------------------------------------------------ engines

    def srun(self, rank: Rank) -> list[str]:
        """The step that runs ``rank``'s engine on its node."""
        return [
            "srun",
            f"--jobid={self.world.job_id}",
            "--overlap",
            "-u",
            "-N1",
            "-n1",
            "-w",
            rank.node,
            f"--job-name=jupyter-remote-hw-rank-{rank.rank}",
            *self.command,
        ]

    def start(self, say: Callable[[str], None], timeout: float = 120.0) -> None:
        """Start every rank's engine and wait until each is ready.

        Raises:
            RanksError: One did not start; those that did are ended.
        """
        port = free_port()
        try:
            self.link_server = keyed.Server(self.world.master_addr)
        except OSError as exc:
            self.unlinked = f"no port for large values on {self.world.master_addr}: {exc}"
        for rank in self.world.ranks:
            env = {
                **os.environ,
                **self.world.environment(rank, port),
                "JRHW_RANKS_HEARTBEAT": f"{self.heartbeat:g}",
            }
            if self.link_server is not None:
                env[keyed.ADDRESS_ENV] = self.link_server.address
            process = subprocess.Popen(
                self.srun(rank),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # the kernel's interrupt is not srun's
            )
            assert process.stdin is not None
            engine = Engine(rank, process, Channel(process.stdin))
            self.engines[rank.rank] = engine
            threading.Thread(target=self._read, args=(engine,), daemon=True).start()
            threading.Thread(target=self._read_errors, args=(engine,), daemon=True).start()
        threading.Thread(target=self._ping, daemon=True).start()
        deadline = time.monotonic() + timeout
        waiting = set(self.engines)
        while waiting:
            try:
                number, message = self.events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise RanksError(
                    f"ranks {_names(waiting)} did not start within {timeout:g} s"
                ) from None
            engine = self.engines[number]
            if message.get("ev") == "ready":
                engine.ready = message
                waiting.discard(number)
                if self.link_server is not None and message.get("bulk"):
                    engine.link = self.link_server.link(number, timeout=5.0)
                if message.get("unlinked"):
                    self.unlinked = f"rank {number}: {message['unlinked']}"
                say(
                    f"rank {number} ready on {message.get('node')}"
                    + (f" (GPU {message['devices']})" if message.get("devices") else "")
                )
            elif message.get("ev") == "lost":
                self.stop()
                raise RanksError(
                    f"rank {number} on {engine.rank.node} did not start: {engine.cause()}"
                )

    def _read(self, engine: Engine) -> None:
        stdout = engine.process.stdout
        assert stdout is not None
        for line in stdout:
            message = decode(line)
            if message is not None:
                self.events.put((engine.rank.rank, message))
        engine.process.wait()
        time.sleep(0.2)  # srun's last words on its standard error
        engine.ended = engine.ended or engine.cause()
        self.events.put((engine.rank.rank, {"ev": "lost", "cause": engine.ended}))

    def _read_errors(self, engine: Engine) -> None:
        stderr = engine.process.stderr
        assert stderr is not None
        for line in stderr:
            engine.said.append(line.decode("utf-8", "replace").rstrip())

    def _ping(self) -> None:
        while not self._stop.wait(PING_INTERVAL):
            for engine in list(self.engines.values()):
                if engine.ended is None:
                    engine.channel.send({"op": "ping"})

    def live(self) -> list[Engine]:
        """The engines still running."""
        return [e for e in self.engines.values() if e.ended is None]

    def stop(self) -> None:
        """End every engine: asked first, then its step ended."""
        self._stop.set()
        if self.link_server is not None:
            self.link_server.close()
        for engine in self.engines.values():
            engine.channel.send({"op": "exit"})
            try:
                assert engine.process.stdin is not None
                engine.process.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for engine in self.engines.values():
            try:
                engine.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                engine.process.terminate()
        for engine in self.engines.values():
            try:
                engine.process.wait(5)
            except subprocess.TimeoutExpired:
                engine.process.kill()

    # ------------------------------------------------------------------ a cell

    def run(
        self,
        code: str,
        ranks: list[int],
        show: Callable[[int, Message], None],
        *,
        inputs: dict[str, Any] | None = None,
        scatter: dict[str, list[Any]] | None = None,
        outputs: list[str] | None = None,
        pickled: dict[int, dict[str, bytes]] | None = None,
        blocked_after: float = 60.0,
        interrupt_grace: float = 2.0,
        end_after: float = 10.0,
    ) -> dict[str, list[Any]]:
        """Run ``code`` on ``ranks``; what ``outputs`` names, gathered by rank.

        Args:
            code: The cell.
            ranks: Which ranks run it.
            show: Shows one rank's output message (stream, display, result, error).
            inputs: Values every rank gets (broadcast).
            scatter: Sequences whose item ``i`` goes to the ``i``-th of ``ranks``.
            outputs: Names gathered from every rank once all succeeded.
            pickled: Values already pickled, by rank (a rank's saved variables).
            blocked_after: Seconds ranks may stay busy once another has finished or
                failed, before they are called blocked.
            interrupt_grace: Seconds after an interrupt before it is sent again.
            end_after: Seconds after an interrupt after which a rank that ignores it
                is ended (its variables are lost; the others keep theirs).

        Raises:
            RanksError: The cell failed on a rank, a rank ended, ranks stayed
                blocked, or the cell was interrupted.
        """
        gone = [r for r in ranks if self.engines[r].ended is not None]
        if gone:
            raise RanksError(
                "; ".join(f"rank {r} has ended ({self.engines[r].ended})" for r in gone)
                + ": `%ranks restart` starts every rank again (their variables are lost)"
            )
        self.cell += 1
        cell = self.cell
        port = free_port()
        broadcast = {name: dumps(value) for name, value in (inputs or {}).items()}
        for index, number in enumerate(ranks):
            engine = self.engines[number]
            own = {**broadcast, **(pickled or {}).get(number, {})}
            mine = {
                name: pack_pickle(data, f"in-{cell}-{name}", engine.link)
                for name, data in own.items()
            }
            for name, values in (scatter or {}).items():
                mine[name] = pack_value(values[index], f"in-{cell}-{name}", engine.link)
            engine.channel.send(
                {
                    "op": "execute",
                    "id": cell,
                    "code": code,
                    "inputs": mine,
                    "env": {"MASTER_PORT": str(port)},
                }
            )
        busy: set[int] = set(ranks)
        errors: dict[int, Message] = {}
        lost: dict[int, str] = {}
        blocked: dict[int, str] = {}
        first_left: float | None = None
        interrupted_at: float | None = None
        resent = False
        user_interrupt = False
        while busy:
            try:
                number, message = self.events.get(timeout=0.2)
            except queue.Empty:
                number, message = -1, {}
            except KeyboardInterrupt:
                user_interrupt = True
                if interrupted_at is None:
                    interrupted_at = time.monotonic()
                    self._interrupt(busy)
                continue
            kind = message.get("ev")
            if kind == "done" and message.get("id") == cell and number in busy:
                busy.discard(number)
                first_left = first_left or time.monotonic()
                if message.get("status") != "ok":
                    errors[number] = message
                    show(number, {"ev": "error", **message, "first": len(errors) == 1})
            elif kind == "lost" and number in busy:
                busy.discard(number)
                lost[number] = str(message.get("cause"))
                first_left = first_left or time.monotonic()
                if interrupted_at is None and busy:
                    interrupted_at = time.monotonic()
                    self._interrupt(busy)
            elif kind == "stacks" and number in blocked:
                blocked[number] = str(message.get("text"))
            elif kind in ("stream", "display", "result") and number in ranks:
                show(number, message)
            now = time.monotonic()
            if (
                first_left is not None
                and busy
                and interrupted_at is None
                and now - first_left > blocked_after
            ):
                for waiting in busy:
                    blocked[waiting] = "(no stack came)"
                    self.engines[waiting].channel.send({"op": "stacks"})
                self._collect_stacks(blocked, busy)
                interrupted_at = time.monotonic()
                self._interrupt(busy)
            if interrupted_at is not None and busy:
                if not resent and now - interrupted_at > interrupt_grace:
                    # Ranks still in a collective wait for peers that left it: the
                    # peers end their process groups, so the wait fails.
                    resent = True
                    self._interrupt(busy)
                    for number, engine in self.engines.items():
                        if number not in busy and engine.ended is None:
                            engine.channel.send({"op": "release"})
                if now - interrupted_at > end_after:
                    for waiting in list(busy):
                        engine = self.engines[waiting]
                        engine.ended = lost[waiting] = (
                            f"it ignored the interrupt for {end_after:g} s and was ended "
                            "(its variables are lost)"
                        )
                        engine.process.terminate()
                        busy.discard(waiting)
        gathered: dict[str, list[Any]] = {}
        if not (errors or lost or blocked) and outputs:
            gathered = self._gather(ranks, outputs)
        if errors or lost or blocked:
            summary = _summary(ranks, errors, lost, blocked, user_interrupt)
            if resent:
                summary += (
                    "; to free the ranks still in a collective, the others ended their "
                    "torch.distributed process groups: run init_process_group again"
                )
            raise RanksError(summary, _first_traceback(errors))
        return gathered

    def request(
        self, ranks: set[int], message: Message, kind: str, what: str, timeout: float
    ) -> dict[int, Message]:
        """Send ``message`` (with a new id) to each of ``ranks`` and wait for each one's
        answer ``kind``; frames its link holds from an earlier request are dropped first.

        Raises:
            RanksError: One did not answer within ``timeout`` seconds (``what``: what
                was asked, in words), or ended first.
        """
        self.cell += 1
        for number in ranks:
            link = self.engines[number].link
            if link is not None:
                link.store.clear()  # what a failed request left
            self.engines[number].channel.send({**message, "id": self.cell})
        answers: dict[int, Message] = {}
        deadline = time.monotonic() + timeout
        while len(answers) < len(ranks):
            try:
                number, answer = self.events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise RanksError(
                    f"ranks {_names(ranks - set(answers))} did not send {what} within {timeout:g} s"
                ) from None
            if answer.get("ev") == kind and answer.get("id") == self.cell:
                answers[number] = answer
            elif answer.get("ev") == "lost" and number in ranks:
                raise RanksError(
                    f"rank {number} ended before it sent {what}: {answer.get('cause')}"
                )
        return answers

    def _interrupt(self, ranks: set[int]) -> None:
        for number in ranks:
            self.engines[number].channel.send({"op": "interrupt"})

    def _collect_stacks(self, blocked: dict[int, str], busy: set[int], wait: float = 2.0) -> None:
        """Wait up to ``wait`` seconds for the stacks asked of ``busy``; other messages
        that come meanwhile are put back for the cell's loop."""
        deadline = time.monotonic() + wait
        kept: list[tuple[int, Message]] = []
        missing = set(busy)
        while missing and time.monotonic() < deadline:
            try:
                number, message = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if message.get("ev") == "stacks" and number in missing:
                blocked[number] = str(message.get("text"))
                missing.discard(number)
            else:
                kept.append((number, message))
        for item in kept:
            self.events.put(item)

    def _gather(self, ranks: list[int], names: list[str]) -> dict[str, list[Any]]:
        values = self.request(
            set(ranks), {"op": "get", "names": names}, "values", ", ".join(names), 300.0
        )
        problems = [
            f"rank {number}: {error}"
            for number in ranks
            for error in dict(values[number].get("errors") or {}).values()
        ]
        if problems:
            raise RanksError("nothing was gathered: " + "; ".join(problems))
        try:
            return {
                name: [
                    unpack_value(values[number]["values"][name], self.engines[number].link)
                    for number in ranks
                ]
                for name in names
            }
        except keyed.BulkError as exc:
            raise RanksError(f"nothing was gathered: {exc}") from None


def free_port() -> int:
    """A TCP port free on this node now (the first node: the rendezvous' host)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _names(ranks: Any) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


def _first_traceback(errors: dict[int, Message]) -> list[str]:
    if not errors:
        return []
    number = next(iter(errors))  # the first to fail: shown first
    first = errors[number]
    return [
        f"[rank {number}] {line}"
        for entry in first.get("traceback") or []
        for line in str(entry).split("\n")
    ]


def _summary(
    ranks: list[int],
    errors: dict[int, Message],
    lost: dict[int, str],
    blocked: dict[int, str],
    interrupted: bool,
) -> str:
    parts = []
    for number, error in errors.items():
        parts.append(f"rank {number} raised {error.get('ename')}: {error.get('evalue')}")
    for number, cause in lost.items():
        parts.append(f"rank {number} ended: {cause}")
    if blocked:
        parts.append(
            f"ranks {_names(blocked)} stayed blocked after the others had finished "
            "(a collective the others never entered?); where they were:\n"
            + "\n".join(f"[rank {n}]\n{stack}" for n, stack in sorted(blocked.items()))
        )
    if interrupted:
        parts.insert(0, "interrupted")
    ok = [r for r in ranks if r not in errors and r not in lost and r not in blocked]
    if ok:
        parts.append(f"ranks {_names(ok)} finished")
    return "; ".join(parts)


def engine_command(python: str = sys.executable) -> list[str]:
    """The command that runs :mod:`.engine` with this kernel's python, from wherever this
    package is (the agent's zipapp on a host, or an installed copy)."""
    package = __name__.rsplit(".", 2)[0]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for _ in range(package.count(".") + 1):
        root = os.path.dirname(root)
    bootstrap = (
        f"import sys; sys.path.insert(0, {root!r}); from {package}.ranks.engine import main; main()"
    )
    return [python, "-c", bootstrap]


__all__ = ["Controller", "Engine", "RanksError", "engine_command", "free_port"]
