"""Which failures are the user's to fix, and how the server's log shows them: a user error
is one WARNING line, once; a bug keeps its ERROR and traceback."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from jupyter_remote_hw.ledger.budget import BudgetExceededError
from jupyter_remote_hw.providers.aws.errors import AWSError
from jupyter_remote_hw.providers.launch_steps import LaunchError, LaunchSteps
from jupyter_remote_hw.provisioner.errors import KernelLaunchError, MachineEndedError
from jupyter_remote_hw.server.user_errors import commands_in, install_filter, is_expected
from jupyter_remote_hw.transport import HostUnreachableError


@pytest.fixture
def log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing ``[LEVEL] message`` lines (and tracebacks) to a string, filtered."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger = logging.getLogger("test_user_errors")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    install_filter(logger)
    install_filter(logger)  # once is enough
    assert len(handler.filters) == 2  # ExpectedErrorFilter and LongURIFilter
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 (any exception, as logged with it)
        return caught


def test_commands_are_the_quoted_ones_each_once() -> None:
    assert commands_in(
        "trust it with `jupyter remote-hw trust gpu`, or `ssh gpu`",
        "then `ssh gpu` again; check that `ssh <host>` works",
        None,
    ) == ["jupyter remote-hw trust gpu", "ssh gpu"]


def test_a_user_error_is_one_warning_line_once_and_a_bug_keeps_its_traceback(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = log
    over = raised(BudgetExceededError("budget: $98/h is above\nthe limit", 98.0, 10.0, 0.0))
    logger.error("start failed", exc_info=over)
    logger.error(over, exc_info=over)  # jupyter_client logs the same failure twice
    logger.error("x", exc_info=raised(AWSError("AWS: no credentials", kind="credentials")))
    logger.error("502 POST /api/kernels (u@127.0.0.1) 3.00ms referer=None")
    logger.error("500 POST /api/kernels (u@127.0.0.1) 3.00ms referer=None")
    logger.exception("a bug", exc_info=raised(KeyError("nobody expected this")))
    lines = out.getvalue().splitlines()
    assert lines[:5] == [
        "[WARNING] start failed: budget: $98/h is above the limit",
        "[WARNING] x: AWS: no credentials",
        "[WARNING] 502 POST /api/kernels (u@127.0.0.1) 3.00ms referer=None",
        "[ERROR] 500 POST /api/kernels (u@127.0.0.1) 3.00ms referer=None",
        "[ERROR] a bug",
    ]
    assert lines[5] == "Traceback (most recent call last):"
    assert out.getvalue().count("Traceback") == 1


def test_a_failed_launch_step_is_logged_by_its_steps_alone(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = log
    steps = LaunchSteps("ssh-gone", "k1", logger)
    with pytest.raises(LaunchError) as caught, steps.step("connect"):
        raise HostUnreachableError("gone", "cannot reach gone (10.0.0.9:22): refused")
    assert is_expected(caught.value)
    logger.error(caught.value, exc_info=caught.value)  # as jupyter_client; said already
    lines = [line for line in out.getvalue().splitlines() if "cannot reach" in line]
    assert lines == [
        (
            f"[WARNING] launch on ssh-gone: connect failed in "
            f"{steps.records[0].seconds:.2f} s: cannot reach gone (10.0.0.9:22): "
            "refused"
        )
    ]
    assert "Traceback" not in out.getvalue()


def test_a_restart_refused_after_the_machine_ended_is_one_line(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    # A SLURM job that reached its time limit: jupyter_client's restarter tries to
    # restart the dead kernel, which is refused; it and tornado log the failure with a
    # traceback each, which the steps' one line already said.
    logger, out = log
    steps = LaunchSteps("slurm-hpc-gpu-a100", "k1", logger)
    with pytest.raises(LaunchError) as caught, steps.step("restart kernel"):
        raise MachineEndedError("SLURM job 64 ended: TIMEOUT (it reached its time limit)")
    failure = raised(KernelLaunchError(caught.value))
    assert is_expected(failure)
    logger.error("Exception in callback restarter.poll", exc_info=failure)
    logger.error(failure, exc_info=failure)
    assert "Traceback" not in out.getvalue()
    assert [line for line in out.getvalue().splitlines() if "TIMEOUT" in line] == [
        (
            f"[WARNING] launch on slurm-hpc-gpu-a100: restart kernel failed in "
            f"{steps.records[0].seconds:.2f} s: SLURM job 64 ended: TIMEOUT (it reached "
            "its time limit)"
        )
    ]


def test_an_access_line_quotes_a_huge_uri_cut_short() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("test_user_errors_uri")
    logger.propagate = False
    logger.addHandler(handler)
    install_filter(logger)
    try:
        logger.warning("%d %s %s (%s) %.2fms", 400, "GET", "/x/" + "a" * 60_000, "u@1", 0.5)
        logger.warning("%d %s %s (%s) %.2fms", 200, "GET", "/short", "u@1", 0.5)
    finally:
        logger.removeHandler(handler)
    first, second = out.getvalue().splitlines()
    assert first.startswith("400 GET /x/aaa") and "… (60003 characters) (u@1) 0.50ms" in first
    assert len(first) < 300
    assert second == "200 GET /short (u@1) 0.50ms"
