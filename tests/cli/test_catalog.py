"""``jupyter remote-hw catalog`` without AWS credentials: the AWS rows fold into one line
saying why in words and what to do; a query or ``--all`` shows them, each with a price
or "price unknown"."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run_cli

FOLD = "AWS: no credentials — set AWS_PROFILE or run `aws configure`"


pytestmark = pytest.mark.usefixtures("no_credentials")


def cli(tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    return run_cli(tmp_path, argv)


def test_catalog_folds_aws_into_one_line(tmp_path: Path) -> None:
    code, out, _ = cli(tmp_path, "catalog", "--region", "us-east-1")
    assert code == 0, out
    rows = [line.split()[0] for line in out.splitlines()[2:] if line.strip()]
    assert rows[0] == "local" and "g5.xlarge" not in rows
    assert (
        f"{FOLD} (54 types folded; `jupyter remote-hw catalog --all` lists them)"
        in out.splitlines()
    )


def test_a_query_or_all_lists_them_each_with_a_price_or_price_unknown(tmp_path: Path) -> None:
    code, out, _ = cli(tmp_path, "catalog", "h200", "--region", "us-east-1")
    assert code == 0, out
    lines = {line.split()[0]: line for line in out.splitlines()[2:] if line.strip()}
    assert "$63.30" in lines["p5en.48xlarge"] and "2026-08-06" in lines["p5en.48xlarge"]
    assert "price unknown" in lines["p5e.48xlarge"]
    assert FOLD in out.splitlines()
    code, out, _ = cli(tmp_path, "catalog", "--all", "--region", "us-west-2")
    assert code == 0 and "g5.xlarge" in out and "types folded" not in out


def test_list_says_why_aws_cannot_be_used(tmp_path: Path) -> None:
    code, out, _ = cli(tmp_path, "list")
    assert code == 0, out
    assert out.splitlines()[-1] == FOLD
