/**
 * What the unit tests load instead of JupyterLab's and Lumino's widget packages, which
 * jest cannot load (ES modules) or jsdom cannot run (browser events). A test file says
 * `jest.mock('@lumino/widgets', () => require('./fakes').luminoWidgets)`, and so on.
 * It also makes the machines and kernels the listing holds (`fakeMachine`, `fakeKernel`).
 */
import type { IMachine, IMachineKernel } from '../src/model';

/** A machine as the machines listing has it: a running SSH host, free, no kernel yet. */
export function fakeMachine(overrides: Partial<IMachine> = {}): IMachine {
  return {
    name: 'ssh-box',
    provider: 'ssh',
    hardware: 'A10G 24 GiB',
    where: 'box',
    state: 'running',
    kernels: [],
    price_per_hour: 0,
    cost_so_far: 0,
    idle_stop_in: null,
    actions: ['start', 'terminate'],
    shareable: true,
    ...overrides
  };
}

/** A kernel as a machine lists it: a notebook's, idle. */
export function fakeKernel(overrides: Partial<IMachineKernel> = {}): IMachineKernel {
  return {
    id: 'k-1',
    owner: 'server',
    execution_state: 'idle',
    state: 'idle',
    kernel_name: 'remote-hw-ssh-box',
    display_name: 'Python 3 (ipykernel)',
    path: 'a.ipynb',
    started: 1,
    uptime_seconds: 1,
    cost_so_far: 0,
    ...overrides
  };
}

/** A widget that is a plain node. */
export class FakeWidget {
  node: HTMLElement;
  isDisposed = false;

  constructor(options: { node?: HTMLElement } = {}) {
    this.node = options.node ?? document.createElement('div');
  }

  addClass(name: string): void {
    this.node.classList.add(name);
  }

  setHidden(hidden: boolean): void {
    this.node.hidden = hidden;
  }

  dispose(): void {
    this.isDisposed = true;
    this.node.remove();
  }
}

/** `@lumino/widgets`. */
export const luminoWidgets = { Widget: FakeWidget };

/** `@jupyterlab/apputils`: what our widgets use of it, doing nothing. */
export const apputils = {
  Notification: { warning: jest.fn(), info: jest.fn() },
  Dialog: class {},
  Clipboard: { copyToSystem: jest.fn() },
  showDialog: jest.fn()
};

/** `@jupyterlab/coreutils`. */
export const coreutils = { URLExt: {} };

/** `@jupyterlab/services`. */
export const services = { ServerConnection: {} };
