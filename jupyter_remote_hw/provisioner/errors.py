"""How a failed launch reaches Jupyter's REST API: an HTTP error with our message."""

from __future__ import annotations

from tornado.web import HTTPError

from ..launch_steps import LaunchError


class KernelLaunchError(HTTPError):
    """A :class:`LaunchError` as jupyter_server reports it.

    jupyter_server answers ``POST /api/kernels`` with an HTTPError's status and
    message, and with "Unhandled error" for anything else; this carries the
    step, the time spent and the hint to the user.

    Attributes:
        launch_error: The failure, with its step and hint.
    """

    def __init__(self, error: LaunchError) -> None:
        super().__init__(error.status, reason=_REASONS.get(error.status))
        # Set after __init__: tornado would %-format a log_message given there.
        self.log_message = str(error)
        self.launch_error = error

    def __str__(self) -> str:
        return str(self.launch_error)


_REASONS = {404: "Unknown Hardware", 502: "Host Unreachable", 504: "Launch Timed Out"}
