"""The hardware REST API and its event socket: thin handlers over :mod:`.hardware_actions`.

Routes (under the server's base URL; documented in docs/rest-api.yaml):

- ``GET  /jupyter-remote-hw/api/hardware``: the hardware listing.
- ``GET  /jupyter-remote-hw/api/machines``: the user's machines.
- ``POST /jupyter-remote-hw/api/machines/<name>/(start|stop|terminate)``.
- ``POST /jupyter-remote-hw/api/launch``: start a kernel on hardware.
- ``GET  /jupyter-remote-hw/api/variables/<session id>``: what could be carried.
- ``POST /jupyter-remote-hw/api/switch/<session id>``: switch a notebook's hardware.
- ``GET  /jupyter-remote-hw/api/usage/<kernel id>``: live use of a kernel's hardware.
- ``POST /jupyter-remote-hw/api/hibernate/<kernel id>``: save a kernel's state, release
  its hardware; ``POST /jupyter-remote-hw/api/wake/<kernel id>``: bring it back.
- ``PUT  /jupyter-remote-hw/api/hibernate-after/<kernel id>``: the notebook's own
  hibernate time for its kernel.
- ``GET|POST /jupyter-remote-hw/api/shares``: the user's shares; share a kernel.
- ``DELETE /jupyter-remote-hw/api/shares/<share id>``: revoke a share.
- ``POST /jupyter-remote-hw/api/join``: attach a kernel here to one a teammate shared.
- ``POST /jupyter-remote-hw/api/hosts/<host>/trust``: trust the host key the user was shown.

No path contains ``/api/kernels`` or ``/api/sessions``: tools that watch Jupyter's own
kernel and session routes by pattern (test harnesses, proxies) would take ours for them.
- ``GET  /jupyter-remote-hw/api/events`` (websocket): launch, machine and switch events.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import APIHandler
from tornado import web, websocket

from ..machines.hardware import list_hardware, provider_statuses
from ..validation import NAME, InvalidInputError, check_identifier, check_json, quote
from .hardware_actions import HardwareActions, HardwareRequestError
from .hardware_events import EventHub
from .hibernation.actions import HibernationActions
from .hibernation.hibernate_after import HibernateAfterActions
from .host_key_actions import trust_host_key
from .json_errors import API_PREFIX, JSONErrors, ServerStoppingError
from .kernel_metrics import KernelMetrics
from .schemas import ALL_VALUES, CHECKERS, PATH_PARTS
from .share_actions import ShareActions

#: Authorization resource of the hardware and machine routes.
HARDWARE_RESOURCE = "remote_hw"
#: Authorization resource of the routes that start kernels or read their variables.
KERNELS_RESOURCE = "kernels"


class HardwareAPIHandler(JSONErrors, APIHandler):
    """Base: the actions, JSON bodies, and request errors as JSON with their status."""

    auth_resource = HARDWARE_RESOURCE

    def initialize(self, actions: HardwareActions, shares: ShareActions) -> None:
        """Keep the actions (handler kwargs)."""
        self.actions = actions
        self.shares = shares

    def stopped(self) -> bool:
        """Whether the server's stop has closed the ledger (and the machines' links)."""
        return self.actions.machines.ledger.closed

    async def prepare(self) -> None:  # type: ignore[override]
        """Refuse an unauthenticated request (401); while the server stops, any request
        once its ledger is closed, and any but a read before (503); then a path part
        that is not what the route takes (400, naming it), before any handler reads it."""
        await _maybe_await(super().prepare())
        self.require_user()
        if self.stopped() or (
            self.actions.machines.server_stopping and self.request.method != "GET"
        ):
            raise ServerStoppingError
        for name, value in self.path_kwargs.items():
            pattern = PATH_PARTS.get(name)
            if pattern is not None:
                try:
                    check_identifier(value, pattern, name)
                except InvalidInputError as exc:
                    raise HardwareRequestError(400, str(exc), name) from None

    def json_body(self, schema: str) -> dict[str, Any]:
        """The request's JSON object, checked against its schema in :mod:`.schemas`.

        Raises:
            HardwareRequestError: 400 naming the field when the body is not JSON, not
                an object, or not what the schema allows.
        """
        raw = self.request.body or b"{}"
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise HardwareRequestError(
                400, f"the request body is not JSON: {exc}", "body"
            ) from None
        except RecursionError:
            raise HardwareRequestError(
                400, "the request body is nested too deeply", "body"
            ) from None
        try:
            check_json(body, CHECKERS[schema])
        except InvalidInputError as exc:
            raise HardwareRequestError(400, str(exc), exc.field) from None
        except RecursionError:
            raise HardwareRequestError(
                400, "the request body is nested too deeply", "body"
            ) from None
        assert isinstance(body, dict)
        return body

    def write_json(self, value: Any, status: int = 200) -> None:
        """Answer ``value`` as JSON."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(value, default=str))


class NoRouteHandler(HardwareAPIHandler):
    """Any other path under the API's prefix: 404 as JSON (not the server's HTML page)."""

    async def _no_route(self, *args: Any) -> None:
        raise HardwareRequestError(
            404, f"no such route {quote(self.request.path)}: see docs/rest-api.yaml"
        )

    get = post = put = patch = delete = _no_route


class HardwareHandler(HardwareAPIHandler):
    """``GET``: every hardware option with what it offers and whether it is usable now."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        machines = self.actions.machines
        # Checking credentials may wait on an instance-metadata lookup: not on this loop.
        providers = await asyncio.to_thread(provider_statuses, machines)
        self.write_json(
            {
                "hardware": [o.to_json() for o in list_hardware(machines)],
                "providers": [p.to_json() for p in providers],
            }
        )


class MachinesHandler(HardwareAPIHandler):
    """``GET``: the user's machines with state, kernels and cost."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.write_json({"machines": await self.actions.list_machines()})


class MachineActionHandler(HardwareAPIHandler):
    """``POST .../machines/<name>/<action>``: start, stop or terminate a machine."""

    @web.authenticated
    @authorized
    async def post(self, name: str, action: str) -> None:
        do = {
            "start": self.actions.start_machine,
            "stop": self.actions.stop_machine,
            "terminate": self.actions.terminate_machine,
        }[action]
        self.write_json({"machine": await do(name)})


class KernelsHandler(HardwareAPIHandler):
    """``POST {"hardware", "path"?}``: start a kernel on hardware; 201 with its model."""

    auth_resource = KERNELS_RESOURCE

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body("launch")
        kernel_id = await self.actions.start_kernel(body.get("hardware"), body.get("path"))
        model = await _maybe_await(self.kernel_manager.kernel_model(kernel_id))  # type: ignore[no-untyped-call]
        self.set_header("Location", f"{self.base_url.rstrip('/')}/api/kernels/{kernel_id}")
        self.write_json(model, status=201)


class LaunchHandler(HardwareAPIHandler):
    """``DELETE``: cancel a kernel's launch under way (a SLURM job waiting in the queue)."""

    auth_resource = KERNELS_RESOURCE

    @web.authenticated
    @authorized
    async def delete(self, kernel_id: str) -> None:
        self.actions.cancel_launch(kernel_id)
        self.set_status(204)
        self.finish()


class SessionVariablesHandler(HardwareAPIHandler):
    """``GET``: what a switch could carry from a session's kernel: its variables (name,
    type, nbytes, carriable, reason) and the modules bound to names; ``?hardware=``
    also says which modules that hardware lacks, when its machine is open."""

    auth_resource = KERNELS_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        hardware = self.get_argument("hardware", None)
        if hardware is not None:
            try:
                check_identifier(hardware, NAME, "hardware")
            except InvalidInputError as exc:
                raise HardwareRequestError(400, str(exc), "hardware") from None
        session = await self.actions.session(session_id)
        self.write_json(await self.actions.kernel_variables(session["kernel"]["id"], hardware))


class SessionSwitchHandler(HardwareAPIHandler):
    """``POST {"hardware", "carry"?, "device"?, "keep_old"?}``: switch a session's hardware."""

    auth_resource = KERNELS_RESOURCE

    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        body = self.json_body("switch")
        report = await self.actions.switch_session(
            session_id,
            body.get("hardware"),
            body.get("carry"),
            body.get("device"),
            body.get("keep_old", False),
        )
        self.write_json(report)


class KernelMetricsHandler(HardwareAPIHandler):
    """``GET``: the live use of the hardware a kernel runs on (CPU, memory, GPUs, cost)."""

    auth_resource = KERNELS_RESOURCE

    def initialize(  # type: ignore[override]
        self, actions: HardwareActions, shares: ShareActions, metrics: KernelMetrics
    ) -> None:
        """Keep the actions and the metrics (handler kwargs)."""
        super().initialize(actions, shares)
        self.metrics = metrics

    @web.authenticated
    @authorized
    async def get(self, kernel_id: str) -> None:
        self.write_json(await self.metrics.metrics(kernel_id))


class HibernationHandler(HardwareAPIHandler):
    """Base of the hibernation routes: the hibernation actions (a handler kwarg)."""

    auth_resource = KERNELS_RESOURCE

    def initialize(  # type: ignore[override]
        self, actions: HardwareActions, shares: ShareActions, hibernation: HibernationActions
    ) -> None:
        """Keep the actions and the hibernation actions (handler kwargs)."""
        super().initialize(actions, shares)
        self.hibernation = hibernation


class HibernateHandler(HibernationHandler):
    """``POST {"policy"?}``: save a kernel's state and release its hardware; the summary
    (what was saved, what was left out and why, bytes)."""

    @web.authenticated
    @authorized
    async def post(self, kernel_id: str) -> None:
        body = self.json_body("hibernate")
        self.write_json(await self.hibernation.hibernate(kernel_id, body.get("policy")))


class WakeHandler(HibernationHandler):
    """``POST {"target"?}``: bring a hibernated kernel back on its target (or on
    ``target``, which becomes its target), its state restored."""

    @web.authenticated
    @authorized
    async def post(self, kernel_id: str) -> None:
        body = self.json_body("wake")
        self.write_json(await self.hibernation.wake(kernel_id, body.get("target")))


class HibernateAfterHandler(HibernationHandler):
    """``PUT {"seconds"}``: how long the kernel may stay idle before it hibernates (0:
    never; null: its target's time); the time that applies now and whose it is."""

    @web.authenticated
    @authorized
    async def put(self, kernel_id: str) -> None:
        body = self.json_body("hibernate_after")
        self.write_json(HibernateAfterActions(self.hibernation).set(kernel_id, body["seconds"]))


class SharesHandler(HardwareAPIHandler):
    """``GET``: the user's shares (``?all=1``: revoked and expired ones too).
    ``POST {"kernel", "public_key", "role", "expires"?, "address"?}``: share a kernel;
    201 with the share and the share file for the teammate."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        shown = self.get_argument("all", "0")
        if shown not in ALL_VALUES:
            raise HardwareRequestError(
                400, f"'all' must be one of {', '.join(ALL_VALUES)}, not {quote(shown)}", "all"
            )
        include_all = shown in ("1", "true")
        self.write_json({"shares": await self.shares.list_shares(include_all)})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body("share")
        granted = await self.shares.share(
            body.get("kernel"),
            body.get("public_key"),
            body.get("role"),
            body.get("expires"),
            body.get("address"),
        )
        self.write_json(granted, status=201)


class ShareHandler(HardwareAPIHandler):
    """``DELETE``: revoke a share; the teammate is dropped at once."""

    @web.authenticated
    @authorized
    async def delete(self, share_id: str) -> None:
        self.write_json(await self.shares.revoke(share_id))


class JoinHandler(HardwareAPIHandler):
    """``POST {"share_file", "identity"?}``: start a kernel here attached to a shared
    one; 201 with the kernel's model and kernelspec."""

    auth_resource = KERNELS_RESOURCE

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body("join")
        joined = await self.shares.join(body.get("share_file"), body.get("identity"))
        model = await _maybe_await(self.kernel_manager.kernel_model(joined["kernel_id"]))  # type: ignore[no-untyped-call]
        self.set_header(
            "Location", f"{self.base_url.rstrip('/')}/api/kernels/{joined['kernel_id']}"
        )
        self.write_json({**joined, "kernel": model}, status=201)


class HostTrustHandler(HardwareAPIHandler):
    """``POST {"fingerprint"}``: record the key a host presents in known_hosts, as
    OpenSSH would, if it is the key whose fingerprint the user was shown (else 409)."""

    @web.authenticated
    @authorized
    async def post(self, host: str) -> None:
        body = self.json_body("trust")
        self.write_json(
            await trust_host_key(
                self.actions.machines.transport.settings, host, body.get("fingerprint"), self.log
            )
        )


class EventsHandler(JSONErrors, websocket.WebSocketHandler):
    """Websocket: every launch, machine and switch event, one JSON text message each.

    A request without credentials is answered 401, one that is not a websocket
    handshake 400, both as JSON."""

    auth_resource = HARDWARE_RESOURCE

    def initialize(self, events: EventHub) -> None:
        """Keep the hub (handler kwargs)."""
        self.events = events
        self._unsubscribe: Any = None

    async def get(self, *args: Any, **kwargs: Any) -> None:
        """Open the socket."""
        try:
            self.require_user()
            if self.request.headers.get("Upgrade", "").lower() != "websocket":
                raise HardwareRequestError(
                    400,
                    "this route is a websocket: open it with an 'Upgrade: websocket' handshake",
                    "Upgrade",
                )
        except HardwareRequestError as exc:
            self.send_error(exc.status, exc_info=(type(exc), exc, exc.__traceback__))
            return
        await self._open(*args, **kwargs)

    @ws_authenticated
    @authorized
    async def _open(self, *args: Any, **kwargs: Any) -> None:
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:
        """Start forwarding events."""
        self._unsubscribe = self.events.subscribe(self._send)

    def _send(self, event: dict[str, Any]) -> None:
        try:
            self.write_message(json.dumps(event, default=str))
        except websocket.WebSocketClosedError:
            self.on_close()

    def on_message(self, message: str | bytes) -> None:
        """Messages from the browser are not expected; ignore them."""

    def on_close(self) -> None:
        """Stop forwarding events."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None


async def _maybe_await(value: Any) -> Any:
    if hasattr(value, "__await__"):
        return await value
    return value


def api_handlers(
    actions: HardwareActions, shares: ShareActions
) -> list[tuple[str, Any, dict[str, Any]]]:
    """The routes of the REST API, for ``ExtensionApp.handlers``."""
    kwargs: dict[str, Any] = {"actions": actions, "shares": shares}
    session = r"(?P<session_id>[^/]+)"
    hibernation = {**kwargs, "hibernation": HibernationActions(actions)}
    return [
        (f"{API_PREFIX}/hardware", HardwareHandler, kwargs),
        (f"{API_PREFIX}/machines", MachinesHandler, kwargs),
        (
            f"{API_PREFIX}/machines/(?P<name>[^/]+)/(?P<action>start|stop|terminate)",
            MachineActionHandler,
            kwargs,
        ),
        (f"{API_PREFIX}/launch", KernelsHandler, kwargs),
        (f"{API_PREFIX}/launch/(?P<kernel_id>[^/]+)", LaunchHandler, kwargs),
        (f"{API_PREFIX}/variables/{session}", SessionVariablesHandler, kwargs),
        (f"{API_PREFIX}/switch/{session}", SessionSwitchHandler, kwargs),
        (
            f"{API_PREFIX}/usage/(?P<kernel_id>[^/]+)",
            KernelMetricsHandler,
            {**kwargs, "metrics": KernelMetrics(actions)},
        ),
        (f"{API_PREFIX}/hibernate/(?P<kernel_id>[^/]+)", HibernateHandler, hibernation),
        (f"{API_PREFIX}/wake/(?P<kernel_id>[^/]+)", WakeHandler, hibernation),
        (
            f"{API_PREFIX}/hibernate-after/(?P<kernel_id>[^/]+)",
            HibernateAfterHandler,
            hibernation,
        ),
        (f"{API_PREFIX}/shares", SharesHandler, kwargs),
        (f"{API_PREFIX}/shares/(?P<share_id>[^/]+)", ShareHandler, kwargs),
        (f"{API_PREFIX}/join", JoinHandler, kwargs),
        (f"{API_PREFIX}/hosts/(?P<host>[^/]+)/trust", HostTrustHandler, kwargs),
        (f"{API_PREFIX}/events", EventsHandler, {"events": actions.events}),
        (f"{API_PREFIX}(?:/.*)?", NoRouteHandler, kwargs),
    ]


__all__ = ["API_PREFIX", "api_handlers"]
