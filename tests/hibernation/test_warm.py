"""Reading a hibernated kernel's files ahead puts them in the page cache: a file evicted
from it (as after hours asleep) is resident once read ahead, whole."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from jupyter_remote_hw.hibernation.warm import read_ahead


def evicted(path: Path) -> Path:
    """``path`` written to disk and dropped from the page cache."""
    with open(path, "wb") as file:
        file.write(os.urandom(1 << 20) * 24)
        file.flush()
        os.fsync(file.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return path


def resident_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache (util-linux's fincore)."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out.split()[0])


async def test_files_read_ahead_are_whole_in_the_page_cache(tmp_path: Path) -> None:
    files = [evicted(tmp_path / "var-0000.bin"), evicted(tmp_path / "var-0001.bin")]
    assert [resident_bytes(f) for f in files] == [0, 0]
    await read_ahead(files)
    assert [resident_bytes(f) for f in files] == [24 << 20, 24 << 20]
