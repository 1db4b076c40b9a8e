"""What the host has: GPUs (nvidia-smi), the accelerators that are not GPUs (AWS Trainium
and Inferentia through neuron-ls, Habana Gaudi through hl-smi), torch's view of CUDA, CPUs
and memory, and the scheduler allocation the agent runs in."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import sys
from typing import Any

from .allocation import allocation_label, slurm_allocation

log = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT = 15.0
TORCH_TIMEOUT = 60.0

NVIDIA_QUERY = [
    "--query-gpu=index,name,memory.total,driver_version",
    "--format=csv,noheader,nounits",
]
_CUDA_VERSION = re.compile(r"CUDA Version:\s*([0-9][0-9.]*)")

#: How long neuron-ls and hl-smi may take.
ACCELERATOR_TOOL_TIMEOUT = 15.0
#: neuron-ls's JSON: ``--json-output`` up to Neuron 2.33, ``--output-format json`` after.
NEURON_LS_QUERIES = (["--json-output"], ["--output-format", "json"])
#: hl-smi's nvidia-smi-like query of each Gaudi.
HL_SMI_QUERY = [
    "--query-aip=index,name,memory.total,driver_version",
    "--format=csv,noheader,nounits",
]
#: The Neuron device of each instance family (neuron-ls names the instance, not the chip).
_NEURON_CHIPS = (
    ("trn3", "Trainium3"),
    ("trn2", "Trainium2"),
    ("trn1", "Trainium"),
    ("inf2", "Inferentia2"),
    ("inf1", "Inferentia"),
)
#: The Gaudi generation of each hl-smi model name.
#: (HL-205 is the first Gaudi, HL-225 a Gaudi2, HL-325L a Gaudi 3; any other HL- a Gaudi.)
_GAUDI_MODELS = (("HL-3", "Gaudi 3"), ("HL-22", "Gaudi2"), ("HL-", "Gaudi"))

# Memory sizes GPUs are sold with (GB); nvidia-smi reports a little less.
_MARKETED_GIB = (4, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 141, 180, 192)

_TORCH_PROBE = """
import json
try:
    import torch
except ImportError:
    print(json.dumps(None))
    raise SystemExit(0)
except Exception as exc:
    print(json.dumps({"import_error": "%s: %s" % (type(exc).__name__, exc)}))
    raise SystemExit(0)
info = {"version": str(torch.__version__), "cuda_version": torch.version.cuda,
        "cuda_available": False, "device_count": 0, "devices": []}
try:
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        info.update(cuda_available=True, device_count=count,
                    devices=[torch.cuda.get_device_name(i) for i in range(count)])
except Exception as exc:
    info["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(info))
"""


async def _run(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Run a command, returning its exit status, stdout and stderr.

    Raises:
        OSError: It could not be started.
        asyncio.TimeoutError: It did not finish in time (it is killed).
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


def parse_gpu_csv(text: str) -> list[dict[str, Any]]:
    """Parse ``nvidia-smi --query-gpu=index,name,memory.total,driver_version`` CSV.

    Args:
        text: Its stdout (``--format=csv,noheader,nounits``).

    Returns:
        One dict per GPU with index, name, memory_mib and driver.
    """
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        index, name, memory, driver = fields[0], ",".join(fields[1:-2]), fields[-2], fields[-1]
        try:
            memory_mib: int | None = int(float(memory))
        except ValueError:
            memory_mib = None
        gpus.append({"index": int(index), "name": name, "memory_mib": memory_mib, "driver": driver})
    return gpus


async def query_gpus() -> tuple[list[dict[str, Any]], list[str]]:
    """List NVIDIA GPUs with nvidia-smi, when it exists.

    Returns:
        The GPUs (each with index, name, memory_mib, driver, cuda_version) and
        warnings about anything that went wrong.
    """
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], []
    try:
        (code, out, err), (_, header, _) = await asyncio.gather(
            _run([smi, *NVIDIA_QUERY], NVIDIA_SMI_TIMEOUT), _run([smi], NVIDIA_SMI_TIMEOUT)
        )
    except (OSError, asyncio.TimeoutError) as exc:
        return [], [f"nvidia-smi could not be run: {exc or 'timed out'}"]
    if code != 0:
        detail = (err or out).strip().splitlines()
        return [], [f"nvidia-smi failed: {detail[-1] if detail else f'exit status {code}'}"]
    match = _CUDA_VERSION.search(header)
    cuda_version = match.group(1) if match else None
    gpus = parse_gpu_csv(out)
    for gpu in gpus:
        gpu["cuda_version"] = cuda_version
    return gpus, []


def neuron_chip(instance_type: str) -> str:
    """The Neuron device of an instance type (``Trainium`` for ``trn1.32xlarge``), or
    ``Neuron device`` when the type is unknown."""
    for prefix, chip in _NEURON_CHIPS:
        if instance_type.startswith(prefix):
            return chip
    return "Neuron device"


def _find(value: Any, wanted: Any) -> Any:
    """The first value in a JSON tree (depth first) for which ``wanted`` holds, or None."""
    if wanted(value):
        return value
    children = value.values() if isinstance(value, dict) else value
    if isinstance(value, (dict, list)):
        for child in children:
            found = _find(child, wanted)
            if found is not None:
                return found
    return None


def _is_device_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, dict) and "neuron_device" in item for item in value)
    )


def parse_neuron_ls(text: str) -> list[dict[str, Any]]:
    """Parse neuron-ls's JSON: its list of devices (``--json-output``), or the object
    that holds that list beside the instance's details (``--output-format json``).

    Args:
        text: Its stdout.

    Returns:
        One dict per Neuron device with index, kind (``neuron``), name, memory_mib and
        cores.

    Raises:
        ValueError: It is not JSON, or lists no device.
    """
    data = json.loads(text)
    devices = _find(data, _is_device_list)
    if devices is None:
        if data == []:
            return []
        raise ValueError("no list of neuron_device entries in it")
    instance = _find(
        data,
        lambda v: isinstance(v, dict) and isinstance(v.get("instance_type"), str),
    )
    name = neuron_chip(instance["instance_type"] if instance else "")
    found = []
    for device in devices:
        memory = device.get("memory_size")
        cores = device.get("nc_count")
        found.append(
            {
                "index": int(device["neuron_device"]),
                "kind": "neuron",
                "name": name,
                "memory_mib": int(memory) // (1024 * 1024) if isinstance(memory, int) else None,
                "cores": cores if isinstance(cores, int) else None,
            }
        )
    return found


def gaudi_name(model: str) -> str:
    """A Gaudi as people name it: ``Gaudi HL-205`` for hl-smi's ``HL-205``."""
    for prefix, generation in _GAUDI_MODELS:
        if model.upper().startswith(prefix):
            return f"{generation} {model}"
    return model


def parse_hl_smi_csv(text: str) -> list[dict[str, Any]]:
    """Parse ``hl-smi --query-aip=index,name,memory.total,driver_version`` CSV.

    Args:
        text: Its stdout (``--format=csv,noheader,nounits``; a ``MiB`` unit is allowed).

    Returns:
        One dict per Gaudi with index, kind (``gaudi``), name, memory_mib and driver.
    """
    found: list[dict[str, Any]] = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        memory = fields[-2].split()[0] if fields[-2] else ""
        try:
            memory_mib: int | None = int(float(memory))
        except ValueError:
            memory_mib = None
        found.append(
            {
                "index": int(fields[0]),
                "kind": "gaudi",
                "name": gaudi_name(",".join(fields[1:-2])),
                "memory_mib": memory_mib,
                "driver": fields[-1],
            }
        )
    return found


async def _neuron_devices(tool: str) -> tuple[list[dict[str, Any]], list[str]]:
    failure = ""
    for query in NEURON_LS_QUERIES:
        try:
            code, out, err = await _run([tool, *query], ACCELERATOR_TOOL_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            return [], [f"neuron-ls could not be run: {exc or 'timed out'}"]
        if code != 0:
            detail = (err or out).strip().splitlines()
            failure = detail[-1] if detail else f"exit status {code}"
            continue
        try:
            return parse_neuron_ls(out), []
        except (ValueError, KeyError, TypeError) as exc:
            failure = f"its JSON was not understood ({exc})"
    return [], [f"neuron-ls failed: {failure}"]


async def _gaudi_devices(tool: str) -> tuple[list[dict[str, Any]], list[str]]:
    try:
        code, out, err = await _run([tool, *HL_SMI_QUERY], ACCELERATOR_TOOL_TIMEOUT)
    except (OSError, asyncio.TimeoutError) as exc:
        return [], [f"hl-smi could not be run: {exc or 'timed out'}"]
    if code != 0:
        detail = (err or out).strip().splitlines()
        return [], [f"hl-smi failed: {detail[-1] if detail else f'exit status {code}'}"]
    return parse_hl_smi_csv(out), []


async def query_accelerators() -> tuple[list[dict[str, Any]], list[str]]:
    """List the accelerators that are not GPUs, with the tools that exist here:
    Trainium and Inferentia with neuron-ls, Gaudi with hl-smi.

    Returns:
        The accelerators (each with index, kind, name and memory_mib) and warnings
        about anything that went wrong.
    """
    asks = []
    for name, ask in (("neuron-ls", _neuron_devices), ("hl-smi", _gaudi_devices)):
        tool = shutil.which(name)
        if tool is not None:
            asks.append(ask(tool))
    accelerators: list[dict[str, Any]] = []
    warnings: list[str] = []
    for found, problems in await asyncio.gather(*asks):
        accelerators.extend(found)
        warnings.extend(problems)
    return accelerators, warnings


async def probe_torch(python: str) -> tuple[dict[str, Any] | None, list[str]]:
    """Ask ``python`` in a subprocess what torch sees (importing torch is slow).

    Args:
        python: The interpreter to ask.

    Returns:
        torch's version and CUDA devices, or None when torch is not importable;
        and warnings.
    """
    try:
        code, out, err = await _run([python, "-c", _TORCH_PROBE], TORCH_TIMEOUT)
    except OSError as exc:
        return None, [f"cannot run {python} to look for torch: {exc.strerror or exc}"]
    except asyncio.TimeoutError:
        return None, [f"{python} took over {TORCH_TIMEOUT:.0f} s to import torch"]
    lines = out.strip().splitlines()
    try:
        info = json.loads(lines[-1]) if code == 0 and lines else None
    except ValueError:
        info = None
    if code != 0:
        detail = err.strip().splitlines()
        return None, [f"torch check failed: {detail[-1] if detail else f'exit status {code}'}"]
    if isinstance(info, dict) and "import_error" in info:
        return None, [f"torch is installed but does not import: {info['import_error']}"]
    if isinstance(info, dict) and "error" in info:
        return info, [f"torch.cuda failed: {info.pop('error')}"]
    return info if isinstance(info, dict) else None, []


def cpu_count() -> int:
    """CPUs this process may run on (its affinity), like ``nproc``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_mib() -> int | None:
    """Total physical memory in MiB, or None when it cannot be read."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))
    except (AttributeError, ValueError, OSError):
        return None


def gpu_size_label(memory_mib: int | None) -> str:
    """A GPU's memory as people name it: nvidia-smi's 23028 MiB is a "24 GiB" A10G.

    Args:
        memory_mib: Memory reported by nvidia-smi.

    Returns:
        E.g. ``"24 GiB"``, or ``""`` when unknown.
    """
    if not memory_mib:
        return ""
    gib = memory_mib / 1024
    for size in _MARKETED_GIB:
        if abs(gib - size) <= 0.07 * size:
            return f"{size} GiB"
    return f"{gib:.0f} GiB"


def gpu_label(gpu: dict[str, Any]) -> str:
    """A GPU as people name it: its name and memory size, e.g. ``NVIDIA A10G 24 GiB``."""
    return " ".join(part for part in (gpu["name"], gpu_size_label(gpu["memory_mib"])) if part)


def summarize(
    gpus: list[dict[str, Any]],
    torch: dict[str, Any] | None,
    cpus: int,
    mem_mib: int | None,
    accelerators: list[dict[str, Any]] | None = None,
) -> str:
    """One line describing the host, e.g. ``1 × NVIDIA A10G 24 GiB · 8 CPUs · 31.0 GiB RAM``
    or ``16 × Trainium 32 GiB · 128 CPUs · 512.0 GiB RAM``.

    Args:
        gpus: From :func:`query_gpus`.
        torch: From :func:`probe_torch`; its devices are used when nvidia-smi saw none.
        cpus: CPU count.
        mem_mib: Memory in MiB, or None.
        accelerators: From :func:`query_accelerators`, listed after the GPUs.

    Returns:
        The summary; a host with neither GPU nor accelerator says "no GPU".
    """
    groups: dict[str, int] = {}
    for gpu in gpus:
        label = gpu_label(gpu)
        groups[label] = groups.get(label, 0) + 1
    if not groups and torch and torch.get("cuda_available"):
        for name in torch.get("devices") or []:
            groups[str(name)] = groups.get(str(name), 0) + 1
    for accelerator in accelerators or []:
        label = gpu_label(accelerator)
        groups[label] = groups.get(label, 0) + 1
    parts = [" + ".join(f"{count} × {label}" for label, count in groups.items()) or "no GPU"]
    parts.append(f"{cpus} CPU" + ("" if cpus == 1 else "s"))
    if mem_mib is not None:
        parts.append(f"{mem_mib / 1024:.1f} GiB RAM")
    return " · ".join(parts)


class HardwareReporter:
    """Answers the ``hardware`` op, caching the slow parts per python.

    The GPU list and torch's view do not change while the agent runs, except
    when torch is installed meanwhile: ask with ``refresh`` then.
    """

    def __init__(self) -> None:
        self._allocation: dict[str, Any] | None = None
        self._allocation_read = False
        self._gpus: tuple[list[dict[str, Any]], list[str]] | None = None
        self._accelerators: tuple[list[dict[str, Any]], list[str]] | None = None
        self._torch: dict[str, tuple[dict[str, Any] | None, list[str]]] = {}

    async def report(self, python: str | None = None, refresh: bool = False) -> dict[str, Any]:
        """Describe the host's hardware.

        Args:
            python: Interpreter whose torch to inspect; the agent's own by default.
            refresh: Ignore cached results.

        Returns:
            The ``hardware`` result: gpus, accelerators (those that are not GPUs),
            torch, cpu_count, memory_mib, summary and warnings.
        """
        python = python or sys.executable
        if refresh:
            self._gpus = None
            self._accelerators = None
            self._torch.pop(python, None)
        need_gpus = self._gpus is None
        need_accelerators = self._accelerators is None
        need_torch = python not in self._torch
        if need_gpus or need_accelerators or need_torch:
            gpus_result, accelerators_result, torch_result = await asyncio.gather(
                query_gpus() if need_gpus else _cached(self._gpus),
                query_accelerators() if need_accelerators else _cached(self._accelerators),
                probe_torch(python) if need_torch else _cached(self._torch[python]),
            )
            self._gpus = gpus_result
            self._accelerators = accelerators_result
            self._torch[python] = torch_result
            for warning in (
                (gpus_result[1] if need_gpus else [])
                + (accelerators_result[1] if need_accelerators else [])
                + (torch_result[1] if need_torch else [])
            ):
                log.warning("hardware: %s", warning)
        if not self._allocation_read:
            self._allocation = await slurm_allocation(os.environ)
            self._allocation_read = True
        assert self._gpus is not None and self._accelerators is not None
        gpus, gpu_warnings = self._gpus
        accelerators, accelerator_warnings = self._accelerators
        torch, torch_warnings = self._torch[python]
        cpus = cpu_count()
        mem = memory_mib()
        warnings = gpu_warnings + accelerator_warnings + torch_warnings
        summary = summarize(gpus, torch, cpus, mem, accelerators)
        allocated = allocation_label(self._allocation) if self._allocation else None
        if allocated and summary.startswith("no GPU"):
            # The job's GPUs, though nvidia-smi and torch see none (yet).
            summary = allocated + summary[len("no GPU") :]
        return {
            "gpus": [dict(gpu) for gpu in gpus],
            "accelerators": [dict(accelerator) for accelerator in accelerators],
            "torch": dict(torch) if torch is not None else None,
            "cpu_count": cpus,
            "memory_mib": mem,
            "allocation": dict(self._allocation) if self._allocation else None,
            "summary": summary,
            "warnings": warnings,
        }


async def _cached(value: Any) -> Any:
    return value
