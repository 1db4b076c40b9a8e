/**
 * The live outputs of a shared kernel above a notebook attached to it: what
 * the owner (and other teammates) run there and what it prints, as it happens.
 * A notebook shows only the outputs of its own cells, so without this view a
 * viewer would see nothing of the owner's work.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { ISharedOutput, isSharedKernel, sharedOutput } from './sharemodel';

/** How many outputs the view keeps. */
const KEPT = 200;

/** The shared outputs view of one notebook; hidden unless its kernel is a shared one. */
export class SharedOutputsView extends Widget {
  constructor(readonly sessionContext: ISessionContext) {
    super();
    this.addClass('jp-RemoteHW-sharedOutputs');
    const header = document.createElement('div');
    header.className = 'jp-RemoteHW-sharedOutputsHeader';
    const title = document.createElement('span');
    title.textContent = 'Live outputs of the shared kernel (cells others run)';
    title.id = `jp-RemoteHW-sharedOutputs-${++viewCount}`;
    header.appendChild(title);
    const clear = document.createElement('button');
    clear.type = 'button';
    clear.className = 'jp-mod-styled jp-RemoteHW-sharedOutputsClear';
    clear.textContent = 'Clear';
    clear.setAttribute('aria-label', 'Clear the shared kernel outputs');
    clear.addEventListener('click', () => this.clear());
    header.appendChild(clear);
    this.node.appendChild(header);
    this.list = document.createElement('div');
    this.list.className = 'jp-RemoteHW-sharedOutputsList';
    this.list.setAttribute('role', 'log');
    this.list.setAttribute('aria-labelledby', title.id);
    this.list.tabIndex = 0;
    this.node.appendChild(this.list);
    this.clear();
    sessionContext.kernelChanged.connect(this.follow, this);
    this.follow();
  }

  readonly list: HTMLDivElement;

  /** Forget the outputs shown. */
  clear(): void {
    this.list.textContent = '';
    const empty = document.createElement('div');
    empty.className = 'jp-RemoteHW-sharedOutputsEmpty';
    empty.textContent = 'Nothing yet: outputs of cells others run on this kernel appear here.';
    this.list.appendChild(empty);
  }

  /** Listen to the session's current kernel, and show the view only for a shared one. */
  private follow(): void {
    this._kernel?.iopubMessage.disconnect(this.onMessage, this);
    const kernel = this.sessionContext.session?.kernel ?? null;
    this._kernel = kernel;
    this.setHidden(!isSharedKernel(kernel?.name));
    kernel?.iopubMessage.connect(this.onMessage, this);
  }

  private onMessage(kernel: Kernel.IKernelConnection, msg: KernelMessage.IIOPubMessage): void {
    const output = sharedOutput(msg as any, kernel.clientId);
    if (output) {
      this.add(output);
    }
  }

  /** Show one output, keeping the latest ones, scrolled to the end. */
  add(output: ISharedOutput): void {
    this.list.querySelector('.jp-RemoteHW-sharedOutputsEmpty')?.remove();
    let node: HTMLElement;
    if (output.image) {
      node = document.createElement('img');
      (node as HTMLImageElement).src = `data:${output.image.mime};base64,${output.image.data}`;
      (node as HTMLImageElement).alt = output.text || 'an image output';
    } else {
      node = document.createElement('pre');
      node.textContent = output.text;
    }
    node.className = `jp-RemoteHW-sharedOutput jp-mod-${output.kind}`;
    this.list.appendChild(node);
    while (this.list.children.length > KEPT) {
      this.list.firstElementChild?.remove();
    }
    // Follow the newest output, unless the user is reading the list.
    if (!this.list.contains(document.activeElement)) {
      this.list.scrollTop = this.list.scrollHeight;
    }
  }

  protected onAfterShow(): void {
    this.list.scrollTop = this.list.scrollHeight;
  }

  dispose(): void {
    this._kernel?.iopubMessage.disconnect(this.onMessage, this);
    this.sessionContext.kernelChanged.disconnect(this.follow, this);
    super.dispose();
  }

  private _kernel: Kernel.IKernelConnection | null = null;
}

let viewCount = 0;
