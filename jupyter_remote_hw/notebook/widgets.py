"""An ipywidgets hardware picker for ``%%remote``, for Notebook 7 and VS Code users.

``jupyter_remote_hw.picker()`` in a cell shows the hardware listing (the same
as JupyterLab's toolbar picker) with a search box; choosing a row makes it the
default target of ``%%remote``, ``%remote_push`` and ``%remote_pull`` in this
kernel. The list is one grid, header and rows sharing its columns, that fits
the cell's width (text wraps; nothing has a fixed width). Unusable hardware is
folded into one line per provider and reason, which expands to its rows.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..machines.folds import Fold, fold_hardware
from ..machines.hardware import HardwareOption, list_hardware

if TYPE_CHECKING:
    from .magics import RemoteMagics

HEADERS = ["Hardware", "GPU", "GPU mem", "vCPU", "RAM", "$/h", "Where", "Availability"]
#: The grid's columns: shares of the cell's width, none below 0, so nothing overflows.
GRID_COLUMNS = (
    "minmax(0, 3fr) minmax(0, 1.3fr) minmax(0, 1.2fr) minmax(0, 0.7fr) "
    "minmax(0, 1.1fr) minmax(0, 1.3fr) minmax(0, 2fr) minmax(0, 2.4fr)"
)
#: Lets the cells' text wrap inside the grid (ipywidgets keeps labels on one line).
STYLE = """<style>
.jp-RemoteHW-widgetGrid > .jupyter-widgets { margin: 0; min-width: 0; width: auto; }
.jp-RemoteHW-widgetGrid .widget-html-content, .jp-RemoteHW-widgetGrid button {
  white-space: normal; overflow-wrap: anywhere; line-height: 1.3; height: auto;
  text-overflow: clip; overflow: visible; text-align: left; }
.jp-RemoteHW-widgetGrid button { min-height: var(--jp-widgets-inline-height, 28px);
  padding: 2px 6px; width: 100%; }
.jp-RemoteHW-widgetGrid .jp-RemoteHW-unusable { opacity: 0.55; }
.jp-RemoteHW-widgetGrid > .jp-RemoteHW-span { grid-column: 1 / -1; }
.jp-RemoteHW-widgetGrid > .jp-RemoteHW-header:first-child { padding-left: 6px; }
.jp-RemoteHW-widgetGrid > .jp-RemoteHW-rowText,
.jp-RemoteHW-widgetGrid > .jp-RemoteHW-rowText > .widget-html-content { display: contents; }
.jp-RemoteHW-widgetGrid .jp-RemoteHW-rowText .jp-RemoteHW-cell { min-width: 0;
  overflow-wrap: anywhere; }
</style>"""


def _price(value: float | None) -> str:
    if value is None:
        return "price unknown"
    return "free" if value == 0 else f"${value:.2f}/h"


def _gib(value: float | None) -> str:
    return f"{value:g} GiB" if value else ""


def columns(option: HardwareOption) -> list[str]:
    """The picker's columns for one option (blank where unknown; a price or "price unknown")."""
    if option.gpu_count == 0:
        gpu = "CPU"
    else:
        gpu = f"{option.gpu_count or 1} × {option.gpu}" if option.gpu else ""
    # Why not, in a few words; the fold line and the row's tooltip say what to do.
    availability = (
        (option.reason or option.why_not or "not available")
        if not option.usable
        else (option.machine_state or option.availability or "ready")
    )
    return [
        option.label,
        gpu,
        _gib(option.gpu_memory_gib),
        str(option.vcpus) if option.vcpus is not None else "",
        _gib(option.memory_gib),
        _price(option.price_per_hour),
        option.where,
        availability,
    ]


def matches(option: HardwareOption, query: str) -> bool:
    """Whether every word of ``query`` appears in the option's name, label, GPU or place."""
    text = " ".join(
        [
            option.name,
            option.label,
            option.gpu or "",
            option.provider,
            option.where,
            option.hardware,
        ]
    ).lower()
    return all(word in text for word in query.lower().split())


def _cell(text: str, title: str = "", unusable: bool = False) -> str:
    """One grid cell of a row's text, as HTML (its title is the tooltip)."""
    classes = "jp-RemoteHW-cell jp-RemoteHW-unusable" if unusable else "jp-RemoteHW-cell"
    return f"<div class='{classes}' title='{html.escape(title or text)}'>{html.escape(text)}</div>"


class HardwarePicker:
    """A search box, the hardware grid and a status line, bound to one kernel's magics.

    Args:
        magics: The ``%%remote`` magics of the kernel, whose default target is set.
        options: The listing (read from the magics' machine manager when left out).
    """

    def __init__(self, magics: RemoteMagics, options: list[HardwareOption] | None = None) -> None:
        self.magics = magics
        self.options = options if options is not None else list_hardware(magics.sessions.machines)
        self.expanded: set[str] = set()
        self._cell_layout = widgets.Layout(width="auto", min_width="0")
        self._row_cells: dict[str, list[widgets.Widget]] = {}
        self._fold_buttons: dict[str, widgets.Button] = {}
        self.search = widgets.Text(
            placeholder="Search: a10g, ssh, local …",
            description="Search",
            continuous_update=True,
            layout=widgets.Layout(width="auto", max_width="100%"),
        )
        self.header = [
            widgets.HTML(f"<b>{html.escape(title)}</b>", layout=self._cell_layout)
            for title in HEADERS
        ]
        for cell in self.header:
            cell.add_class("jp-RemoteHW-header")
        self.grid = widgets.GridBox(
            layout=widgets.Layout(
                grid_template_columns=GRID_COLUMNS,
                grid_gap="2px 10px",
                width="100%",
                align_items="center",
            )
        )
        self.grid.add_class("jp-RemoteHW-widgetGrid")
        self.status = widgets.HTML()
        self.widget = widgets.VBox(
            [widgets.HTML(STYLE), self.search, self.grid, self.status],
            layout=widgets.Layout(width="100%"),
        )
        self.widget.add_class("jp-RemoteHW-picker-widget")
        self.shown: list[HardwareOption | Fold] = []
        self._render()
        self._show_default()
        self.search.observe(lambda change: self._render(), names="value")

    @property
    def value(self) -> str | None:
        """The default ``%%remote`` target now."""
        return self.magics.sessions.default_target

    @property
    def shown_names(self) -> list[str]:
        """Names of the rows shown now (folded rows are not)."""
        return [entry.name for entry in self.shown if isinstance(entry, HardwareOption)]

    @property
    def folds(self) -> list[Fold]:
        """The folded lines shown now."""
        return [entry for entry in self.shown if isinstance(entry, Fold)]

    def toggle(self, key: str) -> None:
        """Expand a fold (by its key, ``aws:no credentials``) to its rows, or fold it again."""
        self.expanded.symmetric_difference_update({key})
        self._render()

    def choose(self, name: str) -> None:
        """Make the row ``name`` the default ``%%remote`` target, or say why it cannot be."""
        option = next(o for o in self.options if o.name == name)
        if not option.usable:
            self.status.value = (
                f"<b>{html.escape(option.name)}</b> cannot be used now: "
                f"{html.escape(option.why_not or 'not available')}"
            )
            return
        self.magics.sessions.default_target = option.name
        self._show_default()
        self._render()

    def _render(self) -> None:
        matching = [o for o in self.options if matches(o, self.search.value)]
        self.shown = fold_hardware(matching, self.expanded)
        children: list[widgets.Widget] = list(self.header)
        for entry in self.shown:
            if isinstance(entry, Fold):
                children.append(self._fold_button(entry))
            else:
                children.extend(self._cells(entry))
        if not matching:
            empty = widgets.HTML("No hardware matches the search.")
            empty.add_class("jp-RemoteHW-span")
            children.append(empty)
        self.grid.children = tuple(children)

    def _fold_button(self, fold: Fold) -> widgets.Button:
        button = self._fold_buttons.get(fold.key)
        if button is None:
            button = widgets.Button(layout=widgets.Layout(width="auto"))
            button.add_class("jp-RemoteHW-fold")
            button.add_class("jp-RemoteHW-span")
            button.on_click(lambda _: self.toggle(fold.key))
            self._fold_buttons[fold.key] = button
        arrow = "▾" if fold.key in self.expanded else "▸"
        button.description = f"{arrow} {fold.text} ({fold.count_text})"
        button.tooltip = "Fold these rows again" if fold.key in self.expanded else "Show these rows"
        return button

    def _cells(self, option: HardwareOption) -> list[widgets.Widget]:
        # Two widgets a row, sharing one layout: its button, and one HTML widget whose
        # seven cells are grid items of their own (``display: contents``). Expanding a
        # fold of 44 rows then creates 88 widgets in the browser, not 352 with their
        # layouts and styles, which took seconds on a loaded machine.
        cells = self._row_cells.get(option.name)
        if cells is None:
            texts = columns(option)
            unusable = not option.usable
            choose = widgets.Button(
                description=texts[0],
                disabled=unusable,
                tooltip=option.why_not or f"Run %%remote on {option.name}",
                layout=self._cell_layout,
            )
            choose.on_click(lambda _: self.choose(option.name))
            choose.add_class("jp-RemoteHW-cell")
            text = "".join(
                [
                    *(_cell(t, unusable=unusable) for t in texts[1:-1]),
                    _cell(texts[-1], option.why_not or "", unusable),
                ]
            )
            row = widgets.HTML(text, layout=self._cell_layout)
            row.add_class("jp-RemoteHW-rowText")
            if unusable:
                choose.add_class("jp-RemoteHW-unusable")
            cells = [choose, row]
            self._row_cells[option.name] = cells
        chooser = cells[0]
        assert isinstance(chooser, widgets.Button)
        chooser.button_style = "info" if option.name == self.value else ""
        return cells

    def _show_default(self) -> None:
        name = self.magics.sessions.default_target
        self.status.value = (
            f"<code>%%remote</code> runs on <b>{html.escape(name)}</b>"
            if name
            else "Pick the hardware <code>%%remote</code> runs on."
        )

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
