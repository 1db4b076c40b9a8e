"""Run pytest-jupyter's server on the loop that pytest-asyncio runs each test on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest


@pytest.fixture
async def jp_asyncio_loop() -> AsyncIterator[asyncio.AbstractEventLoop]:
    """Run the pytest-jupyter server on the loop pytest-asyncio runs each test on.

    pytest-jupyter's own fixture makes a loop of its own, which is not the one
    async tests run on here, so the server would never answer them.
    """
    yield asyncio.get_running_loop()
