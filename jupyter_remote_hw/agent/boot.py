"""Prepare a host and start its agent in one command: sent as ``python3 -c``, run on the host.

Our side runs ``python3 -c <this file> HOME_OR_EMPTY NAME SHA256 SIZE IDLE_EXIT``
over SSH. The script checks the Python, looks for this build's agent zipapp in
the host's cache and verifies its hash; when it is missing (or differs), it
asks for it with one line, ``{"need": SIZE}``, reads exactly SIZE bytes from
its stdin, verifies them and stores them without following symbolic links,
readable by the owner only. It then becomes the agent's ``serve --daemon``,
whose ready line ends the command. So a new host costs one remote command,
not one per step, and the bundle that runs is always the one our side built.

Every line it prints is one JSON object: ``{"need": N}``, ``{"have": true}``,
``{"error": "..."}``, then the agent's own ready line. It must stay a
standalone script that any Python 3 can parse (no imports from this package,
no f-strings, annotations only as strings), so that an old Python gets a
clear answer instead of a syntax error.
"""

import hashlib
import json
import os
import sys
from typing import Any, NoReturn

CACHE = ".cache/jupyter-remote-hw"
STATE = ".local/state/jupyter-remote-hw/agent"


def say(message: "dict[str, Any]") -> None:
    """Write one JSON line for our side."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def fail(message: str) -> NoReturn:
    """Tell our side what went wrong, and stop."""
    say({"error": message})
    sys.exit(1)


def digest_of(path: str) -> "str | None":
    """The SHA-256 of the regular file at ``path`` (not a link), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def private_dir(path: str) -> None:
    """Create ``path`` (and its parents) owner-only; refuse one that others may write."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if info.st_uid != os.getuid():
        fail("the agent cache " + path + " belongs to another user")
    if info.st_mode & 0o022:
        os.chmod(path, 0o700)


def store(path: str, size: int, digest: str) -> None:
    """Read the bundle from stdin, check it, and put it at ``path`` atomically."""
    say({"need": size})
    data = sys.stdin.buffer.read(size)
    if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
        fail(
            "the agent bundle arrived incomplete or altered ("
            + str(len(data))
            + " of "
            + str(size)
            + " bytes)"
        )
    partial = path + "." + str(os.getpid()) + ".part"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(partial, path)


def main(argv: "list[str]") -> None:
    """Check, store when needed, and become the agent."""
    if sys.version_info < (3, 8):  # noqa: UP036 (a host may run any Python 3)
        fail(
            sys.executable
            + " is Python "
            + sys.version.split()[0]
            + ", older than 3.8; install a newer Python there"
        )
    home, name, digest, size, idle_exit = argv
    home = home or os.path.expanduser("~")
    cache = os.path.join(home, CACHE)
    path = os.path.join(cache, name)
    try:
        private_dir(cache)
        if digest_of(path) == digest:
            say({"have": True})
        else:
            store(path, int(size), digest)
            if digest_of(path) != digest:
                fail("the agent bundle at " + path + " changed while it was stored")
    except OSError as exc:
        fail("cannot store the agent in " + cache + ": " + str(exc))
    sys.stdout.flush()
    os.execv(
        sys.executable,
        [
            sys.executable,
            path,
            "serve",
            "--state-dir",
            os.path.join(home, STATE),
            "--daemon",
            "--idle-exit",
            idle_exit,
        ],
    )


if __name__ == "__main__":
    main(sys.argv[1:])
