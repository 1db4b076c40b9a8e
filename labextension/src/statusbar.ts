/**
 * The status bar item: the current notebook's machine, its state, $/h, cost so
 * far and idle-stop countdown.
 */
import { ISessionContext, Notification } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareAPI, HardwareEvents } from './api';
import { isTimeLimitWarning } from './metrics';
import { IHardwareEvent, IMachine, machineStatusText, targetOfKernel } from './model';

/** Shows the machine of the notebook in focus (and says when its time limit nears). */
export class MachineStatus extends Widget {
  constructor(
    readonly api: HardwareAPI,
    readonly events: HardwareEvents
  ) {
    super();
    this.addClass('jp-RemoteHW-status');
    this.node.setAttribute('role', 'status');
    events.received.connect(this.onEvent, this);
    this._timer = window.setInterval(() => void this.refresh(), 30000);
  }

  /** Follow another notebook (or none). */
  set sessionContext(context: ISessionContext | null) {
    this._context?.kernelChanged.disconnect(this.onKernel, this);
    this._context = context;
    context?.kernelChanged.connect(this.onKernel, this);
    void this.refresh();
  }

  /** The text shown now ('' when hidden). */
  get text(): string {
    return this.node.textContent || '';
  }

  private onKernel(): void {
    void this.refresh();
  }

  private onEvent(_: HardwareEvents, event: IHardwareEvent): void {
    if (event.type === 'machine' && event.machine?.name === this.target) {
      this.showMachine(event.machine as IMachine);
    }
    if (isTimeLimitWarning(event) && !this._warned.has(event.detail)) {
      // SLURM's early warning: the allocation ends soon, and its kernels with it.
      this._warned.add(event.detail);
      Notification.warning(event.detail, { autoClose: false });
    }
  }

  private get target(): string | null {
    return targetOfKernel(this._context?.session?.kernel?.name);
  }

  /** Fetch the machine of the current notebook and show it. */
  async refresh(): Promise<void> {
    const target = this.target;
    if (!target) {
      this.showMachine(null);
      return;
    }
    try {
      const machines = await this.api.machines();
      this.showMachine(machines.find(m => m.name === target) ?? null);
    } catch {
      this.showMachine(null);
    }
  }

  private showMachine(machine: IMachine | null): void {
    this._machine = machine;
    const text = machine ? machineStatusText(machine) : '';
    this.node.textContent = text;
    this.node.title = text ? `Remote hardware: ${text}` : '';
    this.setHidden(!text);
    // While the link is down, the seconds count up, every second.
    const down = machine?.state === 'reconnecting' && !!machine.link_down_since;
    if (down && this._tick === 0) {
      this._tick = window.setInterval(() => this.showMachine(this._machine), 1000);
    } else if (!down && this._tick !== 0) {
      window.clearInterval(this._tick);
      this._tick = 0;
    }
  }

  dispose(): void {
    window.clearInterval(this._tick);
    window.clearInterval(this._timer);
    this.events.received.disconnect(this.onEvent, this);
    super.dispose();
  }

  private _warned = new Set<string>();
  private _context: ISessionContext | null = null;
  private _machine: IMachine | null = null;
  private _tick = 0;
  private _timer: number;
}
