/**
 * Sharing a running kernel with a teammate in a real JupyterLab: the owner
 * shares a kernel on the loopback sshd host ("ssh-testhost") from the machines
 * panel, the teammate joins with the share file and their own key (the key pair
 * serve.py generated, named by JRHW_UI_TEAMMATE_KEY), both see each other's
 * variables, and revoking cuts the teammate off while the owner's kernel runs on.
 */
import { IJupyterLabPageFixture, expect, test } from '@jupyterlab/galata';
import { Page } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';
const DIALOG = '.jp-Dialog';
const PANEL = '#jp-RemoteHW-machines';

const TEAMMATE_KEY = process.env.JRHW_UI_TEAMMATE_KEY || '';

test.use({ autoGoto: true });

test.beforeAll(() => {
  if (!TEAMMATE_KEY || !fs.existsSync(TEAMMATE_KEY)) {
    throw new Error('JRHW_UI_TEAMMATE_KEY names no key: run these tests with ui-tests/run.sh');
  }
});

/** A notebook whose kernel runs on the SSH test host. */
async function ownerNotebook(page: IJupyterLabPageFixture, name: string): Promise<void> {
  await page.notebook.createNew(name);
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });
  await item.click();
  const dialog = page.locator(DIALOG);
  await dialog.locator('input[type=search]').fill('test gpu');
  await dialog.locator('tr[data-name="ssh-testhost"]').click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
}

/** The text output of a cell, trimmed. */
async function output(page: IJupyterLabPageFixture, cell: number): Promise<string> {
  return ((await page.notebook.getCellTextOutput(cell)) ?? []).join('').trim();
}

/** Run `source` in cell 0 of the active notebook; its output. */
async function run(page: IJupyterLabPageFixture, source: string): Promise<string> {
  await page.notebook.setCell(0, 'code', source);
  await page.notebook.runCell(0, true);
  return output(page, 0);
}

/** Share the only kernel on ssh-testhost with the teammate's key; the result dialog. */
async function shareFromPanel(
  page: IJupyterLabPageFixture,
  role: 'viewer' | 'collaborator',
  screenshot?: string,
  mistakes = false
) {
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const panel = page.locator(PANEL);
  await panel.locator('button.jp-RemoteHW-refresh').click();
  const machine = panel.locator('li[data-name="ssh-testhost"]');
  await expect(machine.locator('.jp-RemoteHW-kernel')).toHaveCount(1, { timeout: 30000 });
  await machine.locator('button.jp-RemoteHW-shareKernel').click();
  const dialog = page.locator(DIALOG);
  await expect(dialog.locator('textarea')).toBeFocused();
  if (mistakes) {
    // A private key never leaves the page; a bad key and a bad expiry get the server's
    // message; each time the dialog opens again with what was typed.
    const error = dialog.locator('.jp-RemoteHW-formError');
    await dialog.locator('textarea').fill(fs.readFileSync(TEAMMATE_KEY, 'utf8'));
    await dialog.getByRole('button', { name: 'Share' }).click();
    await expect(error).toContainText('This is a private key: nothing was sent');
    await expect(dialog.locator('textarea')).toHaveAttribute('aria-invalid', 'true');
    await dialog.locator('textarea').fill('ssh-ed25519 AAAA-not-a-key ada@laptop');
    await dialog.getByRole('button', { name: 'Share' }).click();
    await expect(error).toContainText('not an SSH public key', { timeout: 30000 });
    await expect(dialog.locator('textarea')).toHaveValue('ssh-ed25519 AAAA-not-a-key ada@laptop');
    await dialog.locator('input[type=file]').setInputFiles(`${TEAMMATE_KEY}.pub`);
    await dialog.locator('input.jp-RemoteHW-expires').fill('soon');
    await dialog.getByRole('button', { name: 'Share' }).click();
    await expect(dialog.locator('input.jp-RemoteHW-expires')).toHaveAttribute(
      'aria-invalid',
      'true',
      { timeout: 30000 }
    );
    await expect(error).toContainText('soon');
    console.log('server message for expires "soon":', await error.textContent());
    await dialog.locator('input.jp-RemoteHW-expires').fill('8h');
  }
  // The teammate's .pub file, picked like a user would.
  await dialog.locator('input[type=file]').setInputFiles(`${TEAMMATE_KEY}.pub`);
  const pub = fs.readFileSync(`${TEAMMATE_KEY}.pub`, 'utf8').trim();
  await expect(dialog.locator('textarea')).toHaveValue(pub);
  await expect(dialog).toContainText('their .pub file, one line');
  await dialog.getByRole('radio', { name: new RegExp(`^${role}:`) }).check();
  await expect(dialog.locator('input.jp-RemoteHW-expires')).toHaveValue('8h');
  if (screenshot) {
    await dialog.locator('.jp-Dialog-content').screenshot({ path: path.join(IMAGES, screenshot) });
  }
  await dialog.getByRole('button', { name: 'Share' }).click();
  const result = page.locator(DIALOG, { hasText: 'Download share file' });
  await expect(result).toBeVisible({ timeout: 60000 });
  return result;
}

/** Download the share file from the result dialog; its path and JSON. */
async function download(page: Page, result: ReturnType<Page['locator']>, dir: string) {
  const [file] = await Promise.all([
    page.waitForEvent('download'),
    result.locator('button.jp-RemoteHW-download').click()
  ]);
  const saved = path.join(dir, file.suggestedFilename());
  await file.saveAs(saved);
  return { saved, name: file.suggestedFilename(), json: JSON.parse(fs.readFileSync(saved, 'utf8')) };
}

/** Join a share from the command palette, with the teammate's private key. */
async function joinFromPalette(page: IJupyterLabPageFixture, shareFile: string, screenshot?: string) {
  await page.keyboard.press('Control+Shift+c');
  await page.locator('#modal-command-palette input').fill('Join Shared Session');
  await page.keyboard.press('Enter');
  const dialog = page.locator(DIALOG, { hasText: 'Join shared session' });
  await expect(dialog.locator('input[type=file]')).toBeFocused();
  await dialog.locator('input[type=file]').setInputFiles(shareFile);
  await expect(dialog.locator('.jp-RemoteHW-shareSummary')).toContainText('left');
  await dialog.getByLabel('Your private key (optional)').fill(TEAMMATE_KEY);
  if (screenshot) {
    await dialog.locator('.jp-Dialog-content').screenshot({ path: path.join(IMAGES, screenshot) });
  }
  await dialog.getByRole('button', { name: 'Join' }).click();
}

test('share a kernel as collaborator, join it, see each other, revoke', async ({ page }, info) => {
  test.setTimeout(360000);
  await ownerNotebook(page, 'owner.ipynb');
  expect(await run(page, 'x = 41\nprint("owner", x)')).toBe('owner 41');

  // Share from the panel; the result says what the file holds.
  const result = await shareFromPanel(page, 'collaborator', 'share-dialog.png');
  await expect(result.locator('dd[data-term="Role"]')).toHaveText(
    'collaborator: runs code, sees variables'
  );
  await expect(result.locator('dd[data-term="Teammate"]')).toContainText('ada@laptop');
  await expect(result.locator('.jp-RemoteHW-shareNote')).toContainText(
    "This file holds the kernel's key"
  );
  await expect(result.locator('.jp-RemoteHW-shareNote')).toContainText('Send it privately');
  await result.locator('.jp-Dialog-content').screenshot({
    path: path.join(IMAGES, 'share-result.png')
  });
  const shareId = (await result.locator('dd[data-term="Share id"]').textContent())!.trim();
  const file = await download(page, result, info.outputDir);
  expect(file.name).toBe(`share-${shareId}.json`);
  expect(file.json.format).toBe('jupyter-remote-hw-share');
  expect(file.json.role).toBe('collaborator');
  expect(typeof file.json.key).toBe('string'); // a collaborator's file holds the kernel key
  expect(JSON.stringify(file.json)).not.toMatch(/PRIVATE KEY|password|aws_secret/i);
  await result.getByRole('button', { name: 'Done' }).click();

  // The share is listed.
  const panel = page.locator(PANEL);
  const listed = panel.locator(`li.jp-RemoteHW-share[data-share-id="${shareId}"]`);
  await expect(listed).toContainText('ada@laptop · collaborator');
  // Named by its notebook and hardware, as the panel lists them, not by ids.
  await expect(listed).toContainText(/\.ipynb on Test GPU 24 GiB · testhost · /);
  await expect(listed).toContainText('not joined yet');
  // From the share on, the owner's kernel says that someone else can run code in it.
  await expect(panel.locator('.jp-RemoteHW-kernel .jp-RemoteHW-runByOthers')).toHaveText(
    'Others can run code here',
    { timeout: 30000 }
  );

  // The teammate joins: a new notebook opens on the attached kernel.
  await joinFromPalette(page, file.saved, 'join-dialog.png');
  await expect(page.locator('.jp-NotebookPanel .jp-KernelName').last()).toContainText(
    'Shared by',
    { timeout: 60000 }
  );
  const joined = (await page.locator('.jp-DocumentTab.jp-mod-current, .lm-TabBar-tab.jp-mod-current .lm-TabBar-tabLabel').first().textContent())!.trim();
  expect(joined).toMatch(/^Untitled\d*\.ipynb$/);
  expect(await run(page, 'print(x)')).toBe('41');
  // Its toolbar says it is a shared session; picking hardware there is explained, not done.
  const item = page.locator(`.jp-NotebookPanel:not(.lm-mod-hidden) ${TOOLBAR}`);
  await expect(item).toHaveText('Shared session');
  await item.click();
  const explained = page.locator(DIALOG, { hasText: 'A shared session' });
  await expect(explained).toContainText('only they can change, stop or pay for');
  await explained.locator('.jp-Dialog-button.jp-mod-accept').click();
  await expect(explained).toHaveCount(0);
  expect(await run(page, 'y = 7\nprint("teammate", y)')).toBe('teammate 7');
  // Above the joined notebook, the live outputs of others' cells: the owner's first run.
  const live = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RemoteHW-sharedOutputs');
  await expect(live).toBeVisible();
  await expect(live).not.toContainText('teammate 7');

  // The owner sees the teammate's variable; the teammate sees that run live.
  await page.notebook.activate('owner.ipynb');
  await expect(page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RemoteHW-sharedOutputs')).toBeHidden();
  expect(await run(page, 'print(y)')).toBe('7');
  await page.notebook.activate(joined);
  await expect(live.locator('pre.jp-mod-input').last()).toContainText('print(y)');
  await expect(live.locator('pre.jp-mod-stdout').last()).toHaveText('7\n');
  await page.notebook.activate('owner.ipynb');

  // The panel shows the join; screenshot of the list.
  await panel.locator('button.jp-RemoteHW-refresh').click();
  await expect(listed).toContainText(/1 joins?, last/, { timeout: 30000 });
  await panel.screenshot({ path: path.join(IMAGES, 'shares-panel.png') });

  // Revoke after confirming.
  await listed.locator('button.jp-RemoteHW-revoke').click();
  const confirm = page.locator(DIALOG, { hasText: 'Revoke the share with ada@laptop?' });
  await expect(confirm).toContainText('your kernel keeps running');
  await confirm.getByRole('button', { name: 'Revoke' }).click();
  const revokedAt = Date.now();
  await expect(listed).toHaveCount(0, { timeout: 30000 });
  await expect(panel.locator('.jp-RemoteHW-shareList')).toContainText('No active shares');

  // The teammate's kernel is cut off at once: the server reads it as dead and drops it
  // (no restart is tried against a key line that is gone), and JupyterLab says so.
  await page.notebook.activate(joined);
  await expect(
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
  ).toHaveAttribute('data-status', /disconnected|dead/, { timeout: 30000 });
  console.log(`revoke to a dead kernel in the teammate's notebook: ${Date.now() - revokedAt} ms`);
  await page.screenshot({ path: info.outputPath('teammate-revoked.png') });

  // The owner's kernel runs on, with both variables.
  await page.notebook.activate('owner.ipynb');
  expect(await run(page, 'print(x + y)')).toBe('48');
});

test('a viewer share: no kernel key in the file, and running code is refused', async ({
  page
}, info) => {
  test.setTimeout(300000);
  await page.theme.setDarkTheme();
  await ownerNotebook(page, 'viewed.ipynb');
  expect(await run(page, 'x = 41\nprint("owner", x)')).toBe('owner 41');

  const result = await shareFromPanel(page, 'viewer', 'share-dialog-dark.png', true);
  await expect(result.locator('dd[data-term="Role"]')).toHaveText('viewer: sees outputs only');
  await expect(result.locator('.jp-RemoteHW-shareNote')).toContainText('holds no kernel key');
  const shareId = (await result.locator('dd[data-term="Share id"]').textContent())!.trim();
  // Keyboard: the download button has the focus; Enter downloads the file.
  await expect(result.locator('button.jp-RemoteHW-download')).toBeFocused();
  const [saved] = await Promise.all([page.waitForEvent('download'), page.keyboard.press('Enter')]);
  const file = info.outputPath(saved.suggestedFilename());
  await saved.saveAs(file);
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  expect(json.role).toBe('viewer');
  expect(json).not.toHaveProperty('key');
  await result.getByRole('button', { name: 'Done' }).click();

  // A pasted share file with a key path that does not exist: the server's message.
  await page.locator(PANEL).locator('button.jp-RemoteHW-join').click();
  let dialog = page.locator(DIALOG, { hasText: 'Join shared session' });
  await dialog.locator('textarea').fill(JSON.stringify(json));
  await dialog.getByLabel('Your private key (optional)').fill('/nonexistent/id_ed25519');
  await dialog.getByRole('button', { name: 'Join' }).click();
  dialog = page.locator(DIALOG, { hasText: 'Join shared session' });
  await expect(dialog.locator('.jp-RemoteHW-formError')).toContainText(
    'no private key at /nonexistent/id_ed25519'
  );
  await expect(dialog.getByLabel('Your private key (optional)')).toHaveAttribute(
    'aria-invalid',
    'true'
  );
  await dialog.getByLabel('Your private key (optional)').fill(TEAMMATE_KEY);
  await dialog.getByRole('button', { name: 'Join' }).click();
  await expect(page.locator('.jp-NotebookPanel .jp-KernelName').last()).toContainText(
    'Shared by',
    { timeout: 60000 }
  );
  // The kernel answers the run with the read-only message (and runs nothing).
  await page.notebook.setCell(0, 'code', 'x = 1');
  await page.notebook.runCell(0, { inplace: true, wait: false });
  await expect(
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').first().locator('.jp-OutputArea')
  ).toContainText('read-only share: root@', { timeout: 30000 });
  await expect(
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
  ).toHaveAttribute('data-status', 'idle');

  const viewer = (await page.locator('.lm-TabBar-tab.jp-mod-current .lm-TabBar-tabLabel').first().textContent())!.trim();

  // The owner's variable is untouched; what the owner runs shows live above the
  // viewer's notebook (a notebook shows only its own cells' outputs).
  await page.notebook.activate('viewed.ipynb');
  await expect(page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RemoteHW-sharedOutputs')).toBeHidden();
  expect(await run(page, 'print(x)')).toBe('41');
  expect(await run(page, 'print("from the owner:", x * 2)')).toBe('from the owner: 82');
  await page.notebook.activate(viewer);
  const live = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RemoteHW-sharedOutputs');
  await expect(live.locator('pre.jp-mod-input').last()).toContainText('print("from the owner:", x * 2)');
  await expect(live.locator('pre.jp-mod-stdout').last()).toHaveText('from the owner: 82\n');
  // The viewer's own refused run is in its cell, not in the live outputs.
  await expect(live).not.toContainText('read-only share');
  await page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)').screenshot({
    path: path.join(IMAGES, 'shared-outputs.png')
  });

  // A revocation through the REST API (another tab, a script) reaches the panel through
  // the events socket: the share leaves the list without a refresh.
  const listed = page.locator(PANEL).locator(`li.jp-RemoteHW-share[data-share-id="${shareId}"]`);
  await expect(listed).toContainText('ada@laptop · viewer');
  const revoked = await page.request.delete(`/jupyter-remote-hw/api/shares/${shareId}`);
  expect(revoked.status()).toBe(200);
  expect((await revoked.json()).share.state).toBe('revoked');
  await expect(listed).toHaveCount(0, { timeout: 15000 });
});
