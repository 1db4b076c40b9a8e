"""A model-based test of a kernel's whole lifecycle, where features meet.

Hypothesis's stateful testing drives random sequences of what users and the world do
to kernels on the ``local`` target and on a loopback SSH host, through a real Jupyter
server process: start a notebook, run cells that set and check variables, hibernate,
wake (by a cell or by request), restart, interrupt, switch hardware carrying
variables, kill a kernel's process from outside, ``kill -9`` the server and start it
again, shut down; and the same operations arriving while a save, a wake or a switch
is under way. After every step it checks what must hold after any sequence:

- every ``execute_request`` gets a reply within :data:`ANSWER_BOUND` seconds;
- no REST answer is a 5xx, and every 4xx says why in one line;
- no traceback in the server's log;
- variables equal the model's after every wake, switch and restart;
- after teardown no kernel process and no saved state is left.

CI runs it for :data:`BUDGET` seconds (``JRHW_LIFECYCLE_SECONDS``; docs/development.md
says how to soak it). A failure prints the sequence of steps that led to it; each one
found becomes a plain regression test.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..kernelws import Execution, KernelChannels
from ..processes import kill_processes_mentioning
from ..provisioner.conftest import HARDWARE, LOCAL_KERNEL, SSH_KERNEL, write_config
from ..serverprocess import Server, start_server
from ..testhosts import SSHTestHost

#: Seconds of random sequences in one run, about (CI's budget); a soak sets more.
BUDGET = float(os.environ.get("JRHW_LIFECYCLE_SECONDS", "60"))
#: Sequences in one run: one takes about a minute on two cores. Hypothesis makes its
#: first sequence the simplest it can, the others at random.
EXAMPLES = max(2, int(BUDGET // 60) + 1)
#: Steps in one sequence at most.
STEPS = int(os.environ.get("JRHW_LIFECYCLE_STEPS", "10"))
#: Seconds within which any cell gets its reply, a wake included, on a loaded 2-core box.
ANSWER_BOUND = 120.0
#: The kernels (the targets) a notebook can start on.
KERNELS = {"local": LOCAL_KERNEL, "ssh": SSH_KERNEL}
#: Variable names the sequences set.
NAMES = ("a", "b")
#: How many notebooks run at once at most.
MAX_NOTEBOOKS = 2
#: How many times one sequence kills the server at most.
MAX_KILLS = 2
DEBUG_ARGS = ["--ServerApp.log_level=DEBUG"] if os.environ.get("JRHW_DEBUG") else []


class Broken(AssertionError):
    """An invariant does not hold."""


@dataclass
class Notebook:
    """What the model expects of one notebook's kernel."""

    path: str
    session_id: str
    kernel_id: str
    target: str
    #: The variables it holds, or None when an operation left them unknown.
    variables: dict[str, int] | None = field(default_factory=dict)
    hibernated: bool = False
    #: Whether its process was killed from outside since it last answered.
    killed: bool = False


@dataclass
class Answer:
    """One REST answer."""

    code: int
    body: Any


class World:
    """The real parts one sequence runs against: a server process, its directories,
    the SSH test host; the server is started again after a kill."""

    def __init__(self, root: Path, host: SSHTestHost) -> None:
        self.root = root
        self.dirs = {name: root / name for name in ("config", "data", "runtime", "nb")}
        for path in self.dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        self.remote_root = root / "r"
        write_config(
            self.dirs["config"] / "jupyter_server_config.json",
            host.ssh_config,
            self.remote_root,
            root / "l",
            [
                {
                    "host": host.alias,
                    "python": sys.executable,
                    "hardware": HARDWARE,
                    "root": str(self.remote_root),
                }
            ],
        )
        self.servers: list[Server] = []
        self.logs_read: dict[Path, int] = {}
        self.pids: set[int] = set()

    @property
    def server(self) -> Server:
        return self.servers[-1]

    async def start(self) -> None:
        server = start_server(
            self.dirs, self.root / f"server-{len(self.servers)}.log", args=DEBUG_ARGS
        )
        self.servers.append(server)
        await server.ready(timeout=ANSWER_BOUND)

    async def kill(self) -> None:
        self.server.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(self.server.process.wait, 30)

    async def stop(self) -> None:
        if self.servers and self.server.process.poll() is None:
            self.server.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.server.process.wait, 90)
            except Exception:
                self.server.process.kill()
                await asyncio.to_thread(self.server.process.wait, 30)
                raise

    async def call(self, method: str, path: str, body: Any = None) -> Answer:
        """One REST call (``api/...`` or ``jupyter-remote-hw/api/...``); a 5xx breaks."""
        request = HTTPRequest(
            f"{self.server.url}/{path}",
            method=method,
            headers={"Authorization": f"token {self.server.token}"},
            body=json.dumps(body) if body is not None else (b"" if method == "POST" else None),
            request_timeout=ANSWER_BOUND,
        )
        try:
            response = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as error:
            if error.response is None:
                raise Broken(f"{method} /{path}: no answer within {ANSWER_BOUND} s") from error
            text = error.response.body.decode(errors="replace")
            if error.code >= 500:
                raise Broken(f"{method} /{path} answered {error.code}: {text[:2000]}") from error
            said = json.loads(text) if text.startswith("{") else {}
            message = said.get("message") or said.get("reason") or ""
            if not message or "\n" in message.strip():
                raise Broken(f"{method} /{path} answered {error.code} without one line: {text}")
            return Answer(error.code, said)
        return Answer(response.code, json.loads(response.body) if response.body else None)

    async def execute(self, kernel_id: str, code: str) -> Execution:
        """Run one cell through the kernel's websocket; no reply within the bound breaks."""
        try:
            kc: KernelChannels = await asyncio.wait_for(
                self.server.channels(kernel_id), ANSWER_BOUND
            )
        except TimeoutError as error:
            raise Broken(
                f"kernel {kernel_id} did not answer kernel_info in time; the server's log "
                f"ends:\n{self.log_tail()}"
            ) from error
        try:
            return await kc.execute(code, timeout=ANSWER_BOUND)
        except TimeoutError as error:
            raise Broken(f"no reply to a cell within {ANSWER_BOUND} s: {code!r}") from error
        finally:
            await kc.close()

    def log_tail(self, characters: int = 4000) -> str:
        """The end of the newest server's log."""
        if not self.servers:
            return ""
        return self.server.log.read_text(errors="replace")[-characters:]

    def tracebacks(self) -> list[str]:
        """Tracebacks the servers logged since last asked."""
        found = []
        for server in self.servers:
            text = server.log.read_text(errors="replace")
            new = text[self.logs_read.get(server.log, 0) :]
            self.logs_read[server.log] = len(text)
            if "Traceback" in new:
                at = new.index("Traceback")
                found.append(new[max(0, at - 1500) : at + 3000])
        return found


def _probe(names: tuple[str, ...] = NAMES) -> str:
    """A cell printing the variables as JSON (absent names left out) and the pid."""
    return (
        "import json as _j, os as _o\n"
        f"print(_j.dumps({{'vars': {{n: globals()[n] for n in {list(names)!r} "
        "if n in globals()}, 'pid': _o.getpid()}))"
    )


def _shown(value: Any) -> str:
    if isinstance(value, Notebook):
        return f"<{value.path} {value.target} {value.kernel_id[:8]}>"
    return repr(value)


def logged(method: Any) -> Any:
    """Record each step and the first failure with the steps before it: a run against
    real parts cannot be replayed exactly (a server may answer 409 one time and 200 the
    next), so hypothesis's own replay of a failing example may diverge from it."""

    @functools.wraps(method)
    def step(self: Lifecycle, **kwargs: Any) -> Any:
        shown = ", ".join(f"{k}={_shown(v)}" for k, v in kwargs.items())
        self.steps.append(f"{method.__name__}({shown})")
        try:
            return method(self, **kwargs)
        except BaseException as error:
            failures = type(self).failures
            if not failures:
                failures.append((list(self.steps), error))
            raise

    return step


class Lifecycle(RuleBasedStateMachine):
    """The model: notebooks with their kernels' variables; rules are what users and
    the world do; invariants hold after every step."""

    world: World
    #: The first failure of a run and the steps that led to it.
    failures: list[tuple[list[str], BaseException]]

    notebooks = Bundle("notebooks")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.open: dict[str, Notebook] = {}
        self.count = 0
        self.steps: list[str] = []
        self.last_pid = 0
        self.kills = 0

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    # -- set-up and teardown ------------------------------------------------------------

    @initialize(target=notebooks, where=st.sampled_from(sorted(KERNELS)))
    @logged
    def server_up(self, where: str) -> Notebook:
        """The server starts with a first notebook open (a sequence with none tests
        nothing)."""
        self.run(self.world.start())
        return self._start(where)

    def teardown(self) -> None:
        try:
            if self.world.servers and self.world.server.process.poll() is None:
                self.steps.append("teardown()")
                self.run(self._teardown())
        except BaseException as error:
            if not type(self).failures:
                type(self).failures.append((list(self.steps), error))
            raise
        finally:
            print("sequence: " + " → ".join(self.steps), flush=True)
            self.run(self.world.stop())
            self.run(_close_http_client())
            self.loop.close()
            kill_processes_mentioning(str(self.world.root))

    async def _teardown(self) -> None:
        for notebook in list(self.open.values()):
            answer = await self.world.call("DELETE", f"api/sessions/{notebook.session_id}")
            assert answer.code == 204, (notebook, answer)
            self.open.pop(notebook.kernel_id)
        left = await self.world.call("GET", "api/kernels")
        assert left.body == [], f"kernels still listed after every notebook shut down: {left}"
        await self.world.stop()
        deadline = time.monotonic() + 30
        while (alive := self._alive()) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert not alive, f"kernel processes left running: {sorted(alive)}"
        saved = [str(p) for p in self.world.root.glob("**/hibernated/*") if p.is_dir()]
        assert not saved, f"saved state left after shutdown: {saved}"
        assert not self.world.tracebacks()

    def _alive(self) -> set[int]:
        return {pid for pid in self.world.pids if Path(f"/proc/{pid}").exists()}

    # -- what users do --------------------------------------------------------------------

    @precondition(lambda self: len(self.open) < MAX_NOTEBOOKS)
    @rule(target=notebooks, where=st.sampled_from(sorted(KERNELS)))
    @logged
    def start_notebook(self, where: str) -> Notebook:
        return self._start(where)

    def _start(self, where: str) -> Notebook:
        self.count += 1
        path = f"nb-{self.count}.ipynb"
        answer = self.run(
            self.world.call(
                "POST",
                "api/sessions",
                {"path": path, "type": "notebook", "kernel": {"name": KERNELS[where]}},
            )
        )
        assert answer.code == 201, answer
        notebook = Notebook(path, answer.body["id"], answer.body["kernel"]["id"], where)
        self.open[notebook.kernel_id] = notebook
        self._check(notebook)
        return notebook

    @rule(notebook=notebooks, name=st.sampled_from(NAMES), value=st.integers(0, 10**6))
    @logged
    def assign(self, notebook: Notebook, name: str, value: int) -> None:
        if not self._live(notebook):
            return
        ran = self.run(self.world.execute(notebook.kernel_id, f"{name} = {value}"))
        if notebook.killed:
            self._after_kill(notebook, ran)
            return
        assert ran.status == "ok", ran
        notebook.hibernated = False
        if notebook.variables is not None:
            notebook.variables[name] = value

    @rule(notebook=notebooks)
    @logged
    def check(self, notebook: Notebook) -> None:
        if self._live(notebook):
            self._check(notebook)

    @rule(notebook=notebooks)
    @logged
    def hibernate(self, notebook: Notebook) -> None:
        if not self._live(notebook):
            return
        answer = self.run(
            self.world.call("POST", f"jupyter-remote-hw/api/hibernate/{notebook.kernel_id}", {})
        )
        if answer.code == 200:
            notebook.hibernated = True
        else:
            assert answer.code == 409, answer

    @rule(notebook=notebooks)
    @logged
    def wake(self, notebook: Notebook) -> None:
        if not self._live(notebook):
            return
        answer = self.run(
            self.world.call("POST", f"jupyter-remote-hw/api/wake/{notebook.kernel_id}", {})
        )
        assert answer.code in (200, 409, 502), answer
        if answer.code == 200:
            notebook.hibernated = False
        self._check(notebook)

    @rule(notebook=notebooks)
    @logged
    def restart(self, notebook: Notebook) -> None:
        if not self._live(notebook):
            return
        answer = self.run(self.world.call("POST", f"api/kernels/{notebook.kernel_id}/restart"))
        if answer.code == 200:
            notebook.variables = {}
            notebook.hibernated = False
            notebook.killed = False
        else:
            assert answer.code == 409, answer
        self._check(notebook)

    @rule(notebook=notebooks)
    @logged
    def interrupt(self, notebook: Notebook) -> None:
        if not self._live(notebook):
            return
        answer = self.run(self.world.call("POST", f"api/kernels/{notebook.kernel_id}/interrupt"))
        assert answer.code in (204, 409), answer

    @rule(target=notebooks, notebook=consumes(notebooks), where=st.sampled_from(sorted(KERNELS)))
    @logged
    def switch(self, notebook: Notebook, where: str) -> Any:
        if not self._live(notebook):
            return multiple()
        target = "local" if where == "local" else "ssh-testhost"
        answer = self.run(
            self.world.call(
                "POST",
                f"jupyter-remote-hw/api/switch/{notebook.session_id}",
                {"hardware": target, "carry": "all"},
            )
        )
        if answer.code != 200:
            assert answer.code in (400, 409, 502), answer
            return notebook
        self.open.pop(notebook.kernel_id)
        moved = Notebook(
            notebook.path,
            notebook.session_id,
            answer.body["kernel_id"],
            where,
            dict(notebook.variables) if notebook.variables is not None else None,
        )
        assert not answer.body.get("not_carried"), answer
        self.open[moved.kernel_id] = moved
        self._check(moved)
        return moved

    @rule(notebook=consumes(notebooks))
    @logged
    def shut_down(self, notebook: Notebook) -> None:
        if not self._live(notebook):
            return
        answer = self.run(self.world.call("DELETE", f"api/sessions/{notebook.session_id}"))
        assert answer.code == 204, answer
        self.open.pop(notebook.kernel_id)

    # -- what the world does --------------------------------------------------------------

    @rule(notebook=notebooks)
    @logged
    def kill_kernel_process(self, notebook: Notebook) -> None:
        """The kernel's process ends from outside (OOM killer, a user's ``kill``)."""
        if not self._live(notebook) or notebook.hibernated or notebook.killed:
            return
        pid = self._check(notebook)
        os.kill(pid, signal.SIGKILL)
        notebook.killed = True

    @precondition(lambda self: bool(self.open) and self.kills < MAX_KILLS)
    @rule()
    @logged
    def kill_server(self) -> None:
        """The Jupyter server dies (``kill -9``) and is started again: every kernel is
        taken over with its variables. Jupyter keeps sessions in memory, so each
        notebook's session is made anew for its kernel, as a reopened notebook does."""
        self.kills += 1
        self.run(self.world.kill())
        self.run(self.world.start())
        listed = self._wait_listed()
        for notebook in list(self.open.values()):
            if notebook.killed and notebook.kernel_id not in listed:
                # Its process died while no server watched it: the new server finds
                # nothing to take over, and the notebook starts a new kernel.
                self.open.pop(notebook.kernel_id)
                notebook.session_id = ""
        assert set(self.open) <= listed, (sorted(self.open), sorted(listed))
        for notebook in self.open.values():
            answer = self.run(
                self.world.call(
                    "POST",
                    "api/sessions",
                    {
                        "path": notebook.path,
                        "type": "notebook",
                        "kernel": {"id": notebook.kernel_id},
                    },
                )
            )
            assert answer.code == 201, answer
            assert answer.body["kernel"]["id"] == notebook.kernel_id, answer
            notebook.session_id = answer.body["id"]
        for notebook in list(self.open.values()):
            if not notebook.killed:
                self._check(notebook)

    # -- two at once ----------------------------------------------------------------------

    @rule(
        notebook=notebooks,
        second=st.sampled_from(["cell", "restart", "shutdown", "hibernate", "switch"]),
        delay=st.sampled_from([0.0, 0.3, 1.0]),
    )
    @logged
    def during_hibernation(self, notebook: Notebook, second: str, delay: float) -> None:
        """Another operation arrives while the kernel's state is being saved."""
        if not self._live(notebook) or notebook.hibernated or notebook.killed:
            return
        first = self.world.call("POST", f"jupyter-remote-hw/api/hibernate/{notebook.kernel_id}", {})
        self.run(self._both(notebook, first, second, delay))

    @rule(
        notebook=notebooks,
        second=st.sampled_from(["restart", "shutdown", "hibernate", "switch"]),
        delay=st.sampled_from([0.0, 0.5, 1.5]),
    )
    @logged
    def during_wake(self, notebook: Notebook, second: str, delay: float) -> None:
        """Another operation arrives while a cell wakes the kernel."""
        if not self._live(notebook) or not notebook.hibernated:
            return
        first = self.world.execute(notebook.kernel_id, "None")
        self.run(self._both(notebook, first, second, delay))

    async def _both(self, notebook: Notebook, first: Any, second: str, delay: float) -> None:
        began = asyncio.ensure_future(first)
        await asyncio.sleep(delay)
        other: Any
        if second == "cell":
            other = self.world.execute(notebook.kernel_id, "None")
        elif second == "restart":
            other = self.world.call("POST", f"api/kernels/{notebook.kernel_id}/restart")
        elif second == "shutdown":
            other = self.world.call("DELETE", f"api/sessions/{notebook.session_id}")
        elif second == "hibernate":
            other = self.world.call(
                "POST", f"jupyter-remote-hw/api/hibernate/{notebook.kernel_id}", {}
            )
        else:
            target = "ssh-testhost" if notebook.target == "local" else "local"
            other = self.world.call(
                "POST",
                f"jupyter-remote-hw/api/switch/{notebook.session_id}",
                {"hardware": target, "carry": "all"},
            )
        results = await asyncio.gather(began, other, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        done = results[1]
        before = dict(notebook.variables) if notebook.variables is not None else None
        if second == "shutdown":
            assert isinstance(done, Answer) and done.code == 204, done
            self.open.pop(notebook.kernel_id)
            notebook.session_id = ""
            return
        if second == "switch" and isinstance(done, Answer) and done.code == 200:
            self.open.pop(notebook.kernel_id)
            notebook.kernel_id = done.body["kernel_id"]
            notebook.target = "local" if notebook.target == "ssh" else "ssh"
            self.open[notebook.kernel_id] = notebook
            # What was carried is all of it, or the switch said what was not.
            assert not done.body.get("not_carried"), done
        # A restart may come before or after the other operation: the variables are
        # the model's or none; nothing else (a half-restored namespace) is allowed.
        seen = await self._observe(notebook)
        allowed = [before] if before is not None else [seen]
        if second == "restart":
            allowed.append({})
        assert seen in allowed, f"variables {seen} after {second}; expected one of {allowed}"
        notebook.variables = seen
        notebook.hibernated = False

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def no_traceback_logged(self) -> None:
        if not getattr(self, "world", None) or not self.world.servers:
            return
        found = self.world.tracebacks()
        assert not found, "the server logged a traceback:\n" + "\n----\n".join(found)

    # -- helpers --------------------------------------------------------------------------

    def _live(self, notebook: Notebook) -> bool:
        return notebook.kernel_id in self.open and bool(notebook.session_id)

    def _check(self, notebook: Notebook) -> int:
        """Run the probe cell; the variables must be the model's. Returns the pid."""
        seen = self.run(self._observe(notebook))
        if notebook.variables is not None:
            assert seen == notebook.variables, (
                f"kernel {notebook.kernel_id} on {notebook.target} holds {seen}, "
                f"expected {notebook.variables}"
            )
        notebook.variables = seen
        notebook.hibernated = False
        return self.last_pid

    async def _observe(self, notebook: Notebook) -> dict[str, int]:
        ran = await self.world.execute(notebook.kernel_id, _probe())
        if notebook.killed:
            self._after_kill(notebook, ran)
            ran = await self.world.execute(notebook.kernel_id, _probe())
        assert ran.status == "ok", ran
        said = json.loads(ran.stdout.strip().splitlines()[-1])
        self.last_pid = int(said["pid"])
        self.world.pids.add(self.last_pid)
        return dict(said["vars"])

    def _after_kill(self, notebook: Notebook, ran: Execution) -> None:
        """The first cell after the kernel's process was killed: answered, with an
        error that says so, or run in a kernel started anew (its variables gone)."""
        notebook.killed = False
        notebook.variables = None
        if ran.status != "ok":
            assert ran.ename, ran
            answer = self.run(self.world.call("POST", f"api/kernels/{notebook.kernel_id}/restart"))
            assert answer.code == 200, answer
            notebook.variables = {}

    def _wait_listed(self) -> set[str]:
        """The kernels the new server lists once it took over what it finds: each live
        one within the bound; one whose process was killed, if at all, within 20 s."""
        began = time.monotonic()
        while True:
            listed = {k["id"] for k in self.run(self.world.call("GET", "api/kernels")).body}
            waited = time.monotonic() - began
            live = {k for k, notebook in self.open.items() if not notebook.killed}
            if set(self.open) <= listed or waited > ANSWER_BOUND:
                return listed
            if live <= listed and waited > 20:
                return listed
            time.sleep(0.5)


async def _close_http_client() -> None:
    AsyncHTTPClient().close()


@pytest.fixture
def lifecycle_root() -> Iterator[Path]:
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="jrhw-lc-", dir="/tmp"))
    try:
        yield root
    finally:
        kill_processes_mentioning(str(root))
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(int(BUDGET) * 3 + 600)
def test_random_lifecycles_keep_every_promise(
    ssh_host: SSHTestHost, lifecycle_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random sequences, :data:`EXAMPLES` of them, against one set of directories (so
    that what one sequence leaves behind meets the next, as over a week)."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    phases = [Phase.explicit, Phase.generate]
    if os.environ.get("JRHW_LIFECYCLE_SHRINK"):
        phases.append(Phase.shrink)

    class Run(Lifecycle):
        world = World(lifecycle_root, ssh_host)
        failures: ClassVar[list[tuple[list[str], BaseException]]] = []

    try:
        run_state_machine_as_test(
            Run,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                phases=phases,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except Exception as error:
        if not Run.failures:
            raise
        steps, first = Run.failures[0]
        log = Run.world.servers[-1].log.read_text(errors="replace") if Run.world.servers else ""
        raise Broken(
            "after these steps:\n  "
            + "\n  ".join(steps)
            + f"\n{type(first).__name__}: {first}\n\nthe server's log ends:\n{log[-4000:]}"
        ) from error
