"""moto's ThreadedMotoServer on 127.0.0.1: the AWS APIs (EC2, SSM) that tests talk to.

Credentials are dummies set only for the test; nothing here can reach real AWS,
since every client is pointed at the server's loopback endpoint.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer

#: Clients in tests give up at once instead of retrying (moto answers 500 for APIs it lacks).
NO_RETRY = Config(retries={"max_attempts": 1, "mode": "standard"})


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The endpoint URL of one moto server for the test session."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


#: Clients made by ``client`` during the current test, closed when its ``aws_env`` ends.
_OPEN_CLIENTS: list[Any] = []


@pytest.fixture
def aws_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Dummy credentials for the moto server, and a clean slate of its state; its endpoint."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    with urllib.request.urlopen(
        urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"), timeout=10
    ) as reply:
        assert reply.status == 200
    try:
        yield moto_endpoint
    finally:
        while _OPEN_CLIENTS:
            _OPEN_CLIENTS.pop().close()


def client(endpoint: str, service: str, region: str = "us-east-1") -> Any:
    """A boto3 client of ``service`` on the moto server, closed when the test ends."""
    made = boto3.client(service, endpoint_url=endpoint, region_name=region, config=NO_RETRY)
    _OPEN_CLIENTS.append(made)
    return made
