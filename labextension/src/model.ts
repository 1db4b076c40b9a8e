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
  gpu_memory_gib: number | null;
  vcpus: number | null;
  memory_gib: number | null;
  price_per_hour: number | null;
  usable: boolean;
  why_not: string | null;
  reason?: string | null;
  hint?: string | null;
  provider_title?: string;
  machine_state: string | null;
  /** What is free there now, where the provider knows (a SLURM partition's GPUs). */
  availability?: string | null;
  /** While no machine is open there and the last try to connect failed: why, since when. */
  unreachable?: { reason: string; since: number; detail: string } | null;
  source: string;
}

/** A kernel on a machine, as `GET /jupyter-remote-hw/api/machines` lists it. */
export interface IMachineKernel {
  id: string;
  owner: string;
  execution_state: string | null;
  /** `idle`, `busy`, ..., `reconnecting` while the link is down, `unknown`. */
  state?: string;
  /** The kernelspec, `remote-hw-<target>`. */
  kernel_name?: string;
  /** `Python 3 (ipykernel)`. */
  display_name?: string;
  /** The notebook whose session uses it, or null. */
  path?: string | null;
  started?: number | null;
  uptime_seconds?: number | null;
  cost_so_far?: number | null;
  /** Set while the kernel hibernates (`state` is then `hibernated`): its saved state. */
  hibernated?: IHibernatedState | null;
  /** How long it may stay idle before it hibernates, and whose time that is. */
  hibernate_after?: { seconds: number; source: 'target' | 'notebook' } | null;
  /**
   * Whether someone else can run code in it, or could at some time in its life (a share
   * as collaborator): what comes from it to this side is rebuilt by the restricted loader.
   */
  run_by_others?: boolean;
}

/** A hibernated kernel's saved state, as the machines listing says it. */
export interface IHibernatedState {
  bytes: number;
  /** Where the state is kept when not on the server's disk (`SLURM cluster dev`). */
  kept_on?: string | null;
  saved_at?: number | null;
  left_out?: { name: string; reason?: string }[];
  /** Whether a wake is under way. */
  waking?: boolean;
  /** Why the last wake failed (the state is intact; the next cell retries). */
  wake_error?: string | null;
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
  uptime_seconds?: number | null;
  idle_stop_in: number | null;
  /** While reconnecting: since when the link has been down (epoch seconds). */
  link_down_since?: number | null;
  actions: string[];
  /** Whether its kernels can be shared with teammates (SSH and cloud machines). */
  shareable?: boolean;
}

/** An event of the event socket. */
export interface IHardwareEvent {
  type: 'launch' | 'machine' | 'switch' | 'share' | 'hibernation';
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

/**
 * The machine a kernel runs on: the one that lists it, else the one its kernelspec's
 * target names (a kernel still starting). On a SLURM cluster the two differ: each
 * kernel of a target has an allocation of its own (`<target>.2`...), or shares one.
 */
export function machineOfKernel(
  machines: IMachine[],
  kernelId: string | null | undefined,
  kernelName: string | null | undefined
): IMachine | null {
  const listing = kernelId ? machines.find(m => m.kernels.some(k => k.id === kernelId)) : undefined;
  if (listing) {
    return listing;
  }
  const target = targetOfKernel(kernelName);
  return (target && machines.find(m => m.name === target)) || null;
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

/** A byte count in binary units, as memory is shown everywhere: `512 B`, `1.5 KiB`, `22.9 MiB`, `1.4 GiB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
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

/**
 * The availability column: its machine's state (`stopped`...), what is free there
 * (`2 of 2 GPUs free on 1 node`), why the last connection failed (`unreachable for 5
 * min`, `host key not trusted`), `not connected yet` for an SSH host never reached,
 * `ready`, or why not.
 */
export function availabilityText(option: IHardware, now: number = Date.now()): string {
  if (!option.usable) {
    return option.reason || option.why_not || 'not available';
  }
  const down = option.unreachable;
  const since =
    down?.reason === 'unreachable' ? ` for ${formatDuration(now / 1000 - down.since)}` : '';
  const fallback = option.provider === 'ssh' ? 'not connected yet' : 'ready';
  return option.machine_state || option.availability || (down ? down.reason + since : fallback);
}

/** The columns of the picker's list, in order, for one option. */
export function pickerColumns(option: IHardware): string[] {
  return [
    option.label,
    gpuText(option),
    option.gpu_memory_gib ? `${option.gpu_memory_gib} GiB` : '',
    option.vcpus !== null ? String(option.vcpus) : '',
    option.memory_gib !== null ? `${option.memory_gib} GiB` : '',
    option.price_per_hour === null ? 'price unknown' : formatPrice(option.price_per_hour),
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
  gpu_mem: o => o.gpu_memory_gib,
  gpus: o => o.gpu_count,
  vcpu: o => o.vcpus,
  ram: o => o.memory_gib,
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

/**
 * How a person reads a machine: its hardware and where it is (`A10G 24 GiB · gpu-box`),
 * as the toolbar says it; the target's name (an id of the config) only when neither
 * is known.
 */
export function machineLabel(machine: Pick<IMachine, 'name' | 'hardware' | 'where'>): string {
  const parts = [machine.hardware, machine.where].filter(part => part && part.trim());
  return parts.length ? [...new Set(parts)].join(' · ') : machine.name;
}

/** The status bar's text for a machine: `A10G 24 GiB · gpu-box · running · free`. */
export function machineStatusText(machine: IMachine, now: number = Date.now() / 1000): string {
  const label = machineLabel(machine);
  if (machine.state === 'reconnecting' && machine.link_down_since) {
    const down = Math.max(0, Math.round(now - machine.link_down_since));
    return `${label} · reconnecting · ${down} s`;
  }
  const parts = [label, machine.state];
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

/** Machine states in which a machine is paid for by the hour. */
export const BILLED_STATES = ['running', 'reconnecting'];

/**
 * What the user's machines cost together: `$1.21/h now · $3.40 so far`; the machines
 * whose price is not known are named (`+ aws-x: price unknown`); '' without machines.
 */
export function totalText(machines: IMachine[]): string {
  if (!machines.length) {
    return '';
  }
  const billed = machines.filter(m => BILLED_STATES.includes(m.state));
  const perHour = billed.reduce((sum, m) => sum + (m.price_per_hour ?? 0), 0);
  const unknown = billed.filter(m => m.price_per_hour === null).map(machineLabel);
  const spent = machines.reduce((sum, m) => sum + (m.cost_so_far ?? 0), 0);
  const parts = [`$${perHour.toFixed(2)}/h now`];
  if (unknown.length) {
    parts[0] += ` + ${unknown.join(', ')}: price unknown`;
  }
  if (spent > 0) {
    parts.push(`${formatCost(spent)} so far`);
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
