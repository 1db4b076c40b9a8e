/**
 * The live hardware use of a kernel's host, as GET /jupyter-remote-hw/api/usage/<kernel>
 * answers it, and how it reads in the status bar, its tooltip and the panel's bars.
 * Pure functions, no JupyterLab imports.
 */
import { IHardwareEvent, formatCost, formatPrice } from './model';

/** One GPU's use (nvidia-smi's view); a value it does not know is null. */
export interface IGpuMetrics {
  index: number;
  name: string;
  utilization: number | null;
  memory_used_gib: number | null;
  memory_total_gib: number | null;
}

/** One node's use, in an allocation of several nodes; `error` where it was not read. */
export interface INodeMetrics {
  node: string;
  time?: number;
  cpu?: { percent: number | null; count: number };
  memory?: { used_gib: number; total_gib: number; percent: number } | null;
  gpus?: IGpuMetrics[];
  warnings?: string[];
  error?: string;
}

/** The hardware use under one kernel. */
export interface IKernelMetrics {
  kernel_id: string;
  /** The hardware target; null for a kernel that runs on this machine but is not ours. */
  target: string | null;
  hardware: string;
  where: string;
  /** When it was read, in epoch seconds. */
  time: number;
  cpu: { percent: number | null; count: number };
  load: number[] | null;
  memory: { used_gib: number; total_gib: number; percent: number } | null;
  gpus: IGpuMetrics[];
  kernel: { pid: number; cpu_percent: number | null; memory_gib: number } | null;
  warnings: string[];
  price_per_hour: number | null;
  cost_so_far: number | null;
  /** Seconds before the machine's time limit ends it (a SLURM job); absent or null: none. */
  time_left_seconds?: number | null;
  /** Each node's use, the kernel's first, in a SLURM allocation of several nodes. */
  nodes?: INodeMetrics[];
}

/** One bar of the panel's "Hardware" section. */
export interface IMeter {
  /** Short label: `GPU 0`, `GPU 0 memory`, `RAM`, `CPU`. */
  label: string;
  /** 0–100, or null when unknown. */
  percent: number | null;
  /** The value as text: `37%`, `12.1 / 80 GiB`. */
  text: string;
}

/** A size in GiB: one decimal below 10 GiB or for used amounts, whole GiB for big totals. */
export function formatGiB(value: number | null, total = false): string {
  if (value === null) {
    return '?';
  }
  return total && value >= 10 ? value.toFixed(0) : value.toFixed(1);
}

/** A percentage, whole: `37%`; `?%` when unknown. */
export function formatPercent(value: number | null | undefined): string {
  return value === null || value === undefined ? '?%' : `${Math.round(value)}%`;
}

function sum(values: (number | null)[]): number | null {
  return values.some(v => v === null) ? null : values.reduce<number>((a, b) => a + (b ?? 0), 0);
}

/**
 * The GPUs in a few characters: `GPU 37% · 12.1/80 GiB`; several GPUs are summed
 * (mean use): `4 GPUs 52% · 48.4/320 GiB`; none: `no GPU`.
 */
export function gpuSummary(gpus: IGpuMetrics[]): string {
  if (!gpus.length) {
    return 'no GPU';
  }
  const use = sum(gpus.map(g => g.utilization));
  const used = sum(gpus.map(g => g.memory_used_gib));
  const total = sum(gpus.map(g => g.memory_total_gib));
  const name = gpus.length === 1 ? 'GPU' : `${gpus.length} GPUs`;
  const percent = use === null ? null : use / gpus.length;
  return `${name} ${formatPercent(percent)} · ${formatGiB(used)}/${formatGiB(total, true)} GiB`;
}

/** What the machine costs: `$4.10/h · $1.23`, `free`, or `price unknown`. */
export function costSummary(metrics: IKernelMetrics): string {
  const price = formatPrice(metrics.price_per_hour);
  if (!price) {
    return 'price unknown';
  }
  if (price === 'free') {
    return price;
  }
  const cost = formatCost(metrics.cost_so_far);
  return cost ? `${price} · ${cost}` : price;
}

/** The cost as a sentence: `Cost: $4.10/h, $1.23 so far`, `Cost: free (hardware you own)`. */
export function costLine(metrics: IKernelMetrics): string {
  const price = formatPrice(metrics.price_per_hour);
  if (price === 'free') {
    return 'Cost: free (hardware you own)';
  }
  if (!price) {
    return 'Cost: no price known for this hardware';
  }
  return `Cost: ${price}, ${formatCost(metrics.cost_so_far) || '?'} so far`;
}

/** Time before a time limit, as people say it: `45 s`, `9 min`, `1 h 05 min`. */
export function formatTimeLeft(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** Whether an event is a scheduler's warning that a machine's time limit is near. */
export function isTimeLimitWarning(event: IHardwareEvent): boolean {
  return (
    event.type === 'launch' &&
    event.step === 'time limit' &&
    typeof event.detail === 'string' &&
    event.detail !== ''
  );
}

/** `9 min left` when the machine has a time limit, else ''. */
export function timeLeftText(metrics: IKernelMetrics): string {
  const left = metrics.time_left_seconds;
  return left === null || left === undefined ? '' : `${formatTimeLeft(left)} left`;
}

/** The status bar's text: `GPU 37% · 12.1/80 GiB | RAM 6.2/31 GiB | CPU 14% | $4.10/h · $1.23`,
 * then the time left on a machine with a time limit (`| 9 min left`). */
export function metricsText(metrics: IKernelMetrics): string {
  const parts = [gpuSummary(metrics.gpus)];
  if (metrics.memory) {
    parts.push(
      `RAM ${formatGiB(metrics.memory.used_gib)}/${formatGiB(metrics.memory.total_gib, true)} GiB`
    );
  }
  parts.push(`CPU ${formatPercent(metrics.cpu.percent)}`);
  parts.push(costSummary(metrics));
  const left = timeLeftText(metrics);
  if (left) {
    parts.push(left);
  }
  return parts.join(' | ');
}

/** The status bar's tooltip: where, every GPU, memory, CPU, the kernel's own use, cost. */
export function metricsTooltip(metrics: IKernelMetrics, now: Date = new Date()): string {
  const lines = [
    `Hardware of this notebook's kernel: ${metrics.hardware} · ${metrics.where}` +
      (metrics.target ? ` (${metrics.target})` : '')
  ];
  if (!metrics.gpus.length) {
    lines.push('No GPU: the host has no nvidia-smi, or it lists none');
  }
  for (const gpu of metrics.gpus) {
    lines.push(
      `GPU ${gpu.index} ${gpu.name}: ${formatPercent(gpu.utilization)} busy, ` +
        `${formatGiB(gpu.memory_used_gib)} of ${formatGiB(gpu.memory_total_gib)} GiB in use`
    );
  }
  if (metrics.memory) {
    lines.push(
      `RAM: ${formatGiB(metrics.memory.used_gib)} of ${formatGiB(metrics.memory.total_gib)} GiB ` +
        `in use (${formatPercent(metrics.memory.percent)})`
    );
  }
  const cpus = `${metrics.cpu.count} CPU${metrics.cpu.count === 1 ? '' : 's'}`;
  const load = metrics.load ? `; load ${metrics.load.map(v => v.toFixed(2)).join(' ')}` : '';
  lines.push(`CPU: ${formatPercent(metrics.cpu.percent)} of ${cpus}${load}`);
  if (metrics.kernel) {
    lines.push(
      `Kernel process ${metrics.kernel.pid}: ${formatPercent(metrics.kernel.cpu_percent)} of a ` +
        `CPU, ${formatGiB(metrics.kernel.memory_gib)} GiB`
    );
  }
  for (const node of metrics.nodes ?? []) {
    lines.push(`Node ${node.node}: ${nodeSummary(node)}`);
  }
  lines.push(costLine(metrics));
  if (timeLeftText(metrics)) {
    lines.push(`Time limit: ${timeLeftText(metrics)}; the kernel ends with the allocation`);
  }
  for (const warning of metrics.warnings) {
    lines.push(`⚠ ${warning}`);
  }
  lines.push(`Read ${Math.max(0, Math.round(now.getTime() / 1000 - metrics.time))} s ago`);
  return lines.join('\n');
}

/** One node's use in a line: `GPU 37% · 12.1/80 GiB | RAM 6.2/31 GiB | CPU 14%`. */
export function nodeSummary(node: INodeMetrics): string {
  if (node.error) {
    return node.error;
  }
  const parts = [node.gpus?.length ? gpuSummary(node.gpus) : 'no GPU'];
  if (node.memory) {
    parts.push(
      `RAM ${formatGiB(node.memory.used_gib)}/${formatGiB(node.memory.total_gib, true)} GiB`
    );
  }
  parts.push(`CPU ${formatPercent(node.cpu?.percent)}`);
  return parts.join(' | ');
}

/** The bars of one host's use: each GPU's use and memory, then RAM and CPU, each label
 * after `prefix` (a node's name in an allocation of several). */
function hostMeters(
  gpus: IGpuMetrics[],
  memory: IKernelMetrics['memory'] | undefined,
  cpu: number | null | undefined,
  prefix = ''
): IMeter[] {
  const result: IMeter[] = [];
  for (const gpu of gpus) {
    const label = prefix + (gpus.length === 1 ? 'GPU' : `GPU ${gpu.index}`);
    result.push({ label, percent: gpu.utilization, text: formatPercent(gpu.utilization) });
    const used =
      gpu.memory_used_gib !== null && gpu.memory_total_gib
        ? (100 * gpu.memory_used_gib) / gpu.memory_total_gib
        : null;
    result.push({
      label: `${label} memory`,
      percent: used,
      text: `${formatGiB(gpu.memory_used_gib)} / ${formatGiB(gpu.memory_total_gib, true)} GiB`
    });
  }
  if (memory) {
    result.push({
      label: `${prefix}RAM`,
      percent: memory.percent,
      text: `${formatGiB(memory.used_gib)} / ${formatGiB(memory.total_gib, true)} GiB`
    });
  }
  result.push({ label: `${prefix}CPU`, percent: cpu ?? null, text: formatPercent(cpu) });
  return result;
}

/** The panel's bars: each GPU's use and memory, then RAM and CPU; in an allocation of
 * several nodes, those of each node, labelled with its name. */
export function meters(metrics: IKernelMetrics): IMeter[] {
  if (!metrics.nodes?.length) {
    return hostMeters(metrics.gpus, metrics.memory, metrics.cpu.percent);
  }
  const result: IMeter[] = [];
  for (const node of metrics.nodes) {
    const prefix = `${node.node} `;
    if (node.error) {
      result.push({ label: `${prefix}use`, percent: null, text: node.error });
      continue;
    }
    result.push(...hostMeters(node.gpus ?? [], node.memory, node.cpu?.percent, prefix));
  }
  return result;
}
