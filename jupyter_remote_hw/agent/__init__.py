"""Host agent: runs on the machine that hosts kernels, next to them.

The agent is a small asyncio daemon that listens on a unix socket in its state
directory and speaks newline-delimited JSON (see :mod:`.protocol`). It starts,
restarts, interrupts and shuts down ipykernel processes bound to 127.0.0.1,
tracks their busy/idle state from IOPub, reports the host's hardware and its
live use (CPU, memory, GPUs) and which modules its Python can import, and
stops the host when it is idle or its client is gone (:mod:`.lifetime`).

It depends only on the Python standard library, plus pyzmq when present (for
activity tracking and kernel readiness checks), and it imports nothing from the
rest of ``jupyter_remote_hw``, so that this package alone can be shipped to a
host as a zipapp. Run it with ``python -m jupyter_remote_hw.agent serve``.
"""

from __future__ import annotations

AGENT_VERSION = "0.8.0"
"""Version of the agent and of its wire protocol; the local side compares it."""

__all__ = ["AGENT_VERSION"]
