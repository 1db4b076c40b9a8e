"""Which modules the host's Python can import: asked before a hardware switch, so the
carry dialog names the modules the new kernel would not find."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from .hardware import _run

#: Seconds the probe may take (finding a package's spec imports its parents).
FIND_TIMEOUT = 20.0

_FIND = r"""
import importlib.util, json, sys
missing = {}
for name in json.loads(sys.argv[1]):
    try:
        if importlib.util.find_spec(name) is None:
            missing[name] = "No module named %r" % name
    except Exception as exc:
        missing[name] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(missing))
"""


async def find_modules(modules: list[str], python: str | None = None) -> dict[str, Any]:
    """The modules of ``modules`` that ``python`` (the agent's own by default) cannot find.

    Returns:
        ``missing``: module name to the reason; ``error`` instead when the
        probe itself could not run (then nothing is known).
    """
    python = python or sys.executable
    try:
        code, out, err = await _run([python, "-c", _FIND, json.dumps(modules)], FIND_TIMEOUT)
    except OSError as exc:
        return {"error": f"cannot run {python}: {exc.strerror or exc}"}
    except asyncio.TimeoutError:
        return {"error": f"{python} took over {FIND_TIMEOUT:.0f} s to look for the modules"}
    if code != 0:
        return {"error": (err.strip().splitlines() or [f"exit status {code}"])[-1]}
    try:
        missing = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"unreadable answer: {out[-200:]!r}"}
    return {"missing": missing}
