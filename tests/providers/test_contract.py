"""The provider contract: one abstract base, every provider found by its entry point,
configured by its class name, and a provider missing a part of the contract refused."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.providers import Machine, Provider, Target, registry
from jupyter_remote_hw.providers.base import ENTRY_POINT_GROUP
from jupyter_remote_hw.providers.launch_steps import LaunchSteps


class OneTarget(Provider):
    """A provider offering one target and no machine: enough of the contract to exist."""

    name = "one"

    def targets(self) -> list[Target]:
        return [Target(name="one", provider=self.name, where="nowhere", hardware="none")]

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        raise NotImplementedError


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[MachineManager]:
    made = MachineManager(
        config=Config(
            {
                "MachineManager": {"ledger_path": str(tmp_path / "ledger.sqlite3")},
                "AWSProvider": {"region": "eu-west-1"},
                "SSHProvider": {"hosts": [{"host": "gpu-a", "hardware": "A10G 24GB"}]},
                "TransportManager": {"ssh_config_files": []},
                "LocalProvider": {"hardware": "Test CPU"},
            }
        )
    )
    yield made
    await made.close()


def test_a_provider_missing_part_of_the_contract_cannot_be_made() -> None:
    class NoMachines(Provider):
        name = "no-machines"

        def targets(self) -> list[Target]:
            return []

    with pytest.raises(TypeError, match="open_machine"):
        NoMachines()  # type: ignore[abstract]
    provider = OneTarget()
    assert [t.name for t in provider.targets()] == ["one"]
    assert provider.usability() is None
    assert provider.price_per_hour(provider.targets()[0]) is None


async def test_the_shipped_providers_come_first_in_their_order(
    manager: MachineManager,
) -> None:
    assert list(manager.providers)[:4] == ["local", "ssh", "aws", "slurm"]
    for name, provider in manager.providers.items():
        assert isinstance(provider, Provider)
        assert provider.name == name


async def test_providers_are_configured_by_their_class_names(manager: MachineManager) -> None:
    aws: Any = manager.providers["aws"]
    assert aws.region == "eu-west-1"
    assert aws.ledger is manager.ledger and aws.transport is manager.transport
    assert [t.name for t in manager.providers["ssh"].targets()] == ["ssh-gpu-a"]
    assert manager.providers["local"].price_per_hour(manager.target("local")) == 0.0
    assert manager.providers["ssh"].price_per_hour(manager.target("ssh-gpu-a")) == 0.0


def test_a_registered_provider_is_found_and_a_broken_one_left_out(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    points = [
        EntryPoint("one", f"{__name__}:OneTarget", ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_module_here:Provider", ENTRY_POINT_GROUP),
        EntryPoint("ssh", f"{__name__}:OneTarget", ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: points)
    with caplog.at_level(logging.WARNING):
        classes = registry.provider_classes(logging.getLogger("test"))
    assert list(classes) == ["local", "ssh", "aws", "slurm", "one"]
    assert classes["one"] is OneTarget
    assert classes["ssh"].__name__ == "SSHProvider"  # a shipped one is not replaced
    assert "provider broken" in caplog.text


def contract_rows(table_head: str) -> dict[str, bool]:
    """The methods named in docs/providers.md's contract table that starts with
    ``table_head``, each with whether the table says a provider must implement it."""
    doc = (Path(__file__).parents[2] / "docs" / "providers.md").read_text()
    section = doc.split("## The contract", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, bool] = {}
    in_table = False
    for line in section.splitlines():
        if line.startswith(f"| `{table_head}` |"):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
        if not in_table or line.startswith("|---"):
            continue
        names, must = line.split("|")[1:3]
        for name in re.findall(r"`(\w+)", names):
            rows[name] = must.strip() == "yes"
    return rows


@pytest.mark.parametrize("cls", [Provider, Machine], ids=lambda cls: cls.__name__)
def test_the_contract_in_the_docs_is_the_one_in_base_py(cls: type) -> None:
    """docs/providers.md lists every method of the contract, no other, and says which
    ones a provider must implement: those ``base.py`` makes abstract."""
    traits = set(Provider.class_trait_names())
    in_code = {
        name: bool(getattr(member, "__isabstractmethod__", False))
        for name, member in vars(cls).items()
        if callable(member) or isinstance(member, property)
        if not name.startswith("__") and name not in traits
        if not name.startswith("_") or getattr(member, "__isabstractmethod__", False)
    }
    in_docs = contract_rows(cls.__name__)
    assert in_docs == in_code
