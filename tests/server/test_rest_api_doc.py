"""docs/rest-api.yaml documents every route the extension registers, and nothing else."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import yaml

from jupyter_remote_hw.hardware_actions import HardwareActions
from jupyter_remote_hw.hardware_events import EventHub
from jupyter_remote_hw.server.handlers import api_handlers

DOC = Path(__file__).parents[2] / "docs" / "rest-api.yaml"


def test_every_route_is_documented() -> None:
    unused = HardwareActions(None, None, None, EventHub(logging.getLogger()))  # type: ignore[arg-type]
    documented = set(yaml.safe_load(DOC.read_text())["paths"])
    routes = {
        re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
        for pattern, _, _ in api_handlers(unused)
    }
    assert routes == documented
