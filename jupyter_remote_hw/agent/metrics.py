"""Live use of a host: CPU and memory from /proc, GPUs from nvidia-smi.

Answers the agent's ``metrics`` op, and reads this machine for kernels that
no agent runs (a plain ``python3`` kernel of the Jupyter server). Standard
library only, like the rest of the agent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from typing import Any

from .hardware import _run, cpu_count

#: nvidia-smi's columns, in this order.
GPU_METRICS_QUERY = [
    "--query-gpu=index,name,utilization.gpu,memory.used,memory.total",
    "--format=csv,noheader,nounits",
]
#: Seconds nvidia-smi may take before it is killed.
GPU_METRICS_TIMEOUT = 5.0
#: Seconds a GPU reading is reused (several kernels on one host ask together).
GPU_CACHE = 1.0
#: Seconds nvidia-smi is left alone after it failed (a wedged driver makes it hang).
GPU_BACKOFF = 30.0
#: CPU use is measured since the previous reading when that is this recent (seconds)...
CPU_WINDOW_MAX = 30.0
#: ...and at least this old; otherwise over a fresh window of this length.
CPU_WINDOW_MIN = 0.25

_GIB = 1024.0**3


def _number(text: str) -> float | None:
    """One nvidia-smi value; None for ``[N/A]``, ``[Not Supported]`` and the like."""
    try:
        return float(text)
    except ValueError:
        return None


def parse_gpu_metrics(text: str) -> list[dict[str, Any]]:
    """Parse ``nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total``.

    Args:
        text: Its stdout (``--format=csv,noheader,nounits``).

    Returns:
        One dict per GPU: index, name, utilization (percent), memory_used_gib and
        memory_total_gib; a value nvidia-smi does not know is None.
    """
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 5 or not fields[0].isdigit():
            continue
        name = ",".join(fields[1:-3]).strip()
        utilization, used, total = (_number(value) for value in fields[-3:])
        gpus.append(
            {
                "index": int(fields[0]),
                "name": name,
                "utilization": utilization,
                "memory_used_gib": None if used is None else round(used / 1024, 2),
                "memory_total_gib": None if total is None else round(total / 1024, 2),
            }
        )
    return gpus


def read_cpu_times(path: str = "/proc/stat") -> tuple[int, int]:
    """The host's CPU time since boot in clock ticks: (total, idle incl. iowait).

    Raises:
        OSError: /proc cannot be read.
        ValueError: Its first line is not the ``cpu`` line.
    """
    with open(path) as handle:
        fields = handle.readline().split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"{path} does not start with the cpu line")
    ticks = [int(value) for value in fields[1:9]]  # user .. steal; guest is in user
    return sum(ticks), ticks[3] + ticks[4]


def read_memory(path: str = "/proc/meminfo") -> dict[str, float]:
    """The host's memory: total and used (MemTotal − MemAvailable) in GiB, and percent used.

    Raises:
        OSError: /proc cannot be read.
        KeyError: MemTotal or MemAvailable is missing (kernels before 3.14).
    """
    values: dict[str, int] = {}
    with open(path) as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                values[key] = int(rest.split()[0]) * 1024
    total, available = values["MemTotal"], values["MemAvailable"]
    used = max(0, total - available)
    return {
        "total_gib": round(total / _GIB, 3),
        "used_gib": round(used / _GIB, 3),
        "percent": round(100.0 * used / total, 1) if total else 0.0,
    }


def read_process(pid: int) -> tuple[int, int]:
    """A process's CPU time (user + system, clock ticks) and resident memory (bytes).

    Raises:
        OSError: The process is gone or cannot be read.
        ValueError: /proc's files are not as expected.
    """
    with open(f"/proc/{pid}/stat") as handle:
        stat = handle.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # fields[0] is the state (field 3)
    ticks = int(fields[11]) + int(fields[12])
    with open(f"/proc/{pid}/statm") as handle:
        resident_pages = int(handle.read().split()[1])
    return ticks, resident_pages * os.sysconf("SC_PAGE_SIZE")


def _percent(part: float, whole: float) -> float:
    return round(min(100.0, max(0.0, 100.0 * part / whole)), 1) if whole > 0 else 0.0


class MetricsSampler:
    """Takes readings of the host (and of kernel processes) and turns them into rates.

    CPU use is a rate: each reading is compared with the one before, so that
    polling every few seconds reports the use over those seconds; the first
    reading (or one long after the last) measures over a short fresh window.
    """

    def __init__(self) -> None:
        # (monotonic time, busy ticks, total ticks) of the last reading; last percent.
        self._host: tuple[float, int, int] | None = None
        self._host_percent: float | None = None
        # Per process: (monotonic time, CPU ticks) of the last reading; last percent.
        self._processes: dict[int, tuple[float, int, float | None]] = {}
        self._gpus: tuple[float, list[dict[str, Any]], list[str]] | None = None
        self._gpu_lock = asyncio.Lock()
        self._gpu_failed_at = -GPU_BACKOFF

    async def sample(self, pid: int | None = None) -> dict[str, Any]:
        """Read the host now.

        Args:
            pid: A kernel's process, to report its own CPU and memory too.

        Returns:
            ``cpu`` (percent of the whole host, count), ``load`` (1, 5 and 15
            minute averages), ``memory`` (used_gib, total_gib, percent), ``gpus``
            (see :func:`parse_gpu_metrics`; empty without nvidia-smi),
            ``kernel`` (pid, cpu_percent of one CPU as ``top`` counts it,
            memory_gib resident; None without a pid or once it is gone),
            ``time`` and ``warnings``.
        """
        warnings: list[str] = []
        gpu_task = asyncio.ensure_future(self.gpus())
        try:
            cpu, kernel = await self._cpu(pid, warnings)
        finally:
            gpus, gpu_warnings = await gpu_task
        try:
            memory: dict[str, float] | None = read_memory()
        except (OSError, KeyError, ValueError, IndexError) as exc:
            memory = None
            warnings.append(f"memory cannot be read from /proc/meminfo: {exc}")
        try:
            load: list[float] | None = [round(value, 2) for value in os.getloadavg()]
        except OSError:
            load = None
        return {
            "time": time.time(),
            "cpu": {"percent": cpu, "count": cpu_count()},
            "load": load,
            "memory": memory,
            "gpus": gpus,
            "kernel": kernel,
            "warnings": warnings + gpu_warnings,
        }

    def _stale(self, pid: int | None, now: float) -> bool:
        """Whether the last readings are too old (or missing) to measure a rate from."""
        if self._host is None or now - self._host[0] > CPU_WINDOW_MAX:
            return True
        if pid is None:
            return False
        last = self._processes.get(pid)
        return last is None or now - last[0] > CPU_WINDOW_MAX

    async def _cpu(
        self, pid: int | None, warnings: list[str]
    ) -> tuple[float | None, dict[str, Any] | None]:
        """Host CPU percent and the process's use, over a window since the last reading."""
        try:
            if self._stale(pid, time.monotonic()):
                self._read_host(time.monotonic())
                self._read_process(pid, time.monotonic())
                await asyncio.sleep(CPU_WINDOW_MIN)
            host = self._read_host(time.monotonic())
        except (OSError, ValueError, IndexError) as exc:
            warnings.append(f"CPU use cannot be read from /proc/stat: {exc}")
            return None, None
        return host, self._read_process(pid, time.monotonic())

    def _read_host(self, now: float) -> float | None:
        """Read /proc/stat; the percent busy since the last reading old enough to count."""
        total, idle = read_cpu_times()
        last = self._host
        if last is None or now - last[0] >= CPU_WINDOW_MIN:
            if last is not None:
                self._host_percent = _percent((total - idle) - last[1], total - last[2])
            self._host = (now, total - idle, total)
        return self._host_percent

    def _read_process(self, pid: int | None, now: float) -> dict[str, Any] | None:
        """Read a process: its CPU (percent of one CPU) since the last reading, and memory."""
        if pid is None:
            return None
        try:
            ticks, resident = read_process(pid)
        except (OSError, ValueError, IndexError):
            self._processes.pop(pid, None)
            return None
        for gone in [
            p for p, seen in self._processes.items() if now - seen[0] > 10 * CPU_WINDOW_MAX
        ]:
            del self._processes[gone]  # kernels nobody asked about for minutes
        last = self._processes.get(pid)
        percent = last[2] if last is not None else None
        if last is None or now - last[0] >= CPU_WINDOW_MIN:
            if last is not None:
                seconds = (ticks - last[1]) / os.sysconf("SC_CLK_TCK")
                percent = round(max(0.0, 100.0 * seconds / (now - last[0])), 1)
            self._processes[pid] = (now, ticks, percent)
        return {"pid": pid, "cpu_percent": percent, "memory_gib": round(resident / _GIB, 3)}

    async def gpus(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The GPUs' use now, from nvidia-smi; no GPU (and no warning) without it."""
        async with self._gpu_lock:
            now = time.monotonic()
            if self._gpus is not None and now - self._gpus[0] < GPU_CACHE:
                return [dict(gpu) for gpu in self._gpus[1]], list(self._gpus[2])
            gpus, warnings = await self._query_gpus(now)
            self._gpus = (time.monotonic(), gpus, warnings)
            return [dict(gpu) for gpu in gpus], list(warnings)

    async def _query_gpus(self, now: float) -> tuple[list[dict[str, Any]], list[str]]:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return [], []
        if now - self._gpu_failed_at < GPU_BACKOFF and self._gpus is not None:
            return [], list(self._gpus[2])  # the last failure, not tried again yet
        try:
            code, out, err = await _run([smi, *GPU_METRICS_QUERY], GPU_METRICS_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            self._gpu_failed_at = now
            reason = str(exc) or f"no answer in {GPU_METRICS_TIMEOUT:.0f} s"
            return [], [f"nvidia-smi could not be run: {reason}"]
        if code != 0:
            self._gpu_failed_at = now
            detail = (err or out).strip().splitlines()
            return [], [f"nvidia-smi failed: {detail[-1] if detail else f'exit status {code}'}"]
        return parse_gpu_metrics(out), []
