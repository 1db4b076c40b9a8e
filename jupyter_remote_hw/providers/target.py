"""A hardware target: one choice in the kernel picker."""

from __future__ import annotations

import re
from dataclasses import dataclass

KERNEL_NAME_PREFIX = "remote-hw-"
"""Kernelspec names of hardware targets start with this."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: A memory size in a hardware label: ``24GB``, ``80 GB``, ``24GiB`` (not ``SXM4-80GB``).
_MEMORY = re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)\s*Gi?B\b", re.IGNORECASE)


def slug(text: str) -> str:
    """A kernelspec-safe form of ``text``: lower-case letters, digits, ``.``, ``_`` and ``-``."""
    return _UNSAFE.sub("-", text).strip("-.").lower() or "host"


def gib_label(label: str) -> str:
    """A configured hardware label with its memory in GiB, as everywhere else.

    GPU memory is sold in binary gigabytes, so ``A10G 24GB`` reads ``A10G 24 GiB``.
    """
    return _MEMORY.sub(r"\1 GiB", label)


@dataclass(frozen=True)
class Target:
    """Somewhere a kernel can run, as the kernel picker shows it.

    Attributes:
        name: Unique, kernelspec-safe name (``local``, ``ssh-gpu-box``).
        provider: The provider that owns it (``local`` or ``ssh``).
        where: Where it runs, for people (``this machine``, the SSH host alias).
        hardware: What it runs on, for people (``A10G 24 GiB``, ``2 CPUs``).
        host: The SSH destination (alias or ``[user@]host``); None for ``local``.
        python: The host's Python, which runs the agent and the kernels.
        root: Directory on the host for the agent's cache and state; None for
            the login user's home.
        authorized_keys: The file the host's sshd reads keys from, where
            shares add their key lines; None for ``~/.ssh/authorized_keys``.
        workdir: Where kernels start on the host when the notebook's directory
            does not exist there; None for the login user's home.
    """

    name: str
    provider: str
    where: str
    hardware: str
    host: str | None = None
    python: str = "python3"
    root: str | None = None
    authorized_keys: str | None = None
    workdir: str | None = None

    @property
    def label(self) -> str:
        """The machine as people read it: ``<hardware> · <where>`` (``A10G 24 GiB ·
        gpu-box``), each part once."""
        return " · ".join(dict.fromkeys(p for p in (self.hardware, self.where) if p))

    @property
    def display_name(self) -> str:
        """The kernel picker's label: ``Python 3 · <hardware> · <where>``."""
        return f"Python 3 · {self.hardware} · {self.where}"

    @property
    def kernel_name(self) -> str:
        """The kernelspec name that selects this target."""
        return KERNEL_NAME_PREFIX + self.name
