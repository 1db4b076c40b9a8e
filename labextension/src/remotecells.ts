/**
 * The notebook toolbar's sign that the notebook holds kernels on other machines through
 * `%%remote` while its own kernel runs here: which hardware, in what state, read from
 * the one machines model (machines.ts). Clicking it opens the Remote hardware panel,
 * where each of those kernels can be shut down or its machine stopped.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import type { KernelMessage } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import type { MachinesModel } from './machines';
import type { IMachine } from './model';

/** How the server records the owner of a kernel that `%%remote` started. */
export const MAGIC_OWNER = 'magic:';

/**
 * Machine states the sign does not name: running, and unknown (a host that only the
 * notebook's own kernel reaches, which this server does not watch).
 */
const QUIET_STATES = ['running', 'unknown'];

/** A machine holding `%%remote` kernels of one notebook, and how many. */
export interface IRemoteCells {
  machine: IMachine;
  kernels: number;
}

/** The machines holding `%%remote` kernels of the notebook at `path`, in listing order. */
export function remoteCellsOf(machines: IMachine[], path: string | null): IRemoteCells[] {
  if (!path) {
    return [];
  }
  return machines.flatMap(machine => {
    const kernels = machine.kernels.filter(
      kernel => kernel.owner.startsWith(MAGIC_OWNER) && kernel.path === path
    ).length;
    return kernels ? [{ machine, kernels }] : [];
  });
}

/** The sign's text: `%%remote · A10G 24 GiB`, `%%remote · 2 machines`; '' for none. */
export function remoteCellsText(found: IRemoteCells[]): string {
  if (!found.length) {
    return '';
  }
  if (found.length > 1) {
    return `%%remote · ${found.length} machines`;
  }
  const { machine } = found[0];
  const state = QUIET_STATES.includes(machine.state) ? '' : ` · ${machine.state}`;
  return `%%remote · ${machine.hardware}${state}`;
}

/** The sign's tooltip: each machine, where it is, its state and its kernels. */
export function remoteCellsTitle(found: IRemoteCells[]): string {
  const lines = found.map(({ machine, kernels }) => {
    const count = kernels === 1 ? '1 kernel' : `${kernels} kernels`;
    const state = machine.state === 'unknown' ? '' : `${machine.state}, `;
    return `${machine.hardware} on ${machine.where}: ${state}${count}`;
  });
  return [
    "This notebook's %%remote cells run on:",
    ...lines,
    'Click to see them in the Remote hardware panel.'
  ].join('\n');
}

/** Whether a cell's source runs on other hardware (`%%remote`, `%remote_hw`). */
export function runsElsewhere(source: string): boolean {
  return /^\s*%%?remote/m.test(source);
}

/** The toolbar sign of one notebook. */
export class RemoteCellsItem extends Widget {
  /**
   * @param model - The machines listing.
   * @param context - The notebook's session: its path, the code its kernel runs (IOPub's
   *   `execute_input`) and its busy/idle: once a cell that runs elsewhere has ended, it
   *   may have started or ended a `%%remote` kernel, and the listing is read again.
   * @param show - Opens the Remote hardware panel.
   */
  constructor(
    readonly model: MachinesModel,
    readonly context: ISessionContext,
    readonly show: () => void
  ) {
    super({ node: document.createElement('button') });
    this.addClass('jp-RemoteHW-remoteCells');
    this.node.setAttribute('type', 'button');
    // The text in a span of its own: Chromium does not elide a button's own text.
    this._label.className = 'jp-RemoteHW-remoteCellsLabel';
    this.node.appendChild(this._label);
    this.node.addEventListener('click', () => this.show());
    model.changed.connect(this.render, this);
    context.iopubMessage.connect(this.onIOPub, this);
    context.statusChanged.connect(this.onStatus, this);
    this.render();
  }

  /** The machines shown now. */
  get found(): IRemoteCells[] {
    return remoteCellsOf(this.model.machines, this.context.path || null);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.changed.disconnect(this.render, this);
    this.context.iopubMessage.disconnect(this.onIOPub, this);
    this.context.statusChanged.disconnect(this.onStatus, this);
    super.dispose();
  }

  /** Note a cell whose code runs elsewhere, as the kernel announces the code it runs. */
  private onIOPub(_: ISessionContext, message: KernelMessage.IMessage): void {
    if (message.header.msg_type === 'execute_input') {
      const code = (message.content as { code?: unknown }).code;
      this._elsewhere ||= typeof code === 'string' && runsElsewhere(code);
    }
  }

  /** Read the listing again once the kernel is idle after such a cell. */
  private onStatus(_: ISessionContext, status: string): void {
    if (status === 'idle' && this._elsewhere) {
      this._elsewhere = false;
      this.model.refresh().catch(() => undefined);
    }
  }

  private render(): void {
    const found = this.found;
    const text = remoteCellsText(found);
    this._label.textContent = text;
    this.node.title = found.length ? remoteCellsTitle(found) : '';
    this.node.setAttribute('aria-label', found.length ? remoteCellsTitle(found) : '');
    this.node.classList.toggle(
      'jp-mod-notRunning',
      found.some(f => !QUIET_STATES.includes(f.machine.state))
    );
    // A class, not Widget.hide(): the notebook toolbar shows and hides its items itself
    // (as they fit its width), which would undo a hide of ours.
    this.node.classList.toggle('jp-mod-empty', !text);
  }

  private _label = document.createElement('span');
  private _elsewhere = false;
}
