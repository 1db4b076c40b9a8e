"""Follow a kernel's execution state (busy/idle) from the status messages on its IOPub."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from .connection import channel_url
from .messaging import AGENT_SESSION, Message, Signer, parse
from .zmqcompat import zmq_module

if TYPE_CHECKING:
    import zmq.asyncio

log = logging.getLogger(__name__)

STARTING = "starting"
IDLE = "idle"
BUSY = "busy"
DEAD = "dead"
UNKNOWN = "unknown"

# ipykernel publishes status as "kernel.<ident>.status"; other kernels may use "status".
# Subscribing to these prefixes keeps stream output off this socket (PUB filters).
_TOPICS = (b"kernel.", b"status")

# Stands for a request a re-adopted kernel was already running when the agent came.
_EARLIER_REQUEST = "<running before the agent watched>"


class ActivityTracker:
    """Execution state and last activity of one kernel, kept from its IOPub.

    The kernel is busy while any request it has announced as busy (by parent
    message id) has not yet been announced idle, so a control-channel request
    answered during a long-running cell does not make the kernel look idle.
    Status caused by the agent's own readiness probes is not activity and is
    ignored. ``last_activity`` is the time of the last busy/idle change (or of
    the last start or exit).

    Args:
        kernel_id: For log messages.
        connection: The kernel's connection dict (ip, iopub_port, key, scheme).
        context: A zmq asyncio context, or None when pyzmq is unavailable, in
            which case the state stays ``unknown``.
        initial_state: State until the first status message arrives.
    """

    def __init__(
        self,
        kernel_id: str,
        connection: dict[str, Any],
        context: zmq.asyncio.Context | None,
        initial_state: str = STARTING,
    ) -> None:
        self.kernel_id = kernel_id
        self._connection = connection
        self._context = context
        self._busy_parents: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._bad_signatures = 0
        self._ready = False
        self.execution_state = initial_state if context is not None else UNKNOWN
        self.last_activity = time.time()

    def start(self) -> None:
        """Start following IOPub in a background task (no-op without pyzmq)."""
        if self._context is not None and self._task is None:
            self._task = asyncio.ensure_future(self._follow())

    async def close(self) -> None:
        """Stop following IOPub."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    def reset(self, state: str = STARTING) -> None:
        """Forget busy requests, e.g. because the kernel process was replaced.

        Args:
            state: The new state (kept ``unknown`` without pyzmq).
        """
        self._busy_parents.clear()
        self._ready = False
        if self._context is not None:
            self.execution_state = state
        self.last_activity = time.time()

    def mark_ready(self) -> None:
        """Record that the kernel answered a shell request: idle unless a status said otherwise."""
        self._ready = True
        self._busy_parents.discard(_EARLIER_REQUEST)
        if (
            self._context is not None
            and self.execution_state in (STARTING, UNKNOWN, BUSY)
            and not self._busy_parents
        ):
            self.execution_state = IDLE

    def mark_running(self) -> None:
        """Record that the kernel's shell is running a request the agent never saw start.

        A re-adopted kernel whose shell does not answer at once is running a
        cell; it stays busy until :meth:`mark_ready`, whatever other requests
        (on its control channel, say) report meanwhile.
        """
        if self._context is not None:
            self._busy_parents.add(_EARLIER_REQUEST)
            self.execution_state = BUSY
            self.last_activity = time.time()

    def observe(self, message: Message) -> None:
        """Update the state from one IOPub message (non-status messages are ignored).

        Args:
            message: A decoded, verified IOPub message.
        """
        if message.msg_type != "status":
            return
        if message.parent_header.get("session") == AGENT_SESSION:
            return  # caused by the agent's own readiness probe, not by a user
        state = message.content.get("execution_state")
        parent_id = message.parent_header.get("msg_id")
        parent = parent_id if isinstance(parent_id, str) else ""
        if state == STARTING:
            if self._ready:
                return  # announced at startup but read after the kernel answered
            self._busy_parents.clear()
            self.execution_state = STARTING
        elif state == BUSY:
            self._busy_parents.add(parent)
            self.execution_state = BUSY
        elif state == IDLE:
            if parent:
                self._busy_parents.discard(parent)
            else:
                self._busy_parents.clear()
            self.execution_state = BUSY if self._busy_parents else IDLE
        else:
            return
        self.last_activity = time.time()

    async def _follow(self) -> None:
        """Receive IOPub messages until cancelled."""
        assert self._context is not None
        zmq = zmq_module
        info = self._connection
        try:
            signer: Signer | None = Signer(
                str(info["key"]).encode(), str(info.get("signature_scheme", "hmac-sha256"))
            )
        except ValueError as exc:
            log.warning("kernel %s: not verifying IOPub signatures: %s", self.kernel_id, exc)
            signer = None
        sock = self._context.socket(zmq.SUB)
        try:
            sock.setsockopt(zmq.LINGER, 0)
            for topic in _TOPICS:
                sock.setsockopt(zmq.SUBSCRIBE, topic)
            sock.connect(channel_url(info, "iopub_port"))
            while True:
                frames = await sock.recv_multipart()
                message = parse(frames, signer)
                if message is None:
                    self._bad_signatures += 1
                    if self._bad_signatures in (1, 100, 10000):
                        log.warning(
                            "kernel %s: dropped %d IOPub message(s) that were malformed "
                            "or wrongly signed",
                            self.kernel_id,
                            self._bad_signatures,
                        )
                    continue
                self.observe(message)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kernel %s: stopped following IOPub", self.kernel_id)
            self.execution_state = UNKNOWN
        finally:
            sock.close(linger=0)
