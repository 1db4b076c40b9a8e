"""A kernel whose machine ended under it (its SLURM job ended, say) is dead in every
client's eyes: in the log, in jupyter_server's listing (``execution_state: dead``
and the reason), on IOPub (a ``dead`` status), to every cell sent to it (an error
reply, from its relay; see :meth:`..agent_client.sleeping.StandIn.end`), and to the
launch listeners (the notebook's notice). jupyter_client's restarter is stopped, and a
restart asked for is refused with the reason (see :func:`restart_refusal`), since the
kernel's hardware is gone."""

from __future__ import annotations

from ..machines.manager import target_label
from .kernel_context import KernelContext


async def report_end(p: KernelContext, reason: str) -> None:
    """The kernel's machine ended under it: stop its restarter, and say why, once, where
    its clients and the server show it."""
    parent = p.parent
    p.log.warning("kernel %s died: %s", p.kernel_id, reason)
    if parent is not None:
        stop_restarter = getattr(parent, "stop_restarter", None)
        if stop_restarter is not None:
            stop_restarter()  # it would restart into hardware that is gone
        if hasattr(parent, "execution_state"):
            parent.execution_state = "dead"  # jupyter_server lists it so
        if hasattr(parent, "reason"):
            parent.reason = reason  # jupyter_server lists it with the kernel
    relay = p.run.machine.relay(p.kernel_id) if p.run.machine is not None else None
    if relay is not None:
        await relay.sleep()  # its clients' requests go to its stand-in from now on
        await relay.refuse_held(reason, dead=True)
    p.operations.end_save()  # its state is gone with it: the save is told so at once
    tell_failed(p, "kernel died", reason)


def restart_refusal(p: KernelContext) -> str | None:
    """Why the kernel cannot be restarted: its machine ended under it, and a restart does
    not quietly take new hardware (a new allocation) in its place. None when it can be
    restarted, as when nothing runs that a restart would replace (a hibernated kernel,
    whose job ended with it, starts afresh where it wakes)."""
    if p.run.host_connection is None:
        return None
    ended = end_reason(p)
    if not ended:
        return None
    return f"{ended}; start a new kernel to run on {target_label(p.manager, p.target)} again"


def end_reason(p: KernelContext) -> str | None:
    """Why the kernel is dead (its machine ended under it), or None."""
    return p.dead or (p.run.machine.end_reason() if p.run.machine is not None else None)


def tell_failed(p: KernelContext, step: str, detail: str) -> None:
    """Tell the launch listeners (the notebook's notice) that ``step`` failed."""
    event = {
        "kernel_id": p.kernel_id,
        "target": p.target,
        "step": step,
        "state": "failed",
        "seconds": None,
        "detail": detail,
    }
    for listener in list(p.manager.launch_listeners):
        try:
            listener(event)
        except Exception:  # one listener's bug must not stop the others
            p.log.exception("a launch listener failed on %s", event)


__all__ = ["end_reason", "report_end", "restart_refusal", "tell_failed"]
