"""A server started without a terminal stops on SIGINT as it does on SIGTERM.

jupyter_server handles SIGINT only when its standard input is a terminal (it asks
for confirmation). Without one (a service, a container, a process manager that stops
it with SIGINT), the signal raises ``KeyboardInterrupt`` wherever the event loop
happens to be, and the server exits without its cleanup: kernels on remote hardware
stay running, and billing, with nobody connected. Here the first SIGINT asks the
server to stop as SIGTERM does (kernels shut down, machines released by their idle
rules); a second one interrupts as Python would. A process that was started with
SIGINT ignored (a script's background job) keeps ignoring it.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

Restore = Callable[[], None]


def stop_on_interrupt(serverapp: Any, log: logging.Logger) -> Restore:
    """Make SIGINT stop ``serverapp`` cleanly where jupyter_server left it to Python.

    Nothing changes where standard input is a terminal, where another SIGINT handler
    is installed, or outside the main thread.

    Returns:
        A function that puts the previous handler back (at the extension's stop).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if sys.stdin is not None and sys.stdin.isatty():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return lambda: None

    def interrupted(signum: int, frame: FrameType | None) -> None:
        # A second SIGINT while the server stops interrupts it as Python would.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        log.info(
            "jupyter_remote_hw: interrupted (SIGINT) without a terminal: stopping the "
            "server and shutting its kernels down, as on SIGTERM; interrupt again to quit now"
        )
        serverapp.stop(from_signal=True)

    signal.signal(signal.SIGINT, interrupted)

    def restore() -> None:
        if signal.getsignal(signal.SIGINT) is interrupted:
            signal.signal(signal.SIGINT, previous)

    return restore


__all__ = ["stop_on_interrupt"]
