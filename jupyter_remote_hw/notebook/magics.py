"""``%%remote``, ``%remote_push``, ``%remote_pull`` and ``%remote_hw``: the sync edge.

Loaded with ``%load_ext jupyter_remote_hw`` in any local IPython kernel. The
work runs in :class:`~jupyter_remote_hw.notebook.remote_sessions.RemoteSessions`; this
module parses arguments, serializes and assigns the local variables, and shows
what comes back (outputs, launch steps, progress, errors) in the running cell.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import DisplayHandle, clear_output, display, publish_display_data
from tabulate import tabulate

from ..providers import Target, UnknownHardwareError
from ..provisioner.errors import KernelLaunchError
from ..transfer import TransferError, dump_variables, load_variables
from ..transfer.kernel_side.pickling import Pickled
from ..transfer.kernel_side.restricted import SharedKernelPulls, load_variables_restricted
from .remote_sessions import Emit, RemoteKernel, RemoteKernelLostError, RemoteSessions
from .untrusted_output import untrusted_display

#: Transfers at least this large show a progress bar.
PROGRESS_BAR_BYTES = 8 * 1024 * 1024


class RemoteCellError(Exception):
    """A remote cell raised; shown with the remote traceback.

    Subclasses carry the remote exception's name, so the cell's error reads
    ``ZeroDivisionError`` and not the name of this class.
    """

    def __init__(self, message: str, traceback_lines: list[str]) -> None:
        super().__init__(message)
        self.traceback_lines = traceback_lines


_ERROR_CLASSES: dict[str, type[RemoteCellError]] = {}


def remote_error(content: dict[str, Any], target: str) -> RemoteCellError:
    """The local exception for a remote ``error`` reply."""
    ename = str(content.get("ename") or "Error")
    kind = _ERROR_CLASSES.get(ename)
    if kind is None:
        kind = type(ename, (RemoteCellError,), {"__module__": "remote"})
        _ERROR_CLASSES[ename] = kind
    return kind(
        str(content.get("evalue", "")),
        [f"Error on {target}:", *list(content.get("traceback") or [])],
    )


def _names(values: list[str] | str | None) -> list[str]:
    """``["a", "b,c"]`` or ``"a,b"`` -> ``["a", "b", "c"]``."""
    if not values:
        return []
    if isinstance(values, str):
        values = [values]
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    bad = [name for name in names if not name.isidentifier()]
    if bad:
        raise UsageError(f"not a variable name: {bad[0]!r}")
    return names


class _Progress:
    """A progress bar for one transfer, shown only when it is large."""

    def __init__(self, description: str) -> None:
        self.description = description
        self._bar: Any = None

    def update(self, done: int, total: int) -> None:
        if self._bar is None:
            if total < PROGRESS_BAR_BYTES:
                return
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=self.description,
                file=sys.stderr,
            )
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class _LaunchDisplay:
    """Shows the steps of starting a remote kernel, in place, while it starts; one line
    once it is ready (a failure keeps every step)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.lines: list[str] = []
        self.done: list[tuple[str, float]] = []
        self.handle: DisplayHandle | None = None

    def ready(self) -> None:
        """The kernel answered: the steps become one line, so the notebook keeps no log."""
        if self.handle is None:
            return  # it was running already: nothing was shown
        total = sum(seconds for _, seconds in self.done)
        steps = " · ".join(f"{step} {seconds:.1f} s" for step, seconds in self.done)
        text = f"Kernel on {self.target.label} ready in {total:.1f} s"
        self.handle.update({"text/plain": f"{text}: {steps}" if steps else text}, raw=True)

    def event(self, event: dict[str, Any]) -> None:
        state, step, detail = event.get("state"), event.get("step"), event.get("detail")
        seconds = event.get("seconds")
        if state == "done" and seconds is not None:
            self.done.append((str(step), float(seconds)))
        if state == "started":
            self.lines.append(f"… {step}")
        elif state == "progress" and detail:
            self.lines.append(f"    {detail}")
        elif state in ("done", "failed") and seconds is not None:
            mark = "✓" if state == "done" else "✗"
            for index in range(len(self.lines) - 1, -1, -1):
                if self.lines[index] == f"… {step}":
                    self.lines[index] = f"{mark} {step} ({seconds:.1f} s)"
                    break
        text = f"Starting a kernel on {self.target.label}:\n" + "\n".join(self.lines)
        if self.handle is None:
            self.handle = display({"text/plain": text}, raw=True, display_id=True)
        else:
            self.handle.update({"text/plain": text}, raw=True)


def _show_output(msg: dict[str, Any], untrusted: bool = False) -> None:
    """Show one IOPub message of a remote cell in the local cell.

    ``untrusted``: the remote kernel is one someone else can run code in; its
    rich output is shown as untrusted (see :mod:`~jupyter_remote_hw.notebook.untrusted_output`).
    """
    kind = msg["msg_type"]
    content = msg["content"]
    if kind == "stream":
        stream = sys.stderr if content.get("name") == "stderr" else sys.stdout
        stream.write(content.get("text", ""))
        stream.flush()
    elif kind in ("display_data", "execute_result", "update_display_data"):
        data, metadata = content.get("data") or {}, content.get("metadata") or {}
        if untrusted:
            data, metadata = untrusted_display(data, metadata)
        publish_display_data(
            data, metadata, transient=content.get("transient"), update=kind == "update_display_data"
        )
    elif kind == "clear_output":
        clear_output(wait=bool(content.get("wait")))


@magics_class
class RemoteMagics(Magics):
    """The remote hardware magics of one IPython shell."""

    def __init__(self, shell: InteractiveShell, sessions: RemoteSessions | None = None) -> None:
        super().__init__(shell)
        self._sessions = sessions

    @property
    def _shell(self) -> InteractiveShell:
        shell: InteractiveShell | None = self.shell
        assert shell is not None
        return shell

    @property
    def sessions(self) -> RemoteSessions:
        """The remote kernels of this shell (created on first use)."""
        if self._sessions is None:
            self._sessions = RemoteSessions()
        return self._sessions

    # ------------------------------------------------------------------ helpers

    def _target(
        self, name: str | None, nodes: int | None = None, gpus_per_node: int | None = None
    ) -> Target:
        try:
            return self.sessions.target(name, nodes, gpus_per_node)
        except (UnknownHardwareError, ValueError) as exc:
            raise UsageError(str(exc)) from None

    def _run(
        self,
        target: Target,
        work: Callable[[RemoteKernel, Emit], Any],
        description: str = "",
        interrupt: bool = False,
    ) -> Any:
        """Start (or reuse) the kernel on ``target`` and run ``work`` with it."""
        launch = _LaunchDisplay(target)
        progress = _Progress(description)
        untrusted = False

        async def job(emit: Emit) -> Any:
            kernel = await self.sessions.kernel(target, emit)
            emit(("ready", None))
            return await work(kernel, emit)

        def on_event(kind: str, payload: Any) -> None:
            nonlocal untrusted
            if kind == "output":
                _show_output(payload, untrusted)
            elif kind == "untrusted":
                untrusted = bool(payload)
            elif kind == "launch":
                launch.event(payload)
            elif kind == "ready":
                launch.ready()
            elif kind == "progress":
                progress.update(*payload)

        def on_interrupt(future: Future[Any]) -> bool:
            if not interrupt or target.name not in self.sessions.running():
                return False
            sys.stderr.write(f"Interrupting the cell on {target.name}…\n")
            self.sessions.call(self.sessions.interrupt(target.name))
            return True

        try:
            return self.sessions.run(job, on_event, on_interrupt)
        finally:
            progress.close()

    def _assign(self, values: dict[str, Any]) -> None:
        self._shell.user_ns.update(values)

    def _load(self, pickled: list[Pickled], restricted: bool, target: Target) -> dict[str, Any]:
        """Rebuild pulled variables: restricted to data types when someone else can run
        code in the kernel they come from (see :mod:`~jupyter_remote_hw.transfer.kernel_side.restricted`)."""
        if not restricted:
            return load_variables(pickled)
        allowed = SharedKernelPulls(config=self.sessions.config).allowed_types
        return load_variables_restricted(
            pickled, f"{target.name} (a kernel that someone else can run code in)", allowed
        )

    async def _pull(
        self, kernel: RemoteKernel, names: list[str], emit: Emit
    ) -> tuple[list[Pickled], bool]:
        """Fetch variables, and whether someone else can run code where they come from
        (asked after: a share added meanwhile counts)."""
        pickled = await self.sessions.pull(kernel, names, emit)
        return pickled, await self.sessions.others_can_run_code(kernel)

    # ------------------------------------------------------------------ magics

    @magic_arguments()
    @argument(
        "target",
        nargs="?",
        help="Hardware to run on (see %%remote_hw); the default target when left out.",
    )
    @argument("--in", dest="inputs", action="append", help="Variables to send first: a,b.")
    @argument("--out", dest="outputs", action="append", help="Variables to fetch after: c,d.")
    @argument("--device", help="Put arriving tensors and modules on this device (cuda).")
    @argument("--nodes", type=int, help="An allocation of this many nodes (SLURM).")
    @argument("--gpus-per-node", type=int, help="With --nodes: GPUs on each node.")
    @cell_magic
    def remote(self, line: str, cell: str) -> None:
        """Run the cell on remote hardware, with variables in and out.

        ``%%remote TARGET [--in a,b] [--out c,d] [--device cuda] [--nodes N
        [--gpus-per-node G]]``: sends the inputs, runs the cell in this notebook's
        kernel on TARGET (started on first use; with ``--nodes``, in an allocation of
        that many nodes of the SLURM target, where ``%%ranks`` runs a cell on every
        rank), shows its outputs as they come, then fetches the outputs. Nothing is
        assigned on either side unless every variable made it.
        """
        args = parse_argstring(self.remote, line)
        target = self._target(args.target, args.nodes, args.gpus_per_node)
        inputs, outputs = _names(args.inputs), _names(args.outputs)
        pickled = dump_variables(self._shell.user_ns, inputs) if inputs else []

        async def work(
            kernel: RemoteKernel, emit: Emit
        ) -> tuple[dict[str, Any], tuple[list[Pickled], bool]]:
            if pickled:
                await self.sessions.push(kernel, pickled, args.device, emit)
            emit(("untrusted", await self.sessions.others_can_run_code(kernel)))
            reply = await self.sessions.execute(kernel, cell, emit)
            if reply.get("status") != "ok" or not outputs:
                return reply, ([], False)
            return reply, await self._pull(kernel, outputs, emit)

        reply, (fetched, restricted) = self._run(target, work, f"{target.name}", interrupt=True)
        if reply.get("status") == "error":
            if reply.get("ename") == "KeyboardInterrupt":
                raise KeyboardInterrupt
            raise remote_error(reply, target.name)
        if reply.get("status") == "aborted":
            raise remote_error(
                {"ename": "Aborted", "evalue": "the remote cell was aborted"}, target.name
            )
        if fetched:
            self._assign(self._load(fetched, restricted, target))

    @magic_arguments()
    @argument("names", nargs="+", help="Variables to send: a,b or a b.")
    @argument("--to", dest="target", help="Hardware to send to (default target when left out).")
    @argument("--device", help="Put arriving tensors and modules on this device (cuda).")
    @line_magic
    def remote_push(self, line: str) -> None:
        """Send local variables to the kernel on remote hardware: all, or none."""
        args = parse_argstring(self.remote_push, line)
        target = self._target(args.target)
        pickled = dump_variables(self._shell.user_ns, _names(args.names))

        async def work(kernel: RemoteKernel, emit: Emit) -> list[dict[str, Any]]:
            return await self.sessions.push(kernel, pickled, args.device, emit)

        assigned = self._run(target, work, f"→ {target.name}")
        where = f" on {args.device}" if args.device else ""
        sys.stdout.write(
            f"sent to {target.name}{where}: "
            + ", ".join(f"{a['name']} ({a['type']})" for a in assigned)
            + "\n"
        )

    @magic_arguments()
    @argument("names", nargs="+", help="Variables to fetch: a,b or a b.")
    @argument(
        "--from", dest="target", help="Hardware to fetch from (default target when left out)."
    )
    @argument("--as", dest="rename", help="Local names for them, in the same order: x,y.")
    @line_magic
    def remote_pull(self, line: str) -> None:
        """Fetch variables from the kernel on remote hardware: all, or none."""
        args = parse_argstring(self.remote_pull, line)
        target = self._target(args.target)
        names = _names(args.names)
        local_names = _names(args.rename) or names
        if len(local_names) != len(names):
            raise UsageError(f"--as names {len(local_names)} variables for {len(names)} fetched")

        async def work(kernel: RemoteKernel, emit: Emit) -> tuple[list[Pickled], bool]:
            return await self._pull(kernel, names, emit)

        fetched, restricted = self._run(target, work, f"← {target.name}")
        values = self._load(fetched, restricted, target)
        self._assign({new: values[old] for old, new in zip(names, local_names, strict=True)})

    @magic_arguments()
    @argument("target", nargs="?", help="Make this the default target of the magics.")
    @line_magic
    def remote_hw(self, line: str) -> None:
        """List hardware targets and this notebook's remote kernels; set the default."""
        args = parse_argstring(self.remote_hw, line)
        if args.target:
            target = self._target(args.target)
            self.sessions.default_target = target.name
            sys.stdout.write(
                f"default hardware: {target.name} ({target.hardware}, {target.where})\n"
            )
            return
        running = self.sessions.running()
        rows = []
        for target in self.sessions.targets():
            kernel = running.get(target.name)
            rows.append(
                [
                    "*" if target.name == self.sessions.default_target else "",
                    target.name,
                    target.hardware,
                    target.where,
                    target.provider,
                    f"running ({kernel.kernel_id[:8]})" if kernel else "",
                ]
            )
        headers = ["default", "target", "hardware", "where", "provider", "this notebook"]
        display(
            {
                "text/plain": tabulate(rows, headers=headers),
                "text/html": tabulate(rows, headers=headers, tablefmt="html"),
            },
            raw=True,
        )


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register the magics, and answer transfer requests in this kernel."""
    from ..transfer.kernel_side.kernel_handler import load_ipython_extension as answer_transfers

    answer_transfers(ipython)
    ipython.register_magics(RemoteMagics(ipython))
    # A remote error shows the remote traceback; a transfer or launch error
    # already says what failed and what to do: none needs the magic's frames.
    # A handler the user had set keeps handling its own exception types.
    previous_types = tuple(t for t in ipython.custom_exceptions if t not in _OURS)
    previous = ipython.CustomTB if previous_types else None

    def show(
        shell: InteractiveShell,
        etype: type[BaseException],
        value: BaseException,
        tb: Any,
        tb_offset: int | None = None,
    ) -> Any:
        if previous is not None and not issubclass(etype, _OURS):
            return previous(etype, value, tb, tb_offset)
        return _show_error(shell, etype, value, tb, tb_offset)

    ipython.set_custom_exc(_OURS + previous_types, show)


#: Exceptions shown without the magic's frames.
_OURS: tuple[type[BaseException], ...] = (
    RemoteCellError,
    RemoteKernelLostError,
    TransferError,
    KernelLaunchError,
)


def _show_error(
    shell: InteractiveShell,
    etype: type[BaseException],
    value: BaseException,
    tb: Any,
    tb_offset: int | None = None,
) -> list[str]:
    if isinstance(value, RemoteCellError):
        lines = value.traceback_lines
    else:
        lines = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, lines)  # type: ignore[arg-type, unused-ignore]  # untyped before IPython 9
    return lines
