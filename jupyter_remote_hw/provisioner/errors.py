"""How a failed launch reaches Jupyter's REST API: an HTTP error with our message."""

from __future__ import annotations

from jupyter_client.kernelspec import NoSuchKernel
from tornado.web import HTTPError

from ..errors import UserError
from ..providers import UnknownHardwareError
from ..providers.launch_steps import LaunchError


class MachineEndedError(UserError):
    """The kernel's machine ended for good (its SLURM job reached its time limit, was
    cancelled or preempted): a restart does not take new hardware in its place."""


class KernelGoneError(UserError):
    """A kernel a previous server started is no longer on its host (it ended while no
    server watched it): there is nothing to take over."""


class KernelLaunchError(HTTPError):
    """A :class:`LaunchError` as jupyter_server reports it.

    jupyter_server answers ``POST /api/kernels`` with an HTTPError's status and
    message, and with "Unhandled error" for anything else; this carries the
    step, the time spent and the hint to the user.

    Attributes:
        launch_error: The failure, with its step and hint.
    """

    def __init__(self, error: LaunchError) -> None:
        super().__init__(error.status, str(error), reason=_REASONS.get(error.status))
        self.launch_error = error

    def __str__(self) -> str:
        return str(self.launch_error)


_REASONS = {
    404: "Unknown Hardware",
    409: "Launch Cancelled",
    502: "Host Unreachable",
    504: "Launch Timed Out",
}


class UnknownHardwareKernelSpec(NoSuchKernel, HTTPError):
    """A ``remote-hw-*`` kernel name that no target has: a 404 naming what exists.

    Still a :class:`NoSuchKernel` for callers that look for that.
    """

    def __init__(self, kernel_name: str, error: UnknownHardwareError) -> None:
        HTTPError.__init__(
            self, 404, f"No kernelspec {kernel_name!r}: {error}", reason="Unknown Hardware"
        )
        self.name = kernel_name

    def __str__(self) -> str:
        return str(self.log_message)
