"""Optional pyzmq: the agent works without it, with less insight into kernels.

pyzmq comes with ipykernel, so it is normally present; when it is not, kernel
readiness is judged by TCP connections alone and execution state is "unknown".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zmq
    import zmq.asyncio

try:
    import zmq as _zmq
    import zmq.asyncio as _zmq_asyncio
except ImportError:  # pragma: no cover - exercised only on hosts without pyzmq
    _zmq = None  # type: ignore[assignment]
    _zmq_asyncio = None  # type: ignore[assignment]

zmq_module: Any = _zmq
"""The ``zmq`` module, or None when pyzmq is not importable."""


def new_context() -> zmq.asyncio.Context | None:
    """An asyncio zmq context, or None without pyzmq.

    Returns:
        A new context owned by the caller, who must ``destroy`` it.
    """
    if _zmq_asyncio is None:
        return None
    context: zmq.asyncio.Context = _zmq_asyncio.Context()
    return context
