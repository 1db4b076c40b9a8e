"""One rank's engine, driven over its standard input and output as the controller
drives it through ``srun`` (here a plain process: the channel is the same)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

import pytest

from jupyter_remote_hw.transfer.kernel_side.ranks.controller import engine_command
from jupyter_remote_hw.transfer.kernel_side.ranks.wire import pack_value, unpack_value


class EngineProcess:
    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            engine_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **env},
        )

    def send(self, message: dict[str, Any]) -> None:
        stdin: IO[bytes] | None = self.process.stdin
        assert stdin is not None
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()

    def until(self, kind: str) -> list[dict[str, Any]]:
        """Messages up to and with the first of ``kind``."""
        stdout = self.process.stdout
        assert stdout is not None
        seen = []
        while True:
            line = stdout.readline()
            assert line, f"the engine ended before {kind}: {seen}"
            seen.append(json.loads(line))
            if seen[-1].get("ev") == kind:
                return seen


@pytest.fixture
def engine() -> Iterator[EngineProcess]:
    made = EngineProcess(
        {"RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "4,5"}
    )
    ready = made.until("ready")[-1]
    assert ready["rank"] == 1
    assert ready["devices"] == "5"  # its own GPU of the node's two
    yield made
    made.close()


def stdout_of(messages: list[dict[str, Any]]) -> str:
    return "".join(m["text"] for m in messages if m.get("ev") == "stream" and m["name"] == "stdout")


def test_a_cell_s_output_comes_as_whole_lines_then_its_result(engine: EngineProcess) -> None:
    engine.send(
        {
            "op": "execute",
            "id": 1,
            "code": "import os, sys, time\nos.system('echo from a child')\n"
            "sys.stdout.write('hal'); sys.stdout.flush(); time.sleep(0.3); print('f')\n"
            "sys.stdout.write('unfinished')\nx = k * 2\nx",
            "inputs": {"k": pack_value(21)},
        }
    )
    seen = engine.until("done")
    assert seen[-1] == {"ev": "done", "id": 1, "status": "ok"}
    # What a child process printed through the same descriptor comes too; a line is
    # never cut ('hal' waited for the rest of its line); the unfinished last line comes
    # before the cell's end.
    assert stdout_of(seen) == "from a child\nhalf\nunfinished"
    # How the lines are batched depends on when the reader woke; that no piece ends
    # inside a line does not: only the cell's last, unfinished line may.
    pieces = [m["text"] for m in seen if m.get("ev") == "stream" and m["name"] == "stdout"]
    assert all(piece.endswith("\n") for piece in pieces[:-1]), pieces
    assert pieces[-1].endswith("unfinished")
    assert "hal" not in pieces and not any(piece.endswith("hal") for piece in pieces)
    assert {"ev": "result", "data": {"text/plain": "42"}, "metadata": {}} in seen
    engine.send({"op": "get", "id": 2, "names": ["x", "missing"]})
    values = engine.until("values")[-1]
    assert unpack_value(values["values"]["x"]) == 42
    assert values["errors"] == {"missing": "'missing' is not defined"}


def test_an_error_names_itself_and_an_interrupt_stops_a_cell_keeping_variables(
    engine: EngineProcess,
) -> None:
    engine.send({"op": "execute", "id": 1, "code": "kept = 5\n1 / 0"})
    done = engine.until("done")[-1]
    assert (done["status"], done["ename"], done["evalue"]) == (
        "error",
        "ZeroDivisionError",
        "division by zero",
    )
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(done["traceback"]))
    assert "1 / 0" in shown
    engine.send({"op": "execute", "id": 2, "code": "import time\nwhile True: time.sleep(0.05)"})
    time.sleep(0.5)
    engine.send({"op": "stacks"})
    stack = engine.until("stacks")[-1]["text"]
    assert "while True: time.sleep(0.05)" in stack
    assert "engine.py" not in stack  # the cell's frames, not the engine's
    began = time.monotonic()
    engine.send({"op": "interrupt"})
    done = engine.until("done")[-1]
    assert done["ename"] == "KeyboardInterrupt"
    assert time.monotonic() - began < 2
    engine.send({"op": "get", "id": 3, "names": ["kept"]})
    assert unpack_value(engine.until("values")[-1]["values"]["kept"]) == 5


def test_rich_outputs_keep_their_place_among_the_printed_lines(engine: EngineProcess) -> None:
    engine.send(
        {
            "op": "execute",
            "id": 1,
            "code": "from IPython.display import display\nimport os\n"
            "for i in range(5):\n    print('line', i)\n    display(i)\n"
            "os.system('echo from a child')\ndisplay('last')\n'result'",
        }
    )
    seen = engine.until("done")
    order = [
        m["text"].strip() if m["ev"] == "stream" else f"{m['ev']} {m['data']['text/plain']}"
        for m in seen
        if m.get("ev") in ("stream", "display", "result")
    ]
    expected = [x for i in range(5) for x in (f"line {i}", f"display {i}")]
    assert order == [*expected, "from a child", "display 'last'", "result 'result'"]


def test_the_engine_ends_when_its_controller_is_gone() -> None:
    made = EngineProcess({"JRHW_RANKS_HEARTBEAT": "1"})
    made.until("ready")
    # No word for the heartbeat's time: it ends itself.
    assert made.process.wait(10) == 3
    made.close()
    made = EngineProcess({})
    made.until("ready")
    assert made.process.stdin is not None
    made.process.stdin.close()  # the notebook's kernel died: the channel closed
    assert made.process.wait(10) == 0
    made.close()


def test_the_engine_runs_from_the_package_as_the_kernel_found_it() -> None:
    command = engine_command()
    assert command[0] == sys.executable
    assert "from jupyter_remote_hw.transfer.kernel_side.ranks.engine import main" in command[2]
