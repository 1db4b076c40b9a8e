/**
 * The live hardware view: the status bar item and the panel's "Hardware" section show
 * the current notebook kernel's RAM, CPU and GPU use, refreshed every few seconds, for a
 * kernel on this machine and one on the loopback sshd host (whose nvidia-smi is a
 * stand-in reporting one "Test GPU" of 24 GiB, 37 % busy).
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';
const MONITOR = '.jp-RemoteHW-monitor';
const SECTION = '#jp-RemoteHW-machines .jp-RemoteHW-hardware';

test.use({ autoGoto: true });

test('a local kernel: RAM and CPU in the status bar, refreshed, and bars in the panel', async ({
  page
}) => {
  await page.notebook.createNew('monitor.ipynb');
  await expect(page.locator(TOOLBAR)).toHaveText('CPU · local', { timeout: 60000 });
  const monitor = page.locator(MONITOR);
  await expect(monitor).toHaveText(
    /^no GPU \| RAM \d+\.\d\/\d+ GiB \| CPU \d+% \| free$/,
    { timeout: 30000 }
  );
  await expect(monitor).toHaveAttribute('title', /RAM: .* GiB in use/);

  // A new reading within about 4 s (every 3 s while the notebook is shown).
  const first = await monitor.getAttribute('data-time');
  await expect
    .poll(async () => monitor.getAttribute('data-time'), { timeout: 4500, intervals: [250] })
    .not.toBe(first);

  // The panel's "Hardware" section has bars for RAM and CPU, and no GPU.
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const section = page.locator(SECTION);
  await expect(section).toContainText(/monitor\.ipynb · .+ · this machine/);
  await expect(section).toContainText('no GPU');
  await expect(section.locator('[role=meter]')).toHaveCount(2);
  const ram = section.locator('[role=meter][aria-label="RAM"]');
  await expect(ram).toHaveAttribute('aria-valuetext', /^\d+\.\d \/ \d+ GiB$/);
  const percent = Number(await ram.getAttribute('aria-valuenow'));
  expect(percent).toBeGreaterThan(0);
  expect(percent).toBeLessThanOrEqual(100);
  await expect(section.locator('[role=meter][aria-label="CPU"]')).toHaveAttribute(
    'aria-valuetext',
    /^\d+%$/
  );
  await expect(section).toContainText('Cost: free (hardware you own)');

  // Closed: the item goes and no more readings are asked for.
  await page.notebook.close(true);
  await expect(monitor).toBeHidden();
  await expect(section).toContainText('Open a notebook to see the hardware');
  let asked = 0;
  page.on('request', request => {
    if (request.url().includes('/jupyter-remote-hw/api/usage/')) {
      asked += 1;
    }
  });
  await page.waitForTimeout(4000);
  expect(asked).toBe(0);
});

test('a kernel on the SSH host: its GPU in the status bar and the panel', async ({ page }) => {
  await page.notebook.createNew('gpu.ipynb');
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });
  await item.click();
  const dialog = page.locator('.jp-Dialog');
  await dialog.locator('input[type=search]').fill('test gpu');
  await dialog.locator('tr[data-name="ssh-testhost"]').click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  await expect(item).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });

  const monitor = page.locator(MONITOR);
  await expect(monitor).toHaveText(
    /^GPU 37% · 12\.1\/24 GiB \| RAM \d+\.\d\/\d+ GiB \| CPU \d+% \| free$/,
    { timeout: 30000 }
  );
  await expect(monitor).toHaveAttribute('title', /GPU 0 Test GPU: 37% busy, 12\.1 of 24\.0 GiB in use/);

  await page.sidebar.openTab('jp-RemoteHW-machines');
  const section = page.locator(SECTION);
  await expect(section).toContainText('gpu.ipynb · Test GPU 24 GiB · testhost');
  await expect(section.locator('[role=meter][aria-label="GPU"]')).toHaveAttribute(
    'aria-valuenow',
    '37'
  );
  await expect(section.locator('[role=meter][aria-label="GPU memory"]')).toHaveAttribute(
    'aria-valuetext',
    '12.1 / 24 GiB'
  );
  await expect(section.locator('[role=meter]')).toHaveCount(4);
  await page.screenshot({ path: path.join(IMAGES, 'hardware-monitor.png') });

  // Leave the SSH host without kernels for the other tests.
  await page.menu.clickMenuItem('Kernel>Shut Down Kernel');
  await expect(monitor).toBeHidden({ timeout: 30000 });
});
