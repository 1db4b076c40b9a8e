"""Kernel websockets that send each message at once (TCP_NODELAY).

jupyter_server leaves Nagle's algorithm on for kernel websockets, so a small
message (an execute_reply, an idle status) can wait for the browser's delayed
ACK: about 40 ms per cell on Linux, for every kernel, local ones too. The
connection class here turns it off when a websocket opens; the extension
installs it as ``ServerApp.kernel_websocket_connection_class`` unless the user
chose another class.
"""

from __future__ import annotations

import asyncio

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection


class NoDelayWebsocketConnection(ZMQChannelsWebsocketConnection):
    """jupyter_server's kernel websocket connection, with TCP_NODELAY on its socket.

    It serves both websocket protocols alike (``v1.kernel.websocket.jupyter.org``
    and the legacy JSON one): the subprotocol only changes how messages are
    framed, not the socket they go out on. It is configured as
    ``c.ZMQChannelsWebsocketConnection.*``, like the class it extends.
    """

    # The signature is the one ZMQChannelsWebsocketConnection.connect has; that one too
    # differs from the base class's (a coroutine function there).
    def connect(self) -> asyncio.Future[None] | None:  # type: ignore[override]
        """Turn Nagle's algorithm off for the websocket, then connect it to the kernel.

        Called by the kernel websocket handler once the websocket is open. A
        socket that is not TCP (a UNIX socket) is left as it is.

        Returns:
            What :meth:`ZMQChannelsWebsocketConnection.connect` returns: a future
            that resolves once the kernel answered, or None if it could not be
            reached.
        """
        handler = self.websocket_handler
        if handler is not None and handler.ws_connection is not None:
            handler.set_nodelay(True)
        return super().connect()
