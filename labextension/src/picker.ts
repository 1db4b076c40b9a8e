/**
 * The notebook toolbar item: shows the notebook's hardware, opens the picker,
 * offers to carry variables, and shows launch progress in place.
 */
import { Dialog, ISessionContext, Notification, showDialog } from '@jupyterlab/apputils';
import { ServiceManager, Session } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { HardwareAPIError, HardwareEvents } from './api';
import { HardwareListBody, HardwareStore } from './hardwarelist';
import { showError } from './errors';
import { ILaunchProgress, applyLaunchEvent, progressText, startsNotebookKernel } from './progress';
import {
  hibernatedDetail,
  hibernatedLabel,
  hibernatedNotice,
  savingLabel,
  stayedAwakeNotice
} from './hibernation';
import { hibernatedStatusDetail, kernelOn } from './hibernateafter';
import type { IHibernatedState } from './model';
import { askCarry } from './switch';
import { applySwitchEvent, switchSummary } from './switchmodel';
import { IHardware, IHardwareEvent, errorText, targetOfKernel, toolbarLabel } from './model';
import { SHARED_SESSION_LABEL, isSharedKernel } from './sharemodel';

export { HardwareListBody, HardwareStore };

/** User settings the picker follows (see labextension/schema/plugin.json). */
export interface IPickerSettings {
  carryByDefault: boolean;
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
      // A notebook opened on a kernel that hibernated before: the listing says so.
      const saved = await this.savedState();
      if (saved) {
        this.hibernated = hibernatedStatusDetail(saved);
        this.display(hibernatedLabel(text), this.hibernated);
        return;
      }
    }
    this.display(text, `Hardware of this notebook's kernel: ${text}. Click to change it.`);
  }

  /** The saved state of the notebook's kernel while it hibernates, else null. */
  private async savedState(): Promise<IHibernatedState | null> {
    const kernel = this.sessionContext.session?.kernel;
    if (!kernel) {
      return null;
    }
    try {
      await this.store.machines.refresh();
      const machine = this.store.machines.machineOf(kernel.id, kernel.name);
      const listed = kernelOn(machine?.kernels, kernel.id);
      const saved = listed?.state === 'hibernated' ? listed.hibernated : null;
      return saved && !saved.waking ? saved : null;
    } catch {
      return null; // the listing is for the label only
    }
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
      buttons: [
        Dialog.cancelButton(),
        Dialog.okButton({ label: this.hibernated ? 'Wake there' : 'Switch' })
      ],
      focusNodeSelector: 'input',
      hasClose: true
    });
    const chosen = choice.button.accept ? choice.value : null;
    if (!chosen || chosen.name === this.currentTarget) {
      return;
    }
    if (this.hibernated) {
      // Its state is saved: it wakes there with all of it, the old hardware untouched.
      await this.wakeOn(chosen);
      return;
    }
    const carry = await this.askCarry(chosen.name);
    if (carry === null) {
      return;
    }
    await this.switchTo(chosen, carry);
  }

  /** Wake the notebook's hibernated kernel on `option`: same kernel, new hardware. */
  async wakeOn(option: IHardware): Promise<void> {
    const kernelId = this.sessionContext.session?.kernel?.id;
    if (!kernelId) {
      return;
    }
    const timer = this.startProgress(option, 'waking');
    try {
      await this.store.machines.wake(kernelId, option.name);
      this.progress = null;
      this.hibernated = null;
      connectAs(this.sessionContext, option.kernel_name);
      await this.refresh();
      Notification.success(`The kernel woke on ${option.label}, its variables restored.`, {
        autoClose: 5000
      });
    } catch (error) {
      this.progress = null;
      await this.refresh();
      await showError(`Waking the kernel on ${option.label} failed`, error, {
        api: this.store.api,
        retry: () => this.wakeOn(option)
      });
    } finally {
      window.clearInterval(timer);
    }
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
      title: `Cancel the launch on ${launching.label || launching.target}?`,
      body:
        `${where}. Cancelling stops it and releases what it holds (a job waiting in a ` +
        'SLURM queue is cancelled); the notebook stays on the kernel it has now.',
      buttons: [
        Dialog.cancelButton({ label: 'Keep waiting' }),
        Dialog.warnButton({ label: 'Cancel launch' })
      ],
      defaultButton: 0
    });
    if (!answer.button.accept || this.progress !== launching) {
      return;
    }
    this.cancelling = true;
    try {
      await this.store.api.cancelLaunch(launching.kernelId);
    } catch (error) {
      this.cancelling = false;
      await showError(
        `The launch on ${launching.label || launching.target} cannot be cancelled`,
        error
      );
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
    const timer = this.startProgress(option, session ? 'starting kernel' : 'starting');
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
        `${option.label}: failed${step ? ` at ${step}` : ''}`,
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

  /** Show a launch on `target` here from its first `step`, its time ticking; the timer. */
  private startProgress(option: IHardware, step: string): number {
    this.progress = {
      target: option.name,
      label: option.label,
      step,
      detail: '',
      startedAt: Date.now(),
      failed: false,
      done: false
    };
    this.showProgress();
    return window.setInterval(() => this.showProgress(), 1000);
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
    // Its label, once the listing says it (the target's name meanwhile).
    void this.store.options().then(options => {
      const option = options.find(o => o.name === event.target);
      const progress = this.progress;
      if (option && progress && progress.target === event.target) {
        progress.label = option.label;
        this.showProgress();
      }
    });
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
      const where = progress.label || progress.target;
      Notification.info(`The launch on ${where} was cancelled.`, { autoClose: 5000 });
    } else if (progress?.failed) {
      const where = progress.label || progress.target;
      this.display(`${where}: failed at ${progress.step}`, progress.detail, 'error');
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

/**
 * Connect the notebook anew to its kernel, under kernelspec `name`. A kernel woken on
 * other hardware keeps its id, and JupyterLab keeps a kernel connection, with the
 * kernelspec name it was made with, for as long as the id stays: its kernel indicator
 * and the notebook's saved kernelspec would go on naming the old hardware.
 */
export function connectAs(sessionContext: ISessionContext, name: string): void {
  const session = sessionContext.session as unknown as
    { model: Session.IModel; update?: (model: Session.IModel) => void } | null | undefined;
  const model = session?.model;
  const kernel = model?.kernel;
  if (!session || !model || !kernel || kernel.name === name || !session.update) {
    return;
  }
  // The connection is made anew only when the kernel's id changes: through none.
  session.update({ ...model, kernel: null });
  session.update({ ...model, kernel: { ...kernel, name } });
}
