"""Calls to the hardware REST API of a pytest-jupyter server, and its event socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError
from tornado.websocket import WebSocketClientConnection

Fetch = Callable[..., Awaitable[Any]]

API = ("jupyter-remote-hw", "api")


async def get(jp_fetch: Fetch, *path: str) -> Any:
    """GET an API path; its JSON body."""
    response = await jp_fetch(*API, *path)
    assert response.code == 200
    return json.loads(response.body)


async def post(jp_fetch: Fetch, *path: str, body: Any = None, raw: str | None = None) -> Any:
    """POST JSON (or ``raw`` text) to an API path; its JSON body."""
    data = raw if raw is not None else json.dumps(body if body is not None else {})
    response = await jp_fetch(*API, *path, method="POST", body=data)
    return json.loads(response.body)


async def failure(
    jp_fetch: Fetch, *path: str, method: str = "POST", body: Any = None, raw: str | None = None
) -> tuple[int, dict[str, Any]]:
    """Call an API path that must fail; its status and JSON error body."""
    kwargs: dict[str, Any] = {"method": method}
    if method in ("POST", "PUT"):
        kwargs["body"] = raw if raw is not None else json.dumps(body if body is not None else {})
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch(*API, *path, **kwargs)
    response = caught.value.response
    assert response is not None
    return caught.value.code, dict(json.loads(response.body))


class Events:
    """The events received on one open event socket."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws = ws
        self.received: list[dict[str, Any]] = []

    async def until(
        self, match: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        """The first event (received so far, or next) for which ``match`` is true."""
        for event in self.received:
            if match(event):
                return event
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.ws.read_message()
                if raw is None:
                    raise ConnectionError("the event socket closed")
                event = json.loads(raw)
                self.received.append(event)
                if match(event):
                    return dict(event)
