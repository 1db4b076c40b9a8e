"""The host aliases an ssh_config file defines, for listing them as targets.

asyncssh reads ssh_config to connect, but does not list the hosts a file
names; this does only that: ``Host`` lines (patterns left out) and the files
they ``Include``.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
from pathlib import Path

_MAX_INCLUDE_DEPTH = 8
_LINE = re.compile(r"^\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)$")


def _words(line: str) -> tuple[str, list[str]] | None:
    """Split ``Keyword args`` or ``Keyword=args``; None for blanks and comments."""
    match = _LINE.match(line)
    if match is None:
        return None
    try:
        words = shlex.split(match.group(2))
    except ValueError:
        words = match.group(2).split()
    # As in ssh, '#' starts a comment only at the start of a word.
    args = []
    for word in words:
        if word.startswith("#"):
            break
        args.append(word)
    return match.group(1).lower(), args


def _is_pattern(alias: str) -> bool:
    return any(char in alias for char in "*?!%")


def _read(path: Path, found: list[str], depth: int) -> None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    ssh_dir = Path("~/.ssh").expanduser()
    for line in text.splitlines():
        parsed = _words(line)
        if parsed is None:
            continue
        keyword, args = parsed
        if keyword == "host":
            found.extend(alias for alias in args if not _is_pattern(alias))
        elif keyword == "include" and depth < _MAX_INCLUDE_DEPTH:
            for pattern in args:
                pattern = os.path.expanduser(pattern)
                if not os.path.isabs(pattern):
                    pattern = str(ssh_dir / pattern)
                for included in sorted(glob.glob(pattern)):
                    _read(Path(included), found, depth + 1)


def host_aliases(paths: list[Path]) -> list[str]:
    """Every concrete ``Host`` alias in ``paths`` and their includes, in order, once.

    Args:
        paths: ssh_config files; missing ones are skipped.

    Returns:
        The aliases; wildcard patterns such as ``*`` or ``*.corp`` are left out.
    """
    found: list[str] = []
    for path in paths:
        _read(path, found, 0)
    return list(dict.fromkeys(found))
