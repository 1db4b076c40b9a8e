"""Our side's ports of a remote kernel (its relay's) are TCP ports on 127.0.0.1, as every
kernel's are on a stock Jupyter server: another user of this machine can connect to
them, but cannot run code, since every request must be signed with the kernel's key,
which only the owner's connection files hold (docs/security.md, "Our side's ports")."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from .conftest import SSH_KERNEL, OpenChannels, StartKernel

NOBODY = 65534

#: Run as another user: subscribe to IOPub, send an execute_request signed with a key that
#: is not the kernel's, and say whether anything came back on the shell channel; then a
#: kernel_info_request signed with the kernel's key, which the same port answers.
PROBE = r"""
import json, sys, zmq
from jupyter_client.session import Session
ports = json.loads(sys.argv[1])
context = zmq.Context()
iopub = context.socket(zmq.SUB)
iopub.setsockopt(zmq.SUBSCRIBE, b"")
iopub.connect("tcp://127.0.0.1:%d" % ports["iopub_port"])
shell = context.socket(zmq.DEALER)
shell.connect("tcp://127.0.0.1:%d" % ports["shell_port"])
Session(key=b"not-the-kernels-key").send(
    shell, "execute_request",
    {"code": "stolen = 1", "silent": False, "store_history": False,
     "user_expressions": {}, "allow_stdin": False},
)
refused = not shell.poll(5000)
# The same port answers a request signed with the kernel's key (given here to show that).
Session(key=sys.argv[2].encode()).send(shell, "kernel_info_request", {})
print(json.dumps({"unsigned_refused": refused, "signed_answered": bool(shell.poll(20000))}))
"""


@pytest.mark.skipif(os.getuid() != 0, reason="switching to another user needs root")
async def test_another_user_reaches_our_sides_ports_but_cannot_run_code(
    start_kernel: StartKernel, channels: OpenChannels, jp_serverapp: Any
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    info = jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info()
    assert info["ip"] == "127.0.0.1" and info["transport"] == "tcp"
    ports = {name: info[name] for name in ("shell_port", "iopub_port")}
    done = await asyncio.to_thread(
        subprocess.run,
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            sys.executable,
            "-c",
            PROBE,
            json.dumps(ports),
            info["key"].decode(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == {"unsigned_refused": True, "signed_answered": True}, done
    ran = await kc.execute("print('stolen' in globals())")
    assert ran.stdout.strip() == "False", ran
