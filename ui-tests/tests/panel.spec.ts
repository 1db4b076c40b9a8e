/**
 * The "Remote hardware" panel names each kernel by its notebook and kernel name, with
 * its hardware, state, uptime (ticking) and cost; the kernel id only as a tooltip; its
 * title opens the notebook. One notebook's kernel on this machine, one on the loopback
 * sshd host ("ssh-testhost").
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as path from 'path';

import { notebookOn } from './notebooks';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem:visible';
const PANEL = '#jp-RemoteHW-machines';

test.use({ autoGoto: true });

/** Write a notebook whose metadata names `kernel`, and open it (which starts that kernel). */
async function openNotebook(
  page: IJupyterLabPageFixture,
  file: string,
  kernel: string,
  source: string
) {
  await page.contents.uploadContent(notebookOn(kernel, source), 'text', `analysis/${file}`);
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
  // The card reads `<hardware> · this machine`, its target's name on hover.
  const localHardware = (await local.locator('.jp-RemoteHW-machineName').textContent())!.split(
    ' · '
  )[0];
  const train = local.locator('li.jp-RemoteHW-kernel');
  await expect(train).toHaveCount(1);
  await expect(train.locator('.jp-RemoteHW-kernelTitle')).toHaveText(
    'analysis/train.ipynb · Python 3 (ipykernel)'
  );
  const facts = train.locator('.jp-RemoteHW-kernelFacts');
  await expect(facts).toHaveText(
    new RegExp(`^${localHardware} · idle · up \\d+ (s|min \\d\\d s) · free$`)
  );
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

  // What the machines cost together, above them (both are free); each machine's name on
  // one line, elided, with the whole of it on hover.
  await expect(panel.locator('.jp-RemoteHW-total')).toHaveText('Total: $0.00/h now');
  const name = panel.locator('li[data-name="ssh-testhost"] .jp-RemoteHW-machineName');
  await expect(name).toHaveText('Test GPU 24 GiB · testhost');
  await expect(name).toHaveAttribute('title', 'Test GPU 24 GiB · testhost (ssh-testhost)');
  expect(await name.evaluate(node => getComputedStyle(node).textOverflow)).toBe('ellipsis');

  // The uptime ticks without a new listing.
  const before = await facts.textContent();
  await expect
    .poll(async () => facts.textContent(), { timeout: 3000, intervals: [500] })
    .not.toBe(before);
  await panel.screenshot({ path: path.join(IMAGES, 'machines-panel.png') });

  // The state follows the kernel without a click: busy while a cell runs, then idle.
  await page.notebook.setCell(0, 'code', 'import time; time.sleep(8)');
  await page.notebook.selectCells(0);
  await page.keyboard.press('Control+Enter');
  await expect(page.locator('.jp-NotebookPanel:visible .jp-InputPrompt').first()).toHaveText(
    '[*]:'
  );
  const fitFacts = fit.locator('.jp-RemoteHW-kernelFacts');
  await expect(fitFacts).toContainText(' · busy · ', { timeout: 7000 });
  await expect(fitFacts).toContainText(' · idle · ', { timeout: 15000 });

  // A kernel's title opens its notebook, as an editor's open-files list does.
  expect(await page.notebook.isActive('fit.ipynb')).toBe(true);
  await train.locator('button.jp-RemoteHW-kernelTitle').click();
  await expect
    .poll(async () => page.notebook.isActive('train.ipynb'), { timeout: 5000 })
    .toBe(true);

  // Stopping the host ends fit.ipynb's kernel with it. The notebook asks where its next
  // cells run, rather than taking JupyterLab's default kernel at the next cell.
  await fit.locator('button.jp-RemoteHW-kernelTitle').click();
  await expect.poll(async () => page.notebook.isActive('fit.ipynb'), { timeout: 5000 }).toBe(true);
  await panel.locator('li[data-name="ssh-testhost"] button.jp-RemoteHW-stop').click();
  await page.locator('.jp-Dialog .jp-Dialog-button.jp-mod-accept').click();
  await expect(panel.locator('li[data-name="ssh-testhost"]')).toHaveCount(0, { timeout: 30000 });
  const asked = page.locator('.jp-Dialog', { hasText: 'The kernel’s hardware ended' });
  await expect(asked).toBeVisible({ timeout: 30000 });
  await expect(asked).toContainText(
    "The hardware of fit.ipynb's kernel, Test GPU 24 GiB · testhost, was"
  );
  await expect(asked).toContainText('the variables it held are gone');
  await expect(asked.locator('.jp-Dialog-button')).toHaveText([
    'Not now',
    'This machine',
    'Other hardware…',
    'Again on Test GPU 24 GiB · testhost'
  ]);
  await expect(asked.locator('.jp-Dialog-button.jp-mod-reject')).toBeFocused();
  await asked.screenshot({ path: path.join(IMAGES, 'kernel-gone.png') });
  await page.keyboard.press('Escape');
  await expect(asked).toHaveCount(0);
  // "Not now": the next cell starts no kernel by itself; JupyterLab asks which one.
  await page.notebook.selectCells(0);
  await page.keyboard.press('Control+Enter');
  await expect(page.locator('.jp-Dialog', { hasText: 'Select Kernel' })).toBeVisible({
    timeout: 15000
  });
  await expect(page.locator('.jp-NotebookPanel:visible .jp-KernelName')).toHaveText('No Kernel');
  await page.keyboard.press('Escape');
  await page.kernel.shutdownAll();
  await page.contents.deleteDirectory('analysis');
});

test('stopping a host that holds only a %%remote kernel ends it and says so', async ({ page }) => {
  await page.notebook.createNew('magic.ipynb', { kernel: 'python3' });
  await page.notebook.setCell(0, 'code', '%load_ext jupyter_remote_hw');
  await page.notebook.runCell(0, true);
  await page.notebook.addCell('code', '%%remote ssh-testhost\nx = 7\nprint("on the host")');
  await page.notebook.runCell(1, true);
  await expect
    .poll(async () => (await page.notebook.getCellTextOutput(1))?.join(''), { timeout: 90000 })
    .toContain('on the host');
  // The notebook's toolbar says that some of its cells run on the host, and on what.
  const sign = page.locator('.jp-NotebookPanel:visible .jp-RemoteHW-remoteCells');
  await expect(sign).toHaveText('%%remote · Test GPU 24 GiB', { timeout: 15000 });
  await expect(sign).toBeVisible();
  await expect(sign).toHaveAttribute('title', /Test GPU 24 GiB on testhost: (\w+, )?1 kernel/);
  await page
    .locator('.jp-NotebookPanel:visible .jp-NotebookPanel-toolbar')
    .screenshot({ path: path.join(IMAGES, 'remote-cells-toolbar.png') });

  await page.sidebar.openTab('jp-RemoteHW-machines');
  const ssh = page.locator(`${PANEL} li[data-name="ssh-testhost"]`);
  await expect(ssh).toContainText('1 kernel', { timeout: 15000 });
  // A host the user owns is stopped (its kernels and agent end), never terminated.
  await expect(ssh.locator('button.jp-RemoteHW-terminate')).toHaveCount(0);
  await ssh.locator('button.jp-RemoteHW-stop').click();
  const dialog = page.locator('.jp-Dialog');
  // The confirmation names the kernel that ends; the safe button is the one Enter presses.
  await expect(dialog).toContainText(
    'The host keeps running (it is yours), but its agent stops and this kernel is shut down, its variables lost:'
  );
  await expect(dialog.locator('li')).toHaveText([/magic\.ipynb · %%remote$/]);
  await expect(dialog.locator('.jp-Dialog-button.jp-mod-reject')).toBeFocused();
  await dialog.screenshot({ path: path.join(IMAGES, 'stop-confirm.png') });
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  // Said once it has really happened, from what the server ended.
  await expect(page.getByText('Test GPU 24 GiB · testhost: 1 kernel shut down; its agent stopped')).toBeVisible({
    timeout: 30000
  });
  await expect(ssh).toHaveCount(0);
  await expect(sign).toBeHidden();

  // The notebook's next %%remote cell does not run on a new kernel without `x`.
  await page.notebook.addCell('code', '%%remote ssh-testhost\nprint(x)');
  await page.notebook.runCell(2, true);
  await expect
    .poll(async () => (await page.notebook.getCellTextOutput(2))?.join(''), { timeout: 60000 })
    .toContain('ended since the last %%remote cell');
  await page.kernel.shutdownAll();
});
