/**
 * The left sidebar panel "Remote hardware": the user's machines with state and
 * cost, each kernel under its machine by its notebook (kernelrows.ts), buttons to
 * stop or terminate them (after confirmation), a "Share…" button per kernel of a
 * shareable machine, and the user's active shares with
 * "Revoke".
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareAPI, HardwareEvents } from './api';
import { showError } from './errors';
import { endConfirmNode, endedMessage } from './machineactions';
import {
  formatCost,
  formatDuration,
  formatPrice,
  IHardwareEvent,
  IMachine,
  machineLabel,
  totalText
} from './model';
import {
  IShare,
  IShareNames,
  activeShares,
  roleText,
  shareFacts,
  sharedKernelText
} from './sharemodel';
import {
  KERNEL_TICK_MS,
  LISTING_POLL_MS,
  LISTING_REDRAW_MS,
  kernelRow,
  listingKey,
  tickKernelRows
} from './kernelrows';
import { MachinesModel } from './machines';
import { shareKernel } from './sharing';

/** How often the shares' time left is redrawn while the panel shows. */
const SHARES_TICK_MS = 30000;

/** The machines panel. */
export class MachinesPanel extends Widget {
  constructor(
    readonly api: HardwareAPI,
    readonly events: HardwareEvents,
    readonly model: MachinesModel,
    readonly join: () => Promise<unknown> = async () => undefined
  ) {
    super();
    this.id = 'jp-RemoteHW-machines';
    this.addClass('jp-RemoteHW-panel');
    this.title.caption = 'Remote hardware';
    const header = document.createElement('header');
    const title = document.createElement('h2');
    title.textContent = 'Remote hardware';
    header.appendChild(title);
    const refresh = document.createElement('button');
    refresh.className = 'jp-RemoteHW-refresh jp-mod-styled';
    refresh.textContent = 'Refresh';
    refresh.setAttribute('aria-label', 'Refresh the machines');
    refresh.addEventListener('click', () => void this.refresh());
    header.appendChild(refresh);
    this.node.appendChild(header);
    this.total = document.createElement('div');
    this.total.className = 'jp-RemoteHW-total';
    this.total.title = 'What your machines cost together: per hour now, and so far';
    this.node.appendChild(this.total);
    this.list = document.createElement('ul');
    this.list.className = 'jp-RemoteHW-machineList';
    this.list.setAttribute('aria-label', 'My machines');
    this.node.appendChild(this.list);

    const sharesHeader = document.createElement('header');
    sharesHeader.className = 'jp-RemoteHW-sharesHeader';
    const sharesTitle = document.createElement('h3');
    sharesTitle.textContent = 'Shares';
    sharesTitle.id = 'jp-RemoteHW-sharesTitle';
    sharesHeader.appendChild(sharesTitle);
    const joinButton = document.createElement('button');
    joinButton.className = 'jp-RemoteHW-join jp-mod-styled';
    joinButton.textContent = 'Join shared session…';
    joinButton.title = 'Attach a kernel here to a kernel a teammate shared with you';
    joinButton.addEventListener('click', () => void this.join());
    sharesHeader.appendChild(joinButton);
    this.node.appendChild(sharesHeader);
    this.shareList = document.createElement('ul');
    this.shareList.className = 'jp-RemoteHW-shareList';
    this.shareList.setAttribute('aria-labelledby', sharesTitle.id);
    this.node.appendChild(this.shareList);
    events.received.connect(this.onEvent, this);
    model.changed.connect(this.onMachines, this);
  }

  readonly list: HTMLUListElement;
  /** The machines' cost together (totalText). */
  readonly total: HTMLDivElement;
  readonly shareList: HTMLUListElement;

  /** Put a section (the live hardware view) between the header and the machines. */
  addSection(node: HTMLElement): void {
    this.node.insertBefore(node, this.total);
  }

  machines: IMachine[] = [];
  shares: IShare[] = [];
  /** Opens a kernel's notebook when its title is clicked (set by the plugin). */
  openNotebook: ((path: string) => void) | null = null;

  protected onAfterShow(): void {
    if (this.model.fetchedAt) {
      this.onMachines(this.model, this.model.machines);
    }
    void this.refresh();
    this._tick = window.setInterval(() => this.renderShares(), SHARES_TICK_MS);
    this._kernelTick = window.setInterval(() => this.tickKernels(), KERNEL_TICK_MS);
  }

  protected onAfterHide(): void {
    window.clearInterval(this._tick);
    window.clearInterval(this._kernelTick);
  }

  private onEvent(_: HardwareEvents, event: IHardwareEvent): void {
    if (!this.isVisible) {
      return;
    }
    if (event.type === 'share') {
      void this.refreshShares();
    }
  }

  /** Fetch and show the machines and the shares. */
  async refresh(): Promise<void> {
    await Promise.all([this.refreshMachines(), this.refreshShares()]);
  }

  /** Fetch and show the active shares. */
  async refreshShares(): Promise<void> {
    try {
      this.shares = await this.api.listShares();
    } catch (error) {
      showNotice(this.shareList, 'jp-RemoteHW-error', `Shares cannot be listed: ${error}`);
      return;
    }
    this.renderShares();
  }

  private renderShares(): void {
    this.shareList.textContent = '';
    const now = Date.now() / 1000;
    const shares = activeShares(this.shares, now);
    if (!shares.length) {
      showNotice(
        this.shareList,
        'jp-RemoteHW-empty',
        'No active shares: "Share…" on a kernel above shares it with a teammate.'
      );
      return;
    }
    for (const share of shares) {
      const item = document.createElement('li');
      item.className = 'jp-RemoteHW-share';
      item.dataset.shareId = share.share_id;
      const who = document.createElement('div');
      who.className = 'jp-RemoteHW-machineName';
      who.textContent = `${share.teammate} · ${share.role}`;
      who.title = `${roleText(share.role)}; key ${share.fingerprint}; share ${share.share_id}`;
      item.appendChild(who);
      const facts = document.createElement('div');
      facts.className = 'jp-RemoteHW-machineFacts';
      facts.textContent = shareFacts(share, now, this.shareNames(share));
      item.appendChild(facts);
      const actions = document.createElement('div');
      actions.className = 'jp-RemoteHW-machineActions';
      const revoke = document.createElement('button');
      revoke.className = 'jp-mod-styled jp-mod-warn jp-RemoteHW-revoke';
      revoke.textContent = 'Revoke';
      revoke.setAttribute(
        'aria-label',
        `Revoke the share with ${share.teammate} (${share.share_id})`
      );
      revoke.addEventListener('click', () => void this.revoke(share));
      actions.appendChild(revoke);
      item.appendChild(actions);
      this.shareList.appendChild(item);
    }
  }

  /** A share's notebook and machine as this panel's listing names them. */
  private shareNames(share: IShare): IShareNames {
    for (const machine of this.machines) {
      const kernel = machine.kernels.find(k => k.id === share.kernel_id);
      if (kernel) {
        return { kernel: kernel.path || undefined, machine: machineLabel(machine) };
      }
    }
    return {};
  }

  /** Confirm, then revoke a share. */
  async revoke(share: IShare): Promise<void> {
    const answer = await showDialog({
      title: 'Revoke share',
      body:
        `Revoke the share with ${share.teammate}? Their connection to ` +
        `${sharedKernelText(share, this.shareNames(share))} drops within seconds; ` +
        'your kernel keeps running.',
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Revoke' })],
      defaultButton: 0
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      const result = await this.api.revoke(share.share_id);
      Notification.success(
        `Revoked the share with ${share.teammate}` +
          (result.closed
            ? `: ${result.closed} connection${result.closed === 1 ? '' : 's'} dropped`
            : ''),
        { autoClose: 5000 }
      );
    } catch (error) {
      await showError(`Revoking the share with ${share.teammate} failed`, error);
    }
    await this.refreshShares();
  }

  /** Share one kernel of a machine, then show the new share in the list. */
  async share(machine: IMachine, kernelId: string): Promise<void> {
    const kernel = machine.kernels.find(k => k.id === kernelId);
    const result = await shareKernel(
      this.api,
      machineLabel(machine),
      kernelId,
      kernel?.path ?? undefined
    );
    if (result) {
      await this.refreshShares();
    }
  }

  /** Wake a hibernated kernel: its hardware starts and its variables come back. */
  async wake(kernelId: string): Promise<void> {
    Notification.info('Waking the kernel: its hardware starts, then its variables come back…', {
      autoClose: 5000
    });
    try {
      await this.model.wake(kernelId);
      Notification.success('The kernel is awake, with its variables.', { autoClose: 5000 });
    } catch (error) {
      await showError('The kernel did not wake', error);
    }
  }

  /** Fetch the machines (the model's listing, which every view shares) and show them. */
  async refreshMachines(quiet = false): Promise<void> {
    try {
      await this.model.refresh();
    } catch (error) {
      if (!quiet) {
        this._shown = '';
        showNotice(this.list, 'jp-RemoteHW-error', `Machines cannot be listed: ${error}`);
      }
    }
  }

  /** The listing changed: redraw when it shows something new (or its times are old). */
  private onMachines(_: MachinesModel, machines: IMachine[]): void {
    this.machines = machines;
    if (!this.isVisible) {
      return;
    }
    const key = listingKey(machines);
    if (key === this._shown && Date.now() - this._drawn < LISTING_REDRAW_MS) {
      return;
    }
    this._shown = key;
    this._drawn = Date.now();
    this.render();
  }

  /** Count the kernels' uptime on; while the panel shows, fetch the listing often. */
  private tickKernels(): void {
    tickKernelRows(this.list);
    if (Date.now() - this.model.fetchedAt >= LISTING_POLL_MS) {
      void this.refreshMachines(true);
    }
  }

  private render(): void {
    const total = totalText(this.machines);
    this.total.textContent = total ? `Total: ${total}` : '';
    this.total.hidden = !total;
    this.list.textContent = '';
    if (!this.machines.length) {
      showNotice(
        this.list,
        'jp-RemoteHW-empty',
        'No machines: pick hardware from a notebook toolbar.'
      );
      return;
    }
    for (const machine of this.machines) {
      this.list.appendChild(this.renderMachine(machine));
    }
  }

  private renderMachine(machine: IMachine): HTMLLIElement {
    const item = document.createElement('li');
    item.className = 'jp-RemoteHW-machine';
    item.dataset.name = machine.name;
    const name = document.createElement('div');
    name.className = 'jp-RemoteHW-machineName';
    name.textContent = machineLabel(machine);
    // Elided to one line; the whole of it on hover, with the target's name in the config.
    name.title = `${name.textContent} (${machine.name})`;
    item.appendChild(name);
    const facts = document.createElement('div');
    facts.className = 'jp-RemoteHW-machineFacts';
    const parts = [
      machine.state,
      `${machine.kernels.length} kernel${machine.kernels.length === 1 ? '' : 's'}`
    ];
    const price = formatPrice(machine.price_per_hour);
    if (price) {
      parts.push(price);
    }
    if (machine.cost_so_far) {
      parts.push(`${formatCost(machine.cost_so_far)} so far`);
    }
    if (machine.idle_stop_in !== null) {
      parts.push(`idle stop in ${formatDuration(machine.idle_stop_in)}`);
    }
    facts.textContent = parts.join(' · ');
    item.appendChild(facts);
    if (machine.kernels.length) {
      const kernels = document.createElement('ul');
      kernels.className = 'jp-RemoteHW-kernelList';
      kernels.setAttribute('aria-label', `Kernels on ${machine.name}`);
      for (const kernel of machine.kernels) {
        const share = machine.shareable ? () => void this.share(machine, kernel.id) : null;
        const wake = () => void this.wake(kernel.id);
        kernels.appendChild(
          kernelRow(kernel, machine, this.model.fetchedAt, share, this.openNotebook, wake)
        );
      }
      item.appendChild(kernels);
    }
    const actions = document.createElement('div');
    actions.className = 'jp-RemoteHW-machineActions';
    for (const action of ['stop', 'terminate'] as const) {
      if (!machine.actions.includes(action)) {
        continue;
      }
      const button = document.createElement('button');
      // Destructive, so secondary: outlined in the warning colour, never a solid block.
      button.className =
        `jp-mod-styled jp-RemoteHW-${action}` +
        (action === 'terminate' ? ' jp-RemoteHW-destructive' : '');
      button.textContent = action === 'stop' ? 'Stop' : 'Terminate';
      button.setAttribute('aria-label', `${button.textContent} ${machineLabel(machine)}`);
      button.addEventListener('click', () => void this.act(machine, action));
      actions.appendChild(button);
    }
    item.appendChild(actions);
    return item;
  }

  /** Confirm, naming what ends, then stop or terminate a machine and say what really ended. */
  async act(machine: IMachine, action: 'stop' | 'terminate'): Promise<void> {
    const label = action === 'terminate' ? 'Terminate' : 'Stop';
    const answer = await showDialog({
      title: `${label} ${machineLabel(machine)}`,
      body: new Widget({ node: endConfirmNode(machine, action) }),
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label })],
      defaultButton: 0 // the safe one: Enter keeps everything running
    });
    if (!answer.button.accept) {
      return;
    }
    const verb = action === 'terminate' ? 'Terminating' : 'Stopping';
    const pending = Notification.emit(`${verb} ${machineLabel(machine)}…`, 'in-progress', {
      autoClose: false
    });
    try {
      const after = await this.api.machineAction(machine.name, action);
      const { message, type } = endedMessage(machine, after, action);
      Notification.update({
        id: pending,
        message,
        type,
        autoClose: type === 'success' ? 4000 : false
      });
    } catch (error) {
      Notification.dismiss(pending);
      await showError(`${label} ${machineLabel(machine)} failed`, error, {
        api: this.api,
        retry: () => this.api.machineAction(machine.name, action)
      });
    }
    await this.refresh();
  }

  dispose(): void {
    window.clearInterval(this._tick);
    window.clearInterval(this._kernelTick);
    this.events.received.disconnect(this.onEvent, this);
    this.model.changed.disconnect(this.onMachines, this);
    super.dispose();
  }

  private _tick = 0;
  private _kernelTick = 0;
  /** The listing drawn last (see listingKey), and when. */
  private _shown = '';
  private _drawn = 0;
}

/** Replace a list's items with one line saying why it is empty (an error or nothing yet). */
function showNotice(list: HTMLElement, className: string, text: string): void {
  list.textContent = '';
  const item = document.createElement('li');
  item.className = className;
  item.textContent = text;
  list.appendChild(item);
}
