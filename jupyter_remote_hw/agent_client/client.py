"""Requests to a host agent: newline-delimited JSON over one byte stream.

The stream is a UNIX socket on this machine (``local`` provider) or the same
socket on a remote host reached through the host's SSH connection. Requests
carry ids, so several may be in flight on one stream.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from typing import Any, Protocol, Self

import asyncssh

from ..agent.protocol import MAX_LINE_BYTES
from .errors import AgentError, AgentUnavailableError


class _Reader(Protocol):
    async def readline(self) -> bytes: ...


class _Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class AgentClient:
    """One open stream to an agent.

    Args:
        reader: The stream's read side.
        writer: The stream's write side.
        where: The host, for error messages.
        log: Where to log.
        socket: The agent's socket path on its host, where other streams to it open.
    """

    def __init__(
        self,
        reader: _Reader,
        writer: _Writer,
        *,
        where: str,
        log: logging.Logger | None = None,
        socket: str | None = None,
    ) -> None:
        self.where = where
        self.socket = socket
        self.log = log or logging.getLogger(__name__)
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._closed_reason: str | None = None
        self._receiver = asyncio.create_task(self._receive())

    @classmethod
    async def connect_unix(
        cls, path: str, *, where: str = "localhost", log: logging.Logger | None = None
    ) -> Self:
        """Open a client on the agent's UNIX socket on this machine."""
        try:
            reader, writer = await asyncio.open_unix_connection(path, limit=MAX_LINE_BYTES)
        except OSError as exc:
            raise AgentUnavailableError(
                f"cannot reach the agent on {where} at {path}: {exc}"
            ) from None
        return cls(reader, writer, where=where, log=log, socket=path)

    @property
    def closed(self) -> bool:
        """Whether the stream has ended; a closed client answers no more requests."""
        return self._closed_reason is not None

    async def _receive(self) -> None:
        reason = "the agent closed the connection"
        try:
            while line := await self._reader.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    self.log.warning("agent on %s: a line that is not JSON was ignored", self.where)
                    continue
                request_id = message.get("id") if isinstance(message, dict) else None
                future = (
                    self._pending.pop(request_id)
                    if isinstance(request_id, int) and request_id in self._pending
                    else None
                )
                if future is None:
                    self._unmatched(message)
                elif not future.done():
                    future.set_result(message)
        except (OSError, ValueError, EOFError, asyncssh.Error) as exc:
            # ValueError: a line longer than the stream's limit.
            reason = f"connection to the agent lost: {exc}"
        self._closed_reason = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(AgentUnavailableError(f"{self.where}: {reason}"))
        self._pending.clear()

    def _unmatched(self, message: object) -> None:
        """Handle an answer to no pending request (the agent's reply to a bad line)."""
        self.log.warning("agent on %s: unexpected message ignored: %.200r", self.where, message)

    async def response(self, op: str, wait: float | None = 120.0, **args: Any) -> dict[str, Any]:
        """Send one request and return the agent's whole response, success or error.

        ``wait`` bounds this side's wait for the answer; ``args`` go to the
        agent as they are (an op's own ``timeout`` argument among them).

        Raises:
            AgentUnavailableError: The stream is closed or broke meanwhile.
            TimeoutError: No answer within ``wait`` seconds.
        """
        if self._closed_reason is not None:
            raise AgentUnavailableError(f"{self.where}: {self._closed_reason}")
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        payload = json.dumps({"id": request_id, "op": op, "args": args}) + "\n"
        try:
            try:
                self._writer.write(payload.encode())
                await self._writer.drain()
            except (OSError, asyncssh.Error) as exc:
                raise AgentUnavailableError(
                    f"{self.where}: connection to the agent lost: {exc}"
                ) from None
            async with asyncio.timeout(wait):
                message = await future
        finally:
            self._pending.pop(request_id, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                # Failed while this request was still being written: the
                # caller got that error instead, so the future's is not news.
                future.exception()
        return message

    async def call(self, op: str, wait: float | None = 120.0, **args: Any) -> dict[str, Any]:
        """Send one request and return its result.

        Raises:
            AgentError: The agent refused or failed the request.
            AgentUnavailableError: The stream is closed or broke meanwhile.
            TimeoutError: No answer within ``wait`` seconds.
        """
        message = await self.response(op, wait, **args)
        if not message.get("ok"):
            raise AgentError(
                self.where,
                str(message.get("kind", "error")),
                str(message.get("error", "the agent gave no reason")),
            )
        result = message.get("result") or {}
        if not isinstance(result, dict):
            raise AgentError(self.where, "bad_response", f"unexpected result: {result!r}")
        return result

    async def close(self) -> None:
        """Close the stream; pending requests fail."""
        self._writer.close()
        self._receiver.cancel()
        await asyncio.gather(self._receiver, return_exceptions=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
