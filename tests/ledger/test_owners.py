"""Who started a kernel, as the ledger records it."""

from __future__ import annotations

import pytest

from jupyter_remote_hw.ledger.records import SERVER_OWNER, magic_owner, magic_owner_process


@pytest.mark.parametrize("host", ["laptop", "node-1.example.org", "a:b"])
def test_a_remote_cells_owner_names_the_machine_and_process_it_ran_in(host: str) -> None:
    assert magic_owner_process(magic_owner(host, 4321)) == (host, 4321)


@pytest.mark.parametrize(
    "owner", [SERVER_OWNER, "magic:", "magic:host:", "magic::12", "magic:h:1x"]
)
def test_any_other_owner_names_no_process(owner: str) -> None:
    assert magic_owner_process(owner) is None
