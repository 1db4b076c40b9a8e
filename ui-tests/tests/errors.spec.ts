/**
 * The error dialog, with an SSH host whose key is not known yet ("newbox": the loopback
 * sshd under an alias whose known_hosts file does not list its key, see serve.py): the
 * dialog names the real address and the key's fingerprint, shows the whole text with
 * copyable commands, and "Trust this key" records the key and starts the kernel there.
 */
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';
const ERROR_DIALOG = '.jp-RemoteHW-errorDialog';
/** JupyterLab's log (run.sh writes it). */
const SERVER_LOG = path.resolve(__dirname, '..', 'server.log');

/** What serve.py wrote of the untrusted host (run.sh names the file). */
interface INewbox {
  address: string;
  port: number;
  fingerprint: string;
  known_hosts: string;
  known_hosts_line: string;
}

function newbox(): INewbox {
  const file = process.env.JRHW_UI_NEWBOX;
  if (!file) {
    throw new Error('JRHW_UI_NEWBOX is not set: run the UI tests with ui-tests/run.sh');
  }
  return JSON.parse(fs.readFileSync(file, 'utf-8'));
}

test.use({ autoGoto: true, permissions: ['clipboard-read', 'clipboard-write'] });

test('an unknown host key is shown in full and trusted in one step', async ({ page }) => {
  const host = newbox();
  expect(fs.existsSync(host.known_hosts)).toBe(false);
  await page.notebook.createNew('hostkey.ipynb');
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });

  await item.click();
  const picker = page.locator('.jp-Dialog');
  await picker.locator('input[type=search]').fill('new gpu');
  await picker.locator('tr[data-name="ssh-newbox"]').click();
  await picker.locator('.jp-Dialog-button.jp-mod-accept').click();

  // The real address from ssh_config (not "newbox:22") and the key's fingerprint.
  const dialog = page.locator(ERROR_DIALOG);
  await expect(dialog).toContainText('Switching to New GPU 48 GiB · newbox failed', {
    timeout: 60000
  });
  const where = `${host.address}:${host.port}`;
  await expect(dialog.locator('.jp-RemoteHW-error-message')).toContainText(
    `host key of newbox (${where}) is not known: it presents ssh-ed25519 key ${host.fingerprint}`
  );
  await expect(dialog).not.toContainText('newbox:22');
  const key = dialog.locator('.jp-RemoteHW-hostKey');
  await expect(key).toContainText(`newbox → ${where}`);
  await expect(key).toContainText(host.fingerprint);

  // The whole text shows: nothing cut off, nothing to scroll.
  const body = dialog.locator('.jp-Dialog-body');
  const size = await body.evaluate(node => ({
    scrollHeight: node.scrollHeight,
    clientHeight: node.clientHeight,
    scrollWidth: node.scrollWidth,
    clientWidth: node.clientWidth
  }));
  expect(size.scrollHeight).toBeLessThanOrEqual(size.clientHeight + 1);
  expect(size.scrollWidth).toBeLessThanOrEqual(size.clientWidth + 1);
  for (const paragraph of await dialog.locator('.jp-RemoteHW-error p').all()) {
    await expect(paragraph).toBeInViewport({ ratio: 1 });
  }
  await expect(dialog.locator('.jp-RemoteHW-error-message')).toContainText('then retry.');

  // Each command in its own block, with a Copy button that copies it.
  const commands = dialog.locator('.jp-RemoteHW-command pre');
  await expect(commands).toHaveText([
    'jupyter remote-hw trust newbox',
    `ssh-keyscan -p ${host.port} ${host.address} >> ${host.known_hosts}`,
    'ssh newbox'
  ]);
  const trustCommand = dialog.locator('.jp-RemoteHW-command', { hasText: 'remote-hw trust' });
  await trustCommand.getByRole('button', { name: 'Copy' }).click();
  await expect(trustCommand.getByRole('button')).toHaveText('Copied');
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(
    'jupyter remote-hw trust newbox'
  );
  await expect(trustCommand.getByRole('button')).toHaveText('Copy', { timeout: 5000 });
  await dialog.locator('.jp-Dialog-content').screenshot({
    path: path.join(IMAGES, 'hostkey-dialog.png')
  });

  // Trust: the key goes where OpenSSH would put it, and the switch is tried again.
  await dialog.getByRole('button', { name: 'Trust this key' }).click();
  await expect(item).toHaveText('New GPU 48 GiB · newbox', { timeout: 90000 });
  expect(fs.readFileSync(host.known_hosts, 'utf-8')).toBe(host.known_hosts_line);
  await page.notebook.setCell(0, 'code', "print('on', 'newbox')");
  await page.notebook.runCell(0, true);
  expect((await page.notebook.getCellTextOutput(0))?.join('').trim()).toBe('on newbox');

  // The server reported the user's error in one WARNING line (the rest is INFO or
  // below), without a traceback.
  const log = fs.readFileSync(SERVER_LOG, 'utf-8').split('\n');
  const first = log.findIndex(line => line.includes('host key of newbox'));
  const reported = log.filter(line => /^\[[WEC] /.test(line) && line.includes('host key of newbox'));
  expect(reported).toEqual([expect.stringMatching(/^\[W .*launch on ssh-newbox: connect failed/)]);
  expect(log.slice(first).filter(line => line.includes('Traceback'))).toEqual([]);
});
