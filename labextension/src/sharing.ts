/**
 * Sharing a kernel with a teammate, and joining a kernel a teammate shared:
 * the share dialog, the result dialog with the share file to send, and the
 * "Join shared session" dialog.
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareAPI, HardwareAPIError } from './api';
import { errorText } from './model';
import {
  DEFAULT_SHARE_EXPIRY,
  formatTimeLeft,
  IJoinResult,
  IShareFile,
  IShareRequest,
  IShareResult,
  joinSummary,
  parseShareFile,
  publicKeyProblem,
  roleText,
  SHARE_ROLES,
  sharedKernelText,
  shareFileNote,
  ShareRole,
  shortKernelId
} from './sharemodel';

/** A refused request, shown in the dialog when it opens again. */
interface IProblem {
  message: string;
  field?: string;
}

let fieldCount = 0;

/** A unique id for a form field, so its label points at it. */
function fieldId(name: string): string {
  fieldCount += 1;
  return `jp-RemoteHW-${name}-${fieldCount}`;
}

/** A labelled field: the label, the control, and a hint under it. */
function labelled(
  parent: HTMLElement,
  text: string,
  control: HTMLElement,
  hint?: string
): HTMLElement {
  const row = document.createElement('div');
  row.className = 'jp-RemoteHW-field';
  const label = document.createElement('label');
  label.textContent = text;
  control.id = control.id || fieldId('field');
  label.htmlFor = control.id;
  row.appendChild(label);
  row.appendChild(control);
  if (hint) {
    const small = document.createElement('div');
    small.className = 'jp-RemoteHW-hint';
    small.id = fieldId('hint');
    small.textContent = hint;
    control.setAttribute('aria-describedby', small.id);
    row.appendChild(small);
  }
  parent.appendChild(row);
  return row;
}

/** A form's opening paragraph, then its error area. */
function formHead(form: HTMLElement, intro: string, problem: IProblem | null): void {
  const text = document.createElement('p');
  text.textContent = intro;
  form.appendChild(text);
  problemNode(form, problem);
}

/** A styled text area for pasted keys and files (no spell checking). */
function textArea(
  className: string,
  rows: number,
  placeholder: string,
  value: string
): HTMLTextAreaElement {
  const area = document.createElement('textarea');
  area.className = `jp-mod-styled ${className}`;
  area.rows = rows;
  area.spellcheck = false;
  area.placeholder = placeholder;
  area.value = value;
  return area;
}

/** The error area of a form, filled when the dialog opens again after a refusal. */
function problemNode(parent: HTMLElement, problem: IProblem | null): void {
  // A field the user edits no longer reads as the one at fault.
  parent.addEventListener('input', event => {
    const target = event.target as HTMLElement;
    target.removeAttribute('aria-invalid');
    target.closest('fieldset')?.removeAttribute('aria-invalid');
  });
  const node = document.createElement('div');
  node.className = 'jp-RemoteHW-formError';
  node.setAttribute('role', 'alert');
  node.textContent = problem?.message ?? '';
  node.hidden = !problem;
  parent.appendChild(node);
}

/** A file picker that puts the picked file's text into `target`. */
function filePicker(accept: string, label: string, target: HTMLTextAreaElement): HTMLInputElement {
  const input = document.createElement('input');
  input.type = 'file';
  input.accept = accept;
  input.className = 'jp-RemoteHW-filePicker';
  input.setAttribute('aria-label', label);
  input.addEventListener('change', () => {
    const file = input.files?.[0];
    if (!file) {
      return;
    }
    void file.text().then(text => {
      target.value = text.trim();
      target.dispatchEvent(new Event('input'));
    });
  });
  return input;
}

/** The share dialog's values. */
export interface IShareForm {
  public_key: string;
  role: ShareRole;
  expires: string;
}

/** The share dialog's body: the teammate's key, the role and the expiry. */
export class ShareBody extends Widget implements Dialog.IBodyWidget<IShareForm> {
  constructor(
    readonly machine: string,
    readonly notebook: string | undefined,
    readonly kernelId: string,
    values: IShareForm,
    problem: IProblem | null
  ) {
    super();
    this.addClass('jp-RemoteHW-form');
    this.addClass('jp-RemoteHW-shareForm');
    formHead(
      this.node,
      `${notebook ? `The kernel of ${notebook}` : `Kernel ${shortKernelId(kernelId)}`} on ${machine}. The host's sshd lets the teammate's ` +
        'key reach this kernel only, as the role allows; you can revoke the share at any time.',
      problem
    );

    this.key = textArea(
      'jp-RemoteHW-publicKey',
      3,
      'ssh-ed25519 AAAA… ada@laptop',
      values.public_key
    );
    const keyRow = labelled(
      this.node,
      "Teammate's public key",
      this.key,
      'their .pub file, one line (never a private key)'
    );
    keyRow.appendChild(filePicker('.pub,text/plain', 'Pick their .pub file', this.key));

    const roles = document.createElement('fieldset');
    roles.className = 'jp-RemoteHW-roles';
    const legend = document.createElement('legend');
    legend.textContent = 'Role';
    roles.appendChild(legend);
    const group = fieldId('role');
    for (const { role, text } of SHARE_ROLES) {
      const label = document.createElement('label');
      const radio = document.createElement('input');
      radio.type = 'radio';
      radio.name = group;
      radio.value = role;
      radio.checked = role === values.role;
      label.appendChild(radio);
      const span = document.createElement('span');
      span.textContent = text;
      label.appendChild(span);
      roles.appendChild(label);
    }
    this.node.appendChild(roles);

    this.expires = document.createElement('input');
    this.expires.type = 'text';
    this.expires.className = 'jp-mod-styled jp-RemoteHW-expires';
    this.expires.value = values.expires;
    this.expires.spellcheck = false;
    labelled(
      this.node,
      'Expires after',
      this.expires,
      'e.g. 30m, 8h, 2d, 1h30m; sshd refuses the key after that'
    );

    const fields: Record<string, HTMLElement | null> = {
      public_key: this.key,
      role: roles,
      expires: this.expires
    };
    const invalid = problem?.field ? fields[problem.field] : null;
    invalid?.setAttribute('aria-invalid', 'true');
  }

  readonly key: HTMLTextAreaElement;
  readonly expires: HTMLInputElement;

  getValue(): IShareForm {
    const checked = this.node.querySelector<HTMLInputElement>('input[type=radio]:checked');
    return {
      public_key: this.key.value.trim(),
      role: (checked?.value as ShareRole) ?? 'viewer',
      expires: this.expires.value.trim() || DEFAULT_SHARE_EXPIRY
    };
  }
}

/** Save the share file in the user's downloads, under the name the server gave. */
export function downloadShareFile(file: IShareFile, filename: string): void {
  const blob = new Blob([JSON.stringify(file, null, 2) + '\n'], { type: 'application/json' });
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  link.style.display = 'none';
  document.body.appendChild(link);
  link.click();
  link.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** The result dialog's body: what was shared, the share file, and how to send it. */
export class ShareResultBody extends Widget {
  constructor(
    readonly result: IShareResult,
    readonly names: { kernel?: string; machine?: string } = {}
  ) {
    super();
    this.addClass('jp-RemoteHW-form');
    this.addClass('jp-RemoteHW-shareResult');
    const { share, share_file: file, filename } = result;
    const facts = document.createElement('dl');
    const now = Date.now() / 1000;
    const rows: [string, string][] = [
      ['Share id', share.share_id],
      ['Teammate', `${share.teammate} (${share.fingerprint})`],
      ['Role', roleText(share.role)],
      ['Kernel', sharedKernelText(share, this.names)],
      [
        'Expires',
        `${new Date(share.expires * 1000).toLocaleString()} (${formatTimeLeft(share.expires, now)})`
      ]
    ];
    for (const [term, value] of rows) {
      const dt = document.createElement('dt');
      dt.textContent = term;
      const dd = document.createElement('dd');
      dd.textContent = value;
      dd.dataset.term = term;
      facts.appendChild(dt);
      facts.appendChild(dd);
    }
    this.node.appendChild(facts);

    const note = document.createElement('p');
    note.className =
      'jp-RemoteHW-shareNote' + (share.role === 'collaborator' ? ' jp-mod-warn' : '');
    note.setAttribute('role', 'note');
    note.textContent = shareFileNote(share.role);
    this.node.appendChild(note);

    const download = document.createElement('button');
    download.type = 'button';
    download.className = 'jp-mod-styled jp-mod-accept jp-RemoteHW-download';
    download.textContent = 'Download share file';
    download.setAttribute('aria-label', `Download share file ${filename}`);
    download.addEventListener('click', () => downloadShareFile(file, filename));
    this.node.appendChild(download);

    const then = document.createElement('p');
    then.className = 'jp-RemoteHW-hint';
    then.textContent =
      `Send ${filename} to ${share.teammate}. They choose "Join shared session…" in ` +
      `JupyterLab, or run: jupyter remote-hw join ${filename}`;
    this.node.appendChild(then);
  }
}

/** Ask for a teammate's key and a role, share the kernel, and show the result. */
export async function shareKernel(
  api: HardwareAPI,
  machine: string,
  kernelId: string,
  notebook?: string
): Promise<IShareResult | null> {
  let values: IShareForm = { public_key: '', role: 'viewer', expires: DEFAULT_SHARE_EXPIRY };
  let problem: IProblem | null = null;
  for (;;) {
    const answer = await showDialog({
      title: 'Share kernel with a teammate',
      body: new ShareBody(machine, notebook, kernelId, values, problem),
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Share' })],
      focusNodeSelector: 'textarea',
      hasClose: true
    });
    if (!answer.button.accept || !answer.value) {
      return null;
    }
    values = answer.value;
    const local = publicKeyProblem(values.public_key);
    if (local) {
      problem = { message: local, field: 'public_key' };
      continue;
    }
    const request: IShareRequest = { kernel: kernelId, ...values };
    const pending = Notification.emit(
      `Sharing ${notebook ? `the kernel of ${notebook}` : `kernel ${shortKernelId(kernelId)}`}…`,
      'in-progress',
      {
        autoClose: false
      }
    );
    let result: IShareResult;
    try {
      result = await api.share(request);
    } catch (error) {
      problem = asProblem(error);
      continue;
    } finally {
      Notification.dismiss(pending);
    }
    await showDialog({
      title: `Shared with ${result.share.teammate}`,
      body: new ShareResultBody(result, { kernel: notebook, machine }),
      buttons: [Dialog.okButton({ label: 'Done' })],
      focusNodeSelector: '.jp-RemoteHW-download',
      hasClose: true
    });
    return result;
  }
}

/** The join dialog's values. */
export interface IJoinForm {
  text: string;
  identity: string;
}

/** The join dialog's body: the share file (picked or pasted) and an optional key path. */
export class JoinBody extends Widget implements Dialog.IBodyWidget<IJoinForm> {
  constructor(values: IJoinForm, problem: IProblem | null) {
    super();
    this.addClass('jp-RemoteHW-form');
    this.addClass('jp-RemoteHW-joinForm');
    formHead(
      this.node,
      'Attach a kernel here to a kernel a teammate shared with you. Nothing is started on ' +
        'their machine, and shutting your kernel down only detaches it.',
      problem
    );

    this.text = textArea(
      'jp-RemoteHW-shareFileText',
      5,
      '{"format": "jupyter-remote-hw-share", …}',
      values.text
    );
    const picker = filePicker('.json,application/json', 'Pick the share file', this.text);
    labelled(
      this.node,
      'Share file',
      picker,
      'the share file (share-ID.json) your teammate sent you'
    );
    labelled(this.node, 'or paste its JSON', this.text);
    this.summary = document.createElement('div');
    this.summary.className = 'jp-RemoteHW-hint jp-RemoteHW-shareSummary';
    this.summary.setAttribute('aria-live', 'polite');
    this.node.appendChild(this.summary);
    this.text.addEventListener('input', () => this.describe());

    this.identity = document.createElement('input');
    this.identity.type = 'text';
    this.identity.className = 'jp-mod-styled jp-RemoteHW-identity';
    this.identity.spellcheck = false;
    this.identity.placeholder = '~/.ssh/id_ed25519';
    this.identity.value = values.identity;
    labelled(
      this.node,
      'Your private key (optional)',
      this.identity,
      'a path on the Jupyter server: the key whose .pub you gave the owner; by default your usual SSH keys and agent'
    );
    const invalid = problem?.field === 'identity' ? this.identity : problem ? this.text : null;
    invalid?.setAttribute('aria-invalid', 'true');
    this.describe();
  }

  readonly text: HTMLTextAreaElement;
  readonly identity: HTMLInputElement;
  readonly summary: HTMLDivElement;

  /** Say what the share file holds, or why it is not one. */
  describe(): void {
    if (!this.text.value.trim()) {
      this.summary.textContent = '';
      return;
    }
    try {
      const file = parseShareFile(this.text.value);
      this.summary.textContent =
        `Share ${file.share_id} of ${file.owner}: ${roleText(file.role)}, ` +
        formatTimeLeft(file.expires, Date.now() / 1000);
      this.summary.classList.remove('jp-mod-error');
    } catch (error) {
      this.summary.textContent = (error as Error).message;
      this.summary.classList.add('jp-mod-error');
    }
  }

  getValue(): IJoinForm {
    return { text: this.text.value, identity: this.identity.value.trim() };
  }
}

/** Ask for a share file and join it; the server's answer, or null if the user cancelled. */
export async function joinShare(api: HardwareAPI): Promise<IJoinResult | null> {
  let values: IJoinForm = { text: '', identity: '' };
  let problem: IProblem | null = null;
  for (;;) {
    const answer = await showDialog({
      title: 'Join shared session',
      body: new JoinBody(values, problem),
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Join' })],
      focusNodeSelector: 'input[type=file]',
      hasClose: true
    });
    if (!answer.button.accept || !answer.value) {
      return null;
    }
    values = answer.value;
    let file: IShareFile;
    try {
      file = parseShareFile(values.text);
    } catch (error) {
      problem = { message: (error as Error).message, field: 'share_file' };
      continue;
    }
    const pending = Notification.emit(
      `Joining share ${file.share_id} of ${file.owner}…`,
      'in-progress',
      {
        autoClose: false
      }
    );
    try {
      const result = await api.join({
        share_file: file,
        ...(values.identity ? { identity: values.identity } : {})
      });
      Notification.success(joinSummary(result, Date.now() / 1000), { autoClose: 8000 });
      return result;
    } catch (error) {
      problem = asProblem(error);
    } finally {
      Notification.dismiss(pending);
    }
  }
}

function asProblem(error: unknown): IProblem {
  if (error instanceof HardwareAPIError) {
    return { message: errorText(error), field: error.field };
  }
  return { message: String(error) };
}
