"""Launch steps are timed, reported to listeners, and a failure names its step and a fix."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import pytest

from jupyter_remote_hw.agent_client import AgentError, AgentUnavailableError
from jupyter_remote_hw.providers import Target, UnknownHardwareError
from jupyter_remote_hw.providers.launch_steps import (
    STEP_HINTS,
    LaunchError,
    LaunchListener,
    LaunchSteps,
    StepRecord,
)
from jupyter_remote_hw.transport import (
    AuthenticationError,
    CommandTimeoutError,
    HostKeyError,
    HostUnreachableError,
)

LOG = logging.getLogger("tests.launch_steps")
SETTING = "c.RemoteHWProvisioner.launch_timeout"


class Recorder:
    """A launch listener that keeps every event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def states(self) -> list[tuple[str, str]]:
        """``(step, state)`` of each event, in order."""
        return [(e["step"], e["state"]) for e in self.events]


def make_steps(*listeners: LaunchListener) -> LaunchSteps:
    """Steps of a launch of kernel ``k-1`` on ``ssh-gpu-a``."""
    return LaunchSteps("ssh-gpu-a", "k-1", LOG, list(listeners))


def fail_in(steps: LaunchSteps, step: str, exc: BaseException) -> LaunchError:
    """Raise ``exc`` inside ``step`` and return the LaunchError it becomes."""
    with pytest.raises(LaunchError) as err, steps.step(step):
        raise exc
    return err.value


def test_steps_record_name_ok_and_seconds_in_order() -> None:
    steps = make_steps()
    with steps.step("connect"):
        pass
    with steps.step("prepare host"):
        time.sleep(0.05)
    with pytest.raises(LaunchError), steps.step("start kernel"):
        raise RuntimeError("boom")
    assert [(r.name, r.ok) for r in steps.records] == [
        ("connect", True),
        ("prepare host", True),
        ("start kernel", False),
    ]
    assert all(isinstance(r, StepRecord) and r.seconds >= 0 for r in steps.records)
    assert steps.records[1].seconds >= 0.05
    assert steps.elapsed >= sum(r.seconds for r in steps.records)
    assert re.fullmatch(
        r"connect \d+\.\d\d s · prepare host 0\.\d\d s · start kernel \d+\.\d\d s",
        steps.summary(),
    )


def test_listeners_get_every_event_with_kernel_and_target() -> None:
    first, second = Recorder(), Recorder()
    steps = make_steps(first, second)
    with steps.step("connect"):
        pass
    with pytest.raises(LaunchError), steps.step("prepare host"):
        steps.note("uploading the agent")
        raise RuntimeError("no space left")
    expected = [
        ("connect", "started"),
        ("connect", "done"),
        ("prepare host", "started"),
        ("prepare host", "progress"),
        ("prepare host", "failed"),
    ]
    assert first.states() == expected
    assert second.events == first.events
    for event in first.events:
        assert event["kernel_id"] == "k-1"
        assert event["target"] == "ssh-gpu-a"
        assert set(event) == {"kernel_id", "target", "step", "state", "seconds", "detail"}
    started, done, _, progress, failed = first.events
    assert started["seconds"] is None and progress["seconds"] is None
    assert isinstance(done["seconds"], float) and isinstance(failed["seconds"], float)
    assert progress["detail"] == "uploading the agent"
    assert failed["detail"] == "no space left"
    assert done["detail"] == ""


def test_note_before_any_step_has_no_step_name() -> None:
    recorder = Recorder()
    make_steps(recorder).note("looking around")
    assert recorder.events[0]["step"] == ""
    assert recorder.events[0]["state"] == "progress"
    assert recorder.events[0]["detail"] == "looking around"


def test_listener_given_at_construction_is_copied() -> None:
    listeners: list[LaunchListener] = []
    steps = LaunchSteps("local", "k-2", LOG, listeners)
    late = Recorder()
    listeners.append(late)
    with steps.step("connect"):
        pass
    assert late.events == []
    assert LaunchSteps("local", "k-3", LOG).listeners == []


def test_failing_step_names_step_elapsed_and_hint() -> None:
    steps = make_steps()
    error = fail_in(steps, "start kernel", RuntimeError("kernel died on start."))
    assert error.step == "start kernel"
    assert error.where == "ssh-gpu-a"
    assert error.reason == "kernel died on start"
    assert error.hint == STEP_HINTS["start kernel"]
    assert error.status == 500
    assert error.elapsed <= steps.elapsed
    assert str(error) == (
        f"Launching a kernel on ssh-gpu-a failed at step 'start kernel' after "
        f"{error.elapsed:.1f} s: kernel died on start. {STEP_HINTS['start kernel']}"
    )
    assert isinstance(error.__cause__, RuntimeError)


def test_once_its_target_is_known_a_failure_names_its_hardware_and_place() -> None:
    events: list[dict[str, Any]] = []
    steps = make_steps(events.append)
    steps.for_target(
        Target(name="ssh-gpu-a", provider="ssh", where="gpu-a", hardware="A10G 24 GiB")
    )
    error = fail_in(steps, "connect", RuntimeError("no route"))
    assert error.where == "A10G 24 GiB · gpu-a"
    assert str(error).startswith("Launching a kernel on A10G 24 GiB · gpu-a failed at step")
    # Its events still name the target: the notebook's toolbar follows them by it.
    assert {event["target"] for event in events} == {"ssh-gpu-a"}


def test_elapsed_counts_from_the_start_of_the_launch() -> None:
    steps = make_steps()
    with steps.step("connect"):
        time.sleep(0.15)
    error = fail_in(steps, "prepare host", RuntimeError("x"))
    assert error.elapsed >= 0.15
    assert f"after {error.elapsed:.1f} s" in str(error)
    assert "after 0.0 s" not in str(error)


def test_host_unreachable_is_502_with_the_step_hint() -> None:
    exc = HostUnreachableError("gpu-a", "cannot reach gpu-a (10.0.0.1:22): Connection refused")
    error = fail_in(make_steps(), "connect", exc)
    assert error.status == 502
    assert "failed at step 'connect'" in str(error)
    assert "cannot reach gpu-a (10.0.0.1:22): Connection refused" in str(error)
    # The hint names the host, so that its command can be pasted as it is.
    assert str(error).endswith(STEP_HINTS["connect"].replace("<host>", "gpu-a"))
    assert error.hint == "Check that `ssh gpu-a` works from the Jupyter server's machine."
    assert error.__cause__ is exc


def test_timeout_is_504_with_the_step_hint() -> None:
    error = fail_in(make_steps(), "prepare host", TimeoutError("no answer in 30 s"))
    assert error.status == 504
    assert error.hint == STEP_HINTS["prepare host"]
    assert "no answer in 30 s" in str(error)
    command = CommandTimeoutError("gpu-a", "`python3 -V` did not finish in 60 s")
    assert fail_in(make_steps(), "prepare host", command).status == 504


async def test_asyncio_timeout_inside_a_step_is_504() -> None:
    steps = make_steps()
    with pytest.raises(LaunchError) as err, steps.step("start kernel"):
        await asyncio.wait_for(asyncio.sleep(10), timeout=0.01)
    assert err.value.status == 504
    assert err.value.step == "start kernel"


def test_unknown_hardware_is_404_without_a_hint() -> None:
    exc = UnknownHardwareError("ssh-nowhere", ["local", "ssh-gpu-a"])
    error = fail_in(make_steps(), "resolve hardware", exc)
    assert error.status == 404
    assert error.hint == ""
    assert "failed at step 'resolve hardware'" in str(error)
    assert "unknown hardware 'ssh-nowhere'" in str(error)
    assert "local, ssh-gpu-a" in str(error)
    assert not str(error).endswith(" ")


def test_plain_error_is_500() -> None:
    error = fail_in(make_steps(), "connect channels", RuntimeError("forward refused"))
    assert error.status == 500
    assert error.hint == STEP_HINTS["connect channels"]


def test_step_without_a_hint() -> None:
    error = fail_in(make_steps(), "custom step", ValueError("bad value"))
    assert error.status == 500
    assert error.hint == ""
    assert str(error).endswith(
        f"failed at step 'custom step' after {error.elapsed:.1f} s: bad value."
    )


@pytest.mark.parametrize(
    ("exc", "status", "hinted"),
    [
        (AuthenticationError("gpu-a", "gpu-a refused every key: run ssh-add"), 502, False),
        (
            HostKeyError(
                "gpu-a", "unknown host key: run ssh gpu-a once", fingerprint=None, changed=False
            ),
            502,
            False,
        ),
        (AgentUnavailableError("the agent did not start"), 502, True),
        (AgentError("gpu-a", "no_ipykernel", "pip install ipykernel"), 500, False),
        (AgentError("gpu-a", "kernel_died", "the kernel exited"), 500, True),
    ],
)
def test_other_failures_are_classified(exc: Exception, status: int, hinted: bool) -> None:
    error = fail_in(make_steps(), "connect", exc)
    assert error.status == status
    assert error.hint == (STEP_HINTS["connect"] if hinted else "")
    assert str(exc) in str(error)


def test_failing_listener_does_not_break_the_launch(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: dict[str, Any]) -> None:
        raise ValueError("listener bug")

    after = Recorder()
    steps = make_steps(broken, after)
    with caplog.at_level(logging.ERROR, logger=LOG.name):
        with steps.step("connect"):
            steps.note("halfway")
        error = fail_in(steps, "prepare host", RuntimeError("real failure"))
    assert [r.ok for r in steps.records] == [True, False]
    assert error.reason == "real failure"  # the listener's error did not replace it
    assert after.states() == [
        ("connect", "started"),
        ("connect", "progress"),
        ("connect", "done"),
        ("prepare host", "started"),
        ("prepare host", "failed"),
    ]
    failures = [r for r in caplog.records if "launch listener failed" in r.getMessage()]
    assert len(failures) == 5
    assert failures[0].exc_info is not None and failures[0].exc_info[0] is ValueError


def test_nested_launch_error_passes_through_unchanged() -> None:
    recorder = Recorder()
    steps = make_steps(recorder)
    with pytest.raises(LaunchError) as err, steps.step("start kernel"), steps.step("connect"):
        raise HostUnreachableError("gpu-a", "gone")
    assert err.value.step == "connect"
    assert err.value.status == 502
    assert [(r.name, r.ok) for r in steps.records] == [("connect", False), ("start kernel", False)]
    assert recorder.states()[-1] == ("start kernel", "failed")


def test_cancellation_is_recorded_and_not_wrapped() -> None:
    recorder = Recorder()
    steps = make_steps(recorder)
    with pytest.raises(asyncio.CancelledError), steps.step("start kernel"):
        raise asyncio.CancelledError
    assert steps.records[-1].name == "start kernel"
    assert steps.records[-1].ok is False
    assert recorder.events[-1]["state"] == "failed"
    assert recorder.events[-1]["detail"] == "cancelled"


async def test_timed_out_names_the_step_that_was_cut_off() -> None:
    recorder = Recorder()
    steps = make_steps(recorder)
    with steps.step("connect"):
        pass
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            with steps.step("start kernel"):
                await asyncio.sleep(10)
    assert recorder.states()[-1] == ("start kernel", "failed")
    error = steps.timed_out(0.05, SETTING)
    assert isinstance(error, LaunchError)
    assert error.step == "start kernel"
    assert error.status == 504
    assert error.reason == "timed out (the limit is 0.05 s)"
    assert error.hint == (f"{STEP_HINTS['start kernel']} Raise {SETTING} if the host is just slow.")
    assert "failed at step 'start kernel'" in str(error)
    assert f"Raise {SETTING}" in str(error)


def test_timed_out_during_a_step_that_has_not_finished() -> None:
    steps = make_steps()
    with steps.step("connect"):
        error = steps.timed_out(120, SETTING)
    assert error.step == "connect"
    assert error.reason == "timed out (the limit is 120 s)"
    assert error.hint.startswith(STEP_HINTS["connect"])


def test_timed_out_before_any_step() -> None:
    error = make_steps().timed_out(60, SETTING)
    assert error.step == "launch"
    assert error.status == 504
    assert error.hint == f"Raise {SETTING} if the host is just slow."
    assert "failed at step 'launch'" in str(error)


async def test_timed_out_between_steps_does_not_blame_a_finished_step() -> None:
    steps = make_steps()
    with steps.step("resolve hardware"):
        pass
    # The provisioner's launch reopens a cached machine's agent outside any step;
    # the launch timeout can fire there.
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await asyncio.sleep(10)
    error = steps.timed_out(0.05, SETTING)
    assert steps.records == [StepRecord("resolve hardware", steps.records[0].seconds, True)]
    assert error.step == "launch", str(error)
