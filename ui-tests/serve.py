"""Serve JupyterLab for the UI tests: the local provider and a real loopback sshd host.

Started by ui-tests/run.sh; stops JupyterLab, the kernels, the agents and sshd when it
receives SIGTERM or SIGINT. Everything lives in one temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests.fakegpu import path_with_fake_gpu
from tests.processes import kill_processes_mentioning
from tests.testhosts import free_port, keygen, loopback_host


def main() -> int:
    """Run JupyterLab until told to stop; its exit code."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    tmp = Path(tempfile.mkdtemp(prefix="jrhw-ui-", dir="/tmp"))
    # A teammate's key pair, for the sharing tests: run.sh names where it goes, so the
    # tests read the public key and hand the private key's path to "Join shared session".
    teammate_key = Path(os.environ.get("JRHW_UI_TEAMMATE_KEY") or tmp / "teammate" / "id_ed25519")
    try:
        teammate_key.parent.mkdir(parents=True, exist_ok=True)
        keygen(teammate_key, comment="ada@laptop")
        # nvidia-smi on the test host is a stand-in ("Test GPU", 24 GiB), so that the live
        # hardware view of its kernels shows GPU numbers.
        gpu = {
            "PATH": path_with_fake_gpu(),
            "FAKE_NVIDIA_SMI_NAME": "Test GPU",
            "FAKE_NVIDIA_SMI_MEMORY_MIB": "24576",
        }
        with loopback_host(tmp / "host", env=gpu) as host:
            # The test host; "deadhost": the same host on a port nothing listens on;
            # "newbox": the same host under an alias whose known_hosts file does not list
            # its key yet, as for a machine the user never connected to; "sparebox": the
            # same host under another alias, a second machine to move a kernel to.
            ssh_config = tmp / "ssh_config"
            newbox_known_hosts = tmp / "newbox_known_hosts"
            ssh_config.write_text(
                host.ssh_config.read_text()
                + host.config_block("deadhost", Port=free_port())
                + host.config_block("newbox", UserKnownHostsFile=newbox_known_hosts)
                + host.config_block("sparebox")
            )
            # What the host-key tests compare the dialog and known_hosts with.
            facts = {
                "address": host.address,
                "port": host.port,
                "fingerprint": host.fingerprint(),
                "known_hosts": str(newbox_known_hosts),
                "known_hosts_line": host.known_hosts_line(),
            }
            if os.environ.get("JRHW_UI_NEWBOX"):
                Path(os.environ["JRHW_UI_NEWBOX"]).write_text(json.dumps(facts))
            env = {
                # No AWS credentials: the picker folds the AWS rows into one line.
                **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
                "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
                "AWS_EC2_METADATA_DISABLED": "true",
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
                ),
                "JUPYTER_CONFIG_DIR": str(tmp / "config"),
                "JRHW_UI_TMP": str(tmp),
                "JRHW_UI_SSH_CONFIG": str(ssh_config),
                "JRHW_UI_SSH_ALIAS": host.alias,
                "JRHW_UI_AUTHORIZED_KEYS": str(host.authorized_keys),
                # Kernelspecs and share files of joined shares stay in the temporary directory.
                "JUPYTER_DATA_DIR": str(tmp / "data"),
                # The extension as built in this tree, before any installed copy.
                "JUPYTER_PATH": os.pathsep.join(
                    filter(None, [str(tmp / "jupyter"), os.environ.get("JUPYTER_PATH")])
                ),
            }
            # The server's config, where kernels look for it too: %%remote in a notebook's
            # kernel offers the hardware the server offers.
            (tmp / "config").mkdir(exist_ok=True)
            (tmp / "config" / "jupyter_server_config.py").symlink_to(
                HERE / "jupyter_server_test_config.py"
            )
            (tmp / "jupyter" / "labextensions").mkdir(parents=True)
            (tmp / "jupyter" / "labextensions" / "jupyter-remote-hw").symlink_to(
                REPO / "jupyter_remote_hw" / "labextension"
            )
            lab = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jupyter",
                    "lab",
                ],
                env=env,
                cwd=tmp,
            )
            while not stop.wait(0.5):
                if lab.poll() is not None:
                    return lab.returncode
            lab.terminate()
            try:
                lab.wait(60)
            except subprocess.TimeoutExpired:
                lab.kill()
                lab.wait()
            return 0
    finally:
        kill_processes_mentioning(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
