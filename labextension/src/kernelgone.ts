/**
 * A notebook whose kernel's hardware ended (stopped, terminated, released) is never given
 * another kernel without asking: JupyterLab would start its default kernel, often a local
 * one, at the next cell, and the cell would fail on variables that are gone. The user is
 * asked instead, with what was lost and the choices: the same hardware again, other
 * hardware, this machine's Python, or not now (then the next cell opens JupyterLab's own
 * kernel picker).
 */
import { Dialog, ISessionContext, showDialog } from '@jupyterlab/apputils';
import { Session } from '@jupyterlab/services';

import { ENDED_STATES, type MachinesModel } from './machines';
import { type IMachine, targetOfKernel } from './model';

/** What the user chose when asked. */
export type GoneChoice = 'again' | 'other' | 'local' | 'later';

/** A kernel as last seen in a notebook. */
export interface IKernelSeen {
  id: string;
  name: string;
}

/**
 * Whether the notebook's kernel went with its hardware: its machine has left the
 * listing or ended. A kernel the user shut down on hardware that still runs did not.
 */
export function hardwareEnded(machine: IMachine | null): boolean {
  return machine === null || ENDED_STATES.includes(machine.state);
}

/** The question, naming the notebook, the hardware and what ended with it. */
export function goneQuestion(notebook: string, hardware: string, machine: IMachine | null): string {
  const how = machine ? machine.state : 'released';
  return (
    `The hardware of ${notebook}'s kernel, ${hardware}, was ${how}: the kernel ended and the ` +
    "variables it held are gone (the notebook's cells and outputs are kept). Where should " +
    'the next cells run?'
  );
}

/** Ask the user; the safe answer ("Not now") is the one Enter and Escape give. */
export async function askWhere(
  notebook: string,
  hardware: string,
  machine: IMachine | null
): Promise<GoneChoice> {
  const again = Dialog.okButton({
    label: `Again on ${hardware}`,
    ariaLabel: `Start a new kernel on ${hardware}`
  });
  const other = Dialog.okButton({ label: 'Other hardware…' });
  const local = Dialog.okButton({ label: 'This machine' });
  const later = Dialog.cancelButton({ label: 'Not now' });
  const result = await showDialog({
    title: 'The kernel’s hardware ended',
    body: goneQuestion(notebook, hardware, machine),
    buttons: [later, local, other, again],
    defaultButton: 0,
    hasClose: true
  });
  switch (result.button.label) {
    case again.label:
      return 'again';
    case other.label:
      return 'other';
    case local.label:
      return 'local';
    default:
      return 'later';
  }
}

/** What the watch needs besides the notebook's session. */
export interface IKernelGoneOptions {
  machines: Pick<MachinesModel, 'refresh' | 'machineOf'>;
  /** The hardware label of a target, for people. */
  hardwareLabel: (target: string) => Promise<string>;
  /** Open the hardware picker of the notebook. */
  pick: () => Promise<void>;
  /** The kernel spec this machine's Python runs under. */
  localKernel: () => string;
  /** The question (a dialog; replaced in tests). */
  ask?: typeof askWhere;
}

/** Watches one notebook's session and asks when its kernel's hardware ends. */
export class KernelGoneWatch {
  constructor(
    readonly context: ISessionContext,
    readonly options: IKernelGoneOptions
  ) {
    context.kernelChanged.connect(this.onKernel, this);
    context.sessionChanged.connect(this.onSession, this);
    this.remember();
  }

  /** Stop watching. */
  dispose(): void {
    this.context.kernelChanged.disconnect(this.onKernel, this);
    this.context.sessionChanged.disconnect(this.onSession, this);
  }

  private remember(): void {
    const kernel = this.context.session?.kernel;
    if (kernel) {
      this._seen = { id: kernel.id, name: kernel.name };
      this.restorePreference();
    }
  }

  private onKernel(
    _: ISessionContext,
    change: Session.ISessionConnection.IKernelChangedArgs
  ): void {
    if (change.newValue) {
      this.remember();
    } else {
      void this.check();
    }
  }

  private onSession(): void {
    if (this.context.session) {
      this.remember();
    } else {
      void this.check();
    }
  }

  /** The notebook lost its kernel: ask, when its hardware went with it. */
  async check(): Promise<GoneChoice | null> {
    const seen = this._seen;
    const target = targetOfKernel(seen?.name);
    // A shutdown the user asked for in JupyterLab is not a surprise.
    if (!seen || !target || this._asking || this.context.isTerminating || this.context.isDisposed) {
      return null;
    }
    this._seen = null;
    try {
      await this.options.machines.refresh();
    } catch {
      return null; // the server cannot be reached: JupyterLab says so itself
    }
    const machine = this.options.machines.machineOf(seen.id, seen.name);
    if (!hardwareEnded(machine) || this.context.session?.kernel) {
      return null;
    }
    // Until the user picks, no cell starts a kernel by itself: JupyterLab asks instead.
    this.holdPreference();
    this._asking = true;
    let choice: GoneChoice;
    try {
      const hardware = await this.options.hardwareLabel(target).catch(() => target);
      choice = await (this.options.ask ?? askWhere)(
        this.context.name || this.context.path,
        hardware,
        machine
      );
      if (choice === 'again') {
        await this.context.changeKernel({ name: seen.name });
      } else if (choice === 'local') {
        await this.context.changeKernel({ name: this.options.localKernel() });
      } else if (choice === 'other') {
        await this.options.pick();
      }
    } finally {
      this._asking = false;
    }
    return choice;
  }

  private holdPreference(): void {
    if (this._held === null) {
      this._held = this.context.kernelPreference;
    }
    this.context.kernelPreference = { ...this._held, shouldStart: false, autoStartDefault: false };
  }

  private restorePreference(): void {
    if (this._held !== null) {
      this.context.kernelPreference = this._held;
      this._held = null;
    }
  }

  private _seen: IKernelSeen | null = null;
  private _asking = false;
  private _held: ISessionContext.IKernelPreference | null = null;
}
