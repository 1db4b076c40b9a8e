"""``jupyter remote-hw catalog QUERY``: the table people read, with the accelerators beyond
GPUs and the date each price was read, run in-process with no AWS credentials."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from traitlets.config import Config

from jupyter_remote_hw.catalog import SHIPPED_CATALOG, read_catalog, write_catalog
from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.machines.hardware import hardware_options
from jupyter_remote_hw.machines.manager import MachineManager


@pytest.fixture(autouse=True)
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home, Jupyter paths and an AWS credential chain with nothing in them."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jcfg"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jdata"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jrun"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def catalog_cli(tmp_path: Path, *argv: str, catalog: Path | None = None) -> tuple[int, str, str]:
    aws: dict[str, str] = {"region": "us-east-1"}
    if catalog is not None:
        aws["catalog_path"] = str(catalog)
    config = {
        "MachineManager": {"ledger_path": str(tmp_path / "ledger.sqlite3")},
        "LocalProvider": {"state_dir": str(tmp_path / "l")},
        "SSHProvider": {"include_ssh_config": False},
        "AWSProvider": aws,
    }
    path = tmp_path / "jupyter_server_config.json"
    path.write_text(json.dumps(config))
    out, err = io.StringIO(), io.StringIO()
    code = main(["--config", str(path), "catalog", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def rows(out: str) -> dict[str, list[str]]:
    """The table's rows by name, each split on runs of two or more spaces."""
    lines = out.splitlines()
    return {
        line.split()[0]: re.split(r"\s{2,}", line.strip())
        for line in lines[2:]
        if line.strip() and not line.startswith(("AWS:", "-")) and "catalog rows" not in line
    }


def test_accelerators_are_listed_with_their_count_and_memory(tmp_path: Path) -> None:
    code, out, err = catalog_cli(tmp_path, "trainium", "--region", "us-east-1", "--no-targets")
    assert code == 0, err
    header = out.splitlines()[0].split()
    assert header[:6] == ["NAME", "PROVIDER", "REGION/WHERE", "HARDWARE", "ACCELS", "GIB"]
    table = rows(out)
    assert set(table) == {"trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge"}
    assert table["trn1.32xlarge"][3:6] == ["16 × Trainium 32 GiB", "16", "32"]
    assert table["trn1.32xlarge"][8:] == ["price unknown", "-", "-", "-"]
    total = len(read_catalog(SHIPPED_CATALOG))
    assert f"3 of {total} catalog rows" in out


def test_each_price_shows_the_date_it_was_read(tmp_path: Path) -> None:
    entries = read_catalog(SHIPPED_CATALOG)
    dated = [
        dataclasses.replace(e, spot_usd_per_hour=0.41, spot_price_date="2030-01-02")
        if (e.instance_type, e.region) == ("g5.xlarge", "us-east-1")
        else e
        for e in entries
    ]
    path = tmp_path / "aws.csv"
    write_catalog(path, dated)
    code, out, err = catalog_cli(
        tmp_path, "g5.xlarge", "--region", "us-east-1", "--no-targets", catalog=path
    )
    assert code == 0, err
    assert rows(out)["g5.xlarge"][8:] == ["$1.01", "2024-08-01", "$0.41", "2030-01-02"]


def test_an_unknown_region_or_word_is_named_in_one_line(tmp_path: Path) -> None:
    code, out, err = catalog_cli(tmp_path, "a10g", "--region", "eu-wset-1")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "unknown region 'eu-wset-1'" in err
    assert "did you mean 'eu-west-1'" in err
    code, out, err = catalog_cli(tmp_path, "gaudii")
    assert code == 1 and err.count("\n") == 1
    assert "unknown hardware 'gaudii'" in err and "did you mean 'Gaudi'" in err


def test_the_pickers_show_an_accelerator_where_they_show_a_gpu(tmp_path: Path) -> None:
    config = Config({"AWSProvider": {"region": "us-east-1"}, "LocalProvider": {"enabled": False}})
    manager = MachineManager(config=config, ledger_path=str(tmp_path / "ledger.sqlite3"))
    try:
        rows = {row["name"]: row for row in hardware_options(manager)}
    finally:
        manager.ledger.close()
    trn1 = rows["aws-trn1-32xlarge"]
    assert (trn1["gpu"], trn1["gpu_count"], trn1["gpu_memory_gib"]) == ("Trainium", 16, 32.0)
    assert trn1["label"] == "16 × Trainium 32 GiB · trn1.32xlarge"
    assert trn1["price_per_hour"] is None
    g5 = rows["aws-g5-xlarge"]
    assert (g5["gpu"], g5["gpu_count"], g5["gpu_memory_gib"]) == ("A10G", 1, 22.4)
    t3 = rows["aws-t3-medium"]
    assert (t3["gpu"], t3["gpu_count"], t3["gpu_memory_gib"]) == (None, 0, None)
