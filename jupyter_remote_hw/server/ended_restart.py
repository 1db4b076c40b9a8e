"""Jupyter's own kernel action route (``POST /api/kernels/<id>/restart|interrupt``),
served here first (an extension's routes come before the server's own), so that a
restart or an interrupt that cannot be done now answers 409 with why, in one line:

- a restart or an interrupt while the kernel is being started, restarted or shut down
  (jupyter_client would run a restart beside the other and restart a kernel it is
  removing, leaving it running; it refuses an interrupt with a bare 500);
- a restart while the notebook switches hardware (jupyter_client would tell the kernel
  to stop under the switch's copy of its variables; the switch stops it when done);
- a restart of a kernel whose machine ended under it (a SLURM job cancelled or at its
  time limit, an EC2 instance terminated outside this server): a restart does not
  quietly take new hardware in its place.

A restart or an interrupt of a kernel the server no longer has (one a switch just
replaced) answers 404 saying so, where jupyter_server answers a restart with a 500.

jupyter_server would answer each with a bare 500 ("Exception restarting kernel") and
log a traceback. Every other request goes on to jupyter_server's handler unchanged.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.services.kernels.handlers import KernelActionHandler
from tornado import web

from ..provisioner import RemoteHWProvisioner
from ..provisioner.kernel_end import restart_refusal, tell_failed
from ..provisioner.operations import OperationConflictError
from .user_errors import one_line

#: Jupyter's kernel action route (without the base URL), as jupyter_server spells it.
KERNEL_ACTION_ROUTE = (
    r"/api/kernels/(?P<kernel_id>\w+-\w+-\w+-\w+-\w+)/(?P<action>restart|interrupt)"
)


class EndedKernelActionHandler(KernelActionHandler):
    """Jupyter's kernel action handler, refusing with a 409 that says why the restart of
    a kernel whose machine ended or that a hardware switch is leaving."""

    @web.authenticated
    @authorized
    async def post(self, kernel_id: str, action: str) -> None:
        """Refuse the restart of a kernel whose machine ended or that switches hardware;
        else as jupyter_server."""
        if kernel_id not in self.kernel_manager:
            # jupyter_server answers a restart of a kernel it no longer has with a 500.
            raise web.HTTPError(
                404,
                f"no kernel {kernel_id}: it was shut down (a notebook that switched "
                "hardware has a new kernel; reload its session)",
            )
        if (
            kernel_id in self.kernel_manager
            and not (kernel := self.kernel_manager.get_kernel(kernel_id)).ready.done()
        ):
            # jupyter_client would run a restart beside the stop or the start under way
            # and lose track of the kernel; it refuses an interrupt with a bare 500.
            raise web.HTTPError(
                409,
                f"{_named(kernel)} is being started, restarted or shut down: try "
                f"the {action} again once that has ended",
            )
        if action == "restart" and kernel_id in self.kernel_manager:
            provisioner: Any = getattr(kernel, "provisioner", None)
            if isinstance(provisioner, RemoteHWProvisioner):
                try:
                    provisioner.operations.refuse_restart()
                except OperationConflictError as exc:
                    raise web.HTTPError(409, str(exc)) from None
                refused = restart_refusal(provisioner)
                if refused:
                    tell_failed(provisioner, "restart kernel", refused)
                    raise web.HTTPError(409, one_line(refused))
        await super().post(kernel_id, action)  # type: ignore[misc]


def _named(kernel: Any) -> str:
    """A kernel as messages name it: by its machine when it is one of ours."""
    provisioner = getattr(kernel, "provisioner", None)
    if isinstance(provisioner, RemoteHWProvisioner):
        return provisioner.named
    return f"the kernel ({getattr(kernel, 'kernel_name', 'unknown')})"


__all__ = ["KERNEL_ACTION_ROUTE", "EndedKernelActionHandler"]
