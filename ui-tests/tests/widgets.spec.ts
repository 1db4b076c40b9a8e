/**
 * The ipywidgets hardware picker (`jupyter_remote_hw.picker()`) in a notebook cell,
 * in JupyterLab and in Notebook 7: the header's columns line up with the rows',
 * nothing overflows the output area or is cut, and unusable AWS rows are folded
 * into one line that expands.
 */
import { expect, test } from '@jupyterlab/galata';
import type { Locator, Page } from '@playwright/test';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const SOURCE = 'import jupyter_remote_hw\njupyter_remote_hw.picker()';
const GRID = '.jp-RemoteHW-widgetGrid';
const COLUMNS = 8;
const FOLD = 'AWS: no credentials — set AWS_PROFILE or run `aws configure`';

test.use({ autoGoto: true });

/**
 * Each header cell starts and ends where the cell below it does (to a pixel), in the
 * row `row` (0: the first row). A row's text cells are grid items of their own.
 */
async function expectAligned(grid: Locator, row = 0): Promise<void> {
  const headers = grid.locator('.jp-RemoteHW-header');
  const cells = grid.locator('.jp-RemoteHW-cell');
  await expect(headers).toHaveCount(COLUMNS);
  for (let column = 0; column < COLUMNS; column++) {
    const header = await headers.nth(column).boundingBox();
    const first = await cells.nth(row * COLUMNS + column).boundingBox();
    expect(header, `header ${column}`).not.toBeNull();
    expect(first, `row cell ${column}`).not.toBeNull();
    expect(Math.abs(header!.x - first!.x), `column ${column} starts`).toBeLessThanOrEqual(1);
    expect(Math.abs(header!.width - first!.width), `column ${column} width`).toBeLessThanOrEqual(1);
  }
}

/** Nothing is wider than the output area, and no cell's text is cut. */
async function expectFits(page: Page, grid: Locator): Promise<void> {
  const sizes = await grid.evaluate(node => {
    const output = node.closest('.jp-OutputArea-output') as HTMLElement;
    const cut = Array.from(node.querySelectorAll<HTMLElement>(':scope > * , :scope > * *'))
      .filter(el => el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0)
      .map(el => `${el.className}: ${el.textContent}`);
    return {
      output: [output.scrollWidth, output.clientWidth],
      grid: [node.scrollWidth, node.clientWidth],
      gridRight: node.getBoundingClientRect().right,
      outputRight: output.getBoundingClientRect().right,
      cut
    };
  });
  expect(sizes.output[0], 'output area scrollWidth <= clientWidth').toBeLessThanOrEqual(sizes.output[1]);
  expect(sizes.grid[0], 'grid scrollWidth <= clientWidth').toBeLessThanOrEqual(sizes.grid[1]);
  expect(sizes.gridRight).toBeLessThanOrEqual(sizes.outputRight + 0.5);
  expect(sizes.cut).toEqual([]);
}

/** The picker's fold line, folded, then expanded to its rows, then folded again. */
async function expectFolded(grid: Locator): Promise<void> {
  const fold = grid.locator('.jp-RemoteHW-fold');
  await expect(fold).toHaveCount(1);
  // The fold line spans the grid's width.
  const spans = await fold.evaluate(node => [
    node.getBoundingClientRect().width,
    node.parentElement!.clientWidth,
    getComputedStyle(node).gridColumn + ' ' + node.outerHTML.slice(0, 300)
  ]);
  expect(Math.abs((spans[0] as number) - (spans[1] as number)), String(spans[2])).toBeLessThanOrEqual(1);
  await expect(fold).toContainText(`▸ ${FOLD} (54 types)`);
  await expect(grid.getByText('p5e.48xlarge · us-east-1')).toHaveCount(0);
  const clicked = Date.now();
  await fold.click();
  await expect(fold).toContainText(`▾ ${FOLD}`);
  const p5e = grid.locator('.jp-RemoteHW-cell', { hasText: 'p5e.48xlarge · us-east-1' });
  await expect(p5e).toHaveCount(1, { timeout: 15000 });
  console.log(`54 folded rows shown ${Date.now() - clicked} ms after the click`);
  // p5e, the accelerator types and the types new to the catalog have no price read yet.
  await expect(grid.locator('.jp-RemoteHW-cell', { hasText: 'price unknown' })).toHaveCount(11);
  await expect(grid.locator('.jp-RemoteHW-cell', { hasText: '$63.30/h' })).toHaveCount(1);
  // Each folded row says why in a few words, not the whole fold line again.
  await expect(grid.locator('.jp-RemoteHW-cell', { hasText: /^no credentials$/ })).toHaveCount(54);
}

/** Search "p5": the fold, still open, holds the four p5 types; the header lines up with them. */
async function searchP5(page: Page, grid: Locator, screenshot: string): Promise<void> {
  await page.locator('.jp-RemoteHW-picker-widget input[type=text]').fill('p5');
  await expect(grid.locator('.jp-RemoteHW-fold')).toContainText(`▾ ${FOLD} (4 types)`);
  // p5e and p5.4xlarge (new to the catalog) have no price read yet.
  await expect(grid.locator('.jp-RemoteHW-cell', { hasText: 'price unknown' })).toHaveCount(2);
  await expectAligned(grid);
  await expectFits(page, grid);
  await page.locator('.jp-OutputArea-output', { has: grid }).screenshot({ path: path.join(IMAGES, screenshot) });
}

test('the ipywidgets picker fits a JupyterLab cell, header aligned with the rows', async ({ page }) => {
  await page.notebook.createNew('widget-picker.ipynb');
  await page.notebook.setCell(0, 'code', SOURCE);
  await page.notebook.runCell(0, true);
  const grid = page.locator(GRID);
  await expect(grid).toBeVisible({ timeout: 60000 });
  await expect(grid.locator('.jp-RemoteHW-fold')).toBeVisible();
  await expectAligned(grid);
  await expectFits(page, grid);
  await expectFolded(grid);
  await expectAligned(grid);
  await expectFits(page, grid);
  await searchP5(page, grid, 'widget-picker-lab.png');
  // A narrow window: the text wraps, still nothing overflows and the columns line up.
  await page.setViewportSize({ width: 760, height: 800 });
  await expectAligned(grid);
  await expectFits(page, grid);
  await grid.locator('.jp-RemoteHW-fold').click();
  await expect(grid.locator('.jp-RemoteHW-fold')).toContainText('▸');
});

test('the ipywidgets picker fits a Notebook 7 cell, header aligned with the rows', async ({
  page,
  context,
  baseURL,
  tmpPath
}) => {
  const file = 'widget-picker-nb7.ipynb';
  const notebook = {
    cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: SOURCE }],
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
    nbformat: 4,
    nbformat_minor: 5
  };
  expect(await page.contents.uploadContent(JSON.stringify(notebook), 'text', `${tmpPath}/${file}`)).toBe(true);

  // Notebook 7's own page, as a plain Playwright page.
  const nb7 = await context.newPage();
  await nb7.goto(`${baseURL}/notebooks/${tmpPath}/${file}`);
  await expect(nb7.locator('#main-panel .jp-Notebook')).toBeVisible({ timeout: 60000 });
  await expect(nb7.locator('.jp-Cell .cm-content').first()).toContainText('jupyter_remote_hw.picker()');
  // Its kernel is started and idle before the cell runs.
  await expect
    .poll(
      async () => {
        const sessions = await (await nb7.request.get(`${baseURL}/api/sessions`)).json();
        const mine = sessions.find((s: { path: string }) => s.path.endsWith(file));
        return mine?.kernel?.execution_state ?? 'none';
      },
      { timeout: 60000 }
    )
    .toBe('idle');
  await nb7.locator('.jp-Cell .cm-content').first().click();
  await nb7.keyboard.press('Shift+Enter');
  const grid = nb7.locator(GRID);
  await expect(grid).toBeVisible({ timeout: 60000 });
  await expect(grid.locator('.jp-RemoteHW-fold')).toBeVisible();
  await expectAligned(grid);
  await expectFits(nb7, grid);
  await expectFolded(grid);
  await expectAligned(grid);
  await expectFits(nb7, grid);
  await searchP5(nb7, grid, 'widget-picker-notebook7.png');
  await nb7.close();
});
