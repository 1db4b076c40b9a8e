"""The jupyter_kernel_test suite, through ``KernelManager`` + ``BlockingKernelClient``.

Hardware kernels (the local target and an SSH host) must pass it as the stock
``python3`` kernel does; the stock kernel runs it here too, with the same
samples, as the baseline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

import jupyter_kernel_test as jkt
import pytest
from jupyter_client.manager import KernelManager, start_new_kernel

from ..testhosts import SSHTestHost
from .clients import LOCAL_KERNEL, SSH_KERNEL, client_env


class IPythonSamples(jkt.KernelTests):
    """The samples of jupyter_kernel_test's own example for ipykernel: every test runs."""

    __test__ = False  # collected through the classes below
    kernel_name = "python3"
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    completion_samples: ClassVar[list[dict[str, Any]]] = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples: ClassVar[list[str]] = [
        "1",
        "print('hello, world')",
        "def f(x):\n  return x*2\n\n\n",
    ]
    incomplete_code_samples: ClassVar[list[str]] = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples: ClassVar[list[str]] = ["import = 7q"]
    code_page_something = "zip?"
    code_generate_error = "raise"
    code_execute_result: ClassVar[list[dict[str, str]]] = [
        {"code": "1+2+3", "result": "6"},
        {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"},
    ]
    code_display_data: ClassVar[list[dict[str, str]]] = [
        {
            "code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))",
            "mime": "text/html",
        },
        {
            "code": "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))",
            "mime": "text/latex",
        },
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"

    # The kernel is started by the class fixture below, in the test's environment.
    @classmethod
    def setUpClass(cls) -> None:
        pass

    @classmethod
    def tearDownClass(cls) -> None:
        pass


def _started(cls: Any) -> Iterator[None]:
    """Start the class's kernel; with its channels open, unless the class tests what a
    client that connects later sees (``connect_channels = False``)."""
    if getattr(cls, "connect_channels", True):
        cls.km, cls.kc = start_new_kernel(kernel_name=cls.kernel_name, startup_timeout=90)
    else:
        cls.km = KernelManager(kernel_name=cls.kernel_name)
        cls.km.start_kernel()
        cls.kc = cls.km.client()
    try:
        yield
    finally:
        _heartbeat_running(cls.kc)
        cls.kc.stop_channels()
        cls.km.shutdown_kernel()


def _heartbeat_running(kc: Any, timeout: float = 10.0) -> None:
    """Wait until the client's heartbeat thread, once started, runs its loop.

    jupyter_client's heartbeat thread, stopped before its loop began, runs it anyway
    with its exit already signalled, opening a new socket each turn until the process
    has no file descriptors left (CI: "Too many open files" in the next test).
    """
    hb = getattr(kc, "_hb_channel", None)  # the property would make one
    deadline = time.monotonic() + timeout
    while hb is not None and hb.is_alive() and not hb._running and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.fixture(scope="class")
def stock_kernel(request: pytest.FixtureRequest) -> Iterator[None]:
    """The stock ``python3`` kernel for the class."""
    yield from _started(request.cls)


@pytest.fixture(scope="class")
def hardware_kernel(request: pytest.FixtureRequest, ssh_host: SSHTestHost) -> Iterator[None]:
    """The class's hardware kernelspec, started from its installed kernel.json; afterwards
    its kernel must be gone from the host."""
    with client_env(ssh_host) as setup:
        yield from _started(request.cls)
        assert setup.kernels() == []


@pytest.mark.usefixtures("stock_kernel")
class TestStockPython(IPythonSamples):
    """Baseline: what the stock kernel passes."""

    __test__ = True


@pytest.mark.usefixtures("hardware_kernel")
class TestLocalTarget(IPythonSamples):
    """A kernel on this machine, through its agent."""

    __test__ = True

    kernel_name = LOCAL_KERNEL


@pytest.mark.usefixtures("hardware_kernel")
class TestSSHTarget(IPythonSamples):
    """A kernel on an SSH host, its channels forwarded over SSH."""

    __test__ = True

    kernel_name = SSH_KERNEL


class IopubWelcome(jkt.IopubWelcomeTests):
    """A client subscribing to IOPub is welcomed (ipykernel's XPUB socket, JEP 65)."""

    __test__ = False
    support_iopub_welcome = True
    connect_channels = False  # the welcome is for a client that subscribes after the start

    @classmethod
    def setUpClass(cls) -> None:
        pass

    @classmethod
    def tearDownClass(cls) -> None:
        pass


@pytest.mark.usefixtures("stock_kernel")
class TestStockPythonWelcome(IopubWelcome):
    """Baseline."""

    __test__ = True


@pytest.mark.usefixtures("hardware_kernel")
class TestLocalTargetWelcome(IopubWelcome):
    """On this machine."""

    __test__ = True
    kernel_name = LOCAL_KERNEL


@pytest.mark.usefixtures("hardware_kernel")
class TestSSHTargetWelcome(IopubWelcome):
    """On an SSH host."""

    __test__ = True
    kernel_name = SSH_KERNEL
