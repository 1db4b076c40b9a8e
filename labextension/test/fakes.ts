/**
 * What the unit tests load instead of JupyterLab's and Lumino's widget packages, which
 * jest cannot load (ES modules) or jsdom cannot run (browser events). A test file says
 * `jest.mock('@lumino/widgets', () => require('./fakes').luminoWidgets)`, and so on.
 */

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
