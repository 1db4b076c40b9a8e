"""Loading of the jupyter_server extension."""

from __future__ import annotations

from typing import Any

from .. import __version__


def _load_jupyter_server_extension(server_app: Any) -> None:
    """Register the extension with a running jupyter_server.

    Args:
        server_app: The ``ServerApp`` loading this extension.
    """
    server_app.web_app.settings["jupyter_remote_hw_version"] = __version__
    server_app.log.info("jupyter_remote_hw %s loaded", __version__)


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Point jupyter_server at this module."""
    return [{"module": __name__}]
