/**
 * Sharing's part of what the hardware API sends: shares, joins, share files, and the
 * outputs of a shared kernel that another client caused; free of DOM and of
 * JupyterLab, so it is unit tested on its own.
 */
import { formatDuration } from './model';

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

/** How a person reads a share's kernel and machine (its notebook, its hardware). */
export interface IShareNames {
  /** The kernel's notebook, where the machines listing knows it. */
  kernel?: string;
  /** The machine's hardware and place (`A10G 24 GiB · gpu-box`). */
  machine?: string;
}

/** `analysis/train.ipynb on A10G 24 GiB · gpu-box`; ids where the names are not known. */
export function sharedKernelText(share: IShare, names: IShareNames = {}): string {
  const kernel = names.kernel || `kernel ${shortKernelId(share.kernel_id)}`;
  return `${kernel} on ${names.machine || share.target}`;
}

/** The facts line of a share in the panel: kernel, machine, time left, joins. */
export function shareFacts(share: IShare, nowSeconds: number, names: IShareNames = {}): string {
  return [
    sharedKernelText(share, names),
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
