/**
 * The status bar item: the current notebook's machine, its state, $/h, cost so
 * far and idle-stop countdown; while the notebook's kernel hibernates,
 * `ssh-box · hibernated · $0/h` (a click wakes it), and the wake's steps as it wakes.
 */
import { ISessionContext, Notification } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareEvents } from './api';
import { showError } from './errors';
import {
  hibernateAfterText,
  hibernatedStatusDetail,
  hibernatedStatusText,
  kernelOn,
  wakingStatusText
} from './hibernateafter';
import { savingLabel } from './hibernation';
import { MachinesModel } from './machines';
import { isTimeLimitWarning } from './metrics';
import { IHardwareEvent, IMachine, machineLabel, machineStatusText, targetOfKernel } from './model';

/** Shows the machine of the notebook in focus (and says when its time limit nears). */
export class MachineStatus extends Widget {
  constructor(
    readonly events: HardwareEvents,
    readonly model: MachinesModel
  ) {
    super();
    this.addClass('jp-RemoteHW-status');
    this.node.setAttribute('role', 'status');
    this.node.addEventListener('click', () => void this.onClick());
    events.received.connect(this.onEvent, this);
    model.changed.connect(this.onMachines, this);
  }

  /** Follow another notebook (or none). */
  set sessionContext(context: ISessionContext | null) {
    this._context?.kernelChanged.disconnect(this.onKernel, this);
    this._context?.statusChanged.disconnect(this.onStatus, this);
    this._context = context;
    this.stopWaking();
    context?.kernelChanged.connect(this.onKernel, this);
    context?.statusChanged.connect(this.onStatus, this);
    void this.refresh();
  }

  /** The text shown now ('' when hidden). */
  get text(): string {
    return this.node.textContent || '';
  }

  /** Whether the notebook's kernel hibernates now (a click wakes it). */
  get hibernated(): boolean {
    return this.node.classList.contains('jp-mod-hibernated');
  }

  private onKernel(): void {
    this.stopWaking();
    void this.refresh();
  }

  /**
   * The kernel went idle while a wake showed: the listing says whether it is awake (a
   * wake step's event may never come, as when the event socket reconnected meanwhile).
   */
  private onStatus(_: ISessionContext, status: string): void {
    if (this._waking && status === 'idle') {
      this.stopWaking();
      void this.refresh();
    }
  }

  private get kernelId(): string | null {
    return this._context?.session?.kernel?.id ?? null;
  }

  /** The shared listing changed: show the notebook's machine as it is now. */
  private onMachines(model: MachinesModel): void {
    if (this.target && !this._waking) {
      this.showMachine(model.machineOf(this.kernelId, this.kernelName));
    }
  }

  private onEvent(_: HardwareEvents, event: IHardwareEvent): void {
    if (isTimeLimitWarning(event) && !this._warned.has(event.detail)) {
      // SLURM's early warning: the allocation ends soon, and its kernels with it.
      this._warned.add(event.detail);
      Notification.warning(event.detail, { autoClose: false });
    }
    const kernelId = this.kernelId;
    if (!kernelId || event.kernel_id !== kernelId) {
      return;
    }
    if (event.type === 'hibernation') {
      if (event.state === 'saving') {
        this.display(savingLabel(event), "Saving the state of this notebook's kernel");
      } else {
        void this.refresh(); // hibernated, or stayed awake: the listing says which
      }
    } else if (event.type === 'launch' && (this._waking || this.hibernated)) {
      this.onWakeStep(event);
    }
  }

  /** A launch step of the notebook's hibernated kernel: it wakes. */
  private onWakeStep(event: IHardwareEvent): void {
    const ended =
      event.state === 'failed' || (event.state === 'done' && event.step === 'restore state');
    if (ended) {
      this.stopWaking();
      void this.refresh();
      return;
    }
    this.startWaking(String(event.step || this._waking?.step || 'starting'));
  }

  /** Show the wake's step, its seconds ticking. */
  private startWaking(step: string): void {
    this._waking = { step, since: this._waking?.since ?? Date.now() };
    if (this._wakeTick === 0) {
      this._wakeTick = window.setInterval(() => this.showWaking(), 1000);
    }
    this.showWaking();
  }

  private stopWaking(): void {
    this._waking = null;
    window.clearInterval(this._wakeTick);
    this._wakeTick = 0;
  }

  private showWaking(): void {
    if (this._waking) {
      const text = wakingStatusText(this._waking.step, this._waking.since, Date.now());
      this.display(text, `This notebook's kernel is waking: ${text}`, 'waking');
    }
  }

  private get target(): string | null {
    return targetOfKernel(this.kernelName);
  }

  private get kernelName(): string | null {
    return this._context?.session?.kernel?.name ?? null;
  }

  /** Fetch the machine of the current notebook and show it. */
  async refresh(): Promise<void> {
    const target = this.target;
    if (!target) {
      this.showMachine(null);
      return;
    }
    try {
      await this.model.refresh(); // shown by onMachines
    } catch {
      this.showMachine(null);
    }
  }

  /** A click on a hibernated kernel wakes it; its steps show here as it wakes. */
  private async onClick(): Promise<void> {
    const kernelId = this.kernelId;
    if (!kernelId || !this.hibernated || this._waking) {
      return;
    }
    this.startWaking('starting');
    try {
      await this.model.wake(kernelId);
    } catch (error) {
      await showError('The kernel could not be woken', error);
    } finally {
      this.stopWaking();
      await this.refresh();
    }
  }

  private display(text: string, title: string, state: '' | 'hibernated' | 'waking' = ''): void {
    this.node.textContent = text;
    this.node.title = title;
    this.setHidden(!text);
    this.node.classList.toggle('jp-mod-hibernated', state === 'hibernated');
    this.node.classList.toggle('jp-mod-waking', state === 'waking');
  }

  private showMachine(machine: IMachine | null): void {
    this._machine = machine;
    const kernel = kernelOn(machine?.kernels, this.kernelId);
    const saved = kernel?.state === 'hibernated' ? kernel.hibernated : null;
    if (machine && saved) {
      this.display(
        hibernatedStatusText(machineLabel(machine), saved),
        hibernatedStatusDetail(saved),
        saved.waking ? 'waking' : 'hibernated'
      );
    } else {
      const text = machine ? machineStatusText(machine) : '';
      const after = hibernateAfterText(kernel?.hibernate_after);
      this.display(text, text ? `Remote hardware: ${text}${after ? `. ${after}` : ''}` : '');
    }
    // While the link is down, the seconds count up, every second; while the kernel
    // wakes (a cell woke it), the listing is read again until it is awake.
    const down = machine?.state === 'reconnecting' && !!machine.link_down_since;
    if (down && this._tick === 0) {
      this._tick = window.setInterval(() => this.showMachine(this._machine), 1000);
    } else if (!down && this._tick !== 0) {
      window.clearInterval(this._tick);
      this._tick = 0;
    }
    window.clearTimeout(this._again);
    if (saved?.waking) {
      this._again = window.setTimeout(() => void this.refresh(), 1000);
    }
  }

  dispose(): void {
    window.clearInterval(this._tick);
    window.clearTimeout(this._again);
    this.stopWaking();
    this.events.received.disconnect(this.onEvent, this);
    this.model.changed.disconnect(this.onMachines, this);
    super.dispose();
  }

  private _warned = new Set<string>();
  private _context: ISessionContext | null = null;
  private _machine: IMachine | null = null;
  private _waking: { step: string; since: number } | null = null;
  private _tick = 0;
  private _wakeTick = 0;
  private _again = 0;
}
