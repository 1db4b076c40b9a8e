"""``jupyter remote-hw`` with the AWS provider and no AWS credentials: each command that
needs AWS says so in one line, with what to do, before asking AWS anything; ``list``
still lists and says why AWS is not in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_remote_hw.cli.commands import main

from .conftest import run_cli

NO_CREDENTIALS = "AWS: no credentials — set AWS_PROFILE or run `aws configure`"
PREFIX = "jupyter remote-hw "


pytestmark = pytest.mark.usefixtures("no_credentials")


def cli(tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    return run_cli(
        tmp_path, argv, AWSProvider={"ssh_cidr": "203.0.113.7/32", "region": "us-east-1"}
    )


def error_line(err: str, command: str) -> str:
    """The one line the command failed with (launch steps may come before it)."""
    [line] = [line for line in err.splitlines() if line.startswith(PREFIX + command + ":")]
    return line


def test_list_lists_and_says_why_aws_is_not_in_it(tmp_path: Path) -> None:
    code, out, err = cli(tmp_path, "list")
    assert code == 0, err
    assert "no machines:" in out and NO_CREDENTIALS in out.splitlines()


def test_launch_says_there_are_no_credentials(tmp_path: Path) -> None:
    code, out, err = cli(tmp_path, "launch", "A10G")
    assert code == 1 and out == ""
    assert NO_CREDENTIALS in error_line(err, "launch")
    # A name the catalog does not know is said first: credentials would not help.
    code, _, err = cli(tmp_path, "launch", "gpu-a10")
    assert "unknown hardware 'gpu-a10'" in error_line(err, "launch")


@pytest.mark.parametrize("command", ["stop", "start", "terminate"])
def test_machine_commands_name_what_is_not_in_the_ledger(tmp_path: Path, command: str) -> None:
    code, out, err = cli(
        tmp_path, command, "aws-g5-xlarge", *(["--yes"] * (command == "terminate"))
    )
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "no machine 'aws-g5-xlarge' in the ledger" in err and "`jupyter remote-hw list`" in err


def test_reap_says_there_are_no_credentials(tmp_path: Path) -> None:
    code, out, err = cli(tmp_path, "reap", "--yes")
    assert code == 1 and out == ""
    line = error_line(err, "reap")
    assert "found none" in line and "`aws configure`" in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("stop", "x$(touch /tmp/owned)"),
            (
                "argument machine: machine 'x$(touch /tmp/owned)' is "
                "not valid: 1 to 128 letters, digits and '.-_:@+'"
            ),
        ),
        (("terminate", "--yes", "a b"), "argument machine: machine 'a b' is not valid"),
        (("trust", "gpu;sh"), "argument host: host 'gpu;sh' is not valid"),
        (
            ("revoke", "../../etc/passwd"),
            (
                "argument SHARE_ID: share id '../../etc/passwd' is not "
                "valid: 1 to 64 letters, digits, '-' or '_'"
            ),
        ),
        (
            ("share", "k" * 5000, "--with", "key.pub", "--role", "viewer"),
            "argument KERNEL_OR_MACHINE: kernel 'kkkk",
        ),
    ],
)
def test_identifiers_on_the_command_line_are_checked_first(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main(list(argv))
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err) < 600  # a long value is cut, not echoed whole
