/**
 * The status bar at the window sizes users have (1280×800, 1920×1080): with a kernel on
 * the SSH host, our items (its machine, its hardware use) fit beside JupyterLab's own,
 * nothing is pushed off the bar (the notification bell stays on screen), and the
 * details are on hover.
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

import { notebookOn } from './notebooks';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem:visible';

test.use({ autoGoto: true });

for (const size of [
  { width: 1280, height: 800 },
  { width: 1920, height: 1080 }
]) {
  test(`the status bar fits at ${size.width}×${size.height}`, async ({ page, tmpPath }) => {
    await page.setViewportSize(size);
    const file = `status-${size.width}.ipynb`;
    const notebook = notebookOn('remote-hw-ssh-testhost', 'x = 1');
    expect(await page.contents.uploadContent(notebook, 'text', `${tmpPath}/${file}`)).toBe(true);
    await page.filebrowser.refresh();
    await page.notebook.open(file);
    await expect(page.locator(TOOLBAR)).toHaveText('Test GPU 24 GiB · testhost', {
      timeout: 90000
    });
    await page.notebook.runCell(0, true);

    const machine = page.locator('.jp-RemoteHW-status');
    const use = page.locator('.jp-RemoteHW-monitor');
    await expect(machine).toContainText('Test GPU 24 GiB · testhost', { timeout: 30000 });
    await expect(use).toContainText('GPU', { timeout: 30000 });
    // The details are on hover.
    await expect(machine).toHaveAttribute('title', /^Remote hardware: Test GPU 24 GiB · testhost/);
    expect(await use.getAttribute('title')).toBeTruthy();

    // Nothing is pushed off the bar: the bell is on screen, the bar does not overflow.
    const bar = page.locator('#jp-main-statusbar');
    const bell = bar.locator('.jp-Notification-Status');
    await expect(bell).toBeVisible();
    const box = await bell.boundingBox();
    expect(box).not.toBeNull();
    expect(box!.x + box!.width).toBeLessThanOrEqual(size.width);
    const overflow = await bar.evaluate(node => node.scrollWidth - node.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await bar.screenshot({ path: path.join(IMAGES, `statusbar-${size.width}.png`) });

    await page.kernel.shutdownAll();
  });
}
