/**
 * The hardware picker, status bar item and machines panel in a real JupyterLab:
 * the `local` provider and a real loopback sshd host ("ssh-testhost").
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

import { luminance } from './colours';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';
const DIALOG = '.jp-Dialog';

test.use({ autoGoto: true });

test('pick the SSH host, run there, switch back carrying a variable, terminate', async ({
  page
}) => {
  await page.notebook.createNew('hardware.ipynb');
  const item = page.locator(TOOLBAR);
  // The notebook's kernel starts on the default hardware: this machine.
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });

  // The picker lists local, the SSH host and the catalog; the search narrows it.
  await item.click();
  const dialog = page.locator(DIALOG);
  await expect(dialog.locator('tr[data-name="local"]')).toContainText('CPU · local');
  await expect(dialog.locator('tr[data-name="ssh-testhost"]')).toContainText('1 × Test GPU');
  await expect(dialog.locator('tr[data-name="ssh-testhost"]')).toContainText('24 GiB');
  // Without AWS credentials, the catalog's AWS rows are one line saying why and what to
  // do; a click shows them greyed, each with a price or "price unknown"; another folds them.
  const fold = dialog.locator('tr.jp-RemoteHW-fold');
  await expect(fold).toHaveCount(1);
  await expect(fold).toContainText('AWS: no credentials — set AWS_PROFILE or run aws configure (54 types)');
  await expect(fold.locator('code')).toHaveText('aws configure');
  await expect(dialog.locator('tr[data-name^="aws-"]')).toHaveCount(0);
  await dialog.screenshot({ path: path.join(IMAGES, 'picker.png') });
  await fold.click();
  const awsRows = dialog.locator('tr.jp-mod-disabled[data-name^="aws-"]');
  await expect(awsRows).toHaveCount(54);
  await expect(dialog.locator('tr[data-name="aws-p5e-48xlarge"]')).toContainText('price unknown');
  await expect(dialog.locator('tr[data-name="aws-p5en-48xlarge"]')).toContainText('$63.30/h');
  await expect(dialog.locator('tr[data-name="aws-g5-xlarge"]')).toHaveAttribute(
    'title', 'no credentials — set AWS_PROFILE or run `aws configure`');
  // Each greyed row says why in a few words; what to do is on the fold line and in its tooltip.
  await expect(dialog.locator('tr[data-name="aws-g5-xlarge"] td').last()).toHaveText('no credentials');
  await fold.click();
  await expect(awsRows).toHaveCount(0);
  // From the keyboard too: Enter on the line opens it (and does not switch).
  await fold.focus();
  await page.keyboard.press('Enter');
  await expect(awsRows).toHaveCount(54);
  await page.keyboard.press('Enter');
  await expect(awsRows).toHaveCount(0);
  await dialog.locator('input[type=search]').fill('test gpu');
  await expect(dialog.locator('.jp-RemoteHW-option')).toHaveCount(1);
  await dialog.locator('tr[data-name="ssh-testhost"]').click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();

  // Progress in place, then the new hardware.
  await expect(page.locator(`${TOOLBAR}.jp-mod-busy`)).toBeVisible();
  await page.locator('.jp-NotebookPanel-toolbar').screenshot({
    path: path.join(IMAGES, 'provisioning.png')
  });
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });

  // A cell runs on the SSH host's kernel (started under the host's agent directory).
  await page.notebook.setCell(
    0,
    'code',
    "import os, getpass\nx = 41\nprint(os.getpid(), getpass.getuser(), 'remote-root' in open('/proc/self/cmdline').read())"
  );
  await page.notebook.runCell(0, true);
  const output = (await page.notebook.getCellTextOutput(0))?.join('') ?? '';
  expect(output).toMatch(/^\d+ \S+ True\s*$/);

  // The status bar shows the machine.
  const status = page.locator('.jp-RemoteHW-status');
  await expect(status).toContainText('Test GPU 24 GiB · testhost · running · free');

  // Back to local, carrying x.
  await item.click();
  await dialog.locator('input[type=search]').fill('this machine');
  await dialog.locator('tr[data-name="local"]').click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  const carry = page.locator('.jp-RemoteHW-carry');
  await expect(carry).toContainText('x  (int,');
  await page.locator(`${DIALOG} .jp-Dialog-button.jp-mod-accept`).click();
  await expect(item).toHaveText('CPU · local', { timeout: 90000 });
  await page.notebook.setCell(0, 'code', 'print(x + 1)');
  await page.notebook.runCell(0, true);
  expect((await page.notebook.getCellTextOutput(0))?.join('').trim()).toBe('42');
  await expect(status).toContainText(/· this machine · running · free/);

  // The panel lists both machines; stop the SSH host after confirming.
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const panel = page.locator('#jp-RemoteHW-machines');
  const ssh = panel.locator('li[data-name="ssh-testhost"]');
  await expect(ssh).toContainText('0 kernels');
  await expect(panel.locator('li[data-name="local"]')).toContainText('1 kernel');
  await ssh.locator('button.jp-RemoteHW-stop').click();
  await expect(page.locator(DIALOG)).toContainText('Stop Test GPU 24 GiB · testhost? No kernel runs there');
  await page.locator(`${DIALOG} .jp-Dialog-button.jp-mod-accept`).click();
  await expect(ssh).toHaveCount(0);
  await expect(panel.locator('li[data-name="local"]')).toBeVisible();
});

test('the picker works in the dark theme and from the keyboard', async ({ page }) => {
  await page.theme.setDarkTheme();
  await page.notebook.createNew('dark.ipynb');
  await page.locator(TOOLBAR).focus();
  await page.keyboard.press('Enter');
  const dialog = page.locator(DIALOG);
  await expect(dialog.locator('input[type=search]')).toBeFocused();
  await page.keyboard.press('ArrowDown');
  await expect(dialog.locator('tr.jp-mod-selected')).toHaveAttribute('data-name', 'ssh-testhost');
  await dialog.screenshot({ path: path.join(IMAGES, 'picker-dark.png') });
  await page.keyboard.press('Escape');
  await expect(dialog).toHaveCount(0);
  // The command's shortcut opens it from the notebook too.
  await page.locator('.jp-NotebookPanel .jp-InputPrompt').first().click();
  await page.keyboard.press('Control+Alt+h');
  await expect(dialog.locator('input[type=search]')).toBeFocused();
  await page.keyboard.press('Escape');
  await expect(dialog).toHaveCount(0);
});

test('a failed launch names the step and what to try', async ({ page }) => {
  await page.notebook.createNew('unreachable.ipynb');
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });
  await item.click();
  const dialog = page.locator(DIALOG);
  await dialog.locator('input[type=search]').fill('gone');
  await dialog.locator('tr[data-name="ssh-deadhost"]').click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  const error = page.locator(`${DIALOG}`, { hasText: 'Switching to Gone GPU 80 GiB · deadhost failed' });
  await expect(error).toContainText("step 'connect'", { timeout: 60000 });
  await expect(error).toContainText('Launching a kernel on Gone GPU 80 GiB · deadhost failed');
  await expect(error).toContainText('Check that `ssh deadhost` works');
  // Plain words first; what the operating system said waits, closed, behind Details.
  const message = error.locator('.jp-RemoteHW-error-message');
  await expect(message).toContainText('nothing accepts connections on that port');
  await expect(message).not.toContainText('Errno');
  // Enter would press Close; Escape closes it too.
  await expect(error.getByRole('button', { name: 'Close' })).toBeFocused();
  await expect(item).toHaveClass(/jp-mod-error/);
  await error.screenshot({ path: path.join(IMAGES, 'launch-error.png') });
  const detail = error.locator('details.jp-RemoteHW-error-detail');
  await expect(detail).not.toHaveAttribute('open', /.*/);
  await detail.locator('summary').click();
  await expect(detail.locator('pre')).toContainText(/Connect call failed|refused/);
  await detail.locator('summary').click();
  // In the dark theme at 1280×800 too: inside the window, light words on a dark dialog.
  await page.theme.setDarkTheme();
  await page.setViewportSize({ width: 1280, height: 800 });
  const box = (await error.locator('.jp-Dialog-content').boundingBox())!;
  expect(box.x).toBeGreaterThanOrEqual(0);
  expect(box.y).toBeGreaterThanOrEqual(0);
  expect(box.x + box.width).toBeLessThanOrEqual(1280);
  expect(box.y + box.height).toBeLessThanOrEqual(800);
  expect(luminance(await message.evaluate(node => getComputedStyle(node).color))).toBeGreaterThan(0.4);
  await error.locator('.jp-Dialog-content').screenshot({
    path: path.join(IMAGES, 'launch-error-dark.png')
  });
  await page.theme.setLightTheme();
  await page.keyboard.press('Escape');
  await expect(error).toHaveCount(0);
  // The notebook keeps its kernel on this machine.
  await expect(item).toHaveText('CPU · local');
  // The picker now says the host is unreachable, and since when.
  await item.click();
  await dialog.locator('input[type=search]').fill('gone');
  await expect(dialog.locator('tr[data-name="ssh-deadhost"]')).toContainText(/unreachable for \d+ s/);
  await page.keyboard.press('Escape');
});
