"""JupyterLab for the UI tests (see serve.py, which sets the JRHW_UI_* variables)."""

import os
import sys
from pathlib import Path

from jupyterlab.galata import configure_jupyter_server

c = get_config()  # type: ignore[name-defined]  # noqa: F821

configure_jupyter_server(c)
c.ServerApp.port = int(os.environ.get("JRHW_UI_PORT", "8888"))
c.ServerApp.ip = "127.0.0.1"
c.ServerApp.allow_root = True  # CI runs as root

tmp = Path(os.environ["JRHW_UI_TMP"])
root = tmp / "notebooks"
root.mkdir(exist_ok=True)
c.ServerApp.root_dir = str(root)

c.ServerApp.jpserver_extensions.update({"jupyter_remote_hw": True})
c.TransportManager.ssh_config_files = [os.environ["JRHW_UI_SSH_CONFIG"]]
c.SSHProvider.hosts = [
    {
        "host": os.environ["JRHW_UI_SSH_ALIAS"],
        "hardware": "Test GPU 24GB",
        "root": str(tmp / "remote-root"),
        # The test host is this machine: its python3 may lack ipykernel, this one has it.
        "python": sys.executable,
        # Shares add their key lines to the file this host's sshd reads.
        "authorized_keys": os.environ["JRHW_UI_AUTHORIZED_KEYS"],
    },
    {"host": "deadhost", "hardware": "Gone GPU 80GB"},
    # Its key is not in the known_hosts file its alias names: trusted from the dialog.
    {
        "host": "newbox",
        "hardware": "New GPU 48GB",
        "root": str(tmp / "remote-root-newbox"),
        "python": sys.executable,
    },
    # A second machine (the test host again) for a kernel to wake on.
    {
        "host": "sparebox",
        "hardware": "Spare GPU 16GB",
        "root": str(tmp / "remote-root-spare"),
        "python": sys.executable,
    },
]
c.TransportManager.connect_timeout = 5.0
c.SSHProvider.include_ssh_config = False
c.LocalProvider.state_dir = str(tmp / "l")
c.MachineManager.ledger_path = str(tmp / "ledger.sqlite3")
# The SLURM cluster run.sh started (../shared/slurm), its login node the test host.
if os.environ.get("JRHW_UI_SLURM_CONF"):
    c.SLURMProvider.clusters = {
        "dev": {
            "login": os.environ["JRHW_UI_SSH_ALIAS"],
            "python": sys.executable,
            "env": {"SLURM_CONF": os.environ["JRHW_UI_SLURM_CONF"]},
            "root": str(tmp / "slurm-root"),
            "time": "10",
            "nodes": [2],
        },
    }
    c.SLURMProvider.queue_poll = 1.0
