import {
  hibernatedDetail,
  hibernatedLabel,
  hibernatedNotice,
  savingLabel,
  stayedAwakeNotice
} from '../src/hibernation';

describe('a kernel that hibernates, in the toolbar and notices', () => {
  it('shows it costs nothing while it hibernates', () => {
    expect(hibernatedLabel('A10G 24 GiB · box')).toBe('A10G 24 GiB · box · hibernated · $0/h');
  });

  it('shows the save with its bytes', () => {
    const event = { type: 'hibernation' as const, time: 1, kernel_id: 'k', state: 'saving' };
    expect(savingLabel({ ...event, step: 'writing', done: 2 ** 20, total: 2 ** 30 })).toBe(
      'hibernating: writing · 1.0 MiB of 1.0 GiB'
    );
    expect(savingLabel({ ...event, step: 'starting', done: 0, total: 0 })).toBe(
      'hibernating: starting'
    );
  });

  it('says what was kept, what was left out and what happens next', () => {
    const event = {
      type: 'hibernation' as const,
      time: 1,
      kernel_id: 'k',
      state: 'hibernated',
      bytes: 3 * 2 ** 20,
      left_out: [{ name: 'handle', type: 'TextIOWrapper', reason: 'an open file' }]
    };
    const notice = hibernatedNotice(event, 'work/train.ipynb');
    expect(notice).toBe(
      'train.ipynb hibernated ($0/h): 3.0 MiB saved; the next cell wakes it. Not saved: handle.'
    );
    expect(notice.length).toBeLessThanOrEqual(140); // a toast shows no more
    expect(hibernatedNotice({ ...event, left_out: [] }, 'a.ipynb')).not.toContain('Not saved');
    expect(hibernatedDetail(event)).toContain('3.0 MiB');
    expect(hibernatedDetail(event)).toContain('Not saved: handle (an open file).');
    // Where the state waits: the Jupyter server's disk, or the host's own.
    expect(hibernatedDetail(event)).toContain('saved on the Jupyter server (3.0 MiB)');
    expect(hibernatedDetail({ ...event, kept_on: 'the disk of gpubox' })).toContain(
      'saved on the disk of gpubox (3.0 MiB)'
    );
  });

  it('says why a kernel stays awake', () => {
    const event = {
      type: 'hibernation' as const,
      time: 1,
      kernel_id: 'k',
      state: 'failed',
      detail: 'kernel k holds what cannot be saved: handle'
    };
    expect(stayedAwakeNotice(event, 'a.ipynb')).toBe(
      'The kernel of a.ipynb did not hibernate and keeps running: kernel k holds what cannot be saved: handle'
    );
  });
});
