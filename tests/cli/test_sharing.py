"""The sharing subcommands: share, shares, join and revoke, as a teammate and owner use them."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import time
from pathlib import Path

import pytest

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.cli.sharing import COMMANDS, SharingCommands, add_parsers, run
from jupyter_remote_hw.sharing import ShareError

from ..sharing.conftest import OwnedKernel, owned, started_client, stop_client, teammate_key  # noqa: F401 (fixtures)
from ..sharing.conftest import run as execute
from ..testhosts import SSHTestHost


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jupyter remote-hw")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


async def test_share_join_shares_revoke(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
    tmp_path: Path,
) -> None:
    # The owner's ledger knows the kernel (as the provisioner records it).
    owned.manager.ledger.put_kernel(owned.kernel_id, "remote-hw-ssh-testhost", "ssh-testhost", {})
    out = io.StringIO()
    share_path = tmp_path / "for-ada.json"
    await run(
        parse(
            "share",
            owned.kernel_id[:8],
            "--with",
            str(teammate_key) + ".pub",
            "--role",
            "collaborator",
            "--expires",
            "2h",
            "--output",
            str(share_path),
            "--authorized-keys",
            str(ssh_host.authorized_keys),
        ),
        owned.manager,
        out,
        io.StringIO(),
    )
    said = out.getvalue()
    share_id = json.loads(share_path.read_text())["share_id"]
    assert f"Share id: {share_id}" in said and "ada@laptop" in said
    assert f"jupyter remote-hw join {share_path.name}" in said

    # The teammate joins: a connection file to attach a Jupyter client to.
    teammate_out = io.StringIO()
    connection_file = tmp_path / "kernel-shared.json"
    teammate = SharingCommands(owned.manager, teammate_out, io.StringIO())
    ready = asyncio.Event()
    joining = asyncio.create_task(
        teammate.join(share_path, str(teammate_key), str(connection_file), ready)
    )
    await asyncio.wait_for(ready.wait(), 30)
    kc = await started_client(json.loads(connection_file.read_text()))
    try:
        assert (await execute(kc, "joined_from_cli = True"))["status"] == "ok"
        assert (await execute(owned.client, "assert joined_from_cli"))["status"] == "ok"
    finally:
        stop_client(kc)

    listing = io.StringIO()
    await run(parse("shares"), owned.manager, listing, io.StringIO())
    row = next(line for line in listing.getvalue().splitlines() if share_id in line)
    assert "collaborator" in row and "ada@laptop" in row and "left" in row
    assert " 1 " in row  # one join recorded

    revoked = io.StringIO()
    await run(parse("revoke", share_id), owned.manager, revoked, io.StringIO())
    assert f"Revoked {share_id}" in revoked.getvalue()
    # The teammate's join ends by itself, and its connection file goes.
    await asyncio.wait_for(joining, 10)
    assert not connection_file.exists()
    listing = io.StringIO()
    await run(parse("shares"), owned.manager, listing, io.StringIO())
    assert share_id not in listing.getvalue()


async def test_bad_input_is_named(owned: OwnedKernel, teammate_key: Path, tmp_path: Path) -> None:
    assert set(COMMANDS) == {"share", "shares", "revoke", "join"}
    pub = str(teammate_key) + ".pub"
    with pytest.raises(ShareError, match="no kernel 'k-unknown' in the ledger .* ssh-testhost"):
        await run(
            parse("share", "k-unknown", "--with", pub, "--role", "viewer"),
            owned.manager,
            io.StringIO(),
            io.StringIO(),
        )
    with pytest.raises(ShareError, match="no share nope"):
        await run(parse("revoke", "nope"), owned.manager, io.StringIO(), io.StringIO())
    with pytest.raises(ShareError, match="not an SSH public key"):
        await run(
            parse("share", owned.kernel_id, "--with", "hello", "--role", "viewer"),
            owned.manager,
            io.StringIO(),
            io.StringIO(),
        )
    with pytest.raises(ShareError, match="private key"):
        await run(
            parse(
                "share",
                owned.kernel_id,
                "--with",
                "-----BEGIN OPENSSH PRIVATE KEY-----",
                "--role",
                "viewer",
            ),
            owned.manager,
            io.StringIO(),
            io.StringIO(),
        )
    with pytest.raises(ShareError, match="not a duration"):
        await run(
            parse("share", owned.kernel_id, "--with", "x", "--role", "viewer", "--expires", "soon"),
            owned.manager,
            io.StringIO(),
            io.StringIO(),
        )
    with pytest.raises(ShareError, match="no share file at"):
        await run(
            parse("join", str(tmp_path / "missing.json")),
            owned.manager,
            io.StringIO(),
            io.StringIO(),
        )


async def test_join_kernelspec_installs_an_attaching_kernel(
    owned: OwnedKernel,
    teammate_key: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    # A target running one kernel names that kernel.
    share_path = tmp_path / "viewer.json"
    await run(
        parse(
            "share",
            "ssh-testhost",
            "--with",
            str(teammate_key) + ".pub",
            "--role",
            "viewer",
            "--output",
            str(share_path),
            "--authorized-keys",
            str(owned.sharer.authorized_keys),
        ),
        owned.manager,
        io.StringIO(),
        io.StringIO(),
    )
    out = io.StringIO()
    await run(
        parse("join", str(share_path), "--kernelspec", "--identity", str(teammate_key)),
        owned.manager,
        out,
        io.StringIO(),
    )
    (spec_file,) = (tmp_path / "data" / "kernels").glob("remote-share-*/kernel.json")
    spec = json.loads(spec_file.read_text())
    assert spec["display_name"].startswith("Shared by ") and spec["display_name"].endswith("(view)")
    assert spec["metadata"]["kernel_provisioner"] == {
        "provisioner_name": "remote-hw-share",
        "config": {"share_file": str(share_path.resolve()), "identity": str(teammate_key)},
    }
    assert "Installed the kernel" in out.getvalue()


def test_join_and_revoke_refuse_a_share_id_that_would_name_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, where in (
        ("HOME", "home"),
        ("JUPYTER_CONFIG_DIR", "jcfg"),
        ("JUPYTER_DATA_DIR", "jdata"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
    ):
        monkeypatch.setenv(name, str(tmp_path / where))
    (tmp_path / "jcfg").mkdir()
    (tmp_path / "jcfg" / "jupyter_server_config.json").write_text(
        json.dumps({"MachineManager": {"ledger_path": str(tmp_path / "ledger.sqlite3")}})
    )
    share = tmp_path / "share.json"
    share.write_text(
        json.dumps(
            {
                "format": "jupyter-remote-hw-share",
                "version": 1,
                "share_id": "../../escaped",
                "role": "viewer",
                "kernel_id": "0f6c3f5e",
                "host": "127.0.0.1",
                "port": 1,
                "user": "ada",
                "host_key": "ssh-ed25519 AAAA",
                "ports": {"iopub_port": 40001},
                "purposes": {"iopub_port": "outputs"},
                "expires": time.time() + 3600,
                "owner": "ada@box",
            }
        )
    )
    before = set(tmp_path.rglob("*"))
    for argv in (["join", str(share)], ["join", "--kernelspec", str(share)]):
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out=out, err=err) == 1
        assert err.getvalue().count("\n") == 1
        assert "'../../escaped' is not valid: 1 to 64 letters, digits, '-' or '_'" in err.getvalue()
    # On the command line itself, the id is refused while the arguments are read.
    with pytest.raises(SystemExit) as ended:
        main(["revoke", "../../escaped"])
    assert ended.value.code == 2
    assert (
        "argument SHARE_ID: share id '../../escaped' is not valid: 1 to 64 letters, "
        "digits, '-' or '_'" in capsys.readouterr().err
    )
    assert set(tmp_path.rglob("*")) - before <= {tmp_path / "ledger.sqlite3"}
