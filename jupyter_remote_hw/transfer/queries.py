"""Requests to a kernel that answers transfer requests, other than moving variables:
whether it answers, its variables and modules, and importing modules in it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .kernel_link import KernelLink
from .kernel_side import protocol
from .kernel_side.errors import NoTransferHandlerError, RefusedVariableError, TransferError

if TYPE_CHECKING:
    from .kernel_side.devices import Placement


def _check(reply: dict[str, Any], action: str) -> dict[str, Any]:
    content: dict[str, Any] = reply["content"]
    if content.get("status") != "ok":
        kind = (
            RefusedVariableError
            if content.get("ename") == "RefusedVariableError"
            else TransferError
        )
        raise kind(f"{action}: {content.get('evalue', 'failed')}", content.get("name"))
    return content


class KernelQueries:
    """What one kernel is asked about its namespace, over its shell channel.

    Args:
        link: The kernel's link.
        where: How to name the kernel in messages ("gpu-box", "this kernel").
    """

    def __init__(self, link: KernelLink, where: str) -> None:
        self.link = link
        self.where = where
        self.restricted: dict[str, Any] | None = None
        """Set (see :func:`.restricted.restriction`) when what this kernel is sent comes from
        a kernel that someone else can run code in: it is then rebuilt here by the
        restricted loader, never by plain pickle."""
        self._hello: dict[str, Any] | None = None  # the kernel's last answer to hello

    async def _rebuilding(self) -> dict[str, Any]:
        """What a request that has the kernel rebuild variables adds: ``restricted``, once
        the kernel said it has the restricted loader.

        Asks only when this client has not had its answer yet (a transfer makes sure the
        kernel answers first, see ``variables.answering``).

        Raises:
            TransferError: It has not (an older version there); nothing was sent.
        """
        if self.restricted is None:
            return {}
        hello = self._hello if self._hello is not None else await self.hello()
        if not hello.get("restricted"):
            raise TransferError(
                f"the kernel on {self.where} cannot rebuild variables from a kernel that "
                "someone else can run code in without running their code (its "
                "jupyter-remote-hw is older): nothing was sent. Restart it, then try again."
            )
        return {"restricted": self.restricted}

    async def _request(
        self, content: dict[str, Any], buffers: list[Any] | None = None, action: str = "transfer"
    ) -> tuple[dict[str, Any], list[Any]]:
        reply = await self.link.request(protocol.REQUEST, content, buffers)
        return _check(reply, action), list(reply.get("buffers") or [])

    async def hello(self, timeout: float = 10.0) -> dict[str, Any]:
        """The kernel's protocol version and Python.

        Raises:
            NoTransferHandlerError: The kernel ignored the request: it does not
                answer transfer requests (known as soon as it is idle again).
            TransferError: No answer within ``timeout`` seconds.
        """
        try:
            async with asyncio.timeout(timeout):
                reply = await self.link.request_or_ignored(protocol.REQUEST, {"op": "hello"})
        except TimeoutError:
            raise TransferError(
                f"the kernel on {self.where} did not answer within {timeout:g} s: it may be "
                "busy running a cell, or its connection is down"
            ) from None
        if reply is None:
            raise NoTransferHandlerError(
                f"the kernel on {self.where} does not answer transfer requests; run "
                "%load_ext jupyter_remote_hw in it"
            )
        self._hello = _check(reply, "hello")
        return self._hello

    async def variables(self) -> list[dict[str, Any]]:
        """The kernel's variables: name, type, nbytes."""
        content, _ = await self._request({"op": "list"}, action="list variables")
        return list(content["variables"])

    async def namespace(self, check: bool = False) -> dict[str, Any]:
        """The kernel's ``variables``, ``modules``, open ``comms``, running ``ranks`` and
        the ranks' variables a hibernation saved, ``ranks_saved`` (see the ``list`` op);
        with ``check``, whether each variable can be carried, and why not."""
        content, _ = await self._request({"op": "list", "check": check}, action="list variables")
        return {
            "variables": list(content["variables"]),
            "modules": list(content.get("modules") or []),
            "comms": list(content.get("comms") or []),
            "ranks": list(content.get("ranks") or []),
            "ranks_saved": content.get("ranks_saved"),
        }

    async def import_modules(self, modules: list[dict[str, str]]) -> dict[str, Any]:
        """Import modules in the kernel, each bound to its name (``{"name", "module"}``).

        Returns:
            ``imported`` and ``failed`` (each failure with its ``reason``).
        """
        if not modules:
            return {"imported": [], "failed": []}
        reply = await self.link.request(protocol.REQUEST, {"op": "import", "modules": modules})
        content: dict[str, Any] = reply["content"]
        if content.get("status") != "ok":  # a kernel of an older version
            reason = str(content.get("evalue") or "the kernel cannot import modules on request")
            return {"imported": [], "failed": [{**module, "reason": reason} for module in modules]}
        return {"imported": list(content["imported"]), "failed": list(content["failed"])}

    async def save_ranks(self) -> dict[str, Any]:
        """Have the kernel gather every ``%%ranks`` engine's variables into one hidden
        variable of its own, for a hibernation to save with the rest (see
        :func:`.kernel_side.ranks.magic.save_ranks`): its ``name``, the ``ranks``,
        ``variables`` and ``nbytes`` gathered, and what was ``left_out``.

        Raises:
            TransferError: A rank did not answer or has ended; nothing was gathered.
        """
        content, _ = await self._request({"op": "ranks_save"}, action="saving the ranks")
        return content

    async def unsave_ranks(self) -> None:
        """Drop what :meth:`save_ranks` gathered (the kernel is as it was before)."""
        await self._request({"op": "ranks_unsave"}, action="dropping the ranks' saved state")

    async def store(
        self, names: list[str], path: str, max_bytes: int = 0, min_free: int = 0
    ) -> dict[str, Any]:
        """Have the kernel write the named variables into ``path`` on its host (see
        :func:`.state_files.write_state`): ``path`` as the host reads it, the
        ``variables`` written and ``total_bytes``.

        Raises:
            TransferError: A variable cannot be pickled there (its ``name`` set), or
                the host's disk has no room, or writing failed; nothing was written.
        """
        content, _ = await self._request(
            {
                "op": "store",
                "names": names,
                "path": path,
                "max_bytes": max_bytes,
                "min_free": min_free,
            },
            action=f"saving on {self.where}",
        )
        return content

    async def load(
        self, path: str, variables: list[dict[str, Any]], device: Placement = None
    ) -> list[dict[str, Any]]:
        """Have the kernel read variables written by :meth:`store` and assign them all, or
        none; ``{"name", "type"}`` of each assigned (``device``: as for a push).

        Raises:
            TransferError: A file cannot be read or does not match, or a variable
                cannot be rebuilt there; nothing was assigned.
        """
        content, _ = await self._request(
            {
                "op": "load",
                "path": path,
                "variables": variables,
                "device": device,
                **await self._rebuilding(),
            },
            action=f"reading saved state on {self.where}",
        )
        return list(content["assigned"])

    async def unstore(self, path: str, keep: bool = False) -> str | None:
        """Have the kernel remove what :meth:`store` wrote into ``path`` (``keep``: keep it
        as the base of the next save, whose unchanged variables it links); the path, or
        None when nothing was there."""
        content, _ = await self._request(
            {"op": "unstore", "path": path, "keep": keep},
            action=f"removing saved state on {self.where}",
        )
        removed = content.get("removed")
        return str(removed) if removed else None


__all__ = ["KernelQueries"]
