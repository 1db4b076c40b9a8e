"""Sharing through the REST API, on a real jupyter_server: the owner's kernel runs on the
loopback sshd test host, whose sshd enforces the share's key line; the teammate joins with
their own key through the same server's join route."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ..kernelws import KernelChannels
from ..provisioner.conftest import LOCAL_KERNEL, SSH_KERNEL, OpenChannels, StartKernel
from ..testhosts import SSHTestHost, keygen
from .apiclient import API, Fetch, failure, get
from .conftest import sharing_host


@pytest.fixture
def hosts(ssh_host: SSHTestHost, remote_root: Path) -> list[dict[str, Any]]:
    """The test host, with share key lines going to the file its sshd reads."""
    return [sharing_host(ssh_host, remote_root)]


@pytest.fixture
def teammate_key(tmp_path: Path) -> Path:
    """The teammate's private key; the owner is given its .pub."""
    return keygen(tmp_path / "teammate", comment="ada@laptop")


@pytest.fixture
async def shares(jp_fetch: Fetch, jp_serverapp: Any) -> AsyncIterator[list[str]]:
    """Ids of shares a test made: revoked afterwards, then every kernel is shut down."""
    made: list[str] = []
    yield made
    for share_id in made:
        await jp_fetch(*API, "shares", share_id, method="DELETE", raise_error=False)
    km = jp_serverapp.kernel_manager
    await asyncio.gather(
        *(km.shutdown_kernel(k) for k in km.list_kernel_ids()), return_exceptions=True
    )


async def share(
    jp_fetch: Fetch, made: list[str], kernel: str, key: Path, role: str, expires: str = "1h"
) -> dict[str, Any]:
    """POST a share of ``kernel`` with ``key``'s .pub; remember it for revoking."""
    response = await jp_fetch(
        *API,
        "shares",
        method="POST",
        body=json.dumps(
            {
                "kernel": kernel,
                "public_key": key.with_suffix(".pub").read_text(),
                "role": role,
                "expires": expires,
            }
        ),
    )
    assert response.code == 201
    granted = dict(json.loads(response.body))
    made.append(granted["share"]["share_id"])
    return granted


async def join(jp_fetch: Fetch, share_file: dict[str, Any], key: Path) -> dict[str, Any]:
    """POST join with the teammate's key; the answer."""
    response = await jp_fetch(
        *API,
        "join",
        method="POST",
        body=json.dumps({"share_file": share_file, "identity": str(key)}),
    )
    assert response.code == 201
    return dict(json.loads(response.body))


def key_lines(host: SSHTestHost, share_id: str) -> list[str]:
    """The host's authorized_keys lines of a share."""
    return [
        line
        for line in host.authorized_keys.read_text().splitlines()
        if line.endswith(f"jupyter-remote-hw-share:{share_id}")
    ]


async def stdout_until(channels: KernelChannels, text: str, timeout: float = 30.0) -> str:
    """Read a kernel's messages until a stdout stream containing ``text``; all stdout seen."""
    seen = ""
    async with asyncio.timeout(timeout):
        while text not in seen:
            message = await channels._next(timeout)
            if message["header"]["msg_type"] == "stream":
                seen += message["content"]["text"]
    return seen


async def cut_off(serverapp: Any, kernel_id: str, since: float, within: float) -> Any:
    """The teammate's kernel, once the server reads it as ended (within ``within``
    seconds of ``since``)."""
    kernel = serverapp.kernel_manager.get_kernel(kernel_id)
    while await kernel.is_alive():
        assert time.monotonic() - since < within, "the teammate's kernel was not cut off"
        await asyncio.sleep(0.2)
    return kernel


async def test_collaborator_joins_through_the_api_and_revoke_cuts_them_off(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    start_kernel: StartKernel,
    channels: OpenChannels,
    shares: list[str],
    ssh_host: SSHTestHost,
    teammate_key: Path,
) -> None:
    owner_id = await start_kernel(SSH_KERNEL)
    owner = await channels(owner_id)
    assert (await owner.execute("x = 41")).ename is None

    granted = await share(jp_fetch, shares, owner_id[:8], teammate_key, "collaborator")
    model, share_file = granted["share"], granted["share_file"]
    share_id = model["share_id"]
    assert granted["filename"] == f"share-{share_id}.json"
    assert (model["kernel_id"], model["target"], model["role"], model["state"]) == (
        owner_id,
        "ssh-testhost",
        "collaborator",
        "active",
    )
    assert model["teammate"] == "ada@laptop" and model["fingerprint"].startswith("SHA256:")
    assert 3590 < model["expires"] - time.time() <= 3600
    # One key line on the host, limited as the role needs, in the file its sshd reads.
    (line,) = key_lines(ssh_host, share_id)
    assert line.startswith("restrict,port-forwarding,") and 'expiry-time="' in line
    assert line.count("permitopen=") == 5
    # The share file: what a collaborator needs, the kernel's key included, and no more.
    assert share_file["kernel_id"] == owner_id and share_file["role"] == "collaborator"
    assert share_file["key"] and set(share_file["ports"]) == {
        "shell_port",
        "iopub_port",
        "stdin_port",
        "control_port",
        "hb_port",
    }
    listed = (await get(jp_fetch, "shares"))["shares"]
    assert [s["share_id"] for s in listed] == [share_id]

    joined = await join(jp_fetch, share_file, teammate_key)
    assert joined["kernel_name"].startswith("remote-share-") and joined["role"] == "collaborator"
    assert joined["display_name"].startswith("Shared by ") and joined["can_execute"] is True
    assert joined["kernel"]["id"] == joined["kernel_id"] != owner_id
    teammate = await channels(joined["kernel_id"])
    seen = await teammate.execute("print(x)\ny = 7")
    assert seen.stdout.strip() == "41" and seen.ename is None
    assert (await owner.execute("print(y)")).stdout.strip() == "7"

    # The listing records the join (read from the host, kept in the ledger).
    (listed_share,) = (await get(jp_fetch, "shares"))["shares"]
    assert listed_share["joins"] and listed_share["joins"][0]["time"] > model["created"]

    started = time.monotonic()
    response = await jp_fetch(*API, "shares", share_id, method="DELETE")
    revoked = json.loads(response.body)
    assert revoked["share"]["state"] == "revoked" and revoked["closed"] >= 1
    assert key_lines(ssh_host, share_id) == []
    # The teammate's kernel is cut off within seconds; the owner's runs on.
    await cut_off(jp_serverapp, joined["kernel_id"], started, 10)
    assert (await owner.execute("print(x + y)")).stdout.strip() == "48"
    assert (await get(jp_fetch, "shares"))["shares"] == []
    response = await jp_fetch(*API, "shares", params={"all": "1"})
    everything = json.loads(response.body)["shares"]
    assert [(s["share_id"], s["state"]) for s in everything] == [(share_id, "revoked")]


async def test_a_viewer_sees_the_owners_output_live_and_cannot_run_code(
    jp_fetch: Fetch,
    start_kernel: StartKernel,
    channels: OpenChannels,
    shares: list[str],
    ssh_host: SSHTestHost,
    teammate_key: Path,
) -> None:
    owner_id = await start_kernel(SSH_KERNEL)
    owner = await channels(owner_id)
    granted = await share(jp_fetch, shares, owner_id, teammate_key, "viewer", "30m")
    share_file = granted["share_file"]
    assert "key" not in share_file and set(share_file["ports"]) == {"iopub_port"}
    (line,) = key_lines(ssh_host, granted["share"]["share_id"])
    assert line.count("permitopen=") == 1

    joined = await join(jp_fetch, share_file, teammate_key)
    assert joined["role"] == "viewer" and joined["can_execute"] is False
    viewer = await channels(joined["kernel_id"])
    await owner.send(
        "execute_request",
        {
            "code": "import time\nfor i in range(3):\n"
            "    print('step', i, flush=True)\n    time.sleep(0.3)",
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    )
    seen = await stdout_until(viewer, "step 2")
    assert "step 0" in seen and "step 1" in seen

    refused = await viewer.execute("y = 1")
    assert refused.ename is not None
    assert any("read-only share" in json.dumps(m["content"]) for m in refused.messages)
    assert "NameError" in ((await owner.execute("y")).ename or "")


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        (
            {"kernel": "x", "public_key": "ssh-ed25519 nope", "role": "viewer"},
            400,
            "public_key",
            "not an SSH public key",
        ),
        (
            {
                "kernel": "x",
                "public_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc",
                "role": "viewer",
            },
            400,
            "public_key",
            "one line such as 'ssh-ed25519 AAAA... name' (never a private key)",
        ),
        (
            {"kernel": "x", "public_key": "-----BEGIN OPENSSH PRIVATE KEY-----", "role": "viewer"},
            400,
            "public_key",
            "that is a private key",
        ),
        (
            {"kernel": "x", "public_key": "KEY", "role": "admin"},
            400,
            "role",
            "role must be one of 'viewer', 'collaborator'",
        ),
        (
            {"kernel": "x", "public_key": "KEY", "role": "viewer", "expires": "soon"},
            400,
            "expires",
            "expires 'soon' is not valid: a duration such as 30m, 8h",
        ),
        (
            {"kernel": "x", "public_key": "KEY", "role": "viewer", "expires": "9999d"},
            400,
            "expires",
            "is longer than 365 days",
        ),
        (
            {"kernel": "", "public_key": "KEY", "role": "viewer"},
            400,
            "kernel",
            "kernel '' is not valid",
        ),
        (
            {"kernel": "no-such-kernel", "public_key": "KEY", "role": "viewer"},
            404,
            "kernel",
            "no kernel 'no-such-kernel'",
        ),
        (
            {"kernel": "x", "public_key": "KEY", "role": "viewer", "whom": 1},
            400,
            "whom",
            "whom is not a field here",
        ),
    ],
)
async def test_a_bad_share_request_names_the_field(
    jp_fetch: Fetch, teammate_key: Path, body: dict[str, Any], status: int, field: str, words: str
) -> None:
    if body.get("public_key") == "KEY":
        body = {**body, "public_key": teammate_key.with_suffix(".pub").read_text()}
    code, error = await failure(jp_fetch, "shares", body=body)
    assert (code, error.get("field")) == (status, field)
    assert words in error["message"]


async def test_a_local_kernel_cannot_be_shared(
    jp_fetch: Fetch, start_kernel: StartKernel, shares: list[str], teammate_key: Path
) -> None:
    kernel_id = await start_kernel(LOCAL_KERNEL)
    code, error = await failure(
        jp_fetch,
        "shares",
        body={
            "kernel": kernel_id,
            "public_key": teammate_key.with_suffix(".pub").read_text(),
            "role": "viewer",
        },
    )
    assert (code, error["field"]) == (409, "kernel")
    assert "only kernels on SSH or cloud hosts can be shared" in error["message"]
    machines = {m["name"]: m for m in (await get(jp_fetch, "machines"))["machines"]}
    assert machines["local"]["shareable"] is False


async def test_a_hibernated_kernel_is_shared_once_it_is_awake(
    jp_fetch: Fetch,
    start_kernel: StartKernel,
    channels: OpenChannels,
    shares: list[str],
    teammate_key: Path,
) -> None:
    """Sharing a hibernated kernel: a 409 that says to wake it first (before, a 404 said
    it was shut down or never started); once a cell woke it, the share is made."""
    kernel_id = await start_kernel(SSH_KERNEL)
    owner = await channels(kernel_id)
    assert (await owner.execute("x = 1")).ename is None
    response = await jp_fetch(*API, "hibernate", kernel_id, method="POST", body="{}")
    assert json.loads(response.body)["hibernated"] is True
    body = {
        "kernel": kernel_id,
        "public_key": teammate_key.with_suffix(".pub").read_text(),
        "role": "viewer",
    }
    code, error = await failure(jp_fetch, "shares", body=body)
    assert (code, error["field"]) == (409, "kernel"), error
    assert error["message"] == (
        "the kernel on Test GPU 24 GiB · testhost hibernates: wake it (run a cell in it), "
        "then share it"
    )
    assert (await owner.execute("print(x)", timeout=120)).stdout.strip() == "1"
    response = await jp_fetch(*API, "shares", method="POST", body=json.dumps(body))
    assert response.code == 201
    shares.append(json.loads(response.body)["share"]["share_id"])


async def test_hibernating_a_shared_kernel_ends_its_shares_and_says_so(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    start_kernel: StartKernel,
    channels: OpenChannels,
    shares: list[str],
    ssh_host: SSHTestHost,
    teammate_key: Path,
) -> None:
    """A share is of one run of the kernel: hibernating it cuts the teammate off (their
    kernel reads as ended, naming hibernation), the key line goes, the listing shows the
    share ended with why, and the owner's kernel wakes with its state."""
    owner_id = await start_kernel(SSH_KERNEL)
    owner = await channels(owner_id)
    assert (await owner.execute("x = 5")).ename is None
    granted = await share(jp_fetch, shares, owner_id, teammate_key, "collaborator")
    share_id = granted["share"]["share_id"]
    joined = await join(jp_fetch, granted["share_file"], teammate_key)
    teammate = await channels(joined["kernel_id"])
    assert (await teammate.execute("print(x)")).stdout.strip() == "5"

    response = await jp_fetch(*API, "hibernate", owner_id, method="POST", body="{}")
    assert json.loads(response.body)["hibernated"] is True
    assert key_lines(ssh_host, share_id) == []
    teammate_kernel = await cut_off(jp_serverapp, joined["kernel_id"], time.monotonic(), 15)
    assert "shut down or hibernated" in teammate_kernel.provisioner.ended_reason
    assert (await get(jp_fetch, "shares"))["shares"] == []
    response = await jp_fetch(*API, "shares", params={"all": "1"})
    (ended,) = json.loads(response.body)["shares"]
    assert (ended["share_id"], ended["state"]) == (share_id, "revoked")
    assert (await owner.execute("print(x)", timeout=120)).stdout.strip() == "5"


async def test_revoking_an_unknown_share_is_404(jp_fetch: Fetch) -> None:
    code, error = await failure(jp_fetch, "shares", "nosuchshare", method="DELETE")
    assert (code, error["field"]) == (404, "share_id")
    assert "no share 'nosuchshare'" in error["message"]


async def test_bad_join_requests_say_what_is_wrong_and_leave_nothing(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    start_kernel: StartKernel,
    shares: list[str],
    teammate_key: Path,
    tmp_path: Path,
) -> None:
    code, error = await failure(jp_fetch, "join", body={"share_file": {"format": "zip"}})
    assert (code, error["field"]) == (400, "share_file")
    assert "not a jupyter-remote-hw share file" in error["message"]

    owner_id = await start_kernel(SSH_KERNEL)
    share_file = (await share(jp_fetch, shares, owner_id, teammate_key, "viewer"))["share_file"]
    code, error = await failure(
        jp_fetch, "join", body={"share_file": share_file, "identity": str(tmp_path / "missing")}
    )
    assert (code, error["field"]) == (400, "identity")
    assert "no private key at" in error["message"]

    kernels_before = set(jp_serverapp.kernel_manager.list_kernel_ids())
    specs_before = set(jp_serverapp.kernel_spec_manager.find_kernel_specs())
    stranger = keygen(tmp_path / "stranger", comment="eve@elsewhere")
    code, error = await failure(
        jp_fetch, "join", body={"share_file": share_file, "identity": str(stranger)}
    )
    assert (code, error["field"]) == (409, "share_file")
    assert "refused your key" in error["message"]
    expired = {**share_file, "expires": time.time() - 60}
    code, error = await failure(
        jp_fetch, "join", body={"share_file": expired, "identity": str(teammate_key)}
    )
    assert code == 409 and "expired" in error["message"]
    # A failed join leaves no kernel and no kernelspec behind.
    assert set(jp_serverapp.kernel_manager.list_kernel_ids()) == kernels_before
    assert set(jp_serverapp.kernel_spec_manager.find_kernel_specs()) == specs_before


async def test_the_listing_marks_a_kernel_that_someone_else_can_run_code_in(
    jp_fetch: Fetch,
    start_kernel: StartKernel,
    shares: list[str],
    teammate_key: Path,
) -> None:
    """Panel and CLI read the mark from the machines listing: not for a viewer's share,
    from a collaborator's share on, and still once that share is revoked."""
    owner_id = await start_kernel(SSH_KERNEL)

    async def marked() -> bool:
        machines = (await get(jp_fetch, "machines"))["machines"]
        (kernel,) = [k for m in machines for k in m["kernels"] if k["id"] == owner_id]
        return bool(kernel["run_by_others"])

    assert await marked() is False
    viewer = await share(jp_fetch, shares, owner_id, teammate_key, "viewer", "30m")
    assert await marked() is False
    await jp_fetch(*API, "shares", viewer["share"]["share_id"], method="DELETE")
    granted = await share(jp_fetch, shares, owner_id, teammate_key, "collaborator")
    assert await marked() is True
    await jp_fetch(*API, "shares", granted["share"]["share_id"], method="DELETE")
    assert await marked() is True  # what was run there stays run
