/**
 * What the hardware API sends, and the logic of the views over it: labels,
 * search, sizes, prices, costs and launch progress. Free of DOM and of
 * JupyterLab, so it is unit tested on its own.
 */

/** One row of `GET /jupyter-remote-hw/api/hardware`. */
export interface IHardware {
  name: string;
  kernel_name: string;
  provider: string;
  label: string;
  hardware: string;
  where: string;
  gpu: string | null;
  gpu_count: number | null;
  gpu_memory_gb: number | null;
  vcpus: number | null;
  memory_gb: number | null;
  price_per_hour: number | null;
  usable: boolean;
  why_not: string | null;
  machine_state: string | null;
  source: string;
}

/** A kernel on a machine. */
export interface IMachineKernel {
  id: string;
  owner: string;
  execution_state: string | null;
}

/** One row of `GET /jupyter-remote-hw/api/machines`. */
export interface IMachine {
  name: string;
  provider: string;
  hardware: string;
  where: string;
  state: string;
  kernels: IMachineKernel[];
  price_per_hour: number | null;
  cost_so_far: number | null;
  idle_stop_in: number | null;
  actions: string[];
}

/** A variable of a kernel, for the carry dialog. */
export interface IVariable {
  name: string;
  type: string;
  nbytes: number;
}

/** What a switch did. */
export interface ISwitchReport {
  session_id: string;
  kernel_id: string;
  previous_kernel_id: string;
  hardware: string;
  carried: { name: string; type: string }[];
  not_carried: { name: string; reason: string }[];
}

/** An event of the event socket. */
export interface IHardwareEvent {
  type: 'launch' | 'machine' | 'switch';
  time: number;
  [key: string]: any;
}

/** The prefix of kernelspec names that select hardware. */
export const KERNEL_NAME_PREFIX = 'remote-hw-';

/** The hardware target a kernelspec name selects, or null for other kernels. */
export function targetOfKernel(kernelName: string | null | undefined): string | null {
  if (!kernelName || !kernelName.toLowerCase().startsWith(KERNEL_NAME_PREFIX)) {
    return null;
  }
  return kernelName.slice(KERNEL_NAME_PREFIX.length).toLowerCase();
}

/** Dollars per hour as people read them: `$1.01/h`, `free` for owned hardware, `` when unknown. */
export function formatPrice(perHour: number | null | undefined): string {
  if (perHour === null || perHour === undefined) {
    return '';
  }
  if (perHour === 0) {
    return 'free';
  }
  return `$${perHour.toFixed(2)}/h`;
}

/** Dollars so far: `$0.42`. */
export function formatCost(cost: number | null | undefined): string {
  if (cost === null || cost === undefined) {
    return '';
  }
  return `$${cost.toFixed(2)}`;
}

/** A byte count: `512 B`, `1.5 KB`, `24.0 MB`, `1.2 GB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Seconds as a countdown: `45 s`, `12 min`, `1 h 05 min`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const hours = Math.floor(minutes / 60);
  return `${hours} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** The toolbar's text for a hardware option: its label, with its price when it has one. */
export function toolbarLabel(option: IHardware): string {
  const price = option.price_per_hour ? ` · ${formatPrice(option.price_per_hour)}` : '';
  return `${option.label}${price}`;
}

/** The GPU column: `1 × A10G`, `CPU`, or `` when unknown. */
export function gpuText(option: IHardware): string {
  if (option.gpu_count === 0) {
    return 'CPU';
  }
  if (!option.gpu) {
    return '';
  }
  return `${option.gpu_count ?? 1} × ${option.gpu}`;
}

/** The availability column: `ready`, `running`, or why not. */
export function availabilityText(option: IHardware): string {
  if (!option.usable) {
    return option.why_not || 'not available';
  }
  return option.machine_state === 'running' ? 'running' : 'ready';
}

/** The columns of the picker's list, in order, for one option. */
export function pickerColumns(option: IHardware): string[] {
  return [
    option.label,
    gpuText(option),
    option.gpu_memory_gb ? `${option.gpu_memory_gb} GB` : '',
    option.vcpus !== null ? String(option.vcpus) : '',
    option.memory_gb !== null ? `${option.memory_gb} GB` : '',
    formatPrice(option.price_per_hour),
    option.where,
    availabilityText(option)
  ];
}

/** Headers of the picker's columns. */
export const PICKER_HEADERS = [
  'Hardware',
  'GPU',
  'GPU mem',
  'vCPU',
  'RAM',
  '$/h',
  'Where',
  'Availability'
];

/**
 * The options matching a search: every word must appear in the name, label,
 * GPU, provider or place; `gpu_mem>=40`, `vcpu>=8`, `ram>=64`, `price<=2`
 * compare numbers. Usable options come first, then by price.
 */
export function filterHardware(options: IHardware[], query: string): IHardware[] {
  const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const matches = options.filter(option => words.every(word => matchesWord(option, word)));
  return matches
    .map((option, index) => ({ option, index }))
    .sort((a, b) => {
      if (a.option.usable !== b.option.usable) {
        return a.option.usable ? -1 : 1;
      }
      return a.index - b.index;
    })
    .map(entry => entry.option);
}

const NUMERIC: Record<string, (o: IHardware) => number | null> = {
  gpu_mem: o => o.gpu_memory_gb,
  gpus: o => o.gpu_count,
  vcpu: o => o.vcpus,
  ram: o => o.memory_gb,
  price: o => o.price_per_hour
};

function matchesWord(option: IHardware, word: string): boolean {
  const compare = /^([a-z_]+)(>=|<=|=|>|<)(\d+(?:\.\d+)?)$/.exec(word);
  if (compare && NUMERIC[compare[1]]) {
    const value = NUMERIC[compare[1]](option);
    if (value === null) {
      return false;
    }
    const limit = Number(compare[3]);
    switch (compare[2]) {
      case '>=':
        return value >= limit;
      case '<=':
        return value <= limit;
      case '>':
        return value > limit;
      case '<':
        return value < limit;
      default:
        return value === limit;
    }
  }
  const haystack = [
    option.name,
    option.label,
    option.gpu ?? '',
    option.provider,
    option.where,
    option.hardware
  ]
    .join(' ')
    .toLowerCase();
  return haystack.includes(word);
}

/**
 * The option selected after an arrow key in the picker: the next (or previous)
 * usable one among those shown, wrapping around; null when none is usable.
 */
export function nextSelection(
  shown: IHardware[],
  current: string | null,
  key: 'ArrowDown' | 'ArrowUp'
): IHardware | null {
  const usable = shown.filter(o => o.usable);
  if (!usable.length) {
    return null;
  }
  const at = usable.findIndex(o => o.name === current);
  if (at < 0) {
    return key === 'ArrowDown' ? usable[0] : usable[usable.length - 1];
  }
  const step = key === 'ArrowDown' ? 1 : -1;
  return usable[(at + step + usable.length) % usable.length];
}

/** The state of one launch, as the toolbar shows it while a kernel starts. */
export interface ILaunchProgress {
  target: string;
  step: string;
  detail: string;
  startedAt: number;
  failed: boolean;
  done: boolean;
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

/** The toolbar's text during a launch: `ssh-box: connect · 3 s`. */
export function progressText(progress: ILaunchProgress, now: number): string {
  const elapsed = formatDuration((now - progress.startedAt) / 1000);
  const step = progress.step || 'starting';
  const detail = progress.detail ? ` (${progress.detail})` : '';
  return `${progress.target}: ${step}${detail} · ${elapsed}`;
}

/** The status bar's text for a machine: `ssh-box running · free · 2 kernels`. */
export function machineStatusText(machine: IMachine): string {
  const parts = [`${machine.name} ${machine.state}`];
  const price = formatPrice(machine.price_per_hour);
  if (price) {
    parts.push(price);
  }
  const cost = machine.cost_so_far ? formatCost(machine.cost_so_far) : '';
  if (cost) {
    parts.push(`${cost} so far`);
  }
  if (machine.idle_stop_in !== null && machine.idle_stop_in !== undefined) {
    parts.push(`idle stop in ${formatDuration(machine.idle_stop_in)}`);
  }
  return parts.join(' · ');
}

/** The error text for a failed request: the message, then the step and hint when given. */
export function errorText(error: { message: string; step?: string; hint?: string }): string {
  const lines = [error.message];
  if (error.step && !error.message.includes(`'${error.step}'`)) {
    lines.push(`Step: ${error.step}`);
  }
  if (error.hint && !error.message.includes(error.hint)) {
    lines.push(`Try: ${error.hint}`);
  }
  return lines.join('\n');
}
