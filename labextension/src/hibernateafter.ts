/**
 * A notebook's own hibernate time, and what the status bar says about hibernation.
 *
 * The notebook's metadata `remote_hw.hibernate_after` (seconds, or a duration such as
 * `30m`, `1h30m`, `never`) travels with the notebook; JupyterLab sends it to the
 * server (`PUT /jupyter-remote-hw/api/hibernate-after/<kernel id>`) whenever the
 * notebook's kernel starts or changes, where it wins over the target's
 * `hibernate_after` (docs/hibernation.md). Free of DOM and of JupyterLab, so it is
 * unit tested on its own.
 */
import { formatBytes } from './kernelrows';
import type { IHibernatedState, IMachineKernel } from './model';
import { formatDuration } from './model';

/** The notebook metadata key under which the time is kept. */
export const METADATA_KEY = 'remote_hw';

/** The longest time the server takes: 7 days, in seconds. */
export const MAX_HIBERNATE_AFTER = 7 * 24 * 3600;

/** A kernel's hibernate time as the machines listing says it. */
export interface IHibernateAfter {
  /** Seconds idle before it hibernates; 0: never. */
  seconds: number;
  /** `notebook` when its notebook set it, else `target` (the hardware's setting). */
  source: 'target' | 'notebook';
}

/** One choice of the "Hibernate after…" dialog; `seconds` null: the hardware's time. */
export interface IHibernateChoice {
  label: string;
  seconds: number | null;
}

/** The choices of the "Hibernate after…" dialog. */
export const HIBERNATE_CHOICES: IHibernateChoice[] = [
  { label: 'Never', seconds: 0 },
  { label: '10 min', seconds: 600 },
  { label: '30 min', seconds: 1800 },
  { label: '1 h', seconds: 3600 },
  { label: '2 h', seconds: 7200 },
  { label: "The hardware's default", seconds: null }
];

const UNITS: { [unit: string]: number } = { s: 1, m: 60, h: 3600, d: 86400 };

/**
 * The seconds a metadata value asks for: a number of seconds, or a string such as
 * `600`, `90s`, `30m`, `1h30m`, `2h`, `never` (0). `null` (explicitly): the
 * hardware's time. `undefined`: not set, or not a time from 0 to 7 days (then nothing
 * is sent).
 */
export function parseHibernateAfter(value: unknown): number | null | undefined {
  let seconds: number;
  if (value === null) {
    return null;
  } else if (typeof value === 'number') {
    seconds = value;
  } else if (typeof value === 'string') {
    const text = value.trim().toLowerCase();
    if (text === 'never') {
      return 0;
    }
    if (/^\d+(\.\d+)?$/.test(text)) {
      seconds = Number(text);
    } else if (/^(\d+(\.\d+)?\s*[smhd]\s*)+$/.test(text)) {
      seconds = 0;
      for (const part of text.matchAll(/(\d+(?:\.\d+)?)\s*([smhd])/g)) {
        seconds += Number(part[1]) * UNITS[part[2]];
      }
    } else {
      return undefined;
    }
  } else {
    return undefined;
  }
  return Number.isFinite(seconds) && seconds >= 0 && seconds <= MAX_HIBERNATE_AFTER
    ? seconds
    : undefined;
}

/** `never`, `45 s`, `30 min`, `1 h`, `1 h 30 min`, `2 d`. */
export function formatIdle(seconds: number): string {
  if (seconds <= 0) {
    return 'never';
  }
  if (seconds < 60) {
    return `${Math.round(seconds)} s`;
  }
  const days = Math.floor(seconds / 86400);
  const hours = Math.floor((seconds % 86400) / 3600);
  const minutes = Math.round((seconds % 3600) / 60);
  const parts: string[] = [];
  if (days) {
    parts.push(`${days} d`);
  }
  if (hours) {
    parts.push(`${hours} h`);
  }
  if (minutes) {
    parts.push(`${minutes} min`);
  }
  return parts.join(' ') || 'never';
}

/** The choice matching a notebook's time (null: the hardware's), or null for another. */
export function choiceOf(seconds: number | null | undefined): IHibernateChoice | null {
  const wanted = seconds === undefined ? null : seconds;
  return HIBERNATE_CHOICES.find(c => c.seconds === wanted) ?? null;
}

/**
 * The index in {@link HIBERNATE_CHOICES} of a notebook's time; a time that is not one of
 * them, or none, selects "The hardware's default" (the last).
 */
export function choiceIndex(seconds: number | null | undefined): number {
  const choice = choiceOf(seconds);
  return choice ? HIBERNATE_CHOICES.indexOf(choice) : HIBERNATE_CHOICES.length - 1;
}

/** What the status bar's tooltip says of a running kernel's hibernate time, or ''. */
export function hibernateAfterText(after: IHibernateAfter | null | undefined): string {
  if (!after) {
    return '';
  }
  const whose = after.source === 'notebook' ? "this notebook's setting" : "the hardware's setting";
  if (after.seconds <= 0) {
    return after.source === 'notebook' ? `Never hibernates (${whose}).` : '';
  }
  return `Hibernates after ${formatIdle(after.seconds)} idle (${whose}).`;
}

/** The status bar's text while the notebook's kernel hibernates (or wakes). */
export function hibernatedStatusText(machine: string, saved: IHibernatedState): string {
  return saved.waking ? `${machine} · waking` : `${machine} · hibernated · $0/h`;
}

/** The status bar's tooltip while the notebook's kernel hibernates. */
export function hibernatedStatusDetail(saved: IHibernatedState): string {
  let text =
    `This notebook's kernel hibernates: ${formatBytes(Number(saved.bytes || 0))} of its ` +
    `state are saved on ${saved.kept_on || 'the Jupyter server'} and its hardware is ` +
    'released ($0/h). ';
  const leftOut = saved.left_out ?? [];
  if (leftOut.length) {
    text += `Not saved: ${leftOut.map(item => item.name).join(', ')}. `;
  }
  if (saved.wake_error) {
    text += `The last wake failed: ${saved.wake_error} `;
  }
  text += saved.waking ? 'It is waking.' : 'Click to wake it now, or run a cell.';
  return text;
}

/** The status bar's text while a wake's launch steps run: `waking: start kernel · 4 s`. */
export function wakingStatusText(step: string, since: number, now: number): string {
  return `waking: ${step || 'starting'} · ${formatDuration((now - since) / 1000)}`;
}

/** The notebook's kernel in a machines listing's machine, or null. */
export function kernelOn(
  kernels: IMachineKernel[] | undefined,
  kernelId: string | null | undefined
): IMachineKernel | null {
  return (kernelId && kernels?.find(k => k.id === kernelId)) || null;
}
