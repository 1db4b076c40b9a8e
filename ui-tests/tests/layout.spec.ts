/**
 * The Remote hardware panel and its confirmation dialog at the window sizes users have
 * (1280×800, 1920×1080), in the light and the dark theme: every control inside the
 * panel (nothing cut off at its right edge or scrolled sideways), each machine's name on
 * one line, the dialog inside the window with its safe button focused, and the colours
 * the theme's own (light text on a dark panel in the dark theme, and the reverse).
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as path from 'path';

import { luminance } from './colours';
import { notebookOn } from './notebooks';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem:visible';
const PANEL = '#jp-RemoteHW-machines';

test.use({ autoGoto: true });

/** The first colour behind `selector` that is not transparent (walking up the tree). */
async function background(page: IJupyterLabPageFixture, selector: string): Promise<string> {
  return page
    .locator(selector)
    .first()
    .evaluate(node => {
      for (let at: Element | null = node; at; at = at.parentElement) {
        const colour = getComputedStyle(at).backgroundColor;
        if (colour && colour !== 'transparent' && !colour.endsWith(', 0)')) {
          return colour;
        }
      }
      return 'rgb(255, 255, 255)';
    });
}

/** Assert that every button and name of the panel lies inside it, nothing scrolled aside. */
async function fitsThePanel(page: IJupyterLabPageFixture): Promise<void> {
  const panel = page.locator(PANEL);
  const box = (await panel.boundingBox())!;
  const outside = await panel.evaluate((node, right) => {
    const cut: string[] = [];
    for (const element of node.querySelectorAll('button, .jp-RemoteHW-machineName')) {
      const rect = element.getBoundingClientRect();
      if (rect.width > 0 && rect.right > right + 1) {
        cut.push(`${element.className}: ${element.textContent} ends at ${rect.right}`);
      }
    }
    return cut;
  }, box.x + box.width);
  expect(outside).toEqual([]);
  expect(await panel.evaluate(node => node.scrollWidth - node.clientWidth)).toBeLessThanOrEqual(0);
  // Each machine's name is one line, elided, not wrapped over several.
  const name = panel.locator('li[data-name="ssh-testhost"] .jp-RemoteHW-machineName');
  const lineHeight = await name.evaluate(node => {
    const style = getComputedStyle(node);
    return parseFloat(style.lineHeight) || 1.5 * parseFloat(style.fontSize); // "normal"
  });
  expect((await name.boundingBox())!.height).toBeLessThan(2 * lineHeight);
}

test('the panel and its confirmation fit at both window sizes, in both themes', async ({
  page,
  tmpPath
}) => {
  await page.contents.uploadContent(
    notebookOn('remote-hw-ssh-testhost', 'x = 1'),
    'text',
    `${tmpPath}/layout.ipynb`
  );
  await page.filebrowser.refresh();
  await page.notebook.open('layout.ipynb');
  await expect(page.locator(TOOLBAR)).toHaveText('Test GPU 24 GiB · testhost', { timeout: 90000 });
  await page.notebook.runCell(0, true);
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const panel = page.locator(PANEL);
  await expect(panel.locator('li[data-name="ssh-testhost"] li.jp-RemoteHW-kernel')).toHaveCount(1, {
    timeout: 30000
  });

  for (const theme of ['light', 'dark'] as const) {
    if (theme === 'dark') {
      await page.theme.setDarkTheme();
    } else {
      await page.theme.setLightTheme();
    }
    for (const size of [
      { width: 1280, height: 800 },
      { width: 1920, height: 1080 }
    ]) {
      await page.setViewportSize(size);
      await expect(
        panel.locator('li[data-name="ssh-testhost"] button.jp-RemoteHW-stop')
      ).toBeVisible();
      await fitsThePanel(page);

      // The theme's colours: light on dark in the dark theme, dark on light otherwise.
      const name = `${PANEL} li[data-name="ssh-testhost"] .jp-RemoteHW-machineName`;
      const text = luminance(
        await page.locator(name).evaluate(node => getComputedStyle(node).color)
      );
      const behind = luminance(await background(page, name));
      if (theme === 'dark') {
        expect(behind).toBeLessThan(0.2);
        expect(text).toBeGreaterThan(0.4);
      } else {
        expect(behind).toBeGreaterThan(0.6);
        expect(text).toBeLessThan(0.2);
      }

      // The confirmation of a stop: inside the window, the safe button focused, Escape
      // closes it and nothing is stopped.
      await panel.locator('li[data-name="ssh-testhost"] button.jp-RemoteHW-stop').click();
      const dialog = page.locator('.jp-Dialog-content');
      await expect(dialog).toBeVisible();
      const box = (await dialog.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.y).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(size.width);
      expect(box.y + box.height).toBeLessThanOrEqual(size.height);
      await expect(dialog.locator('.jp-Dialog-button.jp-mod-reject')).toBeFocused();
      const dialogText = luminance(
        await dialog.locator('.jp-Dialog-body').evaluate(node => getComputedStyle(node).color)
      );
      expect(theme === 'dark' ? dialogText > 0.4 : dialogText < 0.2).toBe(true);
      if (theme === 'dark' && size.width === 1920) {
        await panel.screenshot({ path: path.join(IMAGES, 'machines-panel-dark.png') });
        await dialog.screenshot({ path: path.join(IMAGES, 'stop-confirm-dark.png') });
      }
      await page.keyboard.press('Escape');
      await expect(dialog).toHaveCount(0);
      await expect(panel.locator('li[data-name="ssh-testhost"]')).toContainText('running');
    }
  }
  await page.theme.setLightTheme();
  await page.kernel.shutdownAll();
});
