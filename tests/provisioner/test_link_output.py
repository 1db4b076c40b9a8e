"""Output a kernel prints while its link is cut arrives once the link is back: all of it,
once, in order, with the cell's reply, however long the cut (the host keeps it)."""

from __future__ import annotations

import asyncio
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ..kernelws import Execution, KernelChannels
from ..testhosts import NetnsTestHost
from .conftest import write_config
from .test_launch import OpenChannels, StartKernel


@pytest.fixture
def jp_server_config(ns_host: NetnsTestHost, short_tmp: Path, remote_root: Path) -> dict[str, Any]:
    hosts = [
        {
            "host": ns_host.alias,
            "python": sys.executable,
            "hardware": "Far GPU",
            "root": str(remote_root),
        }
    ]
    return write_config(
        short_tmp / "config.json",
        ns_host.ssh_config,
        remote_root,
        short_tmp / "l",
        hosts,
        SSHProvider={"relay_buffer_mib": 1},
    )


def _ticking_cell(seconds: int) -> str:
    return (
        "import time\n"
        f"for i in range({seconds}):\n"
        "    print(f'tick {i}', flush=True)\n"
        "    time.sleep(1)\n"
    )


async def _start(kc: KernelChannels, code: str, msg_id: str | None = None) -> str:
    return await kc.send(
        "execute_request",
        {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
        msg_id=msg_id,
    )


def _ticks(done: Execution) -> list[int]:
    return [int(n) for n in re.findall(r"tick (\d+)", done.stdout)]


async def _cut_during_ticks(
    ns_host: NetnsTestHost,
    kc: KernelChannels,
    ticks: int,
    cut_after: float,
    cut: float,
    sent_in_cut: str | None = None,
) -> tuple[Execution, Execution | None]:
    """Run a cell printing ``ticks`` lines a second apart, cutting the link for ``cut`` s.

    ``sent_in_cut``: a second cell, sent half-way through the cut; its execution
    is returned too.
    """
    assert ns_host.link is not None
    msg_ids = [await _start(kc, _ticking_cell(ticks))]
    if sent_in_cut is not None:
        msg_ids.append(uuid.uuid4().hex)
    # Read all along, as a notebook does: a client that stops reading stops
    # answering the server's websocket pings, and the server closes it.
    collecting = asyncio.create_task(kc.collect_all(msg_ids, timeout=ticks + cut + 90))
    await asyncio.sleep(cut_after)
    ns_host.link.cut()
    try:
        await asyncio.sleep(cut / 2)
        if sent_in_cut is not None:
            await _start(kc, sent_in_cut, msg_ids[1])
        await asyncio.sleep(cut / 2)
        assert not collecting.done()
    finally:
        ns_host.link.restore()
    found = await collecting
    return found[0], (found[1] if sent_in_cut is not None else None)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("cut", [20, pytest.param(60, marks=pytest.mark.long)])
async def test_no_line_is_lost_or_repeated_across_a_cut(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
    cut: int,
) -> None:
    """A 20 s cut mid-cell; a 60 s cut during which the cell ends (its reply arrives after).
    A cell run half-way through the cut runs once the link is back, after the first."""
    kernel_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    kc = await channels(kernel_id)
    ticks = 40 if cut == 20 else 20
    done, queued = await _cut_during_ticks(
        ns_host, kc, ticks, cut_after=4, cut=cut, sent_in_cut="print('second'); 'sent in the cut'"
    )
    assert done.status == "ok"
    assert _ticks(done) == list(range(ticks))
    assert queued is not None and queued.status == "ok"
    assert queued.result == "'sent in the cut'" and queued.stdout == "second\n"
    dates = [[m["header"]["date"] for m in e.messages] for e in (done, queued)]
    assert max(dates[0]) < min(dates[1])  # the kernel ran it after the first cell
    # The kernel goes on as before, through the same websocket.
    assert (await kc.execute("6 * 7", timeout=60)).result == "42"


@pytest.mark.long
@pytest.mark.timeout(420)
async def test_a_five_minute_cut_loses_nothing(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
) -> None:
    kernel_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    kc = await channels(kernel_id)
    done, _ = await _cut_during_ticks(ns_host, kc, 315, cut_after=5, cut=300)
    assert done.status == "ok"
    assert _ticks(done) == list(range(315))


@pytest.mark.timeout(180)
async def test_output_beyond_the_hosts_bound_is_dropped_with_one_notice(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
) -> None:
    """With 1 MiB kept, 4 MiB printed during a cut: the oldest output goes, the cell says so,
    and the newest output, the result and the reply still arrive."""
    assert ns_host.link is not None
    kernel_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    kc = await channels(kernel_id)
    code = (
        "import time\n"
        "time.sleep(6)\n"
        "for i in range(4096):\n"
        "    print(f'line {i:05d} ' + 'x' * 1000, flush=True)\n"
        "'finished'\n"
    )
    msg_id = await _start(kc, code)
    collecting = asyncio.create_task(kc.collect(msg_id, timeout=150))
    await asyncio.sleep(2)
    ns_host.link.cut()
    try:
        await asyncio.sleep(25)
    finally:
        ns_host.link.restore()
    done = await collecting
    assert done.status == "ok" and done.result == "'finished'"
    notices = re.findall(
        r"\[jupyter-remote-hw\] ([\d.]+) MiB of output \((\d+) messages\) "
        r"was dropped",
        done.stderr,
    )
    assert len(notices) == 1, done.stderr
    lines = [int(n) for n in re.findall(r"line (\d+)", done.stdout)]
    assert lines[-1] == 4095 and lines == sorted(set(lines))
    assert 0 not in lines  # the oldest went
    assert float(notices[0][0]) > 2.0
