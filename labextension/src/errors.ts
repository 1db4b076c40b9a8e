/**
 * The one error dialog of the extension: the whole message and hint (wrapped, never cut),
 * each command the error quotes in a block with a Copy button, and for an SSH host whose
 * key is not known yet, its real address, the key's fingerprint and a "Trust this key"
 * button that records the key and retries what failed.
 */
import { Clipboard, Dialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareAPI } from './api';
import { IErrorDetails, IHostKey, errorDetails } from './errordetails';

/** What the trust route answers. */
export interface ITrustResult {
  destination: string;
  host: string;
  port: number;
  fingerprint: string;
  algorithm: string;
  known_hosts: string;
  already_trusted: boolean;
}

/** The dialog's body: message, host key, step, hint, commands, and the OS's text behind
 * a "Details" toggle. */
export class ErrorBody extends Widget {
  constructor(readonly details: IErrorDetails) {
    super();
    this.addClass('jp-RemoteHW-error');
    this.paragraph('jp-RemoteHW-error-message', details.message);
    const key = details.hostKey;
    if (key) {
      const list = document.createElement('dl');
      list.className = 'jp-RemoteHW-hostKey';
      const row = (term: string, value: string): void => {
        const dt = document.createElement('dt');
        dt.textContent = term;
        const dd = document.createElement('dd');
        const code = document.createElement('code');
        code.textContent = value;
        dd.appendChild(code);
        list.append(dt, dd);
      };
      row(
        'Host',
        key.destination === key.host
          ? `${key.host}:${key.port}`
          : `${key.destination} → ${key.host}:${key.port}`
      );
      row('Key fingerprint', key.fingerprint);
      this.node.appendChild(list);
      this.paragraph(
        'jp-RemoteHW-error-hint',
        'Trust it only if it matches the fingerprint the machine itself shows ' +
          '(ssh-keygen -lf on its /etc/ssh/ssh_host_*_key.pub files).'
      );
    }
    if (details.step && !details.message.includes(`'${details.step}'`)) {
      this.paragraph('jp-RemoteHW-error-step', `Step: ${details.step}`);
    }
    if (details.hint && !details.message.includes(details.hint)) {
      this.paragraph('jp-RemoteHW-error-hint', `Try: ${details.hint}`);
    }
    if (details.commands.length) {
      const commands = document.createElement('div');
      commands.className = 'jp-RemoteHW-commands';
      for (const command of details.commands) {
        commands.appendChild(commandBlock(command));
      }
      this.node.appendChild(commands);
    }
    if (details.detail) {
      // What the operating system said, for whoever needs it: not in the way of the words.
      const toggle = document.createElement('details');
      toggle.className = 'jp-RemoteHW-error-detail';
      const summary = document.createElement('summary');
      summary.textContent = 'Details';
      const text = document.createElement('pre');
      text.textContent = details.detail;
      toggle.append(summary, text);
      this.node.appendChild(toggle);
    }
  }

  private paragraph(className: string, text: string): void {
    const node = document.createElement('p');
    node.className = className;
    node.textContent = text;
    this.node.appendChild(node);
  }
}

/** A command in a block, with a button that copies it. */
function commandBlock(command: string): HTMLElement {
  const block = document.createElement('div');
  block.className = 'jp-RemoteHW-command';
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  code.textContent = command;
  pre.appendChild(code);
  const copy = document.createElement('button');
  copy.className = 'jp-Button jp-mod-styled jp-mod-reject jp-RemoteHW-copy';
  copy.textContent = 'Copy';
  copy.title = `Copy "${command}"`;
  copy.addEventListener('click', event => {
    event.preventDefault();
    event.stopPropagation();
    Clipboard.copyToSystem(command);
    copy.textContent = 'Copied';
    window.setTimeout(() => (copy.textContent = 'Copy'), 2000);
  });
  block.append(pre, copy);
  return block;
}

/** How {@link showError} can help: trust a host key through `api`, then `retry`. */
export interface IShowErrorOptions {
  api?: HardwareAPI;
  retry?: () => Promise<unknown>;
}

/**
 * Show `error` under `title`. For an unknown SSH host key, with `api`, the dialog offers
 * to trust the key shown (only that key: the server refuses another), then runs `retry`.
 */
export async function showError(
  title: string,
  error: unknown,
  options: IShowErrorOptions = {}
): Promise<void> {
  console.warn('jupyter-remote-hw:', title, error);
  const details = errorDetails(error);
  const key = options.api ? details.hostKey : undefined;
  const buttons = [Dialog.cancelButton({ label: 'Close' })];
  if (key) {
    buttons.push(
      Dialog.okButton({
        label: 'Trust this key',
        caption: `Record ${key.fingerprint} in known_hosts`
      })
    );
  }
  // Escape closes it; Enter presses Close, never "Trust this key".
  const dialog = new Dialog({
    title,
    body: new ErrorBody(details),
    buttons,
    hasClose: true,
    defaultButton: 0
  });
  dialog.addClass('jp-RemoteHW-errorDialog');
  const result = await dialog.launch();
  if (!key || !options.api || !result.button.accept) {
    return;
  }
  try {
    await trustHostKey(options.api, key);
  } catch (failure) {
    await showError(`Trusting the key of ${key.destination} failed`, failure);
    return;
  }
  try {
    await options.retry?.();
  } catch (failure) {
    await showError(title, failure, options);
  }
}

/** Record `key` in known_hosts, if the host still presents it (else the server refuses). */
export function trustHostKey(api: HardwareAPI, key: IHostKey): Promise<ITrustResult> {
  return api.request<ITrustResult>(`hosts/${encodeURIComponent(key.destination)}/trust`, {
    method: 'POST',
    body: JSON.stringify({ fingerprint: key.fingerprint })
  });
}
