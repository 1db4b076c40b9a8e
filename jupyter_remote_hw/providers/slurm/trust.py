"""The paths on a cluster that we run from or write to must be ours: no symbolic
link and no other user's file or directory, from the cluster's root down.

The agent's bundle is hashed and then run from its path, and the job's directory
holds the agent's socket and the kernels' files: a path there that another user
owns or links elsewhere could swap what runs or catch what is written. The
shell text here refuses them as ``agent/boot.py`` does on an SSH host (links
refused, foreign owners refused, our own directories made owner-only), in the
commands our side runs on the login node.
"""

from __future__ import annotations

import shlex

#: The exit status of a command whose path check refused a path.
REFUSED = 4

#: sh: ``mine DIR...``: refuses (exit 4, a line on stderr) a path among ``DIR...`` that
#: is a symbolic link or another user's; makes each missing one owner-only and each of
#: ours that others could write owner-only too.
MINE = (
    'mine() { for p in "$@"; do '
    'if [ -L "$p" ] || { [ -e "$p" ] && [ ! -O "$p" ]; }; then '
    'echo "jupyter-remote-hw: refused $p: it is a symbolic link or belongs to another '
    f"user; remove it, or set the cluster's root elsewhere\" >&2; exit {REFUSED}; fi; "
    'if [ ! -e "$p" ]; then mkdir -m 700 "$p" || exit 1; '
    'elif [ -n "$(find "$p" -maxdepth 0 -perm /022)" ]; then chmod go-w "$p" || exit 1; fi; '
    "done; }; "
)

#: sh: ``myfile FILE``: refuses (exit 4) a file that is a link or another user's.
MY_FILE = (
    "myfile() { "
    'if [ -L "$1" ] || { [ -e "$1" ] && [ ! -O "$1" ]; }; then '
    'echo "jupyter-remote-hw: refused $1: it is a symbolic link or belongs to another '
    f'user; remove it" >&2; exit {REFUSED}; fi; '
    "}; "
)


def chain(root: str, relative: str) -> str:
    """The directories from ``root`` (a shell word: quoted, or ``"$HOME"``) down to
    ``root/relative``, each a shell word, for ``mine``: ``root`` itself is not among
    them (a home or project directory may be shared, and is the user's to set)."""
    parts = [part for part in relative.strip("/").split("/") if part]
    return " ".join(f"{root}/{shlex.quote('/'.join(parts[: i + 1]))}" for i in range(len(parts)))


def refused_line(stderr: str) -> str | None:
    """The refusal ``MINE`` or ``MY_FILE`` wrote on stderr, if any."""
    for line in stderr.splitlines():
        if line.startswith("jupyter-remote-hw: refused "):
            return line.removeprefix("jupyter-remote-hw: ")
    return None


__all__ = ["MINE", "MY_FILE", "REFUSED", "chain", "refused_line"]
