/**
 * Switching a notebook's kernel to other hardware: the carry dialog, which opens
 * at once and lists what will come across (variables that cannot are unticked with
 * the reason, modules to re-import), and the question asked before a switch.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareAPI } from './api';
import { formatBytes } from './model';
import {
  ICarryListing,
  IModule,
  IVariable,
  importText,
  isCarriable,
  moduleProblem,
  modulesIntro,
  nothingToCarry,
  ranksWarning
} from './switchmodel';

/** Milliseconds to wait for the listing before opening the dialog with a spinner. */
const QUIET_WAIT = 300;

/**
 * The carry dialog's body: first "Reading the notebook's variables…", then the
 * variables and modules with checkboxes (or why none can be carried); its value
 * is the names ticked.
 */
export class CarryBody extends Widget implements Dialog.IBodyWidget<string[]> {
  constructor(
    readonly ticked: boolean,
    readonly hardware: string
  ) {
    super();
    this.addClass('jp-RemoteHW-carry');
    this.node.setAttribute('aria-busy', 'true');
    const loading = document.createElement('p');
    loading.className = 'jp-RemoteHW-carryLoading';
    const spinner = document.createElement('span');
    spinner.className = 'jp-RemoteHW-spinner';
    spinner.setAttribute('aria-hidden', 'true');
    loading.append(spinner, " Reading the notebook's variables…");
    this.node.appendChild(loading);
  }

  /** Whether the listing has arrived (or failed). */
  loaded = false;

  /** Show what can be carried. */
  showListing(listing: ICarryListing): void {
    this.node.textContent = '';
    const warning = ranksWarning(listing);
    if (warning) {
      this.paragraph(warning).classList.add('jp-RemoteHW-carryWarning');
    }
    if (!listing.variables.length && !listing.modules.length) {
      this.paragraph('The kernel has no variables or imported modules: nothing to carry.');
    }
    if (listing.variables.length) {
      this.paragraph('Carry these variables to the new kernel:');
      this.node.appendChild(this.list(listing.variables.map(v => this.variableItem(v))));
    }
    if (listing.modules.length) {
      this.paragraph(modulesIntro(listing.modules));
      const list = this.list(listing.modules.map(m => this.moduleItem(m)));
      list.classList.add('jp-RemoteHW-carryModules');
      this.node.appendChild(list);
    }
    this.ready();
  }

  /** Say why nothing can be carried; the switch can go on without. */
  showError(message: string): void {
    this.node.textContent = '';
    const error = this.paragraph(`Variables cannot be carried: ${message}`);
    error.classList.add('jp-RemoteHW-carryError');
    this.paragraph('Switch without them, or cancel.');
    this.ready();
  }

  getValue(): string[] {
    return Array.from(this.node.querySelectorAll('input[type=checkbox]'))
      .map(box => box as HTMLInputElement)
      .filter(box => box.checked && !box.disabled)
      .map(box => box.value);
  }

  protected onAfterAttach(): void {
    this.acceptButton(button => (button.disabled = !this.loaded));
  }

  private ready(): void {
    this.loaded = true;
    this.node.setAttribute('aria-busy', 'false');
    this.acceptButton(button => (button.disabled = false));
  }

  private acceptButton(change: (button: HTMLButtonElement) => void): void {
    const button = this.node.closest('.jp-Dialog-content')?.querySelector('.jp-mod-accept');
    if (button) {
      change(button as HTMLButtonElement);
    }
  }

  private paragraph(text: string): HTMLParagraphElement {
    const p = document.createElement('p');
    p.textContent = text;
    this.node.appendChild(p);
    return p;
  }

  private list(items: HTMLLIElement[]): HTMLUListElement {
    const list = document.createElement('ul');
    list.append(...items);
    return list;
  }

  private item(name: string, text: string, ticked: boolean, reason?: string): HTMLLIElement {
    const item = document.createElement('li');
    item.dataset.name = name;
    const label = document.createElement('label');
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.value = name;
    box.checked = ticked && !reason;
    box.disabled = !!reason;
    label.append(box, ` ${text}`);
    item.appendChild(label);
    if (reason) {
      item.classList.add('jp-mod-disabled');
      const why = document.createElement('span');
      why.className = 'jp-RemoteHW-carryReason';
      why.textContent = `cannot be carried: ${reason}`;
      item.appendChild(why);
      item.title = why.textContent;
    }
    return item;
  }

  private variableItem(variable: IVariable): HTMLLIElement {
    const text = `${variable.name}  (${variable.type}, ${formatBytes(variable.nbytes)})`;
    const reason = isCarriable(variable) ? undefined : variable.reason || 'it cannot be pickled';
    return this.item(variable.name, text, this.ticked, reason);
  }

  private moduleItem(module: IModule): HTMLLIElement {
    return this.item(module.name, importText(module), true, moduleProblem(module, this.hardware));
  }
}

/**
 * Ask which variables and modules to carry to the new kernel on `hardware` (a
 * target's name): the names ticked,
 * [] when there is nothing to carry, null when the user cancelled. The dialog
 * opens at once (within QUIET_WAIT ms) and fills in when the listing arrives.
 */
export async function askCarry(
  api: HardwareAPI,
  sessionId: string,
  hardware: string,
  ticked: boolean
): Promise<string[] | null> {
  const listing = api.variables(sessionId, hardware);
  listing.catch(() => undefined);
  const early = await Promise.race([
    listing.then(
      value => value,
      () => null
    ),
    new Promise<undefined>(resolve => setTimeout(() => resolve(undefined), QUIET_WAIT))
  ]);
  if (early && nothingToCarry(early)) {
    return [];
  }
  const body = new CarryBody(ticked, hardware);
  const dialog = showDialog({
    title: 'Carry to the new kernel',
    body,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Switch' })]
  });
  listing.then(
    value => body.showListing(value),
    error => body.showError(error instanceof Error ? error.message : String(error))
  );
  const result = await dialog;
  return result.button.accept ? body.getValue() : null;
}
