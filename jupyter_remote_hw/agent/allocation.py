"""The scheduler allocation the agent runs in, if any: a SLURM job's id, node and GPUs.

Inside a job, SLURM says which GPUs are the job's (``CUDA_VISIBLE_DEVICES``,
``SLURM_STEP_GPUS``) and what they are (``scontrol show job``'s ``JOB_GRES``,
e.g. ``gpu:a100:1``), whether or not ``nvidia-smi`` can see them.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

SCONTROL_TIMEOUT = 10.0

_JOB_GRES = re.compile(r"\bJOB_GRES=(\S+)")


def gpu_indexes(env: Mapping[str, str]) -> list[str]:
    """The GPUs a job's step may use, as SLURM numbers them on its node."""
    for name in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        value = env.get(name, "").strip()
        if value and value != "NoDevFiles":
            return [part for part in value.split(",") if part]
    return []


def parse_job_gres(text: str) -> dict[str, int]:
    """GPU types and counts from ``scontrol show job -d``: ``{"a100": 1}``.

    ``JOB_GRES=gpu:a100:1,gpu:t4:2`` (or ``gpu:2`` with no type: ``{"gpu": 2}``).
    """
    found: dict[str, int] = {}
    match = _JOB_GRES.search(text)
    if match is None or match.group(1) == "(null)":
        return found
    for item in match.group(1).split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        kind = parts[1] if len(parts) == 3 else "gpu"
        try:
            count = int(parts[-1])
        except ValueError:
            continue
        found[kind] = found.get(kind, 0) + count
    return found


async def slurm_allocation(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The SLURM job the agent runs in, or None outside one.

    Returns:
        ``scheduler``, ``job_id``, ``node``, ``partition``, ``gpu_indexes`` and
        ``gpus`` (type to count, from ``scontrol``; empty when it cannot say).
    """
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        return None
    allocation: dict[str, Any] = {
        "scheduler": "slurm",
        "job_id": job_id,
        "node": env.get("SLURMD_NODENAME"),
        "partition": env.get("SLURM_JOB_PARTITION"),
        "gpu_indexes": gpu_indexes(env),
        "gpus": {},
    }
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return allocation
    try:
        proc = await asyncio.create_subprocess_exec(
            scontrol,
            "show",
            "job",
            "-d",
            job_id,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), SCONTROL_TIMEOUT)
    except (OSError, asyncio.TimeoutError) as exc:
        log.info("scontrol could not describe job %s: %s", job_id, exc)
        return allocation
    allocation["gpus"] = parse_job_gres(out.decode(errors="replace"))
    return allocation


def allocation_label(allocation: dict[str, Any]) -> str | None:
    """``1 × a100 (SLURM job 200)``, or None for an allocation without GPUs."""
    gpus = allocation.get("gpus") or {}
    if not gpus:
        count = len(allocation.get("gpu_indexes") or [])
        gpus = {"GPU": count} if count else {}
    if not gpus:
        return None
    kinds = " + ".join(f"{count} × {kind}" for kind, count in gpus.items())
    return f"{kinds} (SLURM job {allocation['job_id']})"
