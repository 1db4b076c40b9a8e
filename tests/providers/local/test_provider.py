"""The ``local`` provider offers this machine as one target."""

from __future__ import annotations

import sys
from pathlib import Path

from traitlets.config import Config

from jupyter_remote_hw.providers import LocalProvider, Target
from jupyter_remote_hw.providers.local import detect_hardware


def test_one_local_target_with_configured_hardware(tmp_path: Path) -> None:
    local = LocalProvider(state_dir=str(tmp_path / "state"), hardware="RTX 4090 24GB")
    assert local.targets() == [
        Target(
            name="local",
            provider="local",
            where="this machine",
            hardware="RTX 4090 24 GiB",
            host=None,
            python=sys.executable,
            root=None,
        )
    ]
    (target,) = local.targets()
    assert target.display_name == "Python 3 · RTX 4090 24 GiB · this machine"
    assert target.kernel_name == "remote-hw-local"


def test_hardware_detected_when_not_set(tmp_path: Path) -> None:
    (target,) = LocalProvider(state_dir=str(tmp_path / "state")).targets()
    assert target.hardware == detect_hardware()
    assert target.hardware  # never an empty label
    assert "CPU" in target.hardware or "GB" in target.hardware or "×" in target.hardware


def test_disabled_offers_nothing(tmp_path: Path) -> None:
    local = LocalProvider(state_dir=str(tmp_path / "state"), enabled=False, hardware="x")
    assert local.targets() == []


def test_traits_read_from_config(tmp_path: Path) -> None:
    config = Config({"LocalProvider": {"hardware": "From config", "enabled": True}})
    (target,) = LocalProvider(config=config, state_dir=str(tmp_path)).targets()
    assert target.hardware == "From config"
    config = Config({"LocalProvider": {"enabled": False}})
    assert LocalProvider(config=config).targets() == []


def test_targets_do_not_create_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    LocalProvider(state_dir=str(state), hardware="x").targets()
    assert not state.exists()
