"""What runs over a live connection: remote commands, byte streams to the host, and local
forwards whose port outlives reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncssh

from .errors import (
    CommandTimeoutError,
    ConnectionFailedError,
    in_words,
)
from .forward import LocalForward
from .settings import TransportSettings

_PGID_MARK = "jupyter-remote-hw-pgid:"


@dataclass(frozen=True)
class CommandResult:
    """What a remote command did.

    Attributes:
        command: The command line as sent.
        exit_status: Its exit status; None when it was killed by a signal.
        stdout: Its standard output, decoded as UTF-8.
        stderr: Its standard error, decoded as UTF-8.
    """

    command: str
    exit_status: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """Whether the command exited with status 0."""
        return self.exit_status == 0


#: Largest packet the host may send on a byte stream opened by
#: :meth:`SSHConnection.open_connection`: 8 times a forward's, so a download
#: is fewer packets to decrypt and hand over (a forward, whose bytes go on to
#: a local socket, measured best at 32 KiB).
STREAM_MAX_PACKET = 256 * 1024


#: Receive window of a byte stream opened by :meth:`SSHConnection.open_connection`:
#: twice a forward's, as a transfer's bulk stream is read at once into its
#: buffers and a download over a long link moves at most one window per round
#: trip on each channel (a large transfer takes several channels; the bytes in
#: flight never exceed the transfer's own size).
STREAM_WINDOW = 16 * 1024 * 1024


class ConnectionChannels:
    """The commands, streams and forwards of :class:`.connection.SSHConnection`."""

    destination: str
    settings: TransportSettings
    log: logging.Logger
    _forwards: set[LocalForward]

    async def wait_connected(self, timeout: float | None = None) -> asyncssh.SSHClientConnection:
        """The live connection (see :meth:`.connection.SSHConnection.wait_connected`)."""
        raise NotImplementedError

    async def run(
        self, command: str, *, timeout: float | None = None, input: str | None = None
    ) -> CommandResult:
        """Run ``command`` (POSIX sh syntax) on the host; return its status and output.

        Raises:
            CommandTimeoutError: It did not finish within ``timeout`` seconds
                (default: the settings' ``command_timeout``); its whole process
                group on the host is killed.
            ConnectionFailedError: There is no connection to run it on, or it was
                lost while the command ran (whether the command did its work is then
                not known: nothing is run again).
        """
        limit = timeout if timeout is not None else self.settings.command_timeout
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        # sshd makes the command a session leader; `exec` keeps that pid for sh,
        # which reports it first so that a timeout can kill the whole group.
        wrapped = "exec sh -c " + shlex.quote(f"echo {_PGID_MARK}$$ >&2; {command}")
        try:
            process = await conn.create_process(wrapped, errors="replace")
        except asyncssh.ChannelOpenError as exc:  # the link dropped after wait_connected
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: could not start `{command}`: {exc.reason}",
            ) from None
        pgid: str | None = None
        try:
            async with asyncio.timeout(limit):
                first = str(await process.stderr.readline())
                if first.startswith(_PGID_MARK):
                    pgid = first[len(_PGID_MARK) :].strip()
                try:
                    stdout, stderr = await process.communicate(input)
                except BrokenPipeError:
                    # The command ended (or closed its input) before it read all of it,
                    # as a check that refuses does: what it said and its status stand.
                    stdout, stderr = await process.communicate()
        except TimeoutError:
            process.close()
            if pgid and pgid.isdigit():
                await conn.run(f"exec sh -c 'kill -s KILL -- -{pgid}'", check=False)
            raise CommandTimeoutError(
                self.destination,
                f"ssh {self.destination}: `{command}` did not finish within {limit:g} s "
                "and was killed",
            ) from None
        except (OSError, asyncssh.Error) as exc:  # a reset
            process.close()
            raise self._lost(command, in_words(exc)[0], str(exc) or type(exc).__name__) from None
        except asyncio.CancelledError:  # its caller gave up: so does its channel
            process.close()
            raise
        if process.exit_status is None:  # its channel closed with no status: the link went
            raise self._lost(command, "it closed before the command ended", None)
        prefix = "" if pgid is not None else first
        return CommandResult(
            command=command,
            exit_status=process.exit_status,
            stdout=str(stdout or ""),
            stderr=prefix + str(stderr or ""),
        )

    def _lost(self, command: str, reason: str, detail: str | None) -> ConnectionFailedError:
        """The error of a command whose connection was lost while it ran."""
        return ConnectionFailedError(
            self.destination,
            f"ssh {self.destination}: the connection was lost while `{command}` ran "
            f"({reason}); whether it did its work is not known. Try again once "
            f"`ssh {self.destination}` works.",
            detail=detail,
        )

    @contextlib.asynccontextmanager
    async def open_process(self, command: str) -> AsyncIterator[asyncssh.SSHClientProcess[bytes]]:
        """Start ``command`` on the host for a dialogue over its stdin and stdout (bytes).

        For exchanges that :meth:`run` cannot carry, such as sending data only
        when the command asks for it. The process's channel is closed when the
        context ends; the caller bounds the time it takes.

        Raises:
            ConnectionFailedError: There is no connection to start it on.
        """
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        try:
            process = await conn.create_process(command, encoding=None)
        except asyncssh.ChannelOpenError as exc:  # the link dropped after wait_connected
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: could not start a command: {exc.reason}",
            ) from None
        try:
            yield process
        finally:
            process.close()
            await process.wait_closed()

    async def open_unix_connection(
        self, remote_path: str
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """Open a byte stream to the UNIX socket ``remote_path`` on the host.

        Raises:
            ConnectionFailedError: There is no connection, or the host refused
                to open the socket (it does not exist or is not ours).
        """
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        try:
            return await conn.open_unix_connection(remote_path, encoding=None)
        except asyncssh.ChannelOpenError as exc:
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: cannot open socket {remote_path}: {exc.reason}",
            ) from None

    async def open_connection(
        self, remote_host: str, remote_port: int
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """Open a byte stream to ``remote_host:remote_port`` as seen from the host.

        Made for bulk transfers: the channel's receive window is twice a
        forward's, so downloads are less held back by round trips, and the
        host may send larger packets than on a forward.

        Raises:
            ConnectionFailedError: There is no connection, or the host refused
                to open the channel (nothing listens there, or forwarding is
                not allowed for this key).
        """
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        try:
            return await conn.open_connection(
                remote_host,
                remote_port,
                encoding=None,
                window=STREAM_WINDOW,
                max_pktsize=STREAM_MAX_PACKET,
            )
        except asyncssh.ChannelOpenError as exc:
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: cannot open {remote_host}:{remote_port}: {exc.reason}",
            ) from None

    async def forward_local_port(
        self,
        remote_port: int,
        *,
        remote_host: str = "127.0.0.1",
        remote_path: str | None = None,
        local_port: int = 0,
    ) -> LocalForward:
        """Listen on 127.0.0.1 and tunnel each client to ``remote_host:remote_port``,
        or to the host's UNIX socket ``remote_path`` when one is given.

        The local port is kept across reconnects; it is closed with this
        connection or by :meth:`LocalForward.close`.
        """
        forward = LocalForward(
            self.destination,
            lambda: self.wait_connected(self.settings.forward_wait_timeout),
            remote_port,
            remote_host=remote_host,
            remote_path=remote_path,
            local_port=local_port,
            log=self.log,
        )
        await forward.start()
        self._forwards.add(forward)
        return forward
