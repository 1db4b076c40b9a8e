"""A last line behind pytest-timeout: a test that is still running well past its timeout
ends its test process, naming itself and where every thread and task stood.

pytest-timeout's signal fails a test once; what the test's clean-up then waits for is
no longer timed, and one such wait held a whole CI run until its time ran out, saying
nothing. A parallel worker that ends this way is reported by pytest-xdist as a failure
of that test, and a new worker runs the tests it had left.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import io
import os
import sys
import threading
from collections.abc import Generator
from typing import Any

import pytest

#: Seconds a test may run past its own timeout (pytest-timeout's) before its process ends.
GRACE = float(os.environ.get("JRHW_WATCHDOG_GRACE", "90"))


def _timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    if marker is not None and "timeout" in marker.kwargs:
        return float(marker.kwargs["timeout"])
    return float(item.config.getini("timeout") or 0)


def _tasks_text() -> str:
    """Where each asyncio task of each running loop stood (best effort, from a thread)."""
    out = io.StringIO()
    try:
        tasks = list(asyncio.tasks._all_tasks)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 (a diagnosis must never fail)
        return ""
    for task in tasks:
        try:
            if not task.done():
                task.print_stack(limit=12, file=out)
        except Exception as error:  # noqa: BLE001 (a diagnosis must never fail)
            out.write(f"(task {task!r}: {error!r})\n")
    return out.getvalue()


def _end(item: pytest.Item, limit: float) -> None:
    capman = item.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with contextlib.suppress(Exception):  # the process ends below either way
            capman.suspend_global_capture(in_=True)
    sys.stderr.write(
        f"\n\n*** watchdog: {item.nodeid} still running {limit:.0f} s after it began "
        "(its timeout and a grace); ending this test process. Threads:\n"
    )
    sys.stderr.flush()
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.write("*** asyncio tasks:\n" + _tasks_text() + "*** end of watchdog report\n")
    sys.stderr.flush()
    os._exit(70)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[Any]:
    """Time the test's set-up, call and tear-down together, as pytest-timeout does."""
    timeout = _timeout(item)
    timer = None
    if timeout > 0:
        limit = timeout + GRACE
        timer = threading.Timer(limit, _end, args=(item, limit))
        timer.daemon = True
        timer.name = "jrhw-watchdog"
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
