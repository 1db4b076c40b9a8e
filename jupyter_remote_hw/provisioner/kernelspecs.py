"""Kernelspecs for hardware targets, listed beside the installed ones.

With ``c.ServerApp.kernel_spec_manager_class`` set to
:class:`RemoteHWKernelSpecManager` (the server extension sets it unless
another manager was chosen), every target appears in JupyterLab's kernel picker as
``Python 3 · <hardware> · <where>``.
"""

from __future__ import annotations

from typing import Any

from ipykernel.kernelspec import RESOURCES
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel

from ..machines.manager import MachineManager
from ..providers import KERNEL_NAME_PREFIX, Target, UnknownHardwareError
from .errors import UnknownHardwareKernelSpec

PROVISIONER_NAME = "remote-hw"
"""The provisioner's name under the ``jupyter_client.kernel_provisioners`` entry point."""


def target_kernel_spec(target: Target) -> dict[str, Any]:
    """The kernel.json content that selects ``target``."""
    return {
        "argv": [target.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": target.display_name,
        "language": "python",
        "interrupt_mode": "signal",
        "env": {},
        "metadata": {
            "debugger": True,
            "kernel_provisioner": {
                "provisioner_name": PROVISIONER_NAME,
                "config": {"target": target.name},
            },
            "jupyter_remote_hw": {
                "target": target.name,
                "provider": target.provider,
                "hardware": target.hardware,
                "where": target.where,
            },
        },
    }


class RemoteHWKernelSpecManager(KernelSpecManager):
    """The installed kernelspecs plus one per hardware target."""

    _listing: dict[str, Target] | None = None

    def _targets(self) -> dict[str, Target]:
        if self._listing is not None:
            return self._listing
        manager: MachineManager = MachineManager.instance(config=self.config)
        try:
            return {t.kernel_name: t for t in manager.targets()}
        except Exception:
            self.log.exception("jupyter_remote_hw: listing hardware targets failed")
            return {}

    def _resolve(self, kernel_name: str) -> Target | None:
        """A target that is not listed now but that a provider still knows by name (a
        SLURM allocation whose job ended, which a kernel started on it names)."""
        if not kernel_name.startswith(KERNEL_NAME_PREFIX):
            return None
        manager: MachineManager = MachineManager.instance(config=self.config)
        name = kernel_name[len(KERNEL_NAME_PREFIX) :]
        for provider in manager.providers.values():
            target = provider.resolve(name)
            if target is not None:
                return target
        return None

    def find_kernel_specs(self) -> dict[str, str]:
        """Installed kernelspecs and hardware targets, by name."""
        found = super().find_kernel_specs()
        for name in self._targets():
            found.setdefault(name, RESOURCES)
        return found

    def get_all_specs(self) -> dict[str, Any]:
        """Every kernelspec, with the targets listed once for the whole listing."""
        self._listing = self._targets()
        try:
            return dict(super().get_all_specs())
        finally:
            self._listing = None

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        """The kernelspec called ``kernel_name``; targets are built, not read from disk."""
        targets = self._targets()
        target = targets.get(kernel_name.lower()) or self._resolve(kernel_name.lower())
        if target is not None:
            return self.kernel_spec_class(resource_dir=RESOURCES, **target_kernel_spec(target))
        try:
            return super().get_kernel_spec(kernel_name)
        except NoSuchKernel:
            if not kernel_name.lower().startswith(KERNEL_NAME_PREFIX):
                raise
            known = [t.name for t in targets.values()]
            raise UnknownHardwareKernelSpec(
                kernel_name,
                UnknownHardwareError(kernel_name[len(KERNEL_NAME_PREFIX) :], known),
            ) from None
