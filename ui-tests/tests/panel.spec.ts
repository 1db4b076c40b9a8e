/**
 * The "Remote hardware" panel names each kernel by its notebook and kernel name, with
 * its hardware, state, uptime (ticking) and cost; the kernel id only as a tooltip; its
 * title opens the notebook. One notebook's kernel on this machine, one on the loopback
 * sshd host ("ssh-testhost").
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem:visible';
const PANEL = '#jp-RemoteHW-machines';

test.use({ autoGoto: true });

/** Write a notebook whose metadata names `kernel`, and open it (which starts that kernel). */
async function openNotebook(page: IJupyterLabPageFixture, file: string, kernel: string, source: string) {
  const notebook = {
    cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source }],
    metadata: { kernelspec: { name: kernel, display_name: 'Python 3', language: 'python' } },
    nbformat: 4,
    nbformat_minor: 5
  };
  await page.contents.uploadContent(JSON.stringify(notebook), 'text', `analysis/${file}`);
  await page.notebook.open(file);
}

test('kernels are listed by notebook with hardware, state, uptime and cost', async ({ page }) => {
  await page.contents.createDirectory('analysis');
  await page.filebrowser.openDirectory('/analysis');
  await openNotebook(page, 'train.ipynb', 'remote-hw-local', 'x = 41');
  await expect(page.locator(TOOLBAR)).toHaveText('CPU · local', { timeout: 60000 });
  await page.notebook.runCell(0, true);
  await openNotebook(page, 'fit.ipynb', 'remote-hw-ssh-testhost', 'y = 1');
  await expect(page.locator(TOOLBAR)).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
  await page.notebook.runCell(0, true);

  await page.sidebar.openTab('jp-RemoteHW-machines');
  const panel = page.locator(PANEL);
  const local = panel.locator('li[data-name="local"]');
  const localHardware = (await local.locator('.jp-RemoteHW-machineName').textContent())!.split(' · ')[1];
  const train = local.locator('li.jp-RemoteHW-kernel');
  await expect(train).toHaveCount(1);
  await expect(train.locator('.jp-RemoteHW-kernelTitle')).toHaveText(
    'analysis/train.ipynb · Python 3 (ipykernel)'
  );
  const facts = train.locator('.jp-RemoteHW-kernelFacts');
  await expect(facts).toHaveText(new RegExp(`^${localHardware} · idle · up \\d+ (s|min \\d\\d s) · free$`));
  await expect(train).toHaveAttribute('title', /^kernel [0-9a-f-]{36} \(remote-hw-local\)$/);
  await expect(train).not.toContainText((await train.getAttribute('data-kernel-id'))!.slice(0, 8));

  const fit = panel.locator('li[data-name="ssh-testhost"] li.jp-RemoteHW-kernel');
  await expect(fit.locator('.jp-RemoteHW-kernelTitle')).toHaveText(
    'analysis/fit.ipynb · Python 3 (ipykernel)'
  );
  await expect(fit.locator('.jp-RemoteHW-kernelFacts')).toHaveText(
    /^Test GPU 24 GiB · idle · up \d+ (s|min \d\d s) · free$/
  );
  await expect(fit.locator('button.jp-RemoteHW-shareKernel')).toBeVisible();

  // The uptime ticks without a new listing.
  const before = await facts.textContent();
  await expect.poll(async () => facts.textContent(), { timeout: 3000, intervals: [500] }).not.toBe(before);
  await panel.screenshot({ path: path.join(IMAGES, 'machines-panel.png') });

  // The state follows the kernel without a click: busy while a cell runs, then idle.
  await page.notebook.setCell(0, 'code', 'import time; time.sleep(8)');
  await page.notebook.selectCells(0);
  await page.keyboard.press('Control+Enter');
  await expect(page.locator('.jp-NotebookPanel:visible .jp-InputPrompt').first()).toHaveText('[*]:');
  const fitFacts = fit.locator('.jp-RemoteHW-kernelFacts');
  await expect(fitFacts).toContainText(' · busy · ', { timeout: 7000 });
  await expect(fitFacts).toContainText(' · idle · ', { timeout: 15000 });

  // A kernel's title opens its notebook, as an editor's open-files list does.
  expect(await page.notebook.isActive('fit.ipynb')).toBe(true);
  await train.locator('button.jp-RemoteHW-kernelTitle').click();
  await expect.poll(async () => page.notebook.isActive('train.ipynb'), { timeout: 5000 }).toBe(true);

  await panel.locator('li[data-name="ssh-testhost"] button.jp-RemoteHW-terminate').click();
  await page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-accept').click();
  await expect(panel.locator('li[data-name="ssh-testhost"]')).toHaveCount(0, { timeout: 30000 });
  await page.kernel.shutdownAll();
  await page.contents.deleteDirectory('analysis');
});
