"""Kernels in SLURM allocations, through a real Jupyter server and the dev cluster."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.hibernation.far import FarPlace
from jupyter_remote_hw.machines import MachineManager
from jupyter_remote_hw.providers.slurm import SLURMProvider

from ...provisioner.test_hibernate import wake
from ...testhosts import SSHTestHost
from .conftest import (
    A100,
    A100_NAME,
    dev_config,
    fill_t4,
    job_state,
    our_jobs,
    queued_launch,
    slurm,
)

T4 = "remote-hw-slurm-dev-gpu-t4"


@pytest.fixture
def jp_server_config(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> dict[str, Any]:
    return dev_config(login_host, short_tmp)


async def test_kernel_runs_in_the_allocation_and_shutdown_ends_the_job(
    kernels: Any,
    manager: MachineManager,
    jp_serverapp: Any,
    jp_fetch: Any,
) -> None:
    events: list[dict[str, Any]] = []
    manager.launch_listeners.append(events.append)
    began = time.monotonic()
    kernel_id = await kernels.start(A100)
    launch = time.monotonic() - began
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute(
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], "
        "os.environ['SLURM_JOB_ID'], os.environ['SLURMD_NODENAME'])"
    )
    assert ran.status == "ok", ran
    visible, job_id, node = ran.stdout.split()
    assert visible == "0" and node == "gpu1"
    assert job_state(job_id) == "RUNNING"
    # The host's hardware report names the job's GPUs, from SLURM (the GPUs here are
    # device files that nvidia-smi cannot see).
    machine = manager.cached("slurm-dev-gpu-a100")
    assert machine is not None

    async def hardware() -> dict[str, Any]:
        return await (await machine.agent()).call("hardware")

    report = await manager.on_home(hardware())
    assert report["allocation"]["job_id"] == job_id
    assert report["allocation"]["gpus"] == {"a100": 1}
    assert report["summary"].startswith(f"1 × a100 (SLURM job {job_id})")
    # The hardware report says how long the allocation has left (10 minutes asked).
    usage = json.loads((await jp_fetch("jupyter-remote-hw", "api", "usage", kernel_id)).body)
    assert 500 < usage["time_left_seconds"] <= 600
    # The agent runs in a step of the job; the kernel's streams reach it through steps too.
    steps_now = slurm("squeue", "-h", "-s", "-j", job_id, "-o", "%j").stdout.split()
    assert "jupyter-remote-hw-agent" in steps_now
    assert "jupyter-remote-hw-bridge" in steps_now
    # The launch steps named the job and the queue.
    notes = [e["detail"] for e in events if e["state"] == "progress"]
    assert any(n.startswith(f"submitted SLURM job {job_id} to partition gpu") for n in notes)
    assert f"job {job_id} RUNNING on gpu1" in notes
    steps = [e["step"] for e in events if e["state"] == "done"]
    assert steps[:4] == ["resolve hardware", "connect", "submit job", "queue"]
    print(f"launch on SLURM: {launch:.2f} s")

    await kc.close()
    await kernels.stop(kernel_id)
    assert job_state(job_id) in ("CANCELLED", "COMPLETING")
    record = manager.ledger.find_machine(job_id)
    assert record is not None and record.state == "terminated"
    assert (
        "its last kernel was shut down"
        in manager.ledger.machine_events(record.machine_id)[-1].detail
    )


async def test_pending_launch_shows_the_queue_and_cancelling_it_cancels_the_job(
    manager: MachineManager,
    jp_serverapp: Any,
) -> None:
    await fill_t4()
    events: list[dict[str, Any]] = []
    manager.launch_listeners.append(events.append)
    target = manager.target("slurm-dev-gpu-t4")
    steps = manager.steps(target.name, "pending-test")
    launch = asyncio.ensure_future(manager.machine(target, steps))
    try:
        for _ in range(100):
            notes = [e["detail"] for e in events if e["state"] == "progress"]
            if any("(Resources)" in n for n in notes):
                break
            await asyncio.sleep(0.2)
        # The first line may come before the scheduler gave a reason; the queue is
        # checked again every queue_poll seconds, and a new line said when it changes.
        pending = next(n for n in notes if "(Resources)" in n)
        found = re.match(r"#1 in the gpu queue \(Resources\), job (\d+) PENDING", pending)
        assert found is not None, pending
        job_id = found[1]
        assert job_state(job_id) == "PENDING"
    finally:
        launch.cancel()
        await asyncio.gather(launch, return_exceptions=True)
    assert job_state(job_id) == "CANCELLED"
    assert [j for j in our_jobs() if j == job_id] in ([], [job_id])
    record = manager.ledger.find_machine(job_id)
    assert record is not None and record.state == "terminated"


async def test_the_user_cancels_a_pending_launch_through_the_api(
    manager: MachineManager,
    jp_fetch: Any,
) -> None:
    await fill_t4()
    events: list[dict[str, Any]] = []
    manager.launch_listeners.append(events.append)
    start = asyncio.ensure_future(
        jp_fetch(
            "jupyter-remote-hw",
            "api",
            "launch",
            method="POST",
            body=json.dumps({"hardware": "slurm-dev-gpu-t4"}),
            raise_error=False,
        )
    )
    pending = await queued_launch(events)
    job_id = pending["detail"].split("job ")[1].split()[0]
    cancelled = await jp_fetch(
        "jupyter-remote-hw", "api", "launch", pending["kernel_id"], method="DELETE"
    )
    assert cancelled.code == 204
    answer = await asyncio.wait_for(start, 30)
    assert answer.code == 409
    message = json.loads(answer.body)["message"]
    assert "failed at step 'queue'" in message and "cancelled by the user" in message, message
    assert job_state(job_id) in ("CANCELLED", "")
    record = manager.ledger.find_machine(job_id)
    assert record is not None and record.state == "terminated"
    last = manager.ledger.machine_events(record.machine_id)[-1].detail
    assert last.endswith("the launch was cancelled"), last
    # Nothing is under way any more: a second cancel says so.
    again = await jp_fetch(
        "jupyter-remote-hw",
        "api",
        "launch",
        pending["kernel_id"],
        method="DELETE",
        raise_error=False,
    )
    assert again.code == 404
    assert "no launch of kernel" in json.loads(again.body)["message"]


async def test_each_kernel_gets_its_own_job_and_shares_one_only_when_asked(
    kernels: Any,
    manager: MachineManager,
    jp_fetch: Any,
) -> None:
    first, second = await kernels.start(A100), await kernels.start(A100)
    where = "import os; print(os.environ['SLURM_JOB_ID'], os.environ['CUDA_VISIBLE_DEVICES'])"
    jobs, gpus = [], []
    for kernel_id in (first, second):
        ran = await (await kernels.channels(kernel_id)).execute(where)
        job, gpu = ran.stdout.split()[:2]
        jobs.append(job)
        gpus.append(gpu)
    # Two allocations, each with one of gpu1's two A100s (this cluster has no cgroups,
    # so each kernel sees the node's index of its GPU).
    assert jobs[0] != jobs[1] and sorted(gpus) == ["0", "1"]
    assert {m.target.name for m in manager.open_machines()} == {A100_NAME, A100_NAME + ".2"}
    # Each running job is offered, to share it; the A100s are all taken now.
    await manager.providers["slurm"].refresh()
    listing = json.loads((await jp_fetch("jupyter-remote-hw", "api", "hardware")).body)
    options = {o["name"]: o for o in listing["hardware"] if o["provider"] == "slurm"}
    shared = options[A100_NAME + ".1"]
    # It says what is in it and how long it has left (the jobs have 10 minutes).
    left = re.search(
        rf"SLURM dev · gpu · share job {jobs[0]} \(1 kernel, (\d+) min left\)$", shared["label"]
    )
    assert left is not None and 8 <= int(left[1]) <= 9, shared["label"]
    assert shared["availability"] == "running, 1 kernel in it"
    assert f"share job {jobs[1]} (1 kernel, " in options[A100_NAME + ".2"]["label"]
    assert options[A100_NAME]["availability"] == "0 of 2 GPUs free on 1 node"
    # A third kernel asks to share the first job, and runs in it.
    third = await kernels.start(shared["kernel_name"])
    ran = await (await kernels.channels(third)).execute(where)
    assert ran.stdout.split() == [jobs[0], gpus[0]]
    assert manager.placements[third] == A100_NAME
    # A job stays while one of its kernels runs, and ends with the last.
    await kernels.stop(first)
    assert job_state(jobs[0]) == "RUNNING"
    await kernels.stop(third)
    assert job_state(jobs[0]) in ("CANCELLED", "COMPLETING")
    assert job_state(jobs[1]) == "RUNNING"
    # The shared job is no longer offered, but its kernel name still starts a kernel
    # (a restart of the kernel that shared it, say): in an allocation of its own.
    await manager.providers["slurm"].refresh()
    listing = json.loads((await jp_fetch("jupyter-remote-hw", "api", "hardware")).body)
    assert A100_NAME + ".1" not in {o["name"] for o in listing["hardware"]}
    spec = json.loads((await jp_fetch("api", "kernelspecs", shared["kernel_name"])).body)
    assert spec["spec"]["metadata"]["jupyter_remote_hw"]["target"] == A100_NAME + ".1"
    # The first allocation is free again: the next kernel takes it, in a new job.
    fourth = await kernels.start(A100)
    assert manager.placements[fourth] == A100_NAME
    ran = await (await kernels.channels(fourth)).execute(where)
    assert ran.stdout.split()[0] not in jobs


async def test_the_hardware_listing_shows_slurm_targets_with_what_is_free(
    jp_fetch: Any,
    manager: MachineManager,
) -> None:
    listing = json.loads((await jp_fetch("jupyter-remote-hw", "api", "hardware")).body)
    options = {o["name"]: o for o in listing["hardware"] if o["provider"] == "slurm"}
    assert sorted(options) == [
        "slurm-dev-debug-a100",
        "slurm-dev-debug-t4",
        "slurm-dev-gpu-a100",
        "slurm-dev-gpu-t4",
    ]
    a100 = options["slurm-dev-gpu-a100"]
    assert a100["label"] == "A100 ×1 of 2 · 1 of 2 CPUs · 1 of 4 GiB · SLURM dev · gpu"
    assert a100["availability"] == "2 of 2 GPUs free on 1 node"
    # The columns say what one allocation holds, as the label does: one A100, the CPUs
    # asked for, the memory the cluster gives them (DefMemPerCPU = 1024 MB); no GPU
    # memory, which sinfo does not say.
    assert (
        a100["gpu"],
        a100["gpu_count"],
        a100["gpu_memory_gib"],
        a100["vcpus"],
        a100["memory_gib"],
    ) == ("A100", 1, None, 1, 1.0)
    assert a100["kernel_name"] == A100 and a100["provider_title"] == "SLURM"


async def test_a_hibernated_kernel_ends_its_job_and_the_next_cell_runs_in_a_new_one(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    kernel_id = await kernels.start(A100)
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute("import os; x = 41; print(os.environ['SLURM_JOB_ID'])")
    first_job = ran.stdout.strip()
    assert job_state(first_job) == "RUNNING"
    answer = await jp_fetch(
        "jupyter-remote-hw", "api", "hibernate", kernel_id, method="POST", body="{}"
    )
    assert json.loads(answer.body)["hibernated"] is True
    # Its agent stopped with its last kernel: the holder job ends, the GPUs are free.
    for _ in range(100):
        if job_state(first_job) in ("COMPLETED", ""):
            break
        await asyncio.sleep(0.2)
    assert job_state(first_job) in ("COMPLETED", ""), job_state(first_job)
    # The ended job is not offered to share.
    assert "slurm-dev-gpu-a100.1" not in [t.name for t in manager.targets()]
    record = manager.ledger.find_machine(first_job)
    assert record is not None and record.state == "terminated"
    # Its variables wait in the cluster's shared home, not on the server's disk: the
    # store keeps the manifest alone.
    slurm_provider = manager.providers["slurm"]
    assert isinstance(slurm_provider, SLURMProvider)
    far = Path(slurm_provider.clusters["dev"]["root"]) / "hibernated" / kernel_id
    assert sorted(p.name for p in far.iterdir()) == ["index.json", "var-0000.bin"]
    entry = manager.hibernation_store.entry(kernel_id)
    assert sorted(p.name for p in entry.path.iterdir()) == ["manifest.json"]
    assert entry.far is not None and entry.far["host"] == "slurm:dev"
    assert entry.nbytes > far.joinpath("var-0000.bin").stat().st_size
    # Read from here over the login node's SSH connection (how a kernel woken elsewhere
    # gets them), byte for byte.
    place = FarPlace.from_json(entry.far)
    assert place is not None
    copied = await slurm_provider.read_hibernated(place, f"{place.path}/var-0000.bin")
    assert copied == far.joinpath("var-0000.bin").read_bytes()
    # The next cell submits a new job and wakes the kernel there, with its variables,
    # read there from the shared home; then they are deleted.
    ran = await kc.execute("print(x + 1, os.environ['SLURM_JOB_ID'])", timeout=120)
    assert ran.status == "ok", ran
    value, second_job = ran.stdout.split()
    assert value == "42" and second_job != first_job
    assert job_state(second_job) == "RUNNING"
    assert not far.exists() and manager.hibernation_store.entries() == []
    # Hibernated again and shut down: its directory is removed through the login node.
    answer = await jp_fetch(
        "jupyter-remote-hw", "api", "hibernate", kernel_id, method="POST", body="{}"
    )
    assert json.loads(answer.body)["hibernated"] is True and far.is_dir()
    await kernels.stop(kernel_id)
    assert not far.exists() and manager.hibernation_store.entries() == []


async def test_a_kernel_woken_on_another_partition_reads_its_state_in_the_cluster(
    kernels: Any, manager: MachineManager, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm_provider = manager.providers["slurm"]
    assert isinstance(slurm_provider, SLURMProvider)

    async def not_through_the_server(place: FarPlace, path: str) -> bytes:
        raise OSError("the state must be read in the cluster, not copied")

    monkeypatch.setattr(slurm_provider, "read_hibernated", not_through_the_server)
    kernel_id = await kernels.start(A100)
    kc = await kernels.channels(kernel_id)
    assert (await kc.execute("import os; w = list(range(1000))")).status == "ok"
    answer = await jp_fetch(
        "jupyter-remote-hw", "api", "hibernate", kernel_id, method="POST", body="{}"
    )
    assert json.loads(answer.body)["hibernated"] is True
    far = Path(slurm_provider.clusters["dev"]["root"]) / "hibernated" / kernel_id
    assert far.is_dir()
    # Woken on the T4 partition: another allocation of the same cluster, which reads the
    # cluster's home itself.
    woke = await wake(jp_fetch, kernel_id, "slurm-dev-gpu-t4")
    assert woke["woken"] is True and woke["target"].startswith("slurm-dev-gpu-t4"), woke
    ran = await kc.execute("print(sum(w), os.environ['SLURM_JOB_PARTITION'])", timeout=120)
    assert ran.status == "ok" and ran.stdout.split() == ["499500", "gpu"], ran
    assert not far.exists() and manager.hibernation_store.entries() == []
