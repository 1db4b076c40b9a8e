/**
 * A SLURM cluster in the hardware picker (the cluster of ../shared/slurm, its login
 * node the loopback sshd host): its partitions with what is free, and a launch that
 * waits in the queue, showing its place there, until the user cancels it.
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import { execFileSync } from 'child_process';
import * as path from 'path';

const IMAGES = path.resolve(__dirname, '..', '..', 'docs', 'images');
const TOOLBAR = '.jp-RemoteHW-toolbarItem';
const DIALOG = '.jp-Dialog';
const SLURM_CONF = process.env.JRHW_UI_SLURM_CONF ?? '';
/** This run's own job, which takes the cluster's one T4. */
const FILLER = `jrhw-ui-filler-${process.pid}`;

/** Run a SLURM command on this machine (the cluster's login node); its output. */
function slurm(...argv: string[]): string {
  return execFileSync(argv[0], argv.slice(1), {
    env: { ...process.env, SLURM_CONF },
    encoding: 'utf-8',
    timeout: 30000
  }).trim();
}

/** A job's state, empty once SLURM has forgotten it. */
function jobState(jobId: string): string {
  return slurm('squeue', '-h', '-t', 'all', '-j', jobId, '-o', '%T');
}

/** Run a cell as Ctrl+Enter does, without galata's wait for the status bar's "Idle"
 * (two of its items hold the word here: the kernel's name and ours, its idle stop). */
async function runAsTyped(page: IJupyterLabPageFixture, index: number): Promise<void> {
  await page.notebook.selectCells(index);
  await page.keyboard.press('Control+Enter');
}

test.use({ autoGoto: true });

test.skip(
  !SLURM_CONF,
  'SLURM cannot run here: ui-tests/run.sh starts ../shared/slurm/up.sh, which needs root'
);

test.afterEach(() => {
  slurm('scancel', '--name', FILLER);
});

test('SLURM partitions with what is free; a pending launch shows its place in the queue and is cancelled', async ({
  page
}) => {
  await page.notebook.createNew('slurm.ipynb');
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });

  // One row per partition and GPU type, with what is free now.
  await item.click();
  const dialog = page.locator(DIALOG);
  await dialog.locator('input[type=search]').fill('slurm');
  // Four of one node each, and one of two nodes per partition (the cluster's 'nodes').
  await expect(dialog.locator('tr[data-name^="slurm-dev-"]')).toHaveCount(6, { timeout: 30000 });
  const a100 = dialog.locator('tr[data-name="slurm-dev-gpu-a100"]');
  // What one kernel's job gets, the node's after "of"; the columns say the same.
  await expect(a100).toContainText('A100 ×1 of 2 · 1 of 2 CPUs · 1 of 4 GiB');
  await expect(a100.locator('td').nth(3)).toHaveText('1');
  await expect(a100.locator('td').nth(4)).toHaveText('1 GiB');
  await expect(a100.locator('td').last()).toHaveText(/^[0-2] of 2 GPUs free on 1 node$/);
  const t4 = dialog.locator('tr[data-name="slurm-dev-gpu-t4"]');
  await expect(t4.locator('td').last()).toHaveText(/^[01] of 1 GPUs free on 1 node$/);
  await dialog.screenshot({ path: path.join(IMAGES, 'picker-slurm.png') });

  // Another job holds the one T4: a launch there waits in the queue.
  const filler = slurm(
    'sbatch',
    '--parsable',
    '-J',
    FILLER,
    '-p',
    'gpu',
    '--gres=gpu:t4:1',
    '-t',
    '5',
    '-o',
    '/dev/null',
    '--wrap',
    'sleep 300'
  );
  await expect.poll(() => jobState(filler), { timeout: 30000 }).toBe('RUNNING');
  await t4.click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  const busy = page.locator(`${TOOLBAR}.jp-mod-busy`);
  await expect(busy).toContainText(/#1 in the gpu queue \(Resources\), job \d+ PENDING/, {
    timeout: 60000
  });
  await page.locator('.jp-NotebookPanel-toolbar').screenshot({
    path: path.join(IMAGES, 'slurm-queue.png')
  });
  const job = /job (\d+) PENDING/.exec((await busy.textContent()) ?? '')![1];
  expect(jobState(job)).toBe('PENDING');

  // A click on the toolbar during the launch offers to cancel it; cancelling cancels
  // the job and leaves the notebook on its kernel.
  await busy.click();
  const confirm = page.locator(DIALOG);
  await expect(confirm).toContainText(/^Cancel the launch on T4 ×1 of 1 · .* · SLURM dev · gpu\?/);
  await expect(confirm).toContainText('#1 in the gpu queue');
  await confirm.locator('.jp-Dialog-button.jp-mod-accept').click();
  await expect(item).toHaveText('CPU · local', { timeout: 30000 });
  await expect(page.getByText(/The launch on .* was cancelled\./)).toBeVisible();
  await expect.poll(() => jobState(job), { timeout: 20000 }).toMatch(/^(CANCELLED)?$/);
  await page.notebook.setCell(0, 'code', 'print(6 * 7)');
  await page.notebook.runCell(0, true);
  expect((await page.notebook.getCellTextOutput(0))?.join('').trim()).toBe('42');
});

test('A notebook across two nodes: the picker offers the allocation, and %%ranks shows every rank', async ({
  page
}) => {
  await page.notebook.createNew('ranks.ipynb');
  const item = page.locator(TOOLBAR);
  await expect(item).toHaveText('CPU · local', { timeout: 60000 });
  await item.click();
  const dialog = page.locator(DIALOG);
  await dialog.locator('input[type=search]').fill('slurm');
  const both = dialog.locator('tr[data-name="slurm-dev-gpu-gpu-2x1"]');
  await expect(both).toContainText('2 nodes × A100/T4 ×1 of 1', { timeout: 30000 });
  await expect(both.locator('td').last()).toHaveText(
    /^[0-2] of 2 nodes free now; an allocation takes 2$/
  );
  await both.click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  await expect(item).toContainText('SLURM dev', { timeout: 120000 });
  await expect(page.locator(`${TOOLBAR}.jp-mod-busy`)).toHaveCount(0, { timeout: 120000 });

  await page.notebook.setCell(
    0,
    'code',
    [
      '%%ranks',
      'import os, torch, torch.distributed as dist',
      "dist.init_process_group('gloo')",
      't = torch.tensor([dist.get_rank() + 1.0]); dist.all_reduce(t)',
      "print('rank', dist.get_rank(), 'of', dist.get_world_size(), 'on',",
      "      os.environ['SLURMD_NODENAME'], '· sum', t.item())"
    ].join('\n')
  );
  await runAsTyped(page, 0);
  const outputs = page.locator('.jp-Cell').nth(0).locator('.jp-OutputArea-output');
  await expect(outputs).toContainText(['starting 2 ranks on gpu1, gpu2'], { timeout: 60000 });
  await expect(outputs.first()).toContainText('[rank 0] rank 0 of 2 on gpu1 · sum 3.0', {
    timeout: 60000
  });
  await expect(outputs.first()).toContainText('[rank 1] rank 1 of 2 on gpu2 · sum 3.0');
  await page.notebook.addCell('code', '%%ranks\nif dist.get_rank() == 1:\n    1 / 0');
  await runAsTyped(page, 1);
  const error = page.locator('.jp-Cell').nth(1).locator('.jp-OutputArea-output');
  await expect(error).toContainText('rank 1 raised ZeroDivisionError: division by zero', {
    timeout: 60000
  });
  await page
    .locator('.jp-NotebookPanel')
    .first()
    .screenshot({
      path: path.join(IMAGES, 'slurm-ranks.png')
    });

  // The panel's hardware use has each node's bars, the second node read on it.
  await page.sidebar.openTab('jp-RemoteHW-machines');
  const section = page.locator('#jp-RemoteHW-machines .jp-RemoteHW-hardware');
  for (const node of ['gpu1', 'gpu2']) {
    await expect(section.locator(`[role=meter][aria-label="${node} CPU"]`)).toHaveAttribute(
      'aria-valuetext',
      /^\d+%$/,
      { timeout: 30000 }
    );
    await expect(section.locator(`[role=meter][aria-label="${node} RAM"]`)).toHaveAttribute(
      'aria-valuetext',
      /^\d+\.\d \/ \d+ GiB$/
    );
  }
  await page.screenshot({ path: path.join(IMAGES, 'slurm-nodes-panel.png') });

  // A switch away warns first that the ranks end with the old kernel.
  await item.click();
  await dialog.locator('tr[data-name="local"]').click();
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  const warning = page.locator('.jp-RemoteHW-carry .jp-RemoteHW-carryWarning');
  await expect(warning).toHaveText(
    'The 2 %%ranks engines (on gpu1, gpu2) end with the old kernel, and their variables ' +
      'with them. To keep one, cancel and gather it first with `%%ranks --out NAME`.',
    { timeout: 30000 }
  );
  await page.locator(DIALOG).screenshot({ path: path.join(IMAGES, 'switch-ranks.png') });
  await page.locator(`${DIALOG} .jp-Dialog-button.jp-mod-reject`).click();
  await page.kernel.shutdownAll();
});
