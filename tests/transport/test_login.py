"""How a ProxyJump hop is read: user, host and port, IPv6 addresses included."""

from __future__ import annotations

import pytest

from jupyter_remote_hw.transport.login import split_hop


@pytest.mark.parametrize(
    ("hop", "parts"),
    [
        ("jump", ("", "jump", "")),
        ("ada@jump", ("ada", "jump", "")),
        ("ada@jump:2222", ("ada", "jump", "2222")),
        ("10.0.0.1:22", ("", "10.0.0.1", "22")),
        ("::1", ("", "::1", "")),
        ("fe80::1", ("", "fe80::1", "")),
        ("[::1]:2222", ("", "::1", "2222")),
        ("ada@[fe80::1]:22", ("ada", "fe80::1", "22")),
        ("[::1]", ("", "::1", "")),
        ("ssh://ada@[::1]:2222", ("ada", "::1", "2222")),
        ("ssh://jump:2200/", ("", "jump", "2200")),
        ("a@b@jump", ("a@b", "jump", "")),
        # Not a bracketed address: taken whole, for ssh's own error to name it.
        ("[::1", ("", "[::1", "")),
    ],
)
def test_a_hop_is_split_as_openssh_reads_it(hop: str, parts: tuple[str, str, str]) -> None:
    assert split_hop(hop) == parts
