"""Pick cloud and cluster hardware per kernel or per cell from JupyterLab."""

from __future__ import annotations

import warnings
from typing import Any

# cryptography 51 deprecates DSA, and asyncssh names its DSA classes when imported: the
# warning would greet every user at the server's start for keys we never use.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh\.")

__version__ = "0.1.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Tell JupyterLab where the prebuilt front-end extension lives."""
    return [{"src": "labextension", "dest": "jupyter-remote-hw"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Tell jupyter_server which application is the server extension."""
    from .server.extension import RemoteHWExtension

    return [{"module": "jupyter_remote_hw.server.extension", "app": RemoteHWExtension}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_remote_hw``: the remote magics, and transfers to this kernel."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def picker(shell: Any = None) -> Any:
    """The ipywidgets hardware picker; the row chosen becomes the default ``%%remote`` target."""
    from .notebook.widgets import picker as show

    return show(shell)
