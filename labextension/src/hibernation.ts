/**
 * What the notebook toolbar and notices say about a kernel that hibernates: its
 * variables saved (on its host's disk or the Jupyter server's), its hardware released,
 * the next cell wakes
 * it (docs/hibernation.md). The words come from `hibernation` events of the event
 * socket (jupyter_remote_hw/server/hibernation/actions.py).
 */
import type { IHardwareEvent } from './model';
import { formatBytes } from './kernelrows';

/** One variable that could not be saved, and why. */
export interface ILeftOut {
  name: string;
  type?: string;
  reason?: string;
}

/** The toolbar's text while the kernel hibernates: `A10G 24 GiB · box · hibernated · $0/h`. */
export function hibernatedLabel(label: string): string {
  return `${label} · hibernated · $0/h`;
}

/** The toolbar's text while the kernel's state is being saved. */
export function savingLabel(event: IHardwareEvent): string {
  const step = String(event.step || 'saving');
  const total = Number(event.total || 0);
  const bytes =
    total > 0 ? ` · ${formatBytes(Number(event.done || 0))} of ${formatBytes(total)}` : '';
  return `hibernating: ${step}${bytes}`;
}

/**
 * The notice once a kernel hibernated, short enough for a toast: what was kept, the
 * names of what was not, what next (the reasons are in {@link hibernatedDetail}).
 */
export function hibernatedNotice(event: IHardwareEvent, notebook: string): string {
  const leftOut: ILeftOut[] = Array.isArray(event.left_out) ? event.left_out : [];
  const name = notebook.split('/').pop() || notebook;
  let text =
    `${name} hibernated ($0/h): ${formatBytes(Number(event.bytes || 0))} saved; ` +
    'the next cell wakes it.';
  if (leftOut.length) {
    text += ` Not saved: ${leftOut.map(item => item.name).join(', ')}.`;
  }
  return text;
}

/** The toolbar's tooltip while the kernel hibernates: the whole story, reasons included. */
export function hibernatedDetail(event: IHardwareEvent): string {
  const leftOut: ILeftOut[] = Array.isArray(event.left_out) ? event.left_out : [];
  let text =
    "This notebook's kernel hibernates: its variables are saved on " +
    `${typeof event.kept_on === 'string' && event.kept_on ? event.kept_on : 'the Jupyter server'} ` +
    `(${formatBytes(Number(event.bytes || 0))}) and its hardware is released, so it costs ` +
    'nothing. The next cell starts the hardware again, restores them, then runs.';
  for (const item of leftOut) {
    text += ` Not saved: ${item.name}${item.reason ? ` (${item.reason})` : ''}.`;
  }
  return text;
}

/** The notice when a kernel could not hibernate: it keeps running, and why. */
export function stayedAwakeNotice(event: IHardwareEvent, notebook: string): string {
  return `The kernel of ${notebook} did not hibernate and keeps running: ${event.detail || 'no reason given'}`;
}
