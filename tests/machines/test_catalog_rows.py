"""Catalog rows in the hardware listing: usable when the aws provider offers them; why
not in words and what to do otherwise; a price or "price unknown"; memory in GiB."""

from __future__ import annotations

from pathlib import Path

import pytest
from traitlets.config import Config

from jupyter_remote_hw.catalog import SHIPPED_CATALOG, read_catalog
from jupyter_remote_hw.machines.folds import Fold, fold_hardware
from jupyter_remote_hw.machines.hardware import (
    HardwareOption,
    hardware_options,
    list_hardware,
    provider_statuses,
)
from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.notebook.widgets import columns
from jupyter_remote_hw.providers.aws import credentials as aws_credentials


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An AWS credential chain that finds nothing (no variables, no files, no instance role)."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    aws_credentials.forget()


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials in the environment (never used to call AWS here)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws_credentials.forget()


def manager_of(tmp_path: Path, **aws: object) -> MachineManager:
    config = Config({"AWSProvider": aws, "LocalProvider": {"enabled": False}})
    return MachineManager(config=config, ledger_path=str(tmp_path / "ledger.sqlite3"))


def test_rows_of_the_region_usable_when_configured(tmp_path: Path, credentials: None) -> None:
    manager = manager_of(
        tmp_path, region="us-west-2", machines=[{"name": "g5-xlarge", "hardware": "g5.xlarge"}]
    )
    try:
        rows = {row["name"]: row for row in hardware_options(manager)}
        assert {row["where"].split(" · ")[1] for row in rows.values()} == {"us-west-2"}
        g5 = rows["aws-g5-xlarge"]
        assert g5["usable"] and g5["why_not"] is None
        assert (g5["gpu"], g5["gpu_count"], g5["price_per_hour"]) == ("A10G", 1, 1.006)
        assert (g5["gpu_memory_gib"], g5["memory_gib"]) == (22.4, 16.0)
        assert "aws-g5-xlarge" in {t.name for t in manager.targets()}
        p5 = rows["aws-p5-48xlarge"]
        assert not p5["usable"] and p5["reason"] == "not set up"
        assert p5["why_not"] == (
            "not set up — start one with `jupyter remote-hw launch "
            "p5.48xlarge`, or list it in c.AWSProvider.machines"
        )
        assert "{" not in p5["why_not"] and "'" not in p5["why_not"]
    finally:
        manager.ledger.close()


def test_without_credentials_every_aws_row_says_so_in_words(
    tmp_path: Path, no_credentials: None
) -> None:
    manager = manager_of(tmp_path, machines=[{"name": "g5-xlarge", "hardware": "g5.xlarge"}])
    try:
        options = list_hardware(manager)
        aws = [o for o in options if o.provider == "aws"]
        region = manager.providers["aws"].region
        shipped = len([e for e in read_catalog(SHIPPED_CATALOG) if e.region == region])
        assert len(aws) == shipped and not any(o.usable for o in aws)  # the configured one too
        assert {(o.reason, o.hint, o.why_not) for o in aws} == {
            (
                "no credentials",
                "set AWS_PROFILE or run `aws configure`",
                "no credentials — set AWS_PROFILE or run `aws configure`",
            )
        }
        statuses = {s.name: s for s in provider_statuses(manager)}
        assert statuses["aws"].to_json() == {
            "name": "aws",
            "title": "AWS",
            "usable": False,
            "reason": "no credentials",
            "hint": "set AWS_PROFILE or run `aws configure`",
            "commands": ["aws configure"],
        }
        assert statuses["ssh"].usable and statuses["ssh"].reason is None
        # Folded: one line for all of them, expandable to them.
        folded = fold_hardware(options)
        folds = [e for e in folded if isinstance(e, Fold)]
        assert [(f.text, len(f.options)) for f in folds] == [
            ("AWS: no credentials — set AWS_PROFILE or run `aws configure`", shipped)
        ]
        assert not [e for e in folded if isinstance(e, HardwareOption) and e.provider == "aws"]
        expanded = fold_hardware(options, {folds[0].key})
        assert expanded[-shipped:] == aws
    finally:
        manager.ledger.close()


def test_a_missing_profile_is_named_with_the_command_that_makes_it(
    tmp_path: Path, no_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "research")
    status = aws_credentials.credentials_status()
    assert status is not None
    assert status.reason == "no AWS profile named 'research'"
    assert status.commands == ("aws configure --profile research",)


def test_every_row_has_a_price_or_says_none_is_known_and_memory_in_gib() -> None:
    entries = read_catalog(SHIPPED_CATALOG)
    # Prices are known in us-east-1 and us-west-2 (until a refresh reads the others), but
    # not for the accelerators beyond GPUs and the types new to the catalog (p5.4xlarge,
    # g4dn.metal), nor for p5e, which has no public on-demand list price (Capacity Blocks).
    assert {
        e.instance_type
        for e in entries
        if e.on_demand_usd_per_hour is None
        and e.region in ("us-east-1", "us-west-2")
        and not e.accelerator_count
    } == {"p5e.48xlarge", "p5.4xlarge", "g4dn.metal"}
    p5en = [
        e
        for e in entries
        if e.instance_type == "p5en.48xlarge" and e.region in ("us-east-1", "us-west-2")
    ]
    assert {(e.on_demand_usd_per_hour, e.price_date) for e in p5en} == {(63.296, "2026-08-06")}
    for entry in entries:
        option = HardwareOption(
            name=entry.instance_type,
            kernel_name="k",
            provider="aws",
            label=entry.hardware,
            hardware=entry.hardware,
            where=entry.region,
            gpu=entry.gpu_name or None,
            gpu_count=entry.gpu_count,
            gpu_memory_gib=entry.gpu_memory_gib or None,
            vcpus=entry.vcpus,
            memory_gib=entry.memory_gib,
            price_per_hour=entry.on_demand_usd_per_hour,
        )
        cells = columns(option)
        price = cells[5]
        assert (
            price == "price unknown"
            if entry.on_demand_usd_per_hour is None
            else (price.startswith("$") and price.endswith("/h"))
        ), (entry, price)
        assert cells[4].endswith(" GiB") and "GB" not in " ".join(cells).replace("GiB", "")
