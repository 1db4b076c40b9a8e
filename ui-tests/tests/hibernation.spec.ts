/**
 * A kernel on the SSH host hibernates (as its idle timer would make it) and the next
 * cell wakes it: the toolbar and the status bar say it hibernates at $0/h, a notice
 * says what was kept and what was not, the panel shows its saved state with a Wake
 * button, and the cell runs with its variables under the same kernel id. Before, the
 * notebook's own hibernate time is set with "Hibernate After…": kept in its metadata,
 * sent to the server, said in the status bar's tooltip.
 */
import { IJupyterLabPageFixture, expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';
const STATUS = '.jp-RemoteHW-status';

test.use({ autoGoto: true });

/** Open a new notebook `file` of one empty cell whose kernel runs on the SSH test host. */
async function openOnTestHost(
  page: IJupyterLabPageFixture,
  tmpPath: string,
  file: string,
  metadata: Record<string, unknown> = {}
): Promise<void> {
  const notebook = {
    cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: '' }],
    metadata: {
      kernelspec: { name: 'remote-hw-ssh-testhost', display_name: 'Test GPU', language: 'python' },
      ...metadata
    },
    nbformat: 4,
    nbformat_minor: 5
  };
  expect(
    await page.contents.uploadContent(JSON.stringify(notebook), 'text', `${tmpPath}/${file}`)
  ).toBe(true);
  await page.filebrowser.refresh();
  await page.notebook.open(file);
}

test('a hibernated kernel says so at $0/h and wakes on the next cell with its variables', async ({
  page,
  tmpPath
}) => {
  const file = 'sleepy.ipynb';
  await openOnTestHost(page, tmpPath, file, { remote_hw: { hibernate_after: '30m' } });
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
  await page.notebook.setCell(0, 'code', "x = 41\nhandle = open('/dev/null')\nprint('ready')");
  await page.notebook.runCell(0, true);
  expect((await page.notebook.getCellTextOutput(0))?.join('').trim()).toBe('ready');

  const sessions = await (await page.request.get('/api/sessions')).json();
  const kernelId: string = sessions.find((s: { path: string }) => s.path.endsWith(file)).kernel.id;

  // The notebook's own time: sent from its metadata as its kernel started, then set
  // from the toolbar item's context menu: in its metadata, on the server, in the
  // status bar's tooltip.
  const status = page.locator(STATUS);
  await expect(status).toContainText('Test GPU 24 GiB · testhost · running');
  const timeOf = async (): Promise<unknown> => {
    const listed = await (await page.request.get('/jupyter-remote-hw/api/machines')).json();
    const kernels = listed.machines.flatMap((m: { kernels: unknown[] }) => m.kernels);
    return kernels.find((k: { id: string }) => k.id === kernelId).hibernate_after;
  };
  await expect.poll(timeOf).toEqual({ seconds: 1800, source: 'notebook' });
  await item.click({ button: 'right' });
  await page.locator('.lm-Menu-item', { hasText: 'Hibernate After…' }).click();
  const dialog = page.locator('.jp-Dialog');
  // The notebook's time (30 min) is preselected, so Enter keeps it.
  await expect(dialog.locator('select')).toHaveValue('30 min');
  await dialog.locator('select').selectOption({ label: '10 min' });
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  await expect(status).toHaveAttribute(
    'title',
    /Hibernates after 10 min idle \(this notebook's setting\)\./
  );
  expect(await timeOf()).toEqual({ seconds: 600, source: 'notebook' });
  await page.notebook.save();
  const saved = await (await page.request.get(`/api/contents/${tmpPath}/${file}`)).json();
  expect(saved.content.metadata.remote_hw).toEqual({ hibernate_after: 600 });
  // "Hibernate Now", beside "Hibernate After…" in the toolbar item's menu.
  await item.click({ button: 'right' });
  await page.locator('.lm-Menu-item', { hasText: 'Hibernate Now' }).click();

  await expect(item).toHaveText('Test GPU 24 GiB · testhost · hibernated · $0/h');
  const notice = page.locator('.Toastify__toast').filter({ hasText: 'hibernated' });
  await expect(notice).toContainText('sleepy.ipynb hibernated ($0/h)');
  await expect(notice).toContainText('Not saved: handle.');
  await expect(item).toHaveAttribute('title', /Not saved: handle \(.*open file.*\)\./);
  // The status bar says it too; its tooltip says what was saved and how to wake it.
  await expect(status).toHaveText('Test GPU 24 GiB · testhost · hibernated · $0/h');
  // The host keeps the state on its own disk.
  await expect(status).toHaveAttribute(
    'title',
    /saved on the disk of testhost and its hardware is released.*Click to wake it/
  );
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const row = page.locator(
    `#jp-RemoteHW-machines li.jp-RemoteHW-kernel[data-kernel-id="${kernelId}"]`
  );
  await expect(row).toContainText(
    /hibernated · [\d.]+ (B|KiB|MiB) saved on the disk of testhost · \$0\/h/
  );
  await expect(row.locator('button.jp-RemoteHW-wakeKernel')).toBeVisible();
  await page.screenshot({ path: path.join(IMAGES, 'hibernated.png') });

  // The next cell wakes it: the same kernel, its variables back.
  // (Run from the keyboard: Galata's runCell waits for "Idle" in the status bar, which
  // our status item says too once the machine is released.)
  await page.notebook.setCell(0, 'code', 'print(x + 1)');
  await page.notebook.selectCells(0);
  await page.keyboard.press('Control+Enter');
  const outputs = page.locator('.jp-Cell').first().locator('.jp-OutputArea-output');
  await expect(outputs.last()).toHaveText('42', { timeout: 120000 });
  // Before its output, the cell that woke the kernel says what the save left out.
  await expect(outputs.first()).toContainText('This kernel woke from hibernation');
  await expect(outputs.first()).toContainText('handle (_io.TextIOWrapper): it is an open file');
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 30000 });
  await expect(status).toContainText('Test GPU 24 GiB · testhost · running', { timeout: 30000 });
  const after = await (await page.request.get('/api/sessions')).json();
  expect(after.find((s: { path: string }) => s.path.endsWith(file)).kernel.id).toBe(kernelId);
});

test('a hibernated kernel wakes on other hardware picked in the toolbar, its variables with it', async ({
  page,
  tmpPath
}) => {
  const file = 'moving.ipynb';
  await openOnTestHost(page, tmpPath, file);
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
  await page.notebook.setCell(0, 'code', "x = 41\nprint('ready')");
  await page.notebook.runCell(0, true);
  expect((await page.notebook.getCellTextOutput(0))?.join('').trim()).toBe('ready');
  const sessions = await (await page.request.get('/api/sessions')).json();
  const kernelId: string = sessions.find((s: { path: string }) => s.path.endsWith(file)).kernel.id;
  // "Hibernate Now", beside "Hibernate After…" in the toolbar item's menu.
  await item.click({ button: 'right' });
  await page.locator('.lm-Menu-item', { hasText: 'Hibernate Now' }).click();

  // Opened again later: the toolbar reads from the server that its kernel hibernates.
  await page.notebook.close(true);
  await page.notebook.open(file);
  await expect(item).toHaveText('Test GPU 24 GiB · testhost · hibernated · $0/h', {
    timeout: 30000
  });

  // Other hardware, picked in the toolbar: the kernel wakes there, the old host untouched.
  await item.click();
  const dialog = page.locator('.jp-Dialog');
  await dialog.locator('tr[data-name="ssh-sparebox"]').click();
  const accept = dialog.locator('.jp-Dialog-button.jp-mod-accept');
  await expect(accept).toHaveText('Wake there');
  await accept.click();
  await expect(page.getByText(/The kernel woke on Spare GPU 16 GiB/)).toBeVisible({
    timeout: 120000
  });
  await expect(item).toHaveText('Spare GPU 16 GiB · sparebox', { timeout: 30000 });
  const after = await (await page.request.get('/api/sessions')).json();
  const kernel = after.find((s: { path: string }) => s.path.endsWith(file)).kernel;
  expect(kernel.id).toBe(kernelId);
  expect(kernel.name).toBe('remote-hw-ssh-sparebox');
  // The status bar follows the machine that lists the kernel, and JupyterLab's own
  // kernel indicator names the new kernelspec.
  await expect(page.locator(STATUS)).toContainText('Spare GPU 16 GiB · sparebox · running', {
    timeout: 30000
  });
  const specs = await (await page.request.get('/api/kernelspecs')).json();
  const indicated = (): Promise<string> =>
    page.evaluate(
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      () => (window as any).jupyterapp.shell.currentWidget.sessionContext.kernelDisplayName
    );
  await expect.poll(indicated).toBe(specs.kernelspecs['remote-hw-ssh-sparebox'].spec.display_name);
  await page.notebook.setCell(0, 'code', 'print(x + 1)');
  await page.notebook.selectCells(0);
  await page.keyboard.press('Control+Enter');
  await expect(page.locator('.jp-Cell .jp-OutputArea-output').first()).toHaveText('42', {
    timeout: 60000
  });
  // Saved, the notebook opens on the hardware it woke on.
  await page.notebook.save();
  const saved = await (await page.request.get(`/api/contents/${tmpPath}/${file}`)).json();
  expect(saved.content.metadata.kernelspec.name).toBe('remote-hw-ssh-sparebox');
});
