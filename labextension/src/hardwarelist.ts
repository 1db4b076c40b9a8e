/**
 * The hardware listing and the picker dialog's body: a searchable table with one row
 * per target, catalog families folded into one line each.
 */
import { Dialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareAPI } from './api';
import type { MachinesModel } from './machines';
import { IHardwareFold, codeParts, foldCount, foldHardware, foldText } from './folding';
import { IHardware, PICKER_HEADERS, filterHardware, nextSelection, pickerColumns } from './model';

/** The hardware listing, fetched once and refreshed on demand. */
export class HardwareStore {
  constructor(
    readonly api: HardwareAPI,
    readonly machines: MachinesModel
  ) {}

  /** The listing; fetched the first time and when `refresh` is set. */
  async options(refresh = false): Promise<IHardware[]> {
    if (refresh || this._options === null) {
      this._options = this.api.hardware();
      this._options.catch(() => {
        this._options = null;
      });
    }
    return this._options;
  }

  private _options: Promise<IHardware[]> | null = null;
}

/** The searchable list in the picker dialog; its value is the chosen option. */
export class HardwareListBody extends Widget implements Dialog.IBodyWidget<IHardware | null> {
  constructor(
    readonly options: IHardware[],
    current: string | null
  ) {
    super();
    this.addClass('jp-RemoteHW-picker');
    this.search = document.createElement('input');
    this.search.type = 'search';
    this.search.className = 'jp-RemoteHW-search jp-mod-styled';
    this.search.placeholder = 'Search: a10g, gpu_mem>=40, price<=2 …';
    this.search.setAttribute('aria-label', 'Search hardware');
    this.node.appendChild(this.search);
    this.table = document.createElement('table');
    this.table.className = 'jp-RemoteHW-table';
    this.table.setAttribute('role', 'listbox');
    this.table.setAttribute('aria-label', 'Hardware');
    const scroller = document.createElement('div');
    scroller.className = 'jp-RemoteHW-tableScroller';
    scroller.appendChild(this.table);
    this.node.appendChild(scroller);
    this.selected =
      options.find(o => o.name === current && o.usable) ?? options.find(o => o.usable) ?? null;
    this.search.addEventListener('input', () => this.render());
    this.search.addEventListener('keydown', event => this.onKey(event));
    this.render();
  }

  readonly search: HTMLInputElement;
  readonly table: HTMLTableElement;
  selected: IHardware | null;

  getValue(): IHardware | null {
    return this.selected && this.selected.usable ? this.selected : null;
  }

  /** The options the search shows now. */
  get shown(): IHardware[] {
    return filterHardware(this.options, this.search.value);
  }

  private onKey(event: KeyboardEvent): void {
    if (event.key !== 'ArrowDown' && event.key !== 'ArrowUp') {
      return;
    }
    event.preventDefault();
    this.selected = nextSelection(this.shown, this.selected?.name ?? null, event.key);
    this.render();
    this.table.querySelector('.jp-mod-selected')?.scrollIntoView({ block: 'nearest' });
  }

  render(): void {
    const shown = this.shown;
    if (this.selected && !shown.some(o => o.name === this.selected!.name)) {
      this.selected = shown.find(o => o.usable) ?? null;
    }
    this.table.textContent = '';
    const head = this.table.createTHead().insertRow();
    for (const title of PICKER_HEADERS) {
      const th = document.createElement('th');
      th.textContent = title;
      head.appendChild(th);
    }
    const body = this.table.createTBody();
    for (const entry of foldHardware(shown, this.expanded)) {
      if (entry.kind === 'fold') {
        this.foldRow(body, entry.fold, entry.expanded);
        continue;
      }
      const option = entry.option;
      const row = body.insertRow();
      row.className = 'jp-RemoteHW-option';
      row.dataset.name = option.name;
      row.setAttribute('role', 'option');
      row.setAttribute('aria-selected', String(option.name === this.selected?.name));
      row.setAttribute('aria-disabled', String(!option.usable));
      row.tabIndex = -1;
      row.classList.toggle('jp-mod-selected', option.name === this.selected?.name);
      row.classList.toggle('jp-mod-disabled', !option.usable);
      for (const text of pickerColumns(option)) {
        row.insertCell().textContent = text;
      }
      if (!option.usable && option.why_not) {
        row.title = option.why_not;
      } else if (option.unreachable) {
        // The last failure in full; picking the row tries again.
        row.title = `${option.unreachable.detail}. Pick it to try again.`;
      }
      row.addEventListener('click', () => {
        if (option.usable) {
          this.selected = option;
          this.render();
        }
      });
    }
    if (!shown.length) {
      const empty = body.insertRow().insertCell();
      empty.colSpan = PICKER_HEADERS.length;
      empty.textContent = 'No hardware matches the search.';
    }
  }

  /** One line for unusable rows of a provider: why, what to do; a click shows its rows. */
  private foldRow(body: HTMLTableSectionElement, fold: IHardwareFold, expanded: boolean): void {
    const row = body.insertRow();
    row.className = 'jp-RemoteHW-fold';
    row.dataset.fold = fold.key;
    row.setAttribute('aria-expanded', String(expanded));
    row.title = expanded ? 'Fold these rows again' : 'Show these rows';
    const cell = row.insertCell();
    cell.colSpan = PICKER_HEADERS.length;
    const arrow = document.createElement('span');
    arrow.className = 'jp-RemoteHW-foldArrow';
    arrow.textContent = expanded ? '▾' : '▸';
    cell.appendChild(arrow);
    for (const part of codeParts(foldText(fold))) {
      const node = document.createElement(part.code ? 'code' : 'span');
      node.textContent = part.text;
      cell.appendChild(node);
    }
    const count = document.createElement('span');
    count.className = 'jp-RemoteHW-foldCount';
    count.textContent = ` (${foldCount(fold)})`;
    cell.appendChild(count);
    row.tabIndex = 0;
    const toggle = (): void => {
      if (!this.expanded.delete(fold.key)) {
        this.expanded.add(fold.key);
      }
      this.render();
      (
        this.table.querySelector(`tr[data-fold="${CSS.escape(fold.key)}"]`) as HTMLElement | null
      )?.focus();
    };
    row.addEventListener('click', toggle);
    row.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        toggle();
      }
    });
  }

  /** Keys of the folds open now. */
  readonly expanded = new Set<string>();
}
