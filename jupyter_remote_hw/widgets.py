"""An ipywidgets hardware picker for ``%%remote``, for Notebook 7 and VS Code users.

``jupyter_remote_hw.picker()`` in a cell shows the hardware listing (the same
as JupyterLab's toolbar picker) with a search box; choosing a row makes it the
default target of ``%%remote``, ``%remote_push`` and ``%remote_pull`` in this
kernel.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
from tabulate import tabulate

from .hardware import HardwareOption, list_hardware

if TYPE_CHECKING:
    from .magics import RemoteMagics

HEADERS = ["hardware", "GPU", "GPU mem", "vCPU", "RAM", "$/h", "where", "availability"]


def _price(value: float | None) -> str:
    if value is None:
        return ""
    return "free" if value == 0 else f"${value:.2f}/h"


def columns(option: HardwareOption) -> list[str]:
    """The picker's columns for one option (blank where unknown)."""
    if option.gpu_count == 0:
        gpu = "CPU"
    else:
        gpu = f"{option.gpu_count or 1} × {option.gpu}" if option.gpu else ""
    availability = (option.why_not or "not available") if not option.usable else (
        "running" if option.machine_state == "running" else "ready")
    return [
        option.label, gpu,
        f"{option.gpu_memory_gb:g} GB" if option.gpu_memory_gb else "",
        str(option.vcpus) if option.vcpus is not None else "",
        f"{option.memory_gb:g} GB" if option.memory_gb is not None else "",
        _price(option.price_per_hour), option.where, availability,
    ]


def matches(option: HardwareOption, query: str) -> bool:
    """Whether every word of ``query`` appears in the option's name, label, GPU or place."""
    text = " ".join([option.name, option.label, option.gpu or "", option.provider,
                     option.where, option.hardware]).lower()
    return all(word in text for word in query.lower().split())


class HardwarePicker:
    """A search box, the hardware list and a status line, bound to one kernel's magics.

    Args:
        magics: The ``%%remote`` magics of the kernel, whose default target is set.
        options: The listing (read from the magics' machine manager when left out).
    """

    def __init__(self, magics: RemoteMagics, options: list[HardwareOption] | None = None) -> None:
        self.magics = magics
        self.options = options if options is not None else list_hardware(
            magics.sessions.machines)
        lines = tabulate([columns(o) for o in self.options], headers=HEADERS,
                         tablefmt="plain").splitlines()
        self._rows = dict(zip((o.name for o in self.options), lines[1:], strict=True))
        self.header = widgets.HTML(f"<pre style='margin:0 0 0 4px'>{html.escape(lines[0])}</pre>")
        self.search = widgets.Text(placeholder="Search: a10g, ssh, local …",
                                   description="Search", continuous_update=True)
        self.select = widgets.Select(rows=min(10, max(3, len(self.options))),
                                     layout=widgets.Layout(width="100%"),
                                     style={"font_family": "monospace"})
        self.status = widgets.HTML()
        self.widget = widgets.VBox([self.search, self.header, self.select, self.status])
        self.widget.add_class("jp-RemoteHW-picker-widget")
        self._fill("")
        current = self.magics.sessions.default_target
        if current in self._rows:
            self.select.value = current
        self._show_default()
        self.search.observe(lambda change: self._fill(change["new"]), names="value")
        self.select.observe(self._chosen, names="value")

    @property
    def value(self) -> str | None:
        """The default ``%%remote`` target now."""
        return self.magics.sessions.default_target

    def _fill(self, query: str) -> None:
        shown = [o for o in self.options if matches(o, query)]
        chosen = self.select.value
        self.select.options = [(self._rows[o.name], o.name) for o in shown]
        self.select.value = chosen if chosen in {o.name for o in shown} else None

    def _chosen(self, change: dict[str, Any]) -> None:
        name = change["new"]
        if name is None:
            return
        option = next(o for o in self.options if o.name == name)
        if not option.usable:
            self.status.value = (f"<b>{html.escape(option.name)}</b> cannot be used now: "
                                 f"{html.escape(option.why_not or 'not available')}")
            return
        self.magics.sessions.default_target = option.name
        self._show_default()

    def _show_default(self) -> None:
        name = self.magics.sessions.default_target
        self.status.value = (f"<code>%%remote</code> runs on <b>{html.escape(name)}</b>" if name else
                             "Pick the hardware <code>%%remote</code> runs on.")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _remote_magics(shell: Any) -> RemoteMagics:
    """The ``%%remote`` magics of ``shell``, loading the extension first when needed."""
    magics = shell.magics_manager.registry.get("RemoteMagics")
    if magics is None:
        shell.extension_manager.load_extension("jupyter_remote_hw")
        magics = shell.magics_manager.registry["RemoteMagics"]
    return magics  # type: ignore[no-any-return]


def picker(shell: Any = None) -> HardwarePicker:
    """Show the hardware picker; the row chosen becomes the default ``%%remote`` target.

    Args:
        shell: The IPython shell (the running one when left out).

    Raises:
        RuntimeError: Not in an IPython kernel.
    """
    if shell is None:
        from IPython.core.getipython import get_ipython

        shell = get_ipython()  # type: ignore[no-untyped-call, unused-ignore]  # untyped before IPython 9
    if shell is None:
        raise RuntimeError("jupyter_remote_hw.picker() runs in a notebook's IPython kernel")
    return HardwarePicker(_remote_magics(shell))


__all__ = ["HardwarePicker", "picker"]
