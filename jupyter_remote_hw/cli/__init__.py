"""The command line, ``jupyter remote-hw``: list, launch, start, stop, terminate and
reap machines, search the catalog, trust host keys, and share kernels."""

from .commands import main

__all__ = ["main"]
