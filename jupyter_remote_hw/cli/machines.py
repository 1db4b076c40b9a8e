"""``jupyter remote-hw list`` and the commands on hardware the user already has.

The machines and kernels ``list`` shows are the ones the "Remote hardware" panel shows:
when Jupyter servers of this user run, ``list`` asks them (``GET
/jupyter-remote-hw/api/machines``: their open links, their kernels' execution state
and notebooks); when none runs, it builds the same view from the ledger with the same
code (:class:`.machine_view.MachineView`). Either way one table, in the panel's words.

Local and SSH targets have no machine to launch: a running server holds their links and
kernels, so ``start`` asks it to connect, and ``stop`` and ``terminate`` ask it to shut
down its kernels there and stop the agent (the hardware itself stays on); without a
server, the command says in one line why nothing can be done and what to do instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from jupyter_server.serverapp import list_running_servers

from ..ledger.records import MAGIC_OWNER
from ..ledger.store import FINAL_STATES
from ..machines.manager import MachineManager
from ..machines.view import OWNED_PROVIDERS, MachineView
from ..providers import Target
from ..sharing.roles import kernels_run_by_others

log = logging.getLogger(__name__)

#: Seconds a running server has to answer.
SERVER_TIMEOUT = 10.0
#: The machines route, under a server's base URL.
MACHINES_ROUTE = "jupyter-remote-hw/api/machines"


class ServerRequestError(Exception):
    """A running server refused a request; the message is its answer."""


@dataclass(frozen=True)
class RunningServer:
    """A Jupyter server of this user, from its runtime file."""

    url: str
    token: str

    def _call(self, path: str, method: str, body: Any, timeout: float) -> Any:
        request = urllib.request.Request(
            self.url.rstrip("/") + "/" + path,
            method=method,
            data=json.dumps({} if body is None else body).encode() if method == "POST" else None,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            with exc:  # the error holds the answer's connection open until closed
                try:
                    message = json.loads(exc.read()).get("message") or str(exc)
                except ValueError:
                    message = str(exc)
            raise ServerRequestError(message) from None

    async def call(
        self, path: str, method: str = "GET", body: Any = None, timeout: float = SERVER_TIMEOUT
    ) -> Any:
        """``path`` (under the base URL) answered as JSON.

        Args:
            path: The route, under the server's base URL.
            method: ``GET`` or ``POST``.
            body: What a ``POST`` sends, as JSON (None: ``{}``).
            timeout: Seconds the server has to answer.

        Raises:
            ServerRequestError: The server answered with an error (its message).
            OSError: It did not answer.
        """
        return await asyncio.to_thread(self._call, path, method, body, timeout)


def running_servers() -> list[RunningServer]:
    """The Jupyter servers of this user that still run (their runtime files)."""
    return [
        RunningServer(info["url"], info.get("token", "")) for info in list_running_servers(log=log)
    ]


async def _ask(server: RunningServer) -> list[dict[str, Any]] | None:
    try:
        answer = await server.call(MACHINES_ROUTE)
    except (OSError, ServerRequestError, ValueError) as exc:
        log.debug("%s: no machines listing: %s", server.url, exc)
        return None
    machines = answer.get("machines") if isinstance(answer, dict) else None
    return machines if isinstance(machines, list) else None


def merge(listings: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Several servers' machines as one list: a machine once, each kernel once, as the
    server that runs it says it (the one that knows its notebook and execution state)."""
    machines: dict[str, dict[str, Any]] = {}
    for listing in listings:
        for machine in listing:
            known = machines.setdefault(machine["name"], {**machine, "kernels": []})
            if known["state"] in ("unknown", "idle") and machine["state"] not in (
                "unknown",
                "idle",
            ):
                known.update({**machine, "kernels": known["kernels"]})
            kernels = {k["id"]: k for k in known["kernels"]}
            for kernel in machine["kernels"]:
                seen = kernels.get(kernel["id"])
                if seen is None or (
                    seen["execution_state"] is None and kernel["execution_state"] is not None
                ):
                    kernels[kernel["id"]] = kernel
            known["kernels"] = list(kernels.values())
    return [machines[name] for name in sorted(machines)]


async def machine_models(
    manager: MachineManager,
    include_ended: bool = False,
) -> tuple[list[dict[str, Any]], list[RunningServer]]:
    """The machines as the panel shows them, and the servers that said so (none: the
    ledger's view)."""
    servers = running_servers()
    answers = await asyncio.gather(*(_ask(s) for s in servers))
    listings = [a for a in answers if a is not None]
    answering = [s for s, a in zip(servers, answers, strict=True) if a is not None]
    recorded = [r.target for r in manager.ledger.kernels()]
    view = MachineView(
        manager.known_targets(recorded),
        manager.ledger,
        run_by_others=kernels_run_by_others(manager.ledger.shares(include_revoked=True)),
    )
    models = merge(listings) if listings else view.models()
    if include_ended:
        live = {m["name"] for m in models}
        models += [
            m for m in view.models(include_ended=True) if m["name"] not in live and not m["actions"]
        ]
    return models, answering


def owned_target(manager: MachineManager, key: str) -> Target | None:
    """The local or SSH target called ``key``, unless a cloud machine has that name."""
    live = manager.ledger.find_machine(key)
    if live is not None and live.state not in FINAL_STATES:
        return None
    target = next((t for t in manager.targets() if t.name == key), None)
    return target if target is not None and target.provider in OWNED_PROVIDERS else None


def no_launch(target: Target) -> str:
    """Why ``launch`` does nothing for hardware the user has, and what to do."""
    return (
        f"{target.name} is {target.where} ({target.provider} provider): hardware you "
        "already have, nothing to launch. Pick its kernel "
        f'"{target.display_name}" in JupyterLab, or run '
        f"`jupyter remote-hw start {target.name}` while JupyterLab runs to connect now"
    )


def no_server(target: Target, action: str) -> str:
    """Why ``start``/``stop``/``terminate`` of owned hardware needs a running Jupyter
    server."""
    if action == "start":
        return (
            f"no Jupyter server is running to hold the link to {target.name} "
            f'({target.where}); start JupyterLab, then pick "{target.display_name}" as a '
            "notebook's kernel (or run this command again)"
        )
    return (
        f"nothing to {action} on {target.name}: no Jupyter server is running, so none "
        "of its kernels are a server's (a `%%remote` kernel ends with its notebook's "
        "kernel; kernels a stopped server left behind end after the agent's orphan grace)"
    )


def kernel_title(kernel: dict[str, Any]) -> str:
    """``analysis/train.ipynb · Python 3 (ipykernel)``, as the panel titles a kernel; a
    ``%%remote`` kernel ``analysis/train.ipynb · %%remote`` (its notebook's, where known)."""
    path = kernel.get("path")
    if str(kernel.get("owner", "")).startswith(MAGIC_OWNER):
        return (
            f"{path} · %%remote"
            if path
            else "%%remote · "
            + str(kernel.get("display_name") or kernel.get("kernel_name") or "kernel")
        )
    name = kernel.get("display_name") or kernel.get("kernel_name") or "kernel"
    return f"{path or 'no notebook'} · {name}"


def render_rows(models: list[dict[str, Any]], money: Any, duration: Any) -> list[list[str]]:
    """Table rows: each machine, then each of its kernels indented under it.

    Args:
        models: Machines as :class:`.MachineView` makes them.
        money: Formats dollars (or None) for people.
        duration: Formats seconds for people.
    """
    rows = []
    for m in models:
        uptime = m.get("uptime_seconds")
        rows.append(
            [
                m["name"],
                m["provider"],
                m["hardware"],
                m["state"],
                money(m["price_per_hour"]) + "/h" if m["price_per_hour"] is not None else "?",
                money(m["cost_so_far"]),
                duration(uptime) if uptime is not None else "-",
                m.get("resource_id") or "-",
            ]
        )
        for k in m["kernels"]:
            uptime = k.get("uptime_seconds")
            rows.append(
                [
                    f"└ {kernel_title(k)}",
                    "",
                    m["hardware"],
                    k["state"] + (" · others can run code" if k.get("run_by_others") else ""),
                    "",
                    money(k.get("cost_so_far")),
                    duration(uptime) if uptime is not None else "-",
                    k["id"],
                ]
            )
    return rows


#: The columns of :func:`render_rows`.
HEADERS = [
    "MACHINE / NOTEBOOK · KERNEL",
    "PROVIDER",
    "HARDWARE",
    "STATE",
    "$/H",
    "COST",
    "UPTIME",
    "INSTANCE / KERNEL ID",
]

__all__ = [
    "HEADERS",
    "RunningServer",
    "ServerRequestError",
    "kernel_title",
    "machine_models",
    "merge",
    "no_launch",
    "no_server",
    "owned_target",
    "render_rows",
    "running_servers",
]
