"""%%remote and %remote_pull on a kernel that someone else can run code in (shared with a
collaborator), in a real notebook on the loopback sshd test host: a planted object that
would run a command on unpickling is refused and runs nothing; HTML is shown sanitized and
JavaScript not at all. Before the share, the same kernel's output is shown as it was."""

from __future__ import annotations

from pathlib import Path

from jupyter_remote_hw.transfer.kernel_side.restricted import SETTING

from ..notebooks import error_of, run_notebook, text_of
from ..testhosts import SSHTestHost, keygen
from .test_magics import TARGET, env  # noqa: F401 (the fixture)


def outputs_of(cell: object, kind: str) -> list[str]:
    return [
        o.data[kind]
        for o in cell.outputs  # type: ignore[attr-defined]
        if "data" in o and kind in o.data
    ]


def test_a_shared_kernel_cannot_run_code_or_javascript_in_the_owners_notebook(
    env: dict[str, str], short_tmp: Path, ssh_host: SSHTestHost
) -> None:
    marker = short_tmp / "planted-ran"
    teammate = keygen(short_tmp / "teammate", comment="ada@laptop")
    cells = [
        "%load_ext jupyter_remote_hw",
        (
            f"%%remote {TARGET}\nfrom IPython.display import HTML, display\n"
            "display(HTML('<b onclick=\"go()\">before the share</b>'))"
        ),
        # The owner shares the kernel with a collaborator (as the Share dialog does).
        (
            "from jupyter_remote_hw.sharing.owner import ShareOwner\n"
            "sessions = get_ipython().magics_manager.registry['RemoteMagics'].sessions\n"
            f"kernel = sessions.running()[{TARGET!r}]\n"
            f"owner = ShareOwner(sessions.machines.ledger, "
            f"authorized_keys={str(ssh_host.authorized_keys)!r})\n"
            "granted = sessions.call(owner.share(kernel.manager.provisioner.run.machine, "
            f"kernel.kernel_id, {teammate.with_suffix('.pub').read_text()!r}, 'collaborator', "
            "expires_in=3600))\nprint('shared')"
        ),
        # What someone with a collaborator's role can leave there.
        (
            f"%%remote {TARGET}\nimport os, numpy as np\n"
            "class Planted:\n    def __reduce__(self):\n"
            f"        return (os.system, ('touch {marker}',))\n"
            "evil, good = Planted(), np.arange(5)\n"
            'display(HTML(\'<b>bold</b><img src="x.png" onerror="alert(1)">'
            '<script>alert(2)</script><a href="javascript:alert(3)">link</a>'
            '<iframe src="https://example.com"></iframe>\'))\n'
            "display({'application/javascript': 'alert(4)', 'text/plain': 'js fallback'}, "
            "raw=True)"
        ),
        f"%remote_pull evil --from {TARGET}",
        f"%%remote {TARGET} --out good,evil\nx = 1",
        f"%remote_pull good --from {TARGET}\nprint(good.sum(), 'evil' in globals())",
    ]
    nb, _ = run_notebook(cells, env, short_tmp, allow_errors=True)
    # Unshared, the kernel's HTML is shown as it was published.
    assert '<b onclick="go()">before the share</b>' in outputs_of(nb.cells[1], "text/html")
    assert "shared" in text_of(nb.cells[2])
    # Shared: HTML sanitized, JavaScript dropped (its text/plain shows instead).
    (html,) = outputs_of(nb.cells[3], "text/html")
    assert "<b>bold</b>" in html and "<img" in html and "link</a>" in html
    for bad in ("script", "onerror", "javascript:", "iframe", "alert"):
        assert bad not in html
    assert not outputs_of(nb.cells[3], "application/javascript")
    assert "js fallback" in text_of(nb.cells[3])
    # The planted object is refused, naming it, what it calls and the setting; nothing ran.
    for cell in (nb.cells[4], nb.cells[5]):
        error = error_of(cell)
        assert error.ename == "RefusedVariableError"
        assert "refused to rebuild 'evil' (__main__.Planted)" in error.evalue
        assert "its pickle calls posix.system," in error.evalue and SETTING in error.evalue
    assert not marker.exists()
    # Data still comes back; nothing of the refused pull was assigned.
    assert "10 False" in text_of(nb.cells[6])
