/**
 * A notebook's own hibernate time: read from its metadata (`remote_hw.hibernate_after`)
 * and sent to the server whenever its kernel starts or changes; chosen with the
 * "Hibernate After…" command, which writes the metadata, so the time travels with
 * the notebook (docs/hibernation.md).
 */
import { InputDialog, ISessionContext, Notification } from '@jupyterlab/apputils';

import { HardwareAPI, HardwareAPIError } from './api';
import { showError } from './errors';
import {
  HIBERNATE_CHOICES,
  METADATA_KEY,
  choiceIndex,
  formatIdle,
  parseHibernateAfter
} from './hibernateafter';
import { targetOfKernel } from './model';

/** The part of a notebook's model this reads and writes (JupyterLab 4's notebook model). */
export interface IMetadataModel {
  getMetadata(key: string): unknown;
  setMetadata(key: string, value: unknown): void;
  deleteMetadata(key: string): void;
}

/** The hibernate time of one notebook. */
export class NotebookHibernateTime {
  constructor(
    readonly sessionContext: ISessionContext,
    readonly model: () => IMetadataModel | null,
    readonly api: HardwareAPI
  ) {
    sessionContext.kernelChanged.connect(() => void this.apply(), this);
    sessionContext.ready.then(() => this.apply()).catch(() => undefined);
  }

  /** The notebook's time: seconds (0: never), null (the hardware's), undefined (unset). */
  get seconds(): number | null | undefined {
    const metadata = this.model()?.getMetadata(METADATA_KEY);
    if (!metadata || typeof metadata !== 'object' || !('hibernate_after' in metadata)) {
      return undefined;
    }
    return parseHibernateAfter(metadata.hibernate_after);
  }

  /**
   * Send the notebook's time for its kernel, when it has one and the kernel runs on
   * remote hardware. Never throws: a kernel here, on this machine, takes none (409),
   * and anything else is only logged.
   */
  async apply(): Promise<void> {
    const kernel = this.sessionContext.session?.kernel;
    const seconds = this.seconds;
    if (!kernel || seconds === undefined || !targetOfKernel(kernel.name)) {
      return;
    }
    try {
      await this.api.setHibernateAfter(kernel.id, seconds);
    } catch (error) {
      if (!(error instanceof HardwareAPIError && error.status === 409)) {
        console.warn("jupyter-remote-hw: the notebook's hibernate time was not sent", error);
      }
    }
  }

  /** Whether the notebook's kernel runs on hardware that can hibernate it now. */
  get canHibernate(): boolean {
    const kernel = this.sessionContext.session?.kernel;
    return !!kernel && targetOfKernel(kernel.name) !== null;
  }

  /**
   * Hibernate the notebook's kernel now; the toolbar and a notice say what was saved
   * (from the server's `hibernation` event), an error says why it stays awake.
   */
  async hibernateNow(): Promise<void> {
    const kernel = this.sessionContext.session?.kernel;
    if (!kernel || !this.canHibernate) {
      return;
    }
    try {
      await this.api.hibernate(kernel.id);
    } catch (error) {
      await showError("This notebook's kernel did not hibernate", error);
    }
  }

  /** Ask for the notebook's time; write it in its metadata and send it. */
  async choose(): Promise<void> {
    const model = this.model();
    if (!model) {
      return;
    }
    const answer = await InputDialog.getItem({
      title: 'Hibernate this notebook’s kernel after it is idle for…',
      items: HIBERNATE_CHOICES.map(c => c.label),
      // An index: a label selects nothing in a list that cannot be edited, and the first
      // choice (Never) would be the one Enter sets.
      current: choiceIndex(this.seconds),
      okLabel: 'Set'
    });
    const choice = HIBERNATE_CHOICES.find(c => c.label === answer.value);
    if (!answer.button.accept || !choice) {
      return;
    }
    const stored = model.getMetadata(METADATA_KEY);
    const metadata: { [key: string]: unknown } =
      stored && typeof stored === 'object' ? { ...stored } : {};
    if (choice.seconds === null) {
      delete metadata.hibernate_after;
    } else {
      metadata.hibernate_after = choice.seconds;
    }
    if (Object.keys(metadata).length) {
      model.setMetadata(METADATA_KEY, metadata);
    } else {
      model.deleteMetadata(METADATA_KEY);
    }
    const kernel = this.sessionContext.session?.kernel;
    if (!kernel || !targetOfKernel(kernel.name)) {
      return; // saved with the notebook: sent when it runs on remote hardware
    }
    try {
      const set = await this.api.setHibernateAfter(kernel.id, choice.seconds);
      const after = set.hibernate_after;
      Notification.info(
        after.seconds > 0
          ? `This notebook's kernel hibernates after ${formatIdle(after.seconds)} idle.`
          : "This notebook's kernel does not hibernate by itself.",
        { autoClose: 5000 }
      );
    } catch (error) {
      await showError('The hibernate time could not be set', error);
    }
  }
}
