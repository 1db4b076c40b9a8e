/**
 * The kernel rows of the "Remote hardware" panel: each kernel named by its notebook
 * and kernel name (`analysis/train.ipynb · Python 3 (ipykernel)`), with its hardware,
 * state, uptime (ticking) and cost so far; its id only as a tooltip. The words are
 * the server's (jupyter_remote_hw/machines/view.py), the ones `jupyter remote-hw list`
 * shows too.
 */
import { formatPrice, type IMachine, type IMachineKernel, machineLabel } from './model';

/** The note under a kernel that someone else can run code in, and its tooltip. */
export const RUN_BY_OTHERS = {
  text: 'Others can run code here',
  title:
    'Shared as collaborator (now or before): variables that come from this kernel are ' +
    'rebuilt only as plain data (c.SharedKernelPulls.allowed_types), never by running code'
};

/** `512 B`, `12.3 MiB`, `1.0 GiB`. */
export function formatBytes(count: number): string {
  const units: [string, number][] = [
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10]
  ];
  for (const [unit, size] of units) {
    if (count >= size) {
      return `${(count / size).toFixed(1)} ${unit}`;
    }
  }
  return `${count} B`;
}

/** How often the rows' uptime and cost are redrawn while the panel shows. */
export const KERNEL_TICK_MS = 1000;

/** How often the listing is fetched again while the panel shows (kernel states change). */
export const LISTING_POLL_MS = 5000;

/** Redraw a polled listing at least this often, though only times moved on (costs, countdowns). */
export const LISTING_REDRAW_MS = 30000;

/** Fields that change with every listing by time alone; the rows count them on themselves. */
const MOVING = new Set(['uptime_seconds', 'cost_so_far', 'idle_stop_in', 'last_seen']);

/** What a listing says apart from times moving on: equal keys need no redraw. */
export function listingKey(machines: IMachine[]): string {
  return JSON.stringify(machines, (key, value) => (MOVING.has(key) ? undefined : value));
}

/**
 * `analysis/train.ipynb · Python 3 (ipykernel)`; a `%%remote` kernel `train.ipynb ·
 * %%remote` (its notebook's, where the server knows it).
 */
export function kernelTitle(kernel: IMachineKernel): string {
  const name = kernel.display_name || kernel.kernel_name || 'kernel';
  if (kernel.owner.startsWith('magic:')) {
    return kernel.path ? `${kernel.path} · %%remote` : `%%remote · ${name}`;
  }
  return `${kernel.path || 'no notebook'} · ${name}`;
}

/** Uptime as a running clock: `45 s`, `12 min 03 s`, `2 h 05 min`. */
export function formatUptime(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60);
  if (minutes < 60) {
    return `${minutes} min ${String(s % 60).padStart(2, '0')} s`;
  }
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** Dollars so far with cents, or fractions of a cent while small: `$0.0042`, `$1.20`. */
export function formatKernelCost(cost: number): string {
  return cost < 1 && cost > 0 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

/**
 * The facts after a kernel's title, `elapsed` seconds after the listing was fetched:
 * hardware, state, uptime and cost (`free` on hardware the user owns).
 */
export function kernelFacts(kernel: IMachineKernel, machine: IMachine, elapsed: number): string[] {
  const saved = kernel.hibernated;
  if (kernel.state === 'hibernated' && saved) {
    // Nothing runs and nothing is billed; the next cell (or Wake) brings it back.
    const facts = [machine.hardware, saved.waking ? 'waking' : 'hibernated'];
    const where = saved.kept_on ? ` on ${saved.kept_on}` : '';
    facts.push(`${formatBytes(saved.bytes)} saved${where}`, '$0/h');
    if (saved.wake_error) {
      facts.push(`last wake failed: ${saved.wake_error}`);
    }
    return facts;
  }
  const facts = [machine.hardware, kernel.state || kernel.execution_state || 'unknown'];
  const base = kernel.uptime_seconds;
  if (base === null || base === undefined) {
    return [...facts, 'uptime unknown'];
  }
  const uptime = base + Math.max(0, elapsed);
  facts.push(`up ${formatUptime(uptime)}`);
  const price = machine.price_per_hour;
  if (price === 0) {
    facts.push(formatPrice(0));
  } else if (price !== null && price !== undefined) {
    facts.push(`${formatKernelCost((price * uptime) / 3600)} so far`);
  } else {
    facts.push('cost unknown');
  }
  return facts;
}

/**
 * One kernel's row: title (a button that opens its notebook, when it has one and
 * `open` is given), facts and, on shareable machines, a "Share…" button.
 *
 * @param fetched - When the listing was fetched (ms, `Date.now()`), for the ticking uptime.
 */
export function kernelRow(
  kernel: IMachineKernel,
  machine: IMachine,
  fetched: number,
  share: (() => void) | null,
  open: ((path: string) => void) | null = null,
  wake: (() => void) | null = null
): HTMLLIElement {
  const row = document.createElement('li');
  row.className = 'jp-RemoteHW-kernel';
  row.dataset.kernelId = kernel.id;
  row.title = `kernel ${kernel.id}` + (kernel.kernel_name ? ` (${kernel.kernel_name})` : '');
  const path = kernel.path;
  const title = document.createElement(open && path ? 'button' : 'div');
  title.className = 'jp-RemoteHW-kernelTitle';
  title.textContent = kernelTitle(kernel);
  if (open && path) {
    title.classList.add('jp-RemoteHW-openNotebook');
    title.title = `Open ${path} (${row.title})`;
    title.addEventListener('click', () => open(path));
  }
  row.appendChild(title);
  const facts = document.createElement('div');
  facts.className = 'jp-RemoteHW-kernelFacts';
  row.appendChild(facts);
  const tick = (now: number): void => {
    facts.textContent = kernelFacts(kernel, machine, (now - fetched) / 1000).join(' · ');
  };
  tick(fetched);
  ticks.set(row, tick);
  if (kernel.run_by_others) {
    const note = document.createElement('div');
    note.className = 'jp-RemoteHW-runByOthers';
    note.textContent = RUN_BY_OTHERS.text;
    note.title = RUN_BY_OTHERS.title;
    row.appendChild(note);
  }
  if (wake && kernel.state === 'hibernated' && !kernel.hibernated?.waking) {
    const button = document.createElement('button');
    button.className = 'jp-mod-styled jp-RemoteHW-wakeKernel';
    button.textContent = 'Wake';
    button.title = 'Start its hardware again and restore its variables (the next cell does too)';
    button.setAttribute('aria-label', `Wake ${kernelTitle(kernel)} on ${machineLabel(machine)}`);
    button.addEventListener('click', wake);
    row.appendChild(button);
  }
  if (share) {
    const button = document.createElement('button');
    button.className = 'jp-mod-styled jp-RemoteHW-shareKernel';
    button.textContent = 'Share…';
    button.setAttribute('aria-label', `Share ${kernelTitle(kernel)} on ${machineLabel(machine)}`);
    button.addEventListener('click', share);
    row.appendChild(button);
  }
  return row;
}

/** Redraw the uptime and cost of every kernel row under `root`. */
export function tickKernelRows(root: HTMLElement, now: number = Date.now()): void {
  root.querySelectorAll<HTMLLIElement>('.jp-RemoteHW-kernel').forEach(row => ticks.get(row)?.(now));
}

const ticks = new WeakMap<HTMLLIElement, (now: number) => void>();
