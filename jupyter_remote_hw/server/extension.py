"""The jupyter_server extension application."""

from __future__ import annotations

from typing import Any

from jupyter_server.extension.application import ExtensionApp

from .. import __version__
from ..transport import TransportManager

#: Key under which the shared :class:`TransportManager` sits in the tornado settings.
TRANSPORT_SETTING = "jupyter_remote_hw_transport"


class RemoteHWExtension(ExtensionApp):
    """Owns the server-wide managers and closes them when the server stops.

    Configured from the server's config files: ``c.TransportManager.*`` reaches
    the one :class:`TransportManager` of this server.
    """

    name = "jupyter_remote_hw"
    load_other_extensions = True
    classes = [TransportManager]  # noqa: RUF012 (a traitlets List on the base class)

    def initialize_settings(self) -> None:
        """Create the managers and publish them to handlers through the settings."""
        self.transport = TransportManager(parent=self, log=self.log)
        self.settings.update({
            TRANSPORT_SETTING: self.transport,
            "jupyter_remote_hw_version": __version__,
        })
        self.log.info("jupyter_remote_hw %s loaded", __version__)

    async def stop_extension(self) -> None:
        """Close every SSH connection and forward."""
        await self.transport.close_all()


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Point jupyter_server at the extension application."""
    return [{"module": __name__, "app": RemoteHWExtension}]
