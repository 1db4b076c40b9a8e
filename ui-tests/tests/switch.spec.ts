/**
 * Switching a notebook's hardware in a real JupyterLab: the carry dialog opens at
 * once, says what will not come across and why, re-imports modules, and the switch
 * shows its progress from the first moment.
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';
const DIALOG = '.jp-Dialog';
const CARRY = '.jp-RemoteHW-carry';

test.use({ autoGoto: true });

test('switch to the SSH host: a lock stays behind with its reason, json is re-imported', async ({
  page
}) => {
  await page.notebook.createNew('switch.ipynb');
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });
  await page.notebook.setCell(0, 'code', 'import json\nx = 1\nimport threading; lk = threading.Lock()');
  await page.notebook.runCell(0, true);

  await item.click();
  const picker = page.locator(DIALOG);
  await picker.locator('input[type=search]').fill('test gpu');
  await picker.locator('tr[data-name="ssh-testhost"]').click();
  await picker.locator('.jp-Dialog-button.jp-mod-accept').click();

  // The carry dialog is there within a second, then lists what will come across.
  const carry = page.locator(CARRY);
  await expect(carry).toBeVisible({ timeout: 1000 });
  const lock = carry.locator('li[data-name="lk"]');
  await expect(lock).toContainText("cannot pickle '_thread.lock'");
  await expect(lock).toHaveClass(/jp-mod-disabled/);
  await expect(lock.locator('input')).not.toBeChecked();
  await expect(lock.locator('input')).toBeDisabled();
  await expect(carry.locator('li[data-name="x"] input')).toBeChecked();
  const json = carry.locator('.jp-RemoteHW-carryModules li[data-name="json"]');
  await expect(json).toContainText('import json');
  await expect(json.locator('input')).toBeChecked();
  await expect(carry).toContainText('Re-import these modules in the new kernel');
  await page.locator(DIALOG).screenshot({ path: path.join(IMAGES, 'switch-dialog.png') });

  // Confirmed: progress shows in the toolbar within a second.
  await page.locator(`${DIALOG} .jp-Dialog-button.jp-mod-accept`).click();
  const busy = page.locator(`${TOOLBAR}.jp-mod-busy`);
  await expect(busy).toBeVisible({ timeout: 1000 });
  await expect(busy).toContainText(/^Test GPU 24 GiB · testhost: /);
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
  await expect(page.locator('.jp-Notification-Toast-warning, .Toastify__toast')).toContainText(
    're-imported json'
  );

  // The module and the variable came across; the lock did not.
  await page.notebook.setCell(0, 'code', "print(json.dumps(x), 'lk' in globals())");
  await page.notebook.runCell(0, true);
  expect((await page.notebook.getCellTextOutput(0))?.join('').trim()).toBe('1 False');

  // Stopping the host from the panel says so at once, then when it is done.
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const ssh = page.locator('#jp-RemoteHW-machines li[data-name="ssh-testhost"]');
  await ssh.locator('button.jp-RemoteHW-stop').click();
  await page.locator(`${DIALOG} .jp-Dialog-button.jp-mod-accept`).click();
  await expect(page.getByText('Stopping Test GPU 24 GiB · testhost…')).toBeVisible({ timeout: 1000 });
  await expect(page.getByText('Test GPU 24 GiB · testhost: 1 kernel shut down; its agent stopped')).toBeVisible({
    timeout: 30000
  });
  await expect(ssh).toHaveCount(0);
});

test('a plain python3 kernel lists its variables at once', async ({ page }) => {
  await page.notebook.createNew('plain.ipynb', { kernel: 'python3' });
  await page.notebook.setCell(0, 'code', 'import numpy as np\nrows = list(range(10))');
  await page.notebook.runCell(0, true);
  await page.locator(TOOLBAR).click();
  const picker = page.locator(DIALOG);
  await picker.locator('tr[data-name="local"]').click();
  await picker.locator('.jp-Dialog-button.jp-mod-accept').click();
  // The dialog is there within a second (reading, or already filled in) ...
  const carry = page.locator(CARRY);
  await expect(carry).toBeVisible({ timeout: 1000 });
  // ... and lists the plain kernel's variables and modules (the server answers
  // in well under a second; the margin is for a loaded test machine).
  await expect(carry.locator('li[data-name="rows"] input')).toBeChecked();
  await expect(carry.locator('li[data-name="np"]')).toContainText('import numpy as np');
  await page.locator(`${DIALOG} .jp-Dialog-button.jp-mod-reject`).click();
  await expect(carry).toHaveCount(0);
});

test('a notebook opened on the SSH host shows the launch steps in its toolbar', async ({
  page,
  tmpPath
}) => {
  const file = 'opened.ipynb';
  const notebook = {
    cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: 'x = 1' }],
    metadata: {
      kernelspec: { name: 'remote-hw-ssh-testhost', display_name: 'Test GPU', language: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
  expect(await page.contents.uploadContent(JSON.stringify(notebook), 'text', `${tmpPath}/${file}`)).toBe(true);
  await page.filebrowser.refresh();
  await page.notebook.open(file);
  const item = page.locator(TOOLBAR);
  await expect(page.locator(`${TOOLBAR}.jp-mod-busy`)).toContainText(/^Test GPU 24 GiB · testhost: /);
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
  await expect(item).not.toHaveClass(/jp-mod-busy/);
});
