/**
 * The notebook toolbar item: shows the notebook's hardware, opens the picker,
 * offers to carry variables, and shows launch progress in place.
 */
import { Dialog, ISessionContext, Notification, showDialog } from '@jupyterlab/apputils';
import { ServiceManager } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { HardwareAPI, HardwareAPIError, HardwareEvents } from './api';
import { showError } from './errors';
import { IHardwareFold, codeParts, foldCount, foldHardware, foldText } from './folding';
import { ILaunchProgress, applyLaunchEvent, progressText, startsNotebookKernel } from './progress';
import {
  hibernatedDetail,
  hibernatedLabel,
  hibernatedNotice,
  savingLabel,
  stayedAwakeNotice
} from './hibernation';
import { askCarry } from './switch';
import { applySwitchEvent, switchSummary } from './switchmodel';
import {
  IHardware,
  IHardwareEvent,
  PICKER_HEADERS,
  SHARED_SESSION_LABEL,
  errorText,
  filterHardware,
  isSharedKernel,
  nextSelection,
  pickerColumns,
  targetOfKernel,
  toolbarLabel
} from './model';

/** User settings the picker follows (see labextension/schema/plugin.json). */
export interface IPickerSettings {
  carryByDefault: boolean;
}

/** The hardware listing, fetched once and refreshed on demand. */
export class HardwareStore {
  constructor(readonly api: HardwareAPI) {}

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

/**
 * The toolbar item of one notebook.
 */
export class HardwareToolbarItem extends Widget {
  constructor(
    readonly sessionContext: ISessionContext,
    readonly store: HardwareStore,
    readonly events: HardwareEvents,
    readonly services: ServiceManager.IManager,
    readonly settings: () => IPickerSettings
  ) {
    super({ node: document.createElement('button') });
    this.addClass('jp-RemoteHW-toolbarItem');
    this.addClass('jp-ToolbarButtonComponent');
    this.node.setAttribute('type', 'button');
    this.node.addEventListener('click', () => void this.pick());
    sessionContext.kernelChanged.connect(() => {
      this.hibernated = null;
      void this.refresh();
    }, this);
    sessionContext.ready.then(() => this.refresh()).catch(() => undefined);
    events.received.connect(this.onEvent, this);
    void this.refresh();
  }

  /** The hardware target of the notebook's kernel, or null. */
  get currentTarget(): string | null {
    return targetOfKernel(this.sessionContext.session?.kernel?.name);
  }

  /** Show the current hardware. */
  async refresh(): Promise<void> {
    if (this.progress && !this.progress.failed && !this.progress.done) {
      return;
    }
    if (this.hibernated) {
      return; // said until it wakes
    }
    if (isSharedKernel(this.sessionContext.session?.kernel?.name)) {
      this.display(
        SHARED_SESSION_LABEL,
        'This notebook is attached to a kernel a teammate shared: it runs on their hardware. Click for what that means.'
      );
      return;
    }
    const target = this.currentTarget;
    let text = 'Pick hardware';
    if (target) {
      try {
        const option = (await this.store.options()).find(o => o.name === target);
        text = option ? toolbarLabel(option) : target;
      } catch {
        text = target;
      }
    }
    this.display(text, `Hardware of this notebook's kernel: ${text}. Click to change it.`);
  }

  private display(text: string, title: string, state: '' | 'busy' | 'error' = ''): void {
    this.node.textContent = text;
    this.node.title = title;
    this.node.setAttribute('aria-label', title);
    this.node.classList.toggle('jp-mod-busy', state === 'busy');
    this.node.classList.toggle('jp-mod-error', state === 'error');
  }

  /** Open the picker; switch to the choice. During a launch, offer to cancel it. */
  async pick(): Promise<void> {
    const launching = this.progress;
    if (launching && !launching.done && !launching.failed) {
      await this.offerCancel(launching);
      return;
    }
    await this.sessionContext.ready;
    if (isSharedKernel(this.sessionContext.session?.kernel?.name)) {
      // Switching would move this notebook off the shared kernel, leaving the session.
      await showDialog({
        title: 'A shared session',
        body:
          'This notebook is attached to a kernel a teammate shared with you. It runs on ' +
          'their hardware, which only they can change, stop or pay for. To run on other ' +
          'hardware, open a notebook of your own.',
        buttons: [Dialog.okButton()]
      });
      return;
    }
    let options: IHardware[];
    // A listing slower than a blink (hosts being probed) shows in the toolbar.
    const slow = this.progress
      ? 0
      : window.setTimeout(
          () => this.display('Listing hardware…', 'Listing hardware…', 'busy'),
          300
        );
    try {
      options = await this.store.options(true);
    } catch (error) {
      await showError('Hardware cannot be listed', error);
      return;
    } finally {
      window.clearTimeout(slow);
      if (!this.progress) {
        void this.refresh();
      }
    }
    const body = new HardwareListBody(options, this.currentTarget);
    const choice = await showDialog({
      title: 'Pick hardware for this notebook',
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Switch' })],
      focusNodeSelector: 'input',
      hasClose: true
    });
    const chosen = choice.button.accept ? choice.value : null;
    if (!chosen || chosen.name === this.currentTarget) {
      return;
    }
    const carry = await this.askCarry(chosen.name);
    if (carry === null) {
      return;
    }
    await this.switchTo(chosen, carry);
  }

  /** Ask whether to cancel the launch under way; cancel it when the user says so. */
  async offerCancel(launching: ILaunchProgress): Promise<void> {
    const where = progressText(launching, Date.now());
    if (!launching.kernelId) {
      await showDialog({
        title: 'Hardware is being prepared',
        body: `${where}. It can be cancelled once its kernel has been named; try again in a moment.`,
        buttons: [Dialog.okButton()]
      });
      return;
    }
    const answer = await showDialog({
      title: `Cancel the launch on ${launching.target}?`,
      body:
        `${where}. Cancelling stops it and releases what it holds (a job waiting in a ` +
        'SLURM queue is cancelled); the notebook stays on the kernel it has now.',
      buttons: [
        Dialog.cancelButton({ label: 'Keep waiting' }),
        Dialog.warnButton({ label: 'Cancel launch' })
      ]
    });
    if (!answer.button.accept || this.progress !== launching) {
      return;
    }
    this.cancelling = true;
    try {
      await this.store.api.cancelLaunch(launching.kernelId);
    } catch (error) {
      this.cancelling = false;
      await showError(`The launch on ${launching.target} cannot be cancelled`, error);
    }
  }

  /** Ask which variables and modules to carry; null when the user cancelled. */
  async askCarry(hardware: string): Promise<string[] | null> {
    const session = this.sessionContext.session;
    if (!session) {
      return [];
    }
    return askCarry(this.store.api, session.id, hardware, this.settings().carryByDefault);
  }

  /** Switch the notebook's kernel to `option`, showing progress here. */
  async switchTo(option: IHardware, carry: string[]): Promise<void> {
    const session = this.sessionContext.session;
    this.progress = {
      target: option.name,
      step: session ? 'starting kernel' : 'starting',
      detail: '',
      startedAt: Date.now(),
      failed: false,
      done: false
    };
    this.showProgress();
    const timer = window.setInterval(() => this.showProgress(), 1000);
    try {
      if (!session) {
        // No kernel yet: start one on the chosen hardware.
        await this.sessionContext.changeKernel({ name: option.kernel_name });
        this.progress = null;
        await this.refresh();
        return;
      }
      // The server starts the new kernel, carries the variables and points the
      // session at it; this page then connects to it before the old kernel is
      // shut down, as when JupyterLab changes a kernel itself.
      const report = await this.store.api.switchSession(session.id, option.name, carry, true);
      this.progress = null;
      await session.changeKernel({ id: report.kernel_id });
      await this.services.kernels
        .shutdown(report.previous_kernel_id)
        .catch(reason =>
          console.warn('jupyter-remote-hw: the previous kernel did not shut down', reason)
        );
      await this.refresh();
      const summary = switchSummary(option.label, report);
      if (summary.level === 'warning') {
        Notification.warning(summary.text, { autoClose: false });
      } else {
        Notification.success(summary.text, { autoClose: 5000 });
      }
    } catch (error) {
      const failure = asError(error);
      const step = failure.step || this.progress?.step || '';
      this.progress = null;
      if (this.cancelling) {
        // The user's own doing: said in passing, not as a failure.
        this.cancelling = false;
        await this.refresh();
        Notification.info(`The launch on ${option.label} was cancelled.`, { autoClose: 5000 });
        return;
      }
      this.display(
        `${option.name}: failed${step ? ` at ${step}` : ''}`,
        errorText(failure),
        'error'
      );
      await showError(`Switching to ${option.label} failed`, error, {
        api: this.store.api,
        retry: () => this.switchTo(option, carry)
      });
      await this.refresh();
    } finally {
      window.clearInterval(timer);
    }
  }

  private showProgress(): void {
    if (this.progress) {
      const text = progressText(this.progress, Date.now());
      this.display(text, `Changing hardware: ${text}`, this.progress.failed ? 'error' : 'busy');
    }
  }

  private onEvent(_: HardwareEvents, event: IHardwareEvent): void {
    const kernelId = this.sessionContext.session?.kernel?.id;
    if (event.type === 'hibernation' && kernelId && event.kernel_id === kernelId) {
      void this.onHibernation(event);
      return;
    }
    if (this.hibernated && event.type === 'launch' && event.kernel_id === kernelId) {
      // It wakes: its launch steps show here as any launch's do.
      this.hibernated = null;
      if (!this.progress) {
        this.progress = {
          target: event.target,
          step: event.step || 'starting',
          detail: '',
          startedAt: Date.now(),
          failed: false,
          done: false,
          kernelId
        };
        this._following = window.setInterval(() => this.showProgress(), 1000);
      }
    }
    if (!this.progress) {
      this.follow(event);
    }
    if (this.progress) {
      const sessionId = this.sessionContext.session?.id;
      this.progress = applySwitchEvent(applyLaunchEvent(this.progress, event), event, sessionId);
      this.showProgress();
      if (this._following && (this.progress.done || this.progress.failed)) {
        this.stopFollowing();
      }
    }
  }

  /** A `hibernation` event of this notebook's kernel: say it here and in a notice. */
  private async onHibernation(event: IHardwareEvent): Promise<void> {
    const notebook = this.sessionContext.path || 'this notebook';
    const target = this.currentTarget;
    let label = target ?? 'kernel';
    try {
      const option = (await this.store.options()).find(o => o.name === target);
      label = option ? toolbarLabel(option) : label;
    } catch {
      // The label is only words: the target's name does.
    }
    if (event.state === 'saving') {
      this.display(savingLabel(event), `Saving the state of this notebook's kernel`, 'busy');
    } else if (event.state === 'hibernated') {
      this.hibernated = hibernatedDetail(event);
      this.display(hibernatedLabel(label), this.hibernated);
      Notification.info(hibernatedNotice(event, notebook), { autoClose: false });
    } else if (event.state === 'failed') {
      this.hibernated = null;
      await this.refresh();
      Notification.warning(stayedAwakeNotice(event, notebook), { autoClose: 10000 });
    }
  }

  /** Follow the launch of this notebook's kernel when it began outside the picker. */
  private follow(event: IHardwareEvent): void {
    const context = this.sessionContext;
    const name = context.session?.kernel?.name ?? context.kernelPreference.name;
    if (!startsNotebookKernel(event, name, context.kernelDisplayStatus)) {
      return;
    }
    this.progress = {
      target: event.target,
      step: event.step || 'starting',
      detail: '',
      startedAt: Date.now(),
      failed: false,
      done: false
    };
    this._following = window.setInterval(() => this.showProgress(), 1000);
  }

  private stopFollowing(): void {
    window.clearInterval(this._following);
    this._following = 0;
    const progress = this.progress;
    this.progress = null;
    if (progress?.failed && this.cancelling) {
      this.cancelling = false;
      void this.refresh();
      Notification.info(`The launch on ${progress.target} was cancelled.`, { autoClose: 5000 });
    } else if (progress?.failed) {
      this.display(`${progress.target}: failed at ${progress.step}`, progress.detail, 'error');
    } else {
      void this.refresh();
    }
  }

  private _following = 0;

  dispose(): void {
    window.clearInterval(this._following);
    this.events.received.disconnect(this.onEvent, this);
    super.dispose();
  }

  /** The launch in progress, if any. */
  progress: ILaunchProgress | null = null;
  /** The notice of this notebook's kernel while it hibernates, else null. */
  hibernated: string | null = null;
  /** Whether the user asked to cancel the launch in progress. */
  private cancelling = false;
}

function asError(error: unknown): { message: string; step?: string; hint?: string } {
  if (error instanceof HardwareAPIError) {
    return error;
  }
  return { message: String(error) };
}
