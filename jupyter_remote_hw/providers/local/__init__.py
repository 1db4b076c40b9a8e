"""The ``local`` provider: kernels on this machine, through the same agent as a remote host."""

from .provider import DEFAULT_STATE_DIR, LocalMachine, LocalProvider, detect_hardware

__all__ = ["DEFAULT_STATE_DIR", "LocalMachine", "LocalProvider", "detect_hardware"]
