/**
 * The progress of a launch as the notebook toolbar shows it, step by step. Free
 * of DOM and of JupyterLab, so it is unit tested on its own.
 */
import { IHardwareEvent, formatDuration, targetOfKernel } from './model';

/** The state of one launch, as the toolbar shows it while a kernel starts. */
export interface ILaunchProgress {
  /** The target launched on (what its events name). */
  target: string;
  /** How a person reads it (`A10G 24 GiB · gpu-box`); the target's name until known. */
  label?: string;
  step: string;
  detail: string;
  startedAt: number;
  failed: boolean;
  done: boolean;
  /** The kernel being launched, once an event named it (what a cancel cancels). */
  kernelId?: string;
}

/**
 * The launch progress after an event: a `launch` event for `target` updates the
 * current step; others leave it as it is.
 */
export function applyLaunchEvent(
  progress: ILaunchProgress,
  event: IHardwareEvent
): ILaunchProgress {
  if (event.type !== 'launch' || event.target !== progress.target) {
    return progress;
  }
  const next = { ...progress, step: event.step || progress.step };
  if (event.kernel_id && typeof event.kernel_id === 'string') {
    next.kernelId = event.kernel_id;
  }
  if (event.state === 'progress') {
    const detail: string = event.detail || '';
    const prefix = `${next.step}: `;
    next.detail = detail.startsWith(prefix) ? detail.slice(prefix.length) : detail;
  } else if (event.state === 'started') {
    next.detail = '';
  } else if (event.state === 'failed') {
    next.failed = true;
    next.detail = event.detail || '';
  } else if (event.state === 'done' && event.step === 'connect channels') {
    next.done = true;
  }
  return next;
}

/**
 * The toolbar's text during a launch: `A10G 24 GiB · gpu-box: connect · 3 s`, then what the step
 * says (`… · 3 s · uploading the agent`): the time, which ticks, is never the part a
 * narrow toolbar cuts off.
 */
export function progressText(progress: ILaunchProgress, now: number): string {
  const elapsed = formatDuration((now - progress.startedAt) / 1000);
  const step = progress.step || 'starting';
  const detail = progress.detail ? ` · ${progress.detail}` : '';
  return `${progress.label || progress.target}: ${step} · ${elapsed}${detail}`;
}

/** Kernel states in which a notebook waits for its kernel to start. */
const STARTING = ['starting', 'initializing', 'restarting', 'autorestarting', 'unknown'];

/**
 * Whether a launch event is the start of a notebook's own kernel that began
 * outside the picker (opening a notebook on hardware, JupyterLab's kernel menu,
 * a restart), so its toolbar follows the launch steps too.
 */
export function startsNotebookKernel(
  event: IHardwareEvent,
  kernelName: string | null | undefined,
  kernelStatus: string
): boolean {
  return (
    event.type === 'launch' &&
    event.state === 'started' &&
    !!event.target &&
    targetOfKernel(kernelName) === event.target &&
    STARTING.includes(kernelStatus)
  );
}
