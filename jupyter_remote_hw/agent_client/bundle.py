"""The agent as one file: a zipapp of the ``agent`` package and what kernels load.

Hosts need only python3 with ipykernel: the zipapp is sent to a host that
lacks it (see :mod:`..agent.boot`) and run with ``python3 agent.pyz serve
...``. Besides the agent it carries the kernel side of transfers (the
``transfer.kernel_side`` package, under a private name in ``kernel/``) and cloudpickle
(in ``vendor/``, used only when the host's Python lacks it). Its name carries
the agent version and a hash of its contents, so a host keeps one copy per
build and a changed agent is never mistaken for the old one.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from functools import cache
from pathlib import Path

import cloudpickle

from ..agent import AGENT_VERSION
from ..agent.launch import ZIPAPP_KERNEL_DIR, ZIPAPP_KERNEL_PACKAGE

_PACKAGE = Path(__file__).resolve().parent.parent
_MAIN = "from jupyter_remote_hw.agent.__main__ import main\nmain()\n"


def _sources() -> list[tuple[str, bytes]]:
    files = [("jupyter_remote_hw/__init__.py", b'"""Host-side copy: the agent only."""\n')]
    for path in sorted((_PACKAGE / "agent").rglob("*.py")):
        files.append((str(path.relative_to(_PACKAGE.parent)), path.read_bytes()))
    kernel_side = _PACKAGE / "transfer" / "kernel_side"
    for path in sorted(kernel_side.rglob("*.py")):
        name = path.relative_to(kernel_side).as_posix()
        files.append((f"{ZIPAPP_KERNEL_DIR}/{ZIPAPP_KERNEL_PACKAGE}/{name}", path.read_bytes()))
    vendor = Path(cloudpickle.__file__).parent
    for path in sorted(vendor.rglob("*.py")):
        files.append((f"vendor/cloudpickle/{path.relative_to(vendor)}", path.read_bytes()))
    files.append(("__main__.py", _MAIN.encode()))
    return files


@cache
def agent_zipapp() -> tuple[str, bytes]:
    """Build the agent zipapp once per process; return its file name and bytes."""
    buffer = io.BytesIO()
    # Fixed timestamps make the bytes, and so the hash, depend only on the sources.
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in _sources():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:12]
    return f"jupyter-remote-hw-agent-{AGENT_VERSION}-{digest}.pyz", data
