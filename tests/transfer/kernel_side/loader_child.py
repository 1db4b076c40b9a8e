"""The restricted loader run in a child process, so that a pickle that crashes it (a
segfault, a hang) fails a test instead of ending the test run.

The child loads each stream with ``load_variables_restricted`` and answers one line:
``ok`` (it returned plain data), ``refused`` (the loader's own error), or what went
wrong: another exception, a call the loader made of something it was not allowed to
name, an audit event (a command, a file written, a socket), a result that is not plain
data. :class:`LoaderChild` starts a new child when one dies, and says how it died.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = str(Path(__file__).resolve().parents[3])

WORKER = r"""
import collections, datetime, decimal, fractions, json, os, pathlib, pickle, sys, uuid
import numpy, pandas
try:
    import torch
except ImportError:
    torch = None
from jupyter_remote_hw.transfer import TransferError
from jupyter_remote_hw.transfer.kernel_side.allowlist import ALLOWED, ALLOWED_ATTRIBUTES
from jupyter_remote_hw.transfer.kernel_side.pickling import Pickled
from jupyter_remote_hw.transfer.kernel_side import restricted, restricted_checks
from jupyter_remote_hw.transfer.kernel_side.restricted import load_variables_restricted

events = []
FORBIDDEN = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
             "socket.connect", "socket.bind", "exec", "compile", "ctypes", "os.remove",
             "os.rename", "shutil")

def audit(event, args):
    if event.startswith(FORBIDDEN) or (
        event == "open" and len(args) > 1 and isinstance(args[1], str) and set(args[1]) & set("wax+")
    ):
        events.append(event)

sys.addaudithook(audit)

allowed_objects = {}
for module, name in ALLOWED:
    try:
        found = restricted._walk(__import__(module, fromlist=["_"]), name, static=False)
    except ImportError:
        continue
    if found is not None:
        allowed_objects[id(found)] = found
for module, owner, name in ALLOWED_ATTRIBUTES:
    found = restricted._walk(sys.modules.get(module), owner, static=True)
    if found is not None:
        allowed_objects[id(getattr(found, name))] = getattr(found, name)
allowed_objects[id(restricted._type_of)] = restricted._type_of
called = []
original_call, original_new = restricted_checks.Checks.call, restricted_checks.Checks.new

def recording(original):
    def call(self, func, args, kwargs):
        try:
            result = original(self, func, args, kwargs)
        except restricted_checks.RefusedGlobalError:
            raise  # refused before it was called
        except BaseException:
            called.append(func)
            raise
        called.append(func)
        return result
    return call

restricted_checks.Checks.call = recording(original_call)
restricted_checks.Checks.new = recording(original_new)
PLAIN = ("builtins", "collections", "datetime", "decimal", "fractions", "uuid", "pathlib",
         "zoneinfo", "numpy", "pandas", "torch", "dateutil", "pytz")

def plain(value, depth=0):
    if depth > 50 or id(value) in allowed_objects:  # an allowed type or function itself
        return True
    module = type(value).__module__.split(".")[0]
    if module not in PLAIN:
        return False
    if isinstance(value, (list, tuple, set, frozenset, collections.deque)):
        return all(plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(plain(k, depth + 1) and plain(v, depth + 1) for k, v in value.items())
    return True

stdin, stdout = sys.stdin.buffer, sys.stdout
while True:
    head = stdin.read(8)
    if len(head) < 8:
        break
    data, buffers, allowed = pickle.loads(stdin.read(int.from_bytes(head, "little")))
    del events[:], called[:]
    try:
        values = load_variables_restricted(
            [Pickled("x", "fuzzed", data, [bytearray(b) for b in buffers])], "fuzz", allowed
        )
        answer = "ok" if plain(values["x"]) else "not plain: " + type(values["x"]).__name__
    except TransferError as exc:
        answer = "refused" if exc.name == "x" else "error: TransferError " + str(exc)
    except BaseException as exc:
        answer = "error: " + type(exc).__name__ + " " + str(exc)[:300]
    outside = [restricted_checks.name_of(f) for f in called if id(f) not in allowed_objects
               and getattr(f, "__self__", None) is None and not allowed]
    if outside:
        answer = "called outside the allowlist: " + ", ".join(outside)
    if events:
        answer = "audit: " + ", ".join(events)
    stdout.write(json.dumps(answer) + "\n")
    stdout.flush()
"""


class LoaderChild:
    """A child process that loads streams with the restricted loader, one at a time.

    Args:
        timeout: Seconds one load may take before the child counts as hung.
    """

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._process: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        environment = {**os.environ, "PYTHONPATH": REPO, "PYTHONFAULTHANDLER": ""}
        return subprocess.Popen(
            [sys.executable, "-c", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
            env=environment,
        )

    def load(self, data: bytes, buffers: list[bytes] = (), allowed: tuple[str, ...] = ()) -> str:  # type: ignore[assignment]
        """What loading ``data`` did (see the module docstring); ``crashed (...)`` or
        ``hung`` when the child died or did not answer in time."""
        if self._process is None or self._process.poll() is not None:
            self._process = self._start()
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        message = pickle.dumps((bytes(data), [bytes(b) for b in buffers], tuple(allowed)))
        try:
            process.stdin.write(len(message).to_bytes(8, "little") + message)
            process.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([process.stdout], [], [], self.timeout)
        line = process.stdout.readline() if ready else b""
        if not line:
            if process.poll() is None:
                process.kill()
                process.wait()
                return "hung"
            return f"crashed (exit status {process.returncode})"
        answer: Any = json.loads(line)
        return str(answer)

    def close(self) -> None:
        """End the child."""
        process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
