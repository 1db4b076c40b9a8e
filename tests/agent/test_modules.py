"""The agent says which modules the host's Python cannot import, before a switch."""

from __future__ import annotations

from pathlib import Path

from .agentclient import AgentClient


async def test_missing_modules_are_named_with_the_reason(client: AgentClient) -> None:
    answer = await client.call(
        "find_modules", modules=["json", "numpy", "no_such_module_here", "os.path"]
    )
    assert answer == {"missing": {"no_such_module_here": "No module named 'no_such_module_here'"}}


async def test_another_python_is_asked_when_named(client: AgentClient, tmp_path: Path) -> None:
    answer = await client.call("find_modules", modules=["json"], python=str(tmp_path / "no-python"))
    assert "cannot run" in answer["error"] and "no-python" in answer["error"]
