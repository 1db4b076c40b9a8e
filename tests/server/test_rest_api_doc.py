"""docs/rest-api.yaml documents every route the extension registers, and nothing else."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import yaml

from jupyter_remote_hw.hardware_actions import HardwareActions
from jupyter_remote_hw.hardware_events import EventHub
from jupyter_remote_hw.server.handlers import api_handlers
from jupyter_remote_hw.share_actions import ShareActions

DOC = Path(__file__).parents[2] / "docs" / "rest-api.yaml"


def test_every_route_is_documented() -> None:
    hub = EventHub(logging.getLogger())
    unused = HardwareActions(None, None, None, hub)  # type: ignore[arg-type]
    no_shares = ShareActions(None, None, hub)  # type: ignore[arg-type]
    documented = set(yaml.safe_load(DOC.read_text())["paths"])
    routes = {
        re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
        for pattern, _, _ in api_handlers(unused, no_shares)
    }
    assert routes == documented
