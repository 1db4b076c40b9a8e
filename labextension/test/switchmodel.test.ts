import { progressText } from '../src/progress';
import {
  ISwitchReport,
  applySwitchEvent,
  importText,
  isCarriable,
  moduleProblem,
  modulesIntro,
  nothingToCarry,
  ranksWarning,
  switchSummary
} from '../src/switchmodel';

describe('the carry dialog', () => {
  it('writes each module as the import that binds it', () => {
    expect(importText({ name: 'json', module: 'json', importable: true })).toBe('import json');
    expect(importText({ name: 'np', module: 'numpy', importable: true })).toBe(
      'import numpy as np'
    );
    expect(importText({ name: 'futures', module: 'concurrent.futures', importable: true })).toBe(
      'from concurrent import futures'
    );
  });

  it('offers unchecked variables and refuses those that failed the check', () => {
    expect(isCarriable({ name: 'x', type: 'int', nbytes: 28 })).toBe(true);
    expect(isCarriable({ name: 'x', type: 'int', nbytes: 28, carriable: true })).toBe(true);
    expect(
      isCarriable({ name: 'lk', type: '_thread.lock', nbytes: 0, carriable: false, reason: 'lock' })
    ).toBe(false);
    expect(nothingToCarry({ variables: [], modules: [] })).toBe(true);
    expect(
      nothingToCarry({ variables: [], modules: [{ name: 'os', module: 'os', importable: true }] })
    ).toBe(false);
  });

  it('warns that running %%ranks engines end with the old kernel, even with nothing to carry', () => {
    const listing = {
      variables: [],
      modules: [],
      ranks: [
        { rank: 0, node: 'gpu1' },
        { rank: 1, node: 'gpu1' },
        { rank: 2, node: 'gpu2' }
      ]
    };
    expect(nothingToCarry(listing)).toBe(false);
    expect(ranksWarning(listing)).toBe(
      'The 3 %%ranks engines (on gpu1, gpu2) end with the old kernel, and their variables ' +
        'with them. To keep one, cancel and gather it first with `%%ranks --out NAME`.'
    );
    expect(ranksWarning({ variables: [], modules: [], ranks: [] })).toBeUndefined();
    expect(ranksWarning({ variables: [], modules: [] })).toBeUndefined();
  });
});

describe('modules in the carry dialog', () => {
  const json = { name: 'json', module: 'json', importable: true };

  it('names a module the new hardware lacks, and one made at run time', () => {
    expect(moduleProblem(json, 'gpu-box')).toBeUndefined();
    expect(moduleProblem({ ...json, installed_there: true }, 'gpu-box')).toBeUndefined();
    expect(
      moduleProblem(
        {
          name: 'torch',
          module: 'torch',
          importable: true,
          installed_there: false,
          missing_reason: "No module named 'torch'"
        },
        'gpu-box'
      )
    ).toBe("not installed on gpu-box (No module named 'torch')");
    expect(
      moduleProblem(
        { name: 'm', module: '__main__', importable: false, reason: 'made at run time' },
        'gpu-box'
      )
    ).toBe('made at run time');
  });

  it('says whether the new hardware was asked', () => {
    expect(modulesIntro([{ ...json, installed_there: true }])).toBe(
      'Re-import these modules in the new kernel:'
    );
    expect(modulesIntro([json])).toContain('any missing there are named after the switch');
  });
});

describe('switch progress', () => {
  const start = {
    target: 'ssh-box',
    step: 'starting kernel',
    detail: '',
    startedAt: 0,
    failed: false,
    done: false
  };

  it('shows the steps of its own session, the copy with bytes and rate', () => {
    const progress = applySwitchEvent(
      start,
      {
        type: 'switch',
        time: 1,
        session_id: 's1',
        hardware: 'ssh-box',
        state: 'carrying variables',
        done: 12.3 * 2 ** 20,
        total: 40 * 2 ** 20,
        detail: '12.3 MiB of 40.0 MiB · 8.1 MiB/s'
      },
      's1'
    );
    expect(progressText(progress, 3000)).toBe(
      'ssh-box: carrying variables · 3 s · 12.3 MiB of 40.0 MiB · 8.1 MiB/s'
    );
    const other = applySwitchEvent(
      progress,
      {
        type: 'switch',
        time: 2,
        session_id: 's2',
        hardware: 'ssh-box',
        state: 'done'
      },
      's1'
    );
    expect(other).toBe(progress);
    const failed = applySwitchEvent(
      progress,
      {
        type: 'switch',
        time: 3,
        session_id: 's1',
        hardware: 'ssh-box',
        state: 'failed',
        message: 'the link dropped'
      },
      's1'
    );
    expect(failed.failed).toBe(true);
    expect(failed.detail).toBe('the link dropped');
  });
});

describe('the summary after a switch', () => {
  const report: ISwitchReport = {
    session_id: 's1',
    kernel_id: 'k2',
    previous_kernel_id: 'k1',
    hardware: 'ssh-box',
    carried: [{ name: 'x', type: 'int' }],
    imported: [{ name: 'np', module: 'numpy' }],
    not_carried: []
  };

  it('says what came across', () => {
    expect(switchSummary('GPU box', report)).toEqual({
      level: 'success',
      text: 'Switched to GPU box; carried x; re-imported np'
    });
  });

  it('names what did not, with the reason', () => {
    const summary = switchSummary('GPU box', {
      ...report,
      not_carried: [{ name: 'torch', module: 'torch', reason: "No module named 'torch'" }]
    });
    expect(summary.level).toBe('warning');
    expect(summary.text).toContain("not carried: torch (No module named 'torch')");
  });
});
