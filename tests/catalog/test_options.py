"""Catalog rows in the hardware listing: usable when the aws provider offers them."""

from __future__ import annotations

from pathlib import Path

from traitlets.config import Config

from jupyter_remote_hw.catalog import hardware_options
from jupyter_remote_hw.machines import MachineManager


def test_rows_of_the_region_usable_when_configured(tmp_path: Path) -> None:
    config = Config({"AWSProvider": {"region": "us-west-2",
                                     "machines": [{"name": "g5-xlarge", "hardware": "g5.xlarge"}]},
                     "LocalProvider": {"enabled": False}})
    manager = MachineManager(config=config, ledger_path=str(tmp_path / "ledger.sqlite3"))
    try:
        rows = {row["name"]: row for row in hardware_options(manager)}
        assert {row["where"].split(" · ")[1] for row in rows.values()} == {"us-west-2"}
        g5 = rows["aws-g5-xlarge"]
        assert g5["usable"] and g5["why_not"] is None
        assert (g5["gpu"], g5["gpu_count"], g5["price_per_hour"]) == ("A10G", 1, 1.006)
        assert "aws-g5-xlarge" in {t.name for t in manager.targets()}
        p5 = rows["aws-p5-48xlarge"]
        assert not p5["usable"]
        assert "c.AWSProvider.machines" in p5["why_not"]
        assert "jupyter remote-hw launch p5.48xlarge" in p5["why_not"]
    finally:
        manager.ledger.close()
