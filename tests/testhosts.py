"""Real OpenSSH test hosts: sshd on loopback, optionally inside a network namespace.

Every host gets freshly generated host and user keys, a dedicated
``authorized_keys`` file, a ``known_hosts`` file that trusts exactly its host
key, and an ``ssh_config`` with a ``Host`` alias, so that code under test reaches
it the way it reaches a user's machine: by name, through an SSH config file.

Used by the pytest fixtures in ``tests/conftest.py`` and by ``benchmarks/``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SSHD = shutil.which("sshd", path="/usr/sbin:/usr/local/sbin:" + os.environ.get("PATH", ""))
IP = shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:" + os.environ.get("PATH", ""))

#: Addresses for namespace hosts come from the benchmarking range (RFC 2544),
#: which no real network here uses: each host gets its own /30.
_NETNS_PREFIX = "198.18"


def is_root() -> bool:
    """Whether this process can create network namespaces."""
    return os.geteuid() == 0


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(host: str, port: int, timeout: float = 10.0, netns: str | None = None) -> None:
    """Block until something accepts TCP connections on ``host:port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if netns is None:
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
                return
        else:
            probe = subprocess.run(
                [
                    IP or "ip",
                    "netns",
                    "exec",
                    netns,
                    sys.executable,
                    "-c",
                    f"import socket; socket.create_connection(({host!r}, {port}), timeout=0.5)",
                ],
                capture_output=True,
                check=False,
            )
            if probe.returncode == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:.0f} s")


def keygen(path: Path, kind: str = "ed25519", comment: str = "jupyter-remote-hw-test") -> Path:
    """Generate an unencrypted key pair at ``path`` and return the private key path."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    return path


@dataclass
class SSHTestHost:
    """One running ``sshd`` reachable through its own SSH config alias.

    Attributes:
        alias: The ``Host`` name in :attr:`ssh_config` that reaches this host.
        address: The address sshd listens on.
        port: The port sshd listens on.
        user: The login user (the user running the tests).
        root: Directory holding this host's keys, config and logs.
        netns: Network namespace name, when the host lives in one.
        env: Variables every session on the host gets (sshd's ``SetEnv``), such as
            a ``PATH`` with a stand-in ``nvidia-smi`` first.
    """

    alias: str
    address: str
    port: int
    user: str
    root: Path
    netns: str | None = None
    extra_listen: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    _sshd: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _children: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    # -- files ---------------------------------------------------------------

    @property
    def host_key(self) -> Path:
        """The host's private host key."""
        return self.root / "ssh_host_ed25519_key"

    @property
    def user_key(self) -> Path:
        """The private key authorized to log in."""
        return self.root / "id_ed25519"

    @property
    def authorized_keys(self) -> Path:
        """The dedicated authorized_keys file sshd reads."""
        return self.root / "authorized_keys"

    @property
    def known_hosts(self) -> Path:
        """A known_hosts file trusting exactly this host's key."""
        return self.root / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        """An ssh_config with a ``Host`` entry for :attr:`alias`."""
        return self.root / "ssh_config"

    @property
    def log(self) -> Path:
        """sshd's log output."""
        return self.root / "sshd.log"

    def known_hosts_line(self, address: str | None = None) -> str:
        """The known_hosts line for this host's key, as reached at ``address``."""
        pub = (self.root / "ssh_host_ed25519_key.pub").read_text().split()
        address = address or self.address
        name = address if self.port == 22 else f"[{address}]:{self.port}"
        return f"{name} {pub[0]} {pub[1]}\n"

    def fingerprint(self) -> str:
        """SHA256 fingerprint of the host key, as ``ssh-keygen -l`` prints it."""
        out = subprocess.run(
            ["ssh-keygen", "-l", "-E", "sha256", "-f", str(self.host_key) + ".pub"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.split()[1]

    def config_block(self, alias: str | None = None, **options: str | int) -> str:
        """An ssh_config ``Host`` block for this host; ``options`` override or add keys."""
        entries: dict[str, str | int] = {
            "HostName": self.address,
            "Port": self.port,
            "User": self.user,
            "IdentityFile": str(self.user_key),
            "IdentitiesOnly": "yes",
            "UserKnownHostsFile": str(self.known_hosts),
            "StrictHostKeyChecking": "yes",
        }
        entries.update(options)
        body = "".join(f"    {key} {value}\n" for key, value in entries.items())
        return f"Host {alias or self.alias}\n{body}"

    # -- lifecycle -----------------------------------------------------------

    def prepare(self) -> None:
        """Generate keys and write every config file."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        keygen(self.host_key)
        keygen(self.user_key)
        shutil.copy(self.root / "id_ed25519.pub", self.authorized_keys)
        os.chmod(self.authorized_keys, 0o600)
        self.known_hosts.write_text(self.known_hosts_line())
        self.ssh_config.write_text(self.config_block())
        sftp = next(
            (
                p
                for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server")
                if os.path.exists(p)
            ),
            "internal-sftp",
        )
        (self.root / "sshd_config").write_text(
            f"Port {self.port}\n"
            + "".join(f"ListenAddress {a}\n" for a in (self.address, *self.extra_listen))
            + f"HostKey {self.host_key}\n"
            f"PidFile {self.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.authorized_keys}\n"
            "PubkeyAuthentication yes\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            "UsePAM no\n"
            "StrictModes no\n"
            "AllowTcpForwarding yes\n"
            "PermitOpen any\n"
            "MaxStartups 100:30:200\n"
            "MaxSessions 100\n"
            "LogLevel VERBOSE\n"
            f"Subsystem sftp {sftp}\n"
            # One SetEnv line: sshd uses the first one it reads.
            + (
                "SetEnv " + " ".join(f'"{key}={value}"' for key, value in self.env.items()) + "\n"
                if self.env
                else ""
            )
        )

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """Prefix ``argv`` so that it runs on the test host (inside its namespace)."""
        if self.netns is None:
            return list(argv)
        return [IP or "ip", "netns", "exec", self.netns, *argv]

    def start(self) -> None:
        """Start sshd and wait until it accepts connections."""
        if SSHD is None:
            raise RuntimeError("sshd not found: install Debian's openssh-server")
        if is_root():
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        logfile = self.log.open("ab")
        self._sshd = subprocess.Popen(
            self.wrap([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")]),
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        logfile.close()
        try:
            wait_for_port(self.address, self.port, netns=None)
        except TimeoutError as exc:
            raise RuntimeError(f"sshd did not start: {self.log.read_text()[-2000:]}") from exc

    def spawn(self, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        """Run a process on the test host; it is killed when the host stops."""
        proc = subprocess.Popen(self.wrap(argv), start_new_session=True)
        self._children.append(proc)
        return proc

    def start_echo_server(self, port: int | None = None) -> int:
        """Run a TCP echo server on the host's own 127.0.0.1; return its port."""
        port = port or free_port()
        script = Path(__file__).with_name("echo_server.py")
        self.spawn([sys.executable, str(script), "127.0.0.1", str(port)])
        wait_for_port("127.0.0.1", port, netns=self.netns)
        return port

    def stop(self) -> None:
        """Stop sshd and every process started with :meth:`spawn`."""
        for proc in [*self._children, *([self._sshd] if self._sshd else [])]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        self._children.clear()
        self._sshd = None


@dataclass
class NetnsLink:
    """The veth link between this machine and a namespace host.

    Cutting takes the namespace's end down: this machine's end keeps its
    address and route but has no carrier, so packets to the host are dropped
    on the spot (as on a dead link) and never take another route.
    """

    netns: str
    inner: str

    def cut(self) -> None:
        """Take the link down: packets to and from the host are lost."""
        subprocess.run(
            [IP or "ip", "-n", self.netns, "link", "set", self.inner, "down"], check=True
        )

    def restore(self) -> None:
        """Bring the link back up."""
        subprocess.run([IP or "ip", "-n", self.netns, "link", "set", self.inner, "up"], check=True)


@dataclass
class NetnsTestHost(SSHTestHost):
    """An :class:`SSHTestHost` inside its own network namespace, with a cuttable link."""

    link: NetnsLink | None = None


@contextlib.contextmanager
def loopback_host(
    root: Path, alias: str = "testhost", env: dict[str, str] | None = None
) -> Iterator[SSHTestHost]:
    """Run an sshd on 127.0.0.1 for the duration of the block (sessions get ``env``)."""
    host = SSHTestHost(
        alias=alias,
        address="127.0.0.1",
        port=free_port(),
        user=getpass.getuser(),
        root=root,
        env=dict(env or {}),
    )
    host.prepare()
    host.start()
    try:
        yield host
    finally:
        host.stop()


@contextlib.contextmanager
def netns_host(root: Path, alias: str = "nshost") -> Iterator[NetnsTestHost]:
    """Run an sshd in a fresh network namespace joined by a veth pair (root only).

    Nothing outside the new namespace and the new veth pair is changed, and
    both are removed afterwards.
    """
    if not is_root():
        raise PermissionError("network namespaces need root")
    tag = secrets.token_hex(3)
    netns = f"jrhw-{tag}"
    outer, inner = f"jrhw{tag}h", f"jrhw{tag}n"
    octet = int(tag[:2], 16)
    outer_ip, inner_ip = f"{_NETNS_PREFIX}.{octet}.1", f"{_NETNS_PREFIX}.{octet}.2"

    def ip(*args: str) -> None:
        subprocess.run([IP or "ip", *args], check=True)

    ip("netns", "add", netns)
    try:
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        ip("link", "set", inner, "netns", netns)
        ip("addr", "add", f"{outer_ip}/30", "dev", outer)
        ip("link", "set", outer, "up")
        # Should the link's own route ever vanish, traffic for the host's
        # addresses is dropped here rather than sent along the default route.
        ip("route", "add", "blackhole", f"{_NETNS_PREFIX}.{octet}.0/30", "metric", "4096")
        ip("netns", "exec", netns, "ip", "addr", "add", f"{inner_ip}/30", "dev", inner)
        ip("netns", "exec", netns, "ip", "link", "set", inner, "up")
        ip("netns", "exec", netns, "ip", "link", "set", "lo", "up")
        # The host's sshd also listens on the namespace's own loopback: that
        # address is reachable only by jumping through the host itself.
        host = NetnsTestHost(
            alias=alias,
            address=inner_ip,
            port=free_port(),
            user=getpass.getuser(),
            root=root,
            netns=netns,
            extra_listen=("127.0.0.1",),
            link=NetnsLink(netns=netns, inner=inner),
        )
        host.prepare()
        host.start()
        try:
            yield host
        finally:
            host.stop()
    finally:
        subprocess.run([IP or "ip", "netns", "del", netns], check=False)
        subprocess.run([IP or "ip", "link", "del", outer], check=False, capture_output=True)
        subprocess.run(
            [IP or "ip", "route", "del", "blackhole", f"{_NETNS_PREFIX}.{octet}.0/30"],
            check=False,
            capture_output=True,
        )


KERNEL_CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


async def forward_kernel(conn: Any, remote: dict[str, Any]) -> dict[str, Any]:
    """Forward a host kernel's five channels to local ports; its connection info here.

    A kernel on UNIX sockets (``ipc``) is reached through forwards to its socket paths.
    """
    local = {**remote, "ip": "127.0.0.1", "transport": "tcp"}
    for name in KERNEL_CHANNELS:
        if remote.get("transport") == "ipc":
            forward = await conn.forward_local_port(0, remote_path=f"{remote['ip']}-{remote[name]}")
        else:
            forward = await conn.forward_local_port(remote[name])
        local[name] = forward.local_port
    return local
