"""A notebook across the nodes of an allocation: ``%%ranks`` on the dev cluster's two
nodes, through a real Jupyter server, with torch.distributed on the gloo backend."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_remote_hw.machines import MachineManager
from jupyter_remote_hw.notebook.remote_sessions import find_shaped_target

from ...kernelws import Execution, KernelChannels
from ...provisioner.test_hibernate import hibernate, wake
from ...testhosts import SSHTestHost
from .conftest import CLUSTER, cluster_entry, dead_answers, our_jobs, server_config, slurm

#: Two nodes × one GPU each (the dev cluster's nodes have different GPU types).
TWO_NODES = "remote-hw-slurm-dev-gpu-gpu-2x1"


@pytest.fixture
def jp_server_config(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> dict[str, Any]:
    entry = cluster_entry(login_host.alias, short_tmp / "c", nodes=[2])
    return server_config(login_host.ssh_config, short_tmp, {CLUSTER: entry})


def traceback_of(ran: Execution) -> str:
    """The error a cell showed, as text without colours."""
    lines = [
        line
        for m in ran.messages
        if m["header"]["msg_type"] == "error"
        for line in m["content"]["traceback"]
    ]
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def ranks_pids(kc: KernelChannels) -> list[int]:
    """Each rank's engine pid, by rank."""
    ran = await kc.execute("%%ranks\nimport os\nprint('pid', os.getpid())")
    assert ran.status == "ok", ran.stderr
    # By rank: the ranks' lines come in whichever order they were printed.
    found = sorted((int(r), int(p)) for r, p in re.findall(r"\[rank (\d+)\] pid (\d+)", ran.stdout))
    assert [r for r, _ in found] == list(range(len(found))) and found, ran.stdout
    return [p for _, p in found]


async def test_a_cell_runs_on_every_rank_of_two_nodes_and_each_failure_names_its_rank(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    kernel_id = await kernels.start(TWO_NODES)
    kc = await kernels.channels(kernel_id)
    job = (await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")).stdout.strip()
    # The holder job holds both nodes.
    assert slurm("squeue", "-h", "-j", job, "-o", "%D %N").stdout.split() == ["2", "gpu[1-2]"]

    # Every rank gets torchrun's environment, on its own node.
    ran = await kc.execute(
        "%%ranks\nimport os\nprint(*(os.environ[k] for k in ('RANK', 'LOCAL_RANK', "
        "'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'SLURMD_NODENAME', 'SLURM_JOB_ID')))"
    )
    assert ran.status == "ok", ran.stderr
    assert "starting 2 ranks on gpu1, gpu2" in ran.stdout
    lines = sorted(re.findall(r"^\[rank (\d)\] (.*)$", ran.stdout, re.MULTILINE))
    assert [(r, fields.split()[:4]) for r, fields in lines] == [
        ("0", ["0", "0", "2", "127.0.0.1"]),
        ("1", ["1", "0", "2", "127.0.0.1"]),
    ]
    assert [fields.split()[5] for _, fields in lines] == ["gpu1", "gpu2"]
    assert {fields.split()[6] for _, fields in lines} == {job}
    assert len({fields.split()[4] for _, fields in lines}) == 1  # one rendezvous port

    # The panel's live use has every node's, each read on its node.
    usage = json.loads((await jp_fetch("jupyter-remote-hw", "api", "usage", kernel_id)).body)
    nodes = usage["nodes"]
    assert [n["node"] for n in nodes] == ["gpu1", "gpu2"]
    assert nodes[1]["host"] == "gpu2" and nodes[1]["cpu"]["count"] >= 1, nodes[1]
    assert nodes[1]["memory"]["total_gib"] > 0
    assert nodes[0]["cpu"] == usage["cpu"]

    # An all-reduce across the nodes with no arguments to init_process_group; the sum
    # gathered into a list by rank.
    ran = await kc.execute(
        "%%ranks --out total\nimport torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\nt = torch.tensor([float(dist.get_rank() + 1)])\n"
        "dist.all_reduce(t)\ntotal = t.item()\nprint('sum', total)",
        timeout=120,
    )
    assert ran.status == "ok", ran.stderr
    assert (await kc.execute("print(total)")).stdout.strip() == "[3.0, 3.0]"
    # Running the cell that starts torch.distributed again neither hangs nor fails.
    ran = await kc.execute(
        "%%ranks\ndist.init_process_group('gloo')\nt = torch.ones(1)\ndist.all_reduce(t)\n"
        "print('again', t.item())",
        timeout=60,
    )
    assert ran.status == "ok", ran.stderr
    assert ran.stdout.count("again 2.0") == 2

    # Broadcast and scatter; variables stay in each rank between cells.
    await kc.execute("factor = 10\nparts = ['a', 'b']")
    ran = await kc.execute("%%ranks --in factor --scatter parts --out mine\nmine = parts * factor")
    assert ran.status == "ok", ran.stderr
    assert (await kc.execute("print(mine)")).stdout.strip() == "['aaaaaaaaaa', 'bbbbbbbbbb']"
    ran = await kc.execute("%%ranks --ranks 1\nprint(mine)")
    assert ran.stdout.strip().endswith("[rank 1] bbbbbbbbbb"), ran.stdout
    # Large values go over each rank's own link to the notebook's kernel, both ways.
    await kc.execute("import os\nbig = os.urandom(3 * 2**20)")
    ran = await kc.execute(
        "%%ranks --in big --out echo\nimport os\necho = big + bytes([int(os.environ['RANK'])])"
    )
    assert ran.status == "ok", traceback_of(ran)
    ran = await kc.execute("print([len(e) for e in echo], [e[:-1] == big for e in echo])")
    assert ran.stdout.strip() == "[3145729, 3145729] [True, True]", ran.stdout
    assert (await kc.execute("print([e[-1] for e in echo])")).stdout.strip() == "[0, 1]"
    listed = (await kc.execute("%ranks")).stdout
    assert listed.count("large values over its link") == 2, listed

    # An error on rank 1 only fails the cell, its traceback shown with its rank.
    ran = await kc.execute("%%ranks\nif dist.get_rank() == 1:\n    1 / 0\nprint('fine')")
    assert ran.status == "error" and ran.ename == "RanksError"
    shown = traceback_of(ran)
    assert "[rank 1]" in shown and "ZeroDivisionError" in shown
    assert "rank 1 raised ZeroDivisionError: division by zero; ranks 0 finished" in shown
    # Every line of its traceback says whose it is.
    body = shown.split("RanksError:")[0].strip().splitlines()
    assert body and all(line.startswith("[rank 1]") for line in body), body
    assert "[rank 0] fine" in ran.stdout

    # A rank that skips an all-reduce the other entered: blocked, named, with its stack,
    # after the configured time; its variables stay.
    began = time.monotonic()
    ran = await kc.execute(
        "%%ranks --blocked-after 3\nif dist.get_rank() == 0:\n"
        "    dist.all_reduce(torch.ones(1))\nprint('left')",
        timeout=60,
    )
    took = time.monotonic() - began
    shown = traceback_of(ran)
    assert ran.status == "error", ran.stdout
    assert "ranks 0 stayed blocked after the others had finished" in shown
    assert "dist.all_reduce(torch.ones(1))" in shown  # its stack
    assert "run init_process_group again" in shown
    assert took < 15, took
    ran = await kc.execute(
        "%%ranks\ndist.init_process_group('gloo')\nprint('kept', mine)", timeout=60
    )
    assert ran.status == "ok", ran.stderr
    assert "[rank 0] kept aaaaaaaaaa" in ran.stdout

    # An interrupt during collectives reaches every rank within 2 s; variables stay.
    msg_id = await kc.start(
        "%%ranks\nimport time\nfor i in range(600):\n    dist.all_reduce(torch.ones(1))\n"
        "    time.sleep(0.1)\n    if i == 3: print('looping', flush=True)"
    )
    await kc.wait_printed(msg_id, "looping", timeout=30)
    await kernels.interrupt(kernel_id)
    began = time.monotonic()
    ran = await kc.collect(msg_id, timeout=30)
    assert time.monotonic() - began < 4
    assert ran.status == "error"
    assert "interrupted" in traceback_of(ran)
    ran = await kc.execute("%%ranks\nprint('still', mine)")
    assert ran.stdout.count("still") == 2, ran.stdout

    # A rank killed from outside fails the cell within 5 s, naming it and the cause.
    pids = await ranks_pids(kc)
    msg_id = await kc.start("%%ranks\nimport time\ntime.sleep(60)")
    await asyncio.sleep(1)
    os.kill(pids[1], signal.SIGKILL)
    began = time.monotonic()
    ran = await kc.collect(msg_id, timeout=30)
    assert time.monotonic() - began < 5
    shown = traceback_of(ran)
    assert "rank 1 ended:" in shown and "Killed" in shown, shown
    # Rank 0 was interrupted and kept its variables; the next cell says how to go on.
    ran = await kc.execute("%%ranks --ranks 0\nprint('kept', mine)")
    assert "[rank 0] kept aaaaaaaaaa" in ran.stdout, ran.stdout
    ran = await kc.execute("%%ranks\nprint(1)")
    assert "%ranks restart" in traceback_of(ran)
    ran = await kc.execute("%ranks restart")
    assert "2 ranks ready" in ran.stdout
    pids = await ranks_pids(kc)

    # One shutdown ends every rank and the job.
    await kernels.stop(kernel_id)
    for _ in range(100):
        if not our_jobs() and not any(alive(p) for p in pids):
            break
        await asyncio.sleep(0.2)
    assert our_jobs() == []
    assert not any(alive(p) for p in pids)


async def test_the_ranks_end_by_themselves_when_the_notebook_kernel_dies(
    kernels: Any, manager: MachineManager
) -> None:
    kernel_id = await kernels.start(TWO_NODES)
    kc = await kernels.channels(kernel_id)
    pids = await ranks_pids(kc)
    kernel_pid = int((await kc.execute("import os; print(os.getpid())")).stdout)
    assert len(pids) == 2 and all(alive(p) for p in pids)
    os.kill(kernel_pid, signal.SIGKILL)
    began = time.monotonic()
    while any(alive(p) for p in pids) and time.monotonic() - began < 60:
        await asyncio.sleep(0.5)
    assert not any(alive(p) for p in pids), "the ranks outlived their notebook's kernel"


async def test_a_kernel_with_running_ranks_hibernates_with_every_rank_and_wakes_them_together(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    kernel_id = await kernels.start(TWO_NODES)
    kc = await kernels.channels(kernel_id)
    pids = await ranks_pids(kc)
    ran = await kc.execute(
        "%%ranks\nimport os, json as j, threading\nmine = int(os.environ['RANK']) * 10\n"
        "big = bytes([mine]) * 100_000\n"  # over the link's threshold
        "if mine:\n    lock = threading.Lock()"
    )
    assert ran.status == "ok", traceback_of(ran)
    await kc.execute("x = 41; import os; job = os.environ['SLURM_JOB_ID']")
    said = await hibernate(jp_fetch, kernel_id)
    assert said["hibernated"] is True, said
    ranks_entry = [v for v in said["saved"] if v["name"] == "%%ranks"]
    assert ranks_entry and ranks_entry[0]["nbytes"] > 200_000, said["saved"]
    assert "_ranks_hibernated" not in [v["name"] for v in said["saved"]]
    left = {e["name"]: e for e in said["left_out"]}
    assert "cannot pickle" in left["rank 1: lock"]["reason"], said["left_out"]
    # The allocation went with the kernel: no engine, nothing in the queue.
    began = time.monotonic()
    while (our_jobs() or any(alive(p) for p in pids)) and time.monotonic() - began < 30:
        await asyncio.sleep(0.5)
    assert our_jobs() == [] and not any(alive(p) for p in pids)
    # The next cell wakes it in a new allocation of two nodes; the first %%ranks cell
    # starts new ranks and gives each its own variables back.
    ran = await kc.execute("print(x + 1, os.environ['SLURM_JOB_ID'] != job)", timeout=120)
    assert ran.stdout.split() == ["42", "True"], ran
    ran = await kc.execute("%ranks")
    assert "the variables of 2 ranks were saved when the kernel hibernated" in ran.stdout
    # Idle again before any %%ranks cell: a second hibernation keeps what waits for them.
    said = await hibernate(jp_fetch, kernel_id)
    assert "%%ranks" in [v["name"] for v in said["saved"]], said["saved"]
    ran = await kc.execute("print(x + 1)", timeout=120)
    assert ran.stdout.strip() == "42", ran
    ran = await kc.execute(
        "%%ranks\nprint(mine, len(big), big[0], j.dumps(mine), 'lock' in dir())", timeout=120
    )
    assert ran.status == "ok", traceback_of(ran)
    assert "giving the 2 ranks the variables saved when the kernel hibernated" in ran.stdout
    assert "[rank 0] 0 100000 0 0 False" in ran.stdout, ran.stdout
    assert "[rank 1] 10 100000 10 10 False" in ran.stdout, ran.stdout
    ran = await kc.execute("print('_ranks_hibernated' in dir())")
    assert ran.stdout.strip() == "False"
    new_pids = await ranks_pids(kc)
    assert not set(new_pids) & set(pids)


async def test_a_rank_that_ended_before_the_hibernation_is_named_and_the_others_are_kept(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    kernel_id = await kernels.start(TWO_NODES)
    kc = await kernels.channels(kernel_id)
    pids = await ranks_pids(kc)
    ran = await kc.execute("%%ranks\nimport os\nmine = int(os.environ['RANK']) + 5")
    assert ran.status == "ok", traceback_of(ran)
    os.kill(pids[1], signal.SIGKILL)
    began = time.monotonic()
    while "ended" not in (await kc.execute("%ranks")).stdout and time.monotonic() - began < 10:
        await asyncio.sleep(0.2)
    # With refuse, nothing is saved: rank 1's variables are gone.
    with pytest.raises(HTTPClientError) as refused:
        await hibernate(jp_fetch, kernel_id, "refuse")
    assert refused.value.code == 409, refused.value
    assert (
        "'rank 1' (%%ranks engine): it had ended before the save"
        in json.loads(refused.value.response.body)["message"]
    )
    ran = await kc.execute("%%ranks --ranks 0\nprint('still', mine)")
    assert "[rank 0] still 5" in ran.stdout, ran.stdout
    # With partial, the rest is saved and rank 1 is named as left out.
    said = await hibernate(jp_fetch, kernel_id)
    assert said["hibernated"] is True
    assert [e["name"] for e in said["left_out"]] == ["rank 1"], said["left_out"]
    ran = await kc.execute("%%ranks\nprint('mine', globals().get('mine'))", timeout=120)
    assert ran.status == "ok", traceback_of(ran)
    assert "[rank 0] mine 5" in ran.stdout and "[rank 1] mine None" in ran.stdout, ran.stdout
    assert "rank 1: nothing to give back" in ran.stdout


async def test_ranks_woken_on_an_allocation_of_another_size_keep_their_saved_variables(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    kernel_id = await kernels.start(TWO_NODES)
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute("%%ranks\nimport os\nmine = int(os.environ['RANK']) + 7")
    assert ran.status == "ok", traceback_of(ran)
    assert (await hibernate(jp_fetch, kernel_id))["hibernated"] is True
    # Woken on one node of one GPU: a world of one rank.
    assert (await wake(jp_fetch, kernel_id, "slurm-dev-gpu-t4"))["woken"] is True
    ran = await kc.execute("%%ranks\nprint('ran')", timeout=120)
    assert ran.status == "error" and "] ran" not in ran.stdout, ran.stdout
    said = traceback_of(ran)
    assert "saved from 2 ranks, and this allocation has 1" in said, said
    assert "`del _ranks_hibernated` drops them" in said
    # All or nothing: the new rank was ended, the saved variables stay for a retry.
    ran = await kc.execute("%ranks")
    assert "the variables of 2 ranks were saved" in ran.stdout, ran.stdout
    job = (await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")).stdout.strip()
    began = time.monotonic()
    while "rank" in slurm("squeue", "-s", "-h", "-j", job, "-o", "%j").stdout:
        assert time.monotonic() - began < 15, "the new rank's step was left running"
        await asyncio.sleep(0.3)
    ran = await kc.execute(
        "print(sorted(_ranks_hibernated['ranks']))\ndel _ranks_hibernated\n%ranks"
    )
    assert "[0, 1]" in ran.stdout and "no ranks run yet" in ran.stdout, ran.stdout
    ran = await kc.execute("%%ranks\nprint('mine' in dir())", timeout=120)
    assert ran.status == "ok" and "[rank 0] False" in ran.stdout, ran.stdout


async def session_with_ranks(
    jp_fetch: Any, kernels: Any
) -> tuple[dict[str, Any], KernelChannels, list[int]]:
    """A notebook's session on two nodes whose ranks run, each holding ``mine`` (its
    rank), gathered into ``mine`` in the notebook's kernel too."""
    response = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"path": "ranks.ipynb", "type": "notebook", "kernel": {"name": TWO_NODES}}),
    )
    session = json.loads(response.body)
    kc = await kernels.channels(session["kernel"]["id"])
    pids = await ranks_pids(kc)
    ran = await kc.execute("%%ranks --out mine\nimport os\nmine = int(os.environ['RANK'])")
    assert ran.status == "ok", traceback_of(ran)
    return session, kc, pids


async def switch(jp_fetch: Any, session_id: str, **body: Any) -> dict[str, Any]:
    response = await jp_fetch(
        "jupyter-remote-hw", "api", "switch", session_id, method="POST", body=json.dumps(body)
    )
    return dict(json.loads(response.body))


async def test_a_switch_says_the_ranks_end_and_leaves_nothing_running(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    session, _, pids = await session_with_ranks(jp_fetch, kernels)
    # The carry dialog's listing names the ranks, which it warns of.
    response = await jp_fetch(
        "jupyter-remote-hw", "api", "variables", session["id"], params={"hardware": "local"}
    )
    listed = json.loads(response.body)
    assert [(r["rank"], r["node"]) for r in listed["ranks"]] == [(0, "gpu1"), (1, "gpu2")]
    assert "mine" in [v["name"] for v in listed["variables"]]

    report = await switch(jp_fetch, session["id"], hardware="local", carry=["mine"])
    assert [c["name"] for c in report["carried"]] == ["mine"]
    assert [n["name"] for n in report["not_carried"]] == ["%%ranks"]
    assert "2 %%ranks engines (on gpu1, gpu2) ended with it" in report["not_carried"][0]["reason"]
    for _ in range(100):
        if not our_jobs() and not any(alive(p) for p in pids):
            break
        await asyncio.sleep(0.2)
    assert our_jobs() == [], "the old allocation outlived the switch"
    assert not any(alive(p) for p in pids), "ranks outlived the switch"
    new = await kernels.channels(report["kernel_id"])
    ran = await new.execute("print(mine)")
    assert ran.stdout.strip() == "[0, 1]", ran
    await kernels.stop(report["kernel_id"])


async def test_a_switch_after_a_wake_carries_the_ranks_saved_variables(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    session, kc, _ = await session_with_ranks(jp_fetch, kernels)
    assert (await hibernate(jp_fetch, session["kernel"]["id"]))["hibernated"] is True
    ran = await kc.execute("y = 3", timeout=120)  # wakes it; its ranks wait
    assert ran.status == "ok", ran
    response = await jp_fetch("jupyter-remote-hw", "api", "variables", session["id"])
    listed = json.loads(response.body)
    assert listed["ranks_saved"] == {"name": "_ranks_hibernated", "size": 2}, listed
    assert listed["ranks"] == []
    # The user picks only y; the ranks' saved variables go too, named as %%ranks.
    report = await switch(jp_fetch, session["id"], hardware="local", carry=["y"])
    assert sorted(c["name"] for c in report["carried"]) == ["%%ranks", "y"], report
    assert report["not_carried"] == [], report
    new = await kernels.channels(report["kernel_id"])
    ran = await new.execute("%ranks")
    assert "the variables of 2 ranks were saved when the kernel hibernated" in ran.stdout
    ran = await new.execute("print(sorted(_ranks_hibernated['ranks']))")
    assert ran.stdout.strip() == "[0, 1]", ran
    await kernels.stop(report["kernel_id"])


async def test_a_switch_that_keeps_the_old_kernel_keeps_its_ranks_and_says_so(
    kernels: Any, manager: MachineManager, jp_fetch: Any
) -> None:
    session, old, pids = await session_with_ranks(jp_fetch, kernels)
    report = await switch(jp_fetch, session["id"], hardware="local", carry=["mine"], keep_old=True)
    assert [n["name"] for n in report["not_carried"]] == ["%%ranks"]
    reason = report["not_carried"][0]["reason"]
    assert "2 %%ranks engines (on gpu1, gpu2) keep running with it" in reason, reason
    # The old kernel and its ranks go on as they were, variables and all.
    assert all(alive(p) for p in pids)
    ran = await old.execute("%%ranks\nprint('still', mine)")
    assert sorted(re.findall(r"still \d", ran.stdout)) == ["still 0", "still 1"], ran.stdout
    await kernels.stop(report["previous_kernel_id"])
    await kernels.stop(report["kernel_id"])
    for _ in range(100):
        if not our_jobs() and not any(alive(p) for p in pids):
            break
        await asyncio.sleep(0.2)
    assert our_jobs() == [] and not any(alive(p) for p in pids)


async def test_remote_finds_the_allocation_of_a_node_count(manager: MachineManager) -> None:
    # What %%remote TARGET --nodes N [--gpus-per-node G] runs on.
    assert find_shaped_target(manager, "slurm-dev-gpu-gpu", 2, None).name == (
        "slurm-dev-gpu-gpu-2x1"
    )
    assert find_shaped_target(manager, "slurm-dev-gpu-gpu", 2, 1).name == "slurm-dev-gpu-gpu-2x1"
    assert find_shaped_target(manager, "slurm-dev-gpu-a100", None, None).name == (
        "slurm-dev-gpu-a100"
    )
    # The A100s are on one node: no two-node allocation of them; the message lists what is.
    with pytest.raises(ValueError, match=r"no allocation of 2 nodes of slurm-dev-gpu-a100") as no:
        find_shaped_target(manager, "slurm-dev-gpu-a100", 2, None)
    assert "slurm-dev-debug-gpu-2x1, slurm-dev-gpu-gpu-2x1" in str(no.value)
    with pytest.raises(ValueError, match=r"2 nodes × 2 GPUs"):
        find_shaped_target(manager, "slurm-dev-gpu-gpu", 2, 2)
    with pytest.raises(ValueError, match="--gpus-per-node goes with --nodes"):
        find_shaped_target(manager, "slurm-dev-gpu-gpu", None, 2)


async def test_a_job_ended_by_slurm_during_a_ranks_cell_answers_with_slurm_s_reason(
    kernels: Any, manager: MachineManager
) -> None:
    kernel_id = await kernels.start(TWO_NODES)
    kc = await kernels.channels(kernel_id)
    pids = await ranks_pids(kc)
    job = (await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")).stdout.strip()
    running = await kc.start("%%ranks\nimport time\nprint('on', flush=True)\ntime.sleep(600)")
    await kc.wait_printed(running, "on")
    assert slurm("scancel", job).returncode == 0
    dead, replies, _ = await dead_answers(kc, [running], timeout=30)
    assert dead
    reply = replies[running]
    # Not "rank died": the cell says SLURM ended the job, and why.
    assert reply["ename"] == "KernelDead", reply
    assert f"SLURM job {job} ended: CANCELLED" in reply["evalue"]
    for _ in range(50):
        if not any(alive(p) for p in pids):
            break
        await asyncio.sleep(0.2)
    assert not any(alive(p) for p in pids)
    assert our_jobs() == []
