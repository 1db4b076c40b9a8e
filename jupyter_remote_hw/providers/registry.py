"""Which providers there are: those registered under the entry point group
``jupyter_remote_hw.providers``, each by its name.

The providers shipped with jupyter-remote-hw are known here too, so that they are
found even where the package's entry points are not installed (a source checkout
on ``sys.path``), and they keep their order in listings: ``local`` first, then
``ssh``, ``aws`` and ``slurm``; other providers follow by name. A registered
provider cannot replace a shipped one of the same name.
"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint, entry_points

from .base import ENTRY_POINT_GROUP, Provider

#: The shipped providers, in listing order.
BUILTIN_PROVIDERS: dict[str, str] = {
    "local": "jupyter_remote_hw.providers.local:LocalProvider",
    "ssh": "jupyter_remote_hw.providers.ssh:SSHProvider",
    "aws": "jupyter_remote_hw.providers.aws:AWSProvider",
    "slurm": "jupyter_remote_hw.providers.slurm:SLURMProvider",
}


def provider_entry_points() -> list[EntryPoint]:
    """The shipped providers, then the other registered ones by name."""
    found = {
        name: EntryPoint(name, value, ENTRY_POINT_GROUP)
        for name, value in BUILTIN_PROVIDERS.items()
    }
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        found.setdefault(point.name, point)
    return list(found.values())


def provider_classes(log: logging.Logger) -> dict[str, type[Provider]]:
    """Every provider class, by name (see the module's docstring).

    A registered provider that cannot be loaded, or is not a :class:`Provider`,
    is left out with a warning on ``log``; a shipped one that cannot be loaded
    raises.
    """
    classes: dict[str, type[Provider]] = {}
    for point in provider_entry_points():
        try:
            cls = point.load()
            if not (isinstance(cls, type) and issubclass(cls, Provider)):
                raise TypeError(f"{point.value} is not a Provider")
        except Exception as exc:
            if point.name in BUILTIN_PROVIDERS:
                raise
            log.warning("provider %s (%s) left out: %s", point.name, point.value, exc)
            continue
        classes[point.name] = cls
    return classes


__all__ = ["BUILTIN_PROVIDERS", "provider_classes", "provider_entry_points"]
