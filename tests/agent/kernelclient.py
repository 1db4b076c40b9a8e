"""jupyter_client's BlockingKernelClient on the connection info the agent returns."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient


@contextlib.contextmanager
def kernel_client(connection: dict[str, Any]) -> Iterator[BlockingKernelClient]:
    """A started, ready client for the kernel; channels and context closed after."""
    kc = BlockingKernelClient()
    kc.load_connection_info(connection)  # type: ignore[arg-type]
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()
        kc.context.destroy(linger=0)


def execute(kc: BlockingKernelClient, code: str, **kwargs: Any) -> dict[str, Any]:
    """Run code, discarding its output; return the execute_reply content.

    A request that ipykernel aborted (it still drops requests queued behind a
    cell that failed, such as an interrupted one) is sent again.
    """
    for _ in range(10):
        reply = kc.execute_interactive(code, timeout=60, output_hook=lambda msg: None, **kwargs)
        content: dict[str, Any] = reply["content"]
        if content["status"] != "aborted":
            break
        time.sleep(0.1)
    return content


def evaluate(kc: BlockingKernelClient, expression: str) -> dict[str, Any]:
    """Evaluate an expression; return its user_expressions entry (status, data or ename)."""
    content = execute(kc, "", silent=True, user_expressions={"v": expression})
    value: dict[str, Any] = content["user_expressions"]["v"]
    return value


def value_of(kc: BlockingKernelClient, expression: str) -> str:
    result = evaluate(kc, expression)
    assert result["status"] == "ok", result
    text: str = result["data"]["text/plain"]
    return text


def shell_reply(kc: BlockingKernelClient, msg_id: str, timeout: float = 60) -> dict[str, Any]:
    """Wait for the shell reply to one request."""
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg


def wait_for_stream(kc: Any, msg_id: str, text: str, timeout: float) -> None:
    """Read IOPub until the cell ``msg_id`` has printed ``text``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "stream"
            and text in msg["content"]["text"]
        ):
            return
    raise AssertionError(f"the cell did not print {text!r} within {timeout} s")
