"""docs/rest-api.yaml documents every route the extension registers, and nothing else."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import yaml

from jupyter_remote_hw.server.handlers import NoRouteHandler, api_handlers
from jupyter_remote_hw.server.hardware_actions import HardwareActions
from jupyter_remote_hw.server.hardware_events import EventHub
from jupyter_remote_hw.server.schemas import PATH_PARTS, REQUESTS
from jupyter_remote_hw.server.share_actions import ShareActions

DOC = Path(__file__).parents[2] / "docs" / "rest-api.yaml"


def test_every_route_is_documented() -> None:
    hub = EventHub(logging.getLogger())
    unused = HardwareActions(None, None, None, hub)  # type: ignore[arg-type]
    no_shares = ShareActions(None, None, hub)  # type: ignore[arg-type]
    documented = set(yaml.safe_load(DOC.read_text())["paths"])
    routes = {
        re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
        for pattern, handler, _ in api_handlers(unused, no_shares)
        if handler is not NoRouteHandler  # any other path: a JSON 404
    }
    assert routes == documented


def _plain(schema: Any) -> Any:
    """``schema`` without what only documents it (descriptions, examples, defaults)."""
    if isinstance(schema, dict):
        return {
            k: _plain(v)
            for k, v in schema.items()
            if k not in ("description", "example", "default")
        }
    if isinstance(schema, list):
        return [_plain(v) for v in schema]
    return schema


def test_the_documented_request_schemas_are_the_ones_checked() -> None:
    paths = yaml.safe_load(DOC.read_text())["paths"]
    bodies = {
        "launch": ("/jupyter-remote-hw/api/launch", "post"),
        "switch": ("/jupyter-remote-hw/api/switch/{session_id}", "post"),
        "share": ("/jupyter-remote-hw/api/shares", "post"),
        "join": ("/jupyter-remote-hw/api/join", "post"),
        "trust": ("/jupyter-remote-hw/api/hosts/{host}/trust", "post"),
        "hibernate": ("/jupyter-remote-hw/api/hibernate/{kernel_id}", "post"),
        "hibernate_after": ("/jupyter-remote-hw/api/hibernate-after/{kernel_id}", "put"),
        "wake": ("/jupyter-remote-hw/api/wake/{kernel_id}", "post"),
    }
    assert set(bodies) == set(REQUESTS)
    for name, (path, method) in bodies.items():
        documented = paths[path][method]["requestBody"]["content"]["application/json"]["schema"]
        assert _plain(documented) == REQUESTS[name], name
    for path, operations in paths.items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in PATH_PARTS:
                    assert parameter["schema"] == {
                        "type": "string",
                        "pattern": PATH_PARTS[parameter["name"]],
                    }, path


def test_every_status_an_operation_answers_is_documented() -> None:
    """401 for no credentials and 403 for no authorization on every operation; 400 on
    every one that takes a body, a path part or a query."""
    for path, operations in yaml.safe_load(DOC.read_text())["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            assert {"401", "403"} <= statuses, (method, path)
            if (
                operation.get("parameters")
                or operation.get("requestBody")
                or path.endswith("/events")
            ):
                assert "400" in statuses, (method, path)


def test_no_flow_mapping_swallowed_a_description() -> None:
    """``{description: a, b}`` in YAML is a key ``b`` with no value: quote such text."""

    def nulls(node: Any, where: str) -> list[str]:
        if isinstance(node, dict):
            return [f"{where}/{k}" for k, v in node.items() if v is None and k != "nullable"] + [
                n for k, v in node.items() for n in nulls(v, f"{where}/{k}")
            ]
        if isinstance(node, list):
            return [n for i, v in enumerate(node) for n in nulls(v, f"{where}[{i}]")]
        return []

    assert nulls(yaml.safe_load(DOC.read_text()), "") == []
