"""Saying that a kernel's machine ended under it: in the log, with the kernel in
jupyter_server's listing, and to the launch listeners (the notebook's notice)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .provisioner import RemoteHWProvisioner


def report_end(p: RemoteHWProvisioner, reason: str) -> None:
    """The kernel's machine ended under it: say why, once, where the server shows it."""
    parent = p.parent
    if parent is None or getattr(parent, "reason", None) == reason:
        return
    p.log.warning("kernel %s died: %s", p.kernel_id, reason)
    if hasattr(parent, "reason"):
        parent.reason = reason  # jupyter_server lists it with the kernel
    event = {
        "kernel_id": p.kernel_id,
        "target": p.target,
        "step": "kernel died",
        "state": "failed",
        "seconds": None,
        "detail": reason,
    }
    for listener in list(p.manager.launch_listeners):
        try:
            listener(event)
        except Exception:  # one listener's bug must not stop the others
            p.log.exception("a launch listener failed on %s", event)


__all__ = ["report_end"]
