/**
 * A kernel on the SSH host hibernates (as its idle timer would make it) and the next
 * cell wakes it: the toolbar says it hibernates at $0/h, a notice says what was kept
 * and what was not, the panel shows its saved state with a Wake button, and the cell
 * runs with its variables under the same kernel id.
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';

test.use({ autoGoto: true });

test('a hibernated kernel says so at $0/h and wakes on the next cell with its variables', async ({
  page,
  tmpPath
}) => {
  const file = 'sleepy.ipynb';
  const notebook = {
    cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: '' }],
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
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
  await page.notebook.setCell(0, 'code', "x = 41\nhandle = open('/dev/null')\nprint('ready')");
  await page.notebook.runCell(0, true);
  expect((await page.notebook.getCellTextOutput(0))?.join('').trim()).toBe('ready');

  const sessions = await (await page.request.get('/api/sessions')).json();
  const kernelId: string = sessions.find((s: { path: string }) => s.path.endsWith(file)).kernel.id;
  const answer = await page.request.post(`/jupyter-remote-hw/api/hibernate/${kernelId}`, {
    data: {}
  });
  expect(answer.status()).toBe(200);

  await expect(item).toHaveText('Test GPU 24 GiB · testhost · hibernated · $0/h');
  const notice = page.locator('.Toastify__toast').filter({ hasText: 'hibernated' });
  await expect(notice).toContainText('sleepy.ipynb hibernated ($0/h)');
  await expect(notice).toContainText('Not saved: handle.');
  await expect(item).toHaveAttribute('title', /Not saved: handle \(.*open file.*\)\./);
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const row = page.locator(`#jp-RemoteHW-machines li.jp-RemoteHW-kernel[data-kernel-id="${kernelId}"]`);
  await expect(row).toContainText(/hibernated · [\d.]+ (B|KiB|MiB) saved · \$0\/h/);
  await expect(row.locator('button.jp-RemoteHW-wakeKernel')).toBeVisible();
  await page.locator('#jp-main-dock-panel').screenshot({ path: path.join(IMAGES, 'hibernated.png') });

  // The next cell wakes it: the same kernel, its variables back.
  // (Run from the keyboard: Galata's runCell waits for "Idle" in the status bar, which
  // our status item says too once the machine is released.)
  await page.notebook.setCell(0, 'code', 'print(x + 1)');
  await page.notebook.selectCells(0);
  await page.keyboard.press('Control+Enter');
  await expect(page.locator('.jp-Cell .jp-OutputArea-output').first()).toHaveText('42', {
    timeout: 120000
  });
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 30000 });
  const after = await (await page.request.get('/api/sessions')).json();
  expect(after.find((s: { path: string }) => s.path.endsWith(file)).kernel.id).toBe(kernelId);
});
