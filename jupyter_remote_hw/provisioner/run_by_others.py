"""Whether someone else can run code in a kernel, or could at any time in its life.

The host's agent marks a kernel from the moment a share that runs code is added
(``agent/shares.py``) until that kernel ends on the host; hibernating ends it there,
and a wake starts a new one, on the same host or another. So the provisioner keeps
the mark too, for the kernel's whole life under its id: set the first time the host
says so (or at a hibernation, when the host cannot say), kept in the ledger with the
kernel (``get_provisioner_info``), across hibernation, waking, moving and server
restarts. What comes from a marked kernel is rebuilt only by the restricted loader
(see :mod:`..transfer.restricted`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..agent_client import AgentError, AgentUnavailableError
from ..transfer.kernel_side.restricted import SharedKernelPulls, restriction
from ..transport import TransportError
from .kernel_context import KernelContext


class RunByOthers:
    """The mark of one provisioner's kernel.

    Args:
        provisioner: The provisioner whose kernel it is.
    """

    def __init__(self, provisioner: KernelContext) -> None:
        self.p = provisioner
        #: Whether someone else could run code in the kernel at some time in its life.
        self.marked = False

    async def ask(self, unknown_marks: bool = False) -> bool:
        """Whether someone else can run code in the kernel, or could since it started.

        True when it is marked; else the host's agent says. When the host cannot
        say (no kernel runs there, unreachable, an error) the answer is True, and
        with ``unknown_marks`` (a hibernation, after which no host can say) the
        kernel is marked for good.
        """
        p = self.p
        if self.marked:
            return True
        if p.run.host_connection is None:
            return True
        try:
            async with asyncio.timeout(p.poll_timeout):
                status = await p.agent_call("kernel_status", wait=None)
        except (AgentError, AgentUnavailableError, TimeoutError, TransportError) as exc:
            p.log.warning(
                "kernel %s: cannot learn from its host whether others can run "
                "code in it (%s); taken to be so",
                p.kernel_id,
                exc,
            )
            self.marked = self.marked or unknown_marks
            return True
        if status.get("others_can_run_code") is not False:
            if not self.marked:
                p.log.info("kernel %s: someone else can run code in it (marked)", p.kernel_id)
            self.marked = True
        return self.marked

    def restriction(self) -> dict[str, Any] | None:
        """How a wake has the new kernel rebuild the saved variables: with the restricted
        loader when the kernel is marked (the owner's ``c.SharedKernelPulls.allowed_types``
        allowed besides), else None (plain pickle: the state is the owner's own)."""
        if not self.marked:
            return None
        return restriction(
            f"{self.p.named} as it was saved (someone else could run code in it)",
            SharedKernelPulls(parent=self.p).allowed_types,
        )
