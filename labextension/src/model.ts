/**
 * What the hardware API sends, and the logic of the views over it: labels,
 * search, sizes, prices, costs and launch progress. Free of DOM and of
 * JupyterLab, so it is unit tested on its own.
 */
import type { IMachineKernel } from './kernelrows';

export type { IMachineKernel } from './kernelrows';

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
  source: string;
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
 * (`2 of 2 GPUs free on 1 node`), `ready`, or why not.
 */
export function availabilityText(option: IHardware): string {
  if (!option.usable) {
    return option.reason || option.why_not || 'not available';
  }
  return option.machine_state || option.availability || 'ready';
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

/** The status bar's text for a machine: `ssh-box running · free · 2 kernels`. */
export function machineStatusText(machine: IMachine, now: number = Date.now() / 1000): string {
  if (machine.state === 'reconnecting' && machine.link_down_since) {
    const down = Math.max(0, Math.round(now - machine.link_down_since));
    return `${machine.name} reconnecting to ${machine.where} · ${down} s`;
  }
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

/** What a share lets the teammate do. */
export type ShareRole = 'viewer' | 'collaborator';

/** One join of a share, as the owner's ledger records it. */
export interface IShareJoin {
  time: number;
  detail: string;
}

/** One row of `GET /jupyter-remote-hw/api/shares`. */
export interface IShare {
  share_id: string;
  role: ShareRole;
  teammate: string;
  fingerprint: string;
  kernel_id: string;
  target: string;
  created: number;
  expires: number;
  revoked: number | null;
  state: 'active' | 'expired' | 'revoked';
  joins: IShareJoin[];
}

/** The share file the teammate joins with (see docs/sharing.md). */
export interface IShareFile {
  format: string;
  version: number;
  share_id: string;
  role: ShareRole;
  kernel_id: string;
  owner: string;
  host: string;
  port: number;
  user: string;
  expires: number;
  [key: string]: unknown;
}

/** What the owner asks for when sharing a kernel. */
export interface IShareRequest {
  kernel: string;
  public_key: string;
  role: ShareRole;
  expires?: string;
  address?: string;
}

/** The answer to a share: the share, its file and the file's name. */
export interface IShareResult {
  share: IShare;
  share_file: IShareFile;
  filename: string;
}

/** The answer to a revocation. */
export interface IRevokeResult {
  share: IShare;
  closed: number;
}

/** What the teammate sends to join. */
export interface IJoinRequest {
  share_file: IShareFile;
  identity?: string;
}

/** The answer to a join: the attached kernel, already started. */
export interface IJoinResult {
  kernel?: { id: string; name: string; [key: string]: unknown };
  kernel_id?: string;
  kernel_name: string;
  display_name: string;
  role: ShareRole;
  owner: string;
  expires: number;
}

/** The kernel a join started, to open a notebook on: `{id, name}`. */
export function joinedKernel(result: IJoinResult): { id: string; name: string } {
  const id = result.kernel?.id ?? result.kernel_id;
  if (!id) {
    throw new Error('The server joined the share but named no kernel to open.');
  }
  return { id, name: result.kernel?.name ?? result.kernel_name };
}

/** The share file's `format` field. */
export const SHARE_FILE_FORMAT = 'jupyter-remote-hw-share';

/** The default lifetime of a share. */
export const DEFAULT_SHARE_EXPIRY = '8h';

/** Each role and what it lets the teammate do, in the order the dialog offers them. */
export const SHARE_ROLES: { role: ShareRole; text: string }[] = [
  { role: 'viewer', text: 'viewer: sees outputs only' },
  { role: 'collaborator', text: 'collaborator: runs code, sees variables' }
];

/** A role as people read it: `viewer: sees outputs only`. */
export function roleText(role: string): string {
  return SHARE_ROLES.find(r => r.role === role)?.text ?? role;
}

/** The first characters of a kernel id, as the CLI shows them. */
export function shortKernelId(kernelId: string): string {
  return kernelId.slice(0, 8);
}

/** Time until `expires` (epoch seconds): `7 h 59 min left`, or `expired`. */
export function formatTimeLeft(expires: number, nowSeconds: number): string {
  const left = expires - nowSeconds;
  if (left <= 0) {
    return 'expired';
  }
  return `${formatDuration(left)} left`;
}

/** Time since `time` (epoch seconds): `just now`, `12 min ago`, `1 h 05 min ago`. */
export function formatAgo(time: number, nowSeconds: number): string {
  const since = nowSeconds - time;
  if (since < 60) {
    return 'just now';
  }
  return `${formatDuration(since)} ago`;
}

/** Who joined a share and when: `not joined yet`, `2 joins, last 3 min ago`. */
export function joinsText(share: IShare, nowSeconds: number): string {
  const count = share.joins.length;
  if (!count) {
    return 'not joined yet';
  }
  const last = Math.max(...share.joins.map(j => j.time));
  return `${count} join${count === 1 ? '' : 's'}, last ${formatAgo(last, nowSeconds)}`;
}

/** The shares still in force at `nowSeconds`, newest first. */
export function activeShares(shares: IShare[], nowSeconds: number): IShare[] {
  return shares
    .filter(s => s.state === 'active' && s.revoked === null && s.expires > nowSeconds)
    .sort((a, b) => b.created - a.created);
}

/** The facts line of a share in the panel: kernel, machine, time left, joins. */
export function shareFacts(share: IShare, nowSeconds: number): string {
  return [
    `kernel ${shortKernelId(share.kernel_id)} on ${share.target}`,
    formatTimeLeft(share.expires, nowSeconds),
    joinsText(share, nowSeconds)
  ].join(' · ');
}

/**
 * Why a teammate's public key cannot be sent as it is, or null when it can:
 * the server checks the key itself; this only keeps an empty field or a
 * private key (which must never leave the machine it was pasted on) from going out.
 */
export function publicKeyProblem(text: string): string | null {
  const key = text.trim();
  if (!key) {
    return "Paste the teammate's public key (their .pub file, one line) or pick the file.";
  }
  if (/PRIVATE KEY/.test(key)) {
    return 'This is a private key: nothing was sent. Ask your teammate for their public key (their .pub file, one line).';
  }
  return null;
}

/** A share file from its text, or an error saying why it is not one. */
export function parseShareFile(text: string): IShareFile {
  const trimmed = text.trim();
  if (!trimmed) {
    throw new Error('Pick the share file your teammate sent you, or paste its JSON.');
  }
  let data: unknown;
  try {
    data = JSON.parse(trimmed);
  } catch (error) {
    throw new Error(`The share file is not JSON (${(error as Error).message}).`);
  }
  if (
    typeof data !== 'object' ||
    data === null ||
    Array.isArray(data) ||
    (data as { format?: unknown }).format !== SHARE_FILE_FORMAT
  ) {
    throw new Error(`This is not a share file: its "format" is not "${SHARE_FILE_FORMAT}".`);
  }
  return data as IShareFile;
}

/** What the owner must know before sending a share file. */
export function shareFileNote(role: string, owner = 'you'): string {
  if (role === 'collaborator') {
    return (
      "This file holds the kernel's key: whoever has it and the teammate's private key " +
      `runs code as ${owner} on the machine. Send it privately (a direct message, not a shared channel).`
    );
  }
  return "This file holds no kernel key: with it, the teammate sees the kernel's outputs only.";
}

/** The summary of a join: `Attached to the kernel root@box shared, as viewer; 7 h 59 min left.` */
export function joinSummary(result: IJoinResult, nowSeconds: number): string {
  return (
    `Attached to the kernel ${result.owner} shared, as ${result.role}; ` +
    `${formatTimeLeft(result.expires, nowSeconds)}.`
  );
}

/** The prefix of the kernelspecs that joining a share installs. */
export const SHARED_KERNEL_PREFIX = 'remote-share-';

/** The notebook toolbar's hardware item on a notebook attached to a shared kernel. */
export const SHARED_SESSION_LABEL = 'Shared session';

/** Whether a kernel attaches to a teammate's shared kernel. */
export function isSharedKernel(kernelName: string | null | undefined): boolean {
  return !!kernelName && kernelName.startsWith(SHARED_KERNEL_PREFIX);
}

/** Text without terminal colour codes (tracebacks carry them). */
export function stripAnsi(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '');
}

/** An output of the shared kernel that another client's request caused. */
export interface ISharedOutput {
  kind: 'input' | 'stdout' | 'stderr' | 'result' | 'error';
  text: string;
  /** An image to show instead of the text: its MIME type and base64 data. */
  image?: { mime: string; data: string };
}

/** The image types the shared outputs view shows (never HTML or scripts from the kernel). */
const SHARED_IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif'];

/** A kernel message, as far as the shared outputs view reads it. */
export interface IIOPubLike {
  header: { msg_type: string };
  parent_header: { session?: string } | Record<string, never>;
  content: any;
}

/**
 * What to show for an IOPub message of a shared kernel, or null: only the
 * outputs and inputs of other clients' requests (`ownSession` is this page's
 * kernel client id), as text or an image, never as HTML.
 */
export function sharedOutput(msg: IIOPubLike, ownSession: string): ISharedOutput | null {
  const session = (msg.parent_header as { session?: string }).session;
  if (!session || session === ownSession) {
    return null;
  }
  const content = msg.content ?? {};
  switch (msg.header.msg_type) {
    case 'execute_input': {
      const count = content.execution_count;
      return { kind: 'input', text: `In [${count ?? ' '}]: ${content.code ?? ''}` };
    }
    case 'stream':
      return { kind: content.name === 'stderr' ? 'stderr' : 'stdout', text: content.text ?? '' };
    case 'execute_result':
    case 'display_data': {
      const data: Record<string, unknown> = content.data ?? {};
      const mime = SHARED_IMAGE_TYPES.find(type => typeof data[type] === 'string');
      const text = typeof data['text/plain'] === 'string' ? (data['text/plain'] as string) : '';
      if (mime) {
        return { kind: 'result', text, image: { mime, data: data[mime] as string } };
      }
      return text ? { kind: 'result', text } : null;
    }
    case 'error': {
      const trace: string[] = content.traceback ?? [];
      const text = trace.length ? trace.join('\n') : `${content.ename}: ${content.evalue}`;
      return { kind: 'error', text: stripAnsi(text) };
    }
    default:
      return null;
  }
}
