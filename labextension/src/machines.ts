/**
 * The user's machines, kept in one place for every view: the panel, the status bar and
 * the notebook toolbars read this model and redraw on its `changed` signal.
 *
 * The event socket feeds it: a `machine` event replaces that machine at once; a
 * kernel's launch, a hibernation's end or a share fetches the listing again (one
 * fetch however many events came together). A slow poll only catches what no event
 * says (a link that dropped, a job that ended), and only while the page is visible.
 * Whatever fetches come at once share one request.
 */
import { ISignal, Signal } from '@lumino/signaling';

import type { HardwareAPI, HardwareEvents } from './api';
import { type IHardwareEvent, type IMachine, machineOfKernel } from './model';

/** Milliseconds between two fetches of the whole listing when no event came. */
export const MACHINES_POLL_MS = 30000;

/** Milliseconds events that call for a fetch are gathered before it goes out. */
export const EVENT_GATHER_MS = 300;

/** Machine states after which a machine may leave the listing. */
export const ENDED_STATES = ['terminated', 'stopped', 'failed'];

/** What the model uses of the API. */
export type IMachinesAPI = Pick<HardwareAPI, 'machines' | 'wake'>;

/** Whether an event changes the listing in a way only a new fetch tells. */
export function needsListing(event: IHardwareEvent): boolean {
  if (event.type === 'launch') {
    // A kernel is up (its last step) or its launch failed; other steps change nothing.
    return (
      event.state === 'failed' || (event.state === 'done' && event.step === 'connect channels')
    );
  }
  if (event.type === 'hibernation') {
    return event.state !== 'saving';
  }
  return event.type === 'switch' && (event.state === 'done' || event.state === 'failed');
}

/** The listing with `machine` in place of the one of its name (added when new). */
export function withMachine(machines: IMachine[], machine: IMachine): IMachine[] {
  const index = machines.findIndex(m => m.name === machine.name);
  if (index < 0) {
    return [...machines, machine];
  }
  return machines.map((m, i) => (i === index ? machine : m));
}

/** The machines listing, shared by the views (see the module). */
export class MachinesModel {
  constructor(
    readonly api: IMachinesAPI,
    events: Pick<HardwareEvents, 'received'> | null,
    readonly pollMs: number = MACHINES_POLL_MS
  ) {
    this._events = events;
    events?.received.connect(this.onEvent, this);
    if (pollMs > 0) {
      this._poll = window.setInterval(() => this.onPoll(), pollMs);
    }
  }

  /** Emitted with the listing whenever it changed (or was fetched again). */
  get changed(): ISignal<this, IMachine[]> {
    return this._changed;
  }

  /** The listing as last known (empty until the first fetch). */
  get machines(): IMachine[] {
    return this._machines;
  }

  /** When the listing was last fetched whole (ms since the epoch; 0: never). */
  get fetchedAt(): number {
    return this._fetchedAt;
  }

  /** Why the last fetch failed, or null after one that worked. */
  get error(): unknown {
    return this._error;
  }

  /** The machine that runs a kernel, as last known. */
  machineOf(kernelId: string | null, kernelName: string | null | undefined): IMachine | null {
    return machineOfKernel(this._machines, kernelId, kernelName);
  }

  /**
   * Fetch the listing now; fetches asked for while one is out share it.
   *
   * @returns The listing; throws (and keeps the last one) when it cannot be fetched.
   */
  refresh(): Promise<IMachine[]> {
    if (!this._fetching) {
      this._fetching = this.fetch().finally(() => {
        this._fetching = null;
      });
    }
    return this._fetching;
  }

  /** Wake a hibernated kernel (on `target`, or where it slept); then fetch the listing. */
  async wake(kernelId: string, target?: string): Promise<{ woken: boolean; target?: string }> {
    try {
      return await this.api.wake(kernelId, target);
    } finally {
      void this.refresh().catch(() => undefined);
    }
  }

  /** Stop listening and polling. */
  dispose(): void {
    this._events?.received.disconnect(this.onEvent, this);
    window.clearInterval(this._poll);
    window.clearTimeout(this._gather);
    Signal.clearData(this);
  }

  private async fetch(): Promise<IMachine[]> {
    try {
      const machines = await this.api.machines();
      this._error = null;
      this._fetchedAt = Date.now();
      this._machines = machines;
      this._changed.emit(machines);
      return machines;
    } catch (error) {
      this._error = error;
      throw error;
    }
  }

  private onEvent(_: unknown, event: IHardwareEvent): void {
    if (event.type === 'machine' && event.machine) {
      const machine = event.machine as IMachine;
      this._machines = withMachine(this._machines, machine);
      this._changed.emit(this._machines);
      if (ENDED_STATES.includes(machine.state)) {
        this.gather(); // whether it is still listed at all, the listing says
      }
    } else if (needsListing(event)) {
      this.gather();
    }
  }

  /** Fetch the listing once the events coming together have come. */
  private gather(): void {
    window.clearTimeout(this._gather);
    this._gather = window.setTimeout(
      () => void this.refresh().catch(() => undefined),
      EVENT_GATHER_MS
    );
  }

  private onPoll(): void {
    if (typeof document !== 'undefined' && document.visibilityState === 'hidden') {
      return;
    }
    if (Date.now() - this._fetchedAt >= this.pollMs / 2) {
      void this.refresh().catch(() => undefined);
    }
  }

  private _events: Pick<HardwareEvents, 'received'> | null;
  private _changed = new Signal<this, IMachine[]>(this);
  private _machines: IMachine[] = [];
  private _fetchedAt = 0;
  private _error: unknown = null;
  private _fetching: Promise<IMachine[]> | null = null;
  private _poll = 0;
  private _gather = 0;
}
