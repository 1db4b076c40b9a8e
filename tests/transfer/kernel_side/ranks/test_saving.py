"""A rank's variables as a hibernation keeps them, and given back to a new engine
(the cluster test, ``tests/providers/slurm/test_ranks.py``, runs the whole hibernation)."""

from __future__ import annotations

import base64

from jupyter_remote_hw.transfer.kernel_side.ranks.saving import RESTORE_IMPORTS
from jupyter_remote_hw.transfer.kernel_side.ranks.wire import pack_value, raw_pickle, unpack_value

from .test_engine import EngineProcess


def test_a_rank_s_variables_modules_and_what_it_cannot_keep_come_back_in_a_new_engine() -> None:
    first = EngineProcess({"RANK": "1"})
    try:
        first.until("ready")
        first.send(
            {
                "op": "execute",
                "id": 1,
                "code": "import json as j, threading, types\n"
                "weights = [0.5] * 1000\nscale = lambda v: v * 3\n"
                "lock = threading.Lock()\n_private = 1\n"
                "made = types.ModuleType('made')\n",
            }
        )
        assert first.until("done")[-1]["status"] == "ok"
        first.send({"op": "save", "id": 2})
        saved = first.until("saved")[-1]
    finally:
        first.close()
    assert saved["id"] == 2
    assert sorted(saved["values"]) == ["scale", "weights"]
    assert saved["types"] == {"scale": "function", "weights": "list"}
    assert {"name": "j", "module": "json"} in saved["modules"]
    assert {"name": "threading", "module": "threading"} in saved["modules"]
    left = {entry["name"]: entry for entry in saved["left_out"]}
    assert sorted(left) == ["lock", "made"]  # _private and IPython's own names are not the user's
    assert "TypeError" in left["lock"]["reason"] and left["lock"]["type"] == "_thread.lock"
    assert "cannot be imported by name" in left["made"]["reason"]

    second = EngineProcess({"RANK": "1"})
    try:
        second.until("ready")
        modules = [(m["name"], m["module"]) for m in saved["modules"]] + [("gone", "no_such_mod")]
        inputs = {
            name: base64.b64encode(raw_pickle(field)).decode()
            for name, field in saved["values"].items()
        }
        inputs["_ranks_modules"] = pack_value(modules)
        second.send({"op": "execute", "id": 1, "code": RESTORE_IMPORTS, "inputs": inputs})
        seen = second.until("done")
        assert seen[-1]["status"] == "ok", seen
        printed = "".join(m["text"] for m in seen if m.get("ev") == "stream")
        assert printed.startswith("gone (no_such_mod) was not imported again: ModuleNotFoundError")
        second.send({"op": "execute", "id": 2, "code": "check = (j.dumps(scale(2)), len(weights))"})
        assert second.until("done")[-1]["status"] == "ok"
        second.send({"op": "get", "id": 3, "names": ["check", "_ranks_modules"]})
        values = second.until("values")[-1]
        assert unpack_value(values["values"]["check"]) == ("6", 1000)
        assert "_ranks_modules" in values["errors"]  # the restore left nothing of its own
    finally:
        second.close()
