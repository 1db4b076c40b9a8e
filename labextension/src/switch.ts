/**
 * Switching a notebook's kernel to other hardware: the carry dialog.
 */
import { Dialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { formatBytes } from './model';
import { IVariable } from './switchmodel';

/** The carry dialog's body: the variables with checkboxes; its value is the names ticked. */
export class CarryBody extends Widget implements Dialog.IBodyWidget<string[]> {
  constructor(readonly variables: IVariable[], ticked: boolean) {
    super();
    this.addClass('jp-RemoteHW-carry');
    const intro = document.createElement('p');
    intro.textContent = 'Carry these variables to the new kernel:';
    this.node.appendChild(intro);
    const list = document.createElement('ul');
    for (const variable of variables) {
      const item = document.createElement('li');
      const label = document.createElement('label');
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.checked = ticked;
      box.value = variable.name;
      label.appendChild(box);
      const text = document.createElement('span');
      text.textContent = ` ${variable.name}  (${variable.type}, ${formatBytes(variable.nbytes)})`;
      label.appendChild(text);
      item.appendChild(label);
      list.appendChild(item);
    }
    this.node.appendChild(list);
  }

  getValue(): string[] {
    return Array.from(this.node.querySelectorAll('input[type=checkbox]'))
      .filter(box => (box as HTMLInputElement).checked)
      .map(box => (box as HTMLInputElement).value);
  }
}
