"""Every error of the hardware API answered as JSON, and logged in one line when it is
the user's or the request's; a request that comes while the server stops answers 503
"the server is stopping" (see :class:`ServerStoppingError`)."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.escape import url_escape

from ..errors import causes
from ..ledger.store import LedgerClosedError
from ..validation import quote
from .request_errors import HardwareRequestError
from .user_errors import is_expected, launch_logged, one_line

#: URL prefix of every route.
API_PREFIX = "/jupyter-remote-hw/api"


#: The most characters of a request's path quoted in a log line.
LOGGED_PATH = 200

#: The answer (503) to a request that comes while the server stops.
STOPPING = "the server is stopping: start it again, then retry"


class ServerStoppingError(HardwareRequestError):
    """A request that came while the server stops (its ledger closed, or about to be)."""

    def __init__(self) -> None:
        super().__init__(503, STOPPING)


def stopping_error(exc: BaseException) -> ServerStoppingError | None:
    """The 503 answer for ``exc`` when it comes from the ledger closed by the server's
    stop, else None."""
    if any(isinstance(cause, LedgerClosedError) for cause in causes(exc)):
        return ServerStoppingError()
    return None


class JSONErrors(JupyterHandler):
    """Every error answered as JSON ``{"message", ...}``: never an HTML page; 401 for a
    request without valid credentials (with ``WWW-Authenticate``), 405 with ``Allow``."""

    def allowed_methods(self) -> list[str]:
        """The HTTP methods this route answers."""
        return [
            m.upper()
            for m in ("get", "post", "delete", "put", "patch")
            if getattr(type(self), m) is not getattr(web.RequestHandler, m)
        ]

    def short_path(self) -> str:
        """The request's path for a log line, cut to :data:`LOGGED_PATH` characters."""
        path = self.request.path
        return (
            path if len(path) <= LOGGED_PATH else f"{path[:LOGGED_PATH]}… ({len(path)} characters)"
        )

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        """Request errors are answers, not server faults: log them in one line (a failed
        launch step was logged by its steps already), with the path cut short; a
        request refused because the server stops, in its access line only."""
        if isinstance(value, ServerStoppingError):
            return
        if isinstance(value, HardwareRequestError) or is_expected(value):
            log = self.log.debug if launch_logged(value) else self.log.warning
            log(
                "%s %s: %s",
                self.request.method,
                self.short_path(),
                quote(one_line(str(value)), 500)[1:-1],
            )
            return
        if isinstance(value, web.HTTPError) and value.status_code < 500:
            self.log.warning(
                "%s %s: %d %s",
                self.request.method,
                self.short_path(),
                value.status_code,
                value.log_message or "",
            )
            return
        super().log_exception(typ, value, tb)

    def stopped(self) -> bool:
        """Whether the server's stop has closed what requests use (see
        :class:`HardwareAPIHandler`)."""
        return False

    def _handle_request_exception(self, e: BaseException) -> None:
        if not isinstance(e, (HardwareRequestError, web.HTTPError)) and self.stopped():
            e = ServerStoppingError()  # whatever failed, it failed because the server stops
        e = stopping_error(e) or e
        if isinstance(e, ServerStoppingError):
            self._refused_stopping = True
        if isinstance(e, HardwareRequestError):
            self.log_exception(type(e), e, e.__traceback__)
            self.send_error(e.status, exc_info=(type(e), e, e.__traceback__))
            return
        super()._handle_request_exception(e)

    def _log(self) -> None:
        """The access line of a request refused because the server stops is one WARNING
        line (jupyter_server logs a 503 at ERROR, with the request's headers)."""
        if getattr(self, "_refused_stopping", False):
            self.log.warning(
                "503 %s %s %.2fms: %s",
                self.request.method,
                self.short_path(),
                1000.0 * self.request.request_time(),
                STOPPING,
            )
            return
        super()._log()

    def check_xsrf_cookie(self) -> None:
        """A request without credentials is refused 401 before its XSRF check."""
        if hasattr(self, "_jupyter_current_user"):  # else too early: prepare checks it
            self.require_user()
        super().check_xsrf_cookie()

    def get_login_url(self) -> str:
        """An API answers 401 to a request without credentials, never a redirect."""
        self.require_user()
        return str(super().get_login_url())

    def require_user(self) -> None:
        """Refuse (401) a request without the server's token or login cookie."""
        if not self.current_user:
            raise HardwareRequestError(
                401,
                "not authenticated: send the server's token (Authorization: token "
                "<token>) or its login cookie",
            )

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Request errors as ``{"message", "field", "step", "hint"}`` with their status;
        any other error as ``{"message"}``."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, HardwareRequestError):
            body = exc.to_json()
            status = exc.status
            host_key = body.get("host_key")
            if host_key and host_key.get("fingerprint") and not host_key.get("changed"):
                host_key["trust"] = {
                    "method": "POST",
                    "body": {"fingerprint": host_key["fingerprint"]},
                    "url": url_path_join(
                        self.base_url,
                        API_PREFIX,
                        "hosts",
                        url_escape(host_key["destination"], plus=False),
                        "trust",
                    ),
                }
        else:
            status = status_code
            reason = (
                exc.log_message
                if isinstance(exc, web.HTTPError) and exc.log_message
                else self._reason
            )
            if status == 404:
                reason = f"no such route {quote(self.request.path)}: see docs/rest-api.yaml"
            elif status >= 500:
                reason = "internal error: the server's log has the details"
            body = {"message": reason}
        self.clear()
        self.set_status(status)
        if status == 401:
            self.set_header("WWW-Authenticate", "token")
        if status == 405:
            self.set_header("Allow", ", ".join(self.allowed_methods()))
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))


__all__ = [
    "API_PREFIX",
    "LOGGED_PATH",
    "STOPPING",
    "JSONErrors",
    "ServerStoppingError",
    "stopping_error",
]
