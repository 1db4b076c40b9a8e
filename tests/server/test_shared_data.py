"""Data from a kernel that someone else can run code in never runs their code on the
owner's side (issue 31): a hardware switch's carry and a wake, on the same target or
another, rebuild it with the restricted loader, and the kernel's mark stays with it
through hibernation, waking, moving and the ledger. Real jupyter_server, real sshd
test host, the teammate's real share and joined kernel, real ipykernels."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_remote_hw.hibernation import HibernationStore
from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.provisioner import RemoteHWProvisioner

from ..provisioner.conftest import HARDWARE, SSH_KERNEL, OpenChannels
from ..testhosts import SSHTestHost
from .apiclient import API, Fetch, get, post
from .conftest import new_session, sharing_host
from .test_shares import join, share, shares, teammate_key  # noqa: F401 (fixtures)

#: The second target: the same SSH test host under another name, with its own agent.
OTHER = "ssh-other"

#: What the teammate runs in the shared kernel: an object whose unpickling runs a command.
PLANT = """\
import os
class Planted:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
evil = Planted()
z = {{"kept": [1, 2]}}
"""


@pytest.fixture
def hosts(ssh_host: SSHTestHost, remote_root: Path) -> list[dict[str, Any]]:
    """The test host, its share key lines going to the file its sshd reads, and the same
    host again as ``ssh-other``."""
    return [
        sharing_host(ssh_host, remote_root),
        {
            "host": ssh_host.alias,
            "name": "other",
            "python": sys.executable,
            "hardware": HARDWARE,
            "root": str(remote_root.with_name("r2")),
        },
    ]


def provisioner_of(serverapp: Any, kernel_id: str) -> RemoteHWProvisioner:
    provisioner = serverapp.kernel_manager.get_kernel(kernel_id).provisioner
    assert isinstance(provisioner, RemoteHWProvisioner)
    return provisioner


async def planted_by_a_collaborator(
    jp_fetch: Fetch, made: list[str], channels: OpenChannels, key: Path, marker: Path
) -> tuple[dict[str, Any], Any]:
    """A notebook session on the test host, shared as collaborator; the teammate joins and
    plants ``evil`` (and plain ``z``); the owner sets ``x``. The session and the owner's
    channels."""
    session = await new_session(jp_fetch, SSH_KERNEL)
    owner_id = session["kernel"]["id"]
    owner = await channels(owner_id)
    assert (await owner.execute("x = 41")).status == "ok"
    granted = await share(jp_fetch, made, owner_id, key, "collaborator")
    joined = await join(jp_fetch, granted["share_file"], key)
    teammate = await channels(joined["kernel_id"])
    planted = await teammate.execute(PLANT.format(marker=marker))
    assert planted.status == "ok", planted
    session["joined_kernel_id"] = joined["kernel_id"]
    return session, owner


@pytest.mark.timeout(240)
async def test_a_switch_carries_data_from_a_shared_kernel_without_running_its_code(
    jp_fetch: Fetch,
    channels: OpenChannels,
    shares: list[str],
    teammate_key: Path,
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran-on-the-owners-side"
    session, _ = await planted_by_a_collaborator(jp_fetch, shares, channels, teammate_key, marker)
    report = await post(
        jp_fetch,
        "switch",
        session["id"],
        # Another target of the same loopback host (the marker would land here too);
        # `local` takes the same carry path.
        body={"hardware": OTHER, "carry": ["x", "z", "evil"]},
    )
    assert sorted(c["name"] for c in report["carried"]) == ["x", "z"]
    (refused,) = report["not_carried"]
    assert refused["name"] == "evil", report
    assert "refused to rebuild 'evil'" in refused["reason"]
    assert (
        "the kernel on Test GPU 24 GiB · testhost, which someone else can run code in"
        in (refused["reason"])
    ), refused
    assert f"{__import__('os').system.__module__}.system" in refused["reason"]
    assert not marker.exists(), "the teammate's code ran in the owner's new kernel"
    new = await channels(report["kernel_id"])
    shown = await new.execute("print(x, z, 'evil' in globals())")
    assert shown.stdout.split() == ["41", "{'kept':", "[1,", "2]}", "False"], shown


@pytest.mark.timeout(300)
async def test_a_shared_kernel_keeps_its_mark_through_hibernation_and_wakes_without_its_code(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    channels: OpenChannels,
    shares: list[str],
    teammate_key: Path,
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran-on-wake"
    session, owner = await planted_by_a_collaborator(
        jp_fetch, shares, channels, teammate_key, marker
    )
    kernel_id = session["kernel"]["id"]
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    for target in (None, OTHER):  # a wake on the same target, then on another
        hibernated = await post(jp_fetch, "hibernate", kernel_id, body={})
        assert hibernated["hibernated"] is True, hibernated
        # The mark is in the ledger's row and the saved state, and the CLI shows it.
        info = await provisioner.get_provisioner_info()
        assert info["run_by_others"] is True and info["hibernated"]["run_by_others"] is True
        store: HibernationStore = MachineManager.instance().hibernation_store
        (entry,) = [e for e in store.entries() if e.entry_id == kernel_id]
        assert entry.manifest["run_by_others"] is True
        # A server started later takes the kernel over from its ledger row, mark included.
        row = MachineManager.instance().ledger.get_kernel(kernel_id)
        assert row is not None and row.info["run_by_others"] is True
        later = RemoteHWProvisioner(parent=jp_serverapp.kernel_manager)
        await later.load_provisioner_info({**row.info, "kernel_id": "taken-over-" + kernel_id})
        assert later.run_by_others.marked
        MachineManager.instance().placements.drop(later.kernel_id)
        body = {"target": target} if target else {}
        woke = await post(jp_fetch, "wake", kernel_id, body=body)
        assert sorted(woke["assigned"]) == ["x", "z"], woke  # evil left out, and why
        [refused] = [v for v in woke["left_out"] if v["name"] == "evil"]
        assert "system" in refused["reason"], refused
        shown = await owner.execute("print(x, z['kept'], 'evil' in globals())", timeout=120)
        assert shown.stdout.split() == ["41", "[1,", "2]", "False"], shown
        assert not marker.exists(), "the teammate's code ran when the kernel woke"
        # Woken, its host has a new kernel no share ever touched: the mark still holds.
        assert await provisioner.others_can_run_code()
        # The teammate's object is gone for good: put it back, as they could, for round two.
        assert (await owner.execute(PLANT.format(marker=marker))).status == "ok"


@pytest.mark.timeout(240)
async def test_hibernation_ends_the_kernels_shares_in_the_owners_listing_too(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    channels: OpenChannels,
    shares: list[str],
    teammate_key: Path,
    ssh_host: SSHTestHost,
    tmp_path: Path,
) -> None:
    session, owner = await planted_by_a_collaborator(
        jp_fetch, shares, channels, teammate_key, tmp_path / "unused"
    )
    kernel_id = session["kernel"]["id"]
    (listed,) = (await get(jp_fetch, "shares"))["shares"]
    assert listed["state"] == "active"
    hibernated = await post(jp_fetch, "hibernate", kernel_id, body={})
    assert hibernated["hibernated"] is True, hibernated
    # The host removed the key line; the owner's listing no longer shows the share live.
    assert [
        line for line in ssh_host.authorized_keys.read_text().splitlines() if "share:" in line
    ] == []
    assert (await get(jp_fetch, "shares"))["shares"] == []
    response = await jp_fetch(*API, "shares", params={"all": "1"})
    (ended,) = json.loads(response.body)["shares"]
    assert ended["share_id"] == listed["share_id"] and ended["state"] == "revoked"
    assert ended["revoked"] is not None
    # The teammate's joined kernel reads as ended, with the reason.
    joined = jp_serverapp.kernel_manager.get_kernel(session["joined_kernel_id"])
    deadline = time.monotonic() + 20
    while await joined.is_alive():
        assert time.monotonic() < deadline, "the teammate's kernel still reads as alive"
        await asyncio.sleep(0.2)
    assert "revoked or has expired" in joined.provisioner.ended_reason
    # ... and is dropped at once, not restarted: its websocket answers 404, not a hang or 500.
    while session["joined_kernel_id"] in jp_serverapp.kernel_manager:
        assert time.monotonic() < deadline + 10, "the teammate's ended kernel was kept"
        await asyncio.sleep(0.2)
    with pytest.raises(HTTPClientError) as caught:
        await channels(session["joined_kernel_id"])
    assert caught.value.code == 404
    # The owner's kernel wakes as before.
    assert (await owner.execute("print(x)", timeout=120)).stdout.strip() == "41"
