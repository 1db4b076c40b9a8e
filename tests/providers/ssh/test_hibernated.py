"""Where an SSH host's hibernated kernels keep their state: the host's own disk, unless
its entry (or the provider) says that disk does not outlive the host; and what our side
refuses to read or remove there."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from traitlets import TraitError

from jupyter_remote_hw.hibernation.far import FarPlace
from jupyter_remote_hw.providers import SSHProvider
from jupyter_remote_hw.providers.ssh.provider import HIBERNATED_DIR
from jupyter_remote_hw.transport import TransportManager

from ...conftest import TEST_TRANSPORT
from ...hibernation.test_warm import evicted, resident_bytes
from ...testhosts import SSHTestHost


def provider(tmp_path: Path, **traits: object) -> SSHProvider:
    return SSHProvider(
        transport=TransportManager(ssh_config_files=[str(tmp_path / "none")]),
        hosts=[
            {"host": "gpu-box", "root": "/data/u"},
            {"host": "scratch", "hibernate_on_host": False},
            {"host": "plain"},
        ],
        **traits,
    )


def test_a_host_keeps_its_state_on_its_own_disk_unless_told_it_does_not_persist(
    tmp_path: Path,
) -> None:
    ssh = provider(tmp_path)
    targets = {t.host: t for t in ssh.targets()}
    assert ssh.hibernation_place(targets["gpu-box"]) == FarPlace(
        "ssh", "ssh:gpu-box", f"/data/u/{HIBERNATED_DIR}", "the disk of gpu-box"
    )
    plain = ssh.hibernation_place(targets["plain"])
    assert plain is not None and plain.path == f"~/{HIBERNATED_DIR}"
    assert ssh.hibernation_place(targets["scratch"]) is None
    # The provider's setting is the default a host entry overrides.
    off = provider(tmp_path, hibernate_on_host=False)
    assert off.hibernation_place(targets["gpu-box"]) is None


def test_a_host_entrys_hibernate_on_host_must_be_true_or_false(tmp_path: Path) -> None:
    with pytest.raises(TraitError, match=r"'gpu-box' has 'hibernate_on_host' 'no'; give true"):
        SSHProvider(hosts=[{"host": "gpu-box", "hibernate_on_host": "no"}])


async def test_files_outside_a_hosts_place_or_of_unknown_hosts_are_refused(
    tmp_path: Path,
) -> None:
    ssh = provider(tmp_path)
    place = FarPlace("ssh", "ssh:gpu-box", f"/data/u/{HIBERNATED_DIR}/k1", "the disk of gpu-box")
    with pytest.raises(OSError, match=r"/etc/passwd is not in /data/u/"):
        await ssh.read_hibernated(place, "/etc/passwd")
    with pytest.raises(OSError, match=r"is not in"):
        await ssh.read_hibernated(place, f"{place.path}/../../../../etc/passwd")
    stranger = FarPlace("ssh", "ssh:elsewhere", "/tmp/x", "the disk of elsewhere")
    with pytest.raises(OSError, match=r"the disk of elsewhere is not the disk of a configured"):
        await ssh.remove_hibernated(stranger)


@pytest.fixture
async def on_host(ssh_host: SSHTestHost, tmp_path: Path) -> AsyncIterator[SSHProvider]:
    """The provider with the loopback test host, its root ``tmp_path`` (so the host's
    place is readable here)."""
    ssh = SSHProvider(
        transport=TransportManager(ssh_config_files=[str(ssh_host.ssh_config)], **TEST_TRANSPORT),
        hosts=[{"host": ssh_host.alias, "root": str(tmp_path)}],
    )
    yield ssh
    assert ssh.transport is not None
    await ssh.transport.close_all()


def _place(ssh: SSHProvider) -> FarPlace:
    base = ssh.hibernation_place(ssh.targets()[0])
    assert base is not None
    return base.child("k1")


async def test_a_hosts_files_are_read_ahead_read_and_removed_over_its_connection(
    on_host: SSHProvider, ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    place = _place(on_host)
    kept = tmp_path / HIBERNATED_DIR / "k1"
    kept.mkdir(parents=True)
    files = [evicted(kept / "var-0000.bin"), evicted(kept / "var-0001.bin")]
    assert [resident_bytes(f) for f in files] == [0, 0]
    await on_host.warm_hibernated(place, [f"{place.path}/{f.name}" for f in files])
    assert [resident_bytes(f) for f in files] == [24 << 20, 24 << 20]
    read = await on_host.read_hibernated(place, f"{place.path}/var-0001.bin")
    assert read == files[1].read_bytes()
    done = await on_host.remove_hibernated(place)
    assert done == f"its saved state in {place.path} on the disk of {ssh_host.alias} removed"
    assert not kept.exists() and kept.parent.exists()
    with pytest.raises(OSError, match=r"reading .*var-0000.bin on .* failed: .*No such file"):
        await on_host.read_hibernated(place, f"{place.path}/var-0000.bin")


def _anon_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/self/status")


async def test_a_large_file_read_from_a_host_is_not_held_in_our_memory(
    on_host: SSHProvider, tmp_path: Path
) -> None:
    """Waking a kernel elsewhere reads each saved file through our side: 96 MiB come back
    as a view of a spooled, mapped file, our memory growing by a piece or so, not by the
    file."""
    place = _place(on_host)
    kept = tmp_path / HIBERNATED_DIR / "k1"
    kept.mkdir(parents=True)
    data = os.urandom(1 << 20) * 96
    (kept / "var-0000.bin").write_bytes(data)
    before, peak, done = _anon_bytes(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], _anon_bytes() - before)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        read = await on_host.read_hibernated(place, f"{place.path}/var-0000.bin")
    finally:
        done.set()
        sampler.join()
    assert len(read) == len(data) and read == data
    assert peak[0] < 48 << 20, f"our memory grew by {peak[0] >> 20} MiB"
