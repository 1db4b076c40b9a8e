import {
  HIBERNATE_CHOICES,
  choiceIndex,
  choiceOf,
  formatIdle,
  hibernateAfterText,
  hibernatedStatusDetail,
  hibernatedStatusText,
  kernelOn,
  parseHibernateAfter,
  wakingStatusText
} from '../src/hibernateafter';

describe("a notebook's hibernate time in its metadata", () => {
  it('reads seconds and friendly durations', () => {
    expect(parseHibernateAfter(600)).toBe(600);
    expect(parseHibernateAfter(0)).toBe(0);
    expect(parseHibernateAfter('1800')).toBe(1800);
    expect(parseHibernateAfter('90s')).toBe(90);
    expect(parseHibernateAfter('30m')).toBe(1800);
    expect(parseHibernateAfter(' 1h30m ')).toBe(5400);
    expect(parseHibernateAfter('2H')).toBe(7200);
    expect(parseHibernateAfter('1d')).toBe(86400);
    expect(parseHibernateAfter('never')).toBe(0);
  });

  it("takes null for the hardware's time and leaves out what is not a time", () => {
    expect(parseHibernateAfter(null)).toBeNull();
    expect(parseHibernateAfter(undefined)).toBeUndefined();
    expect(parseHibernateAfter('soon')).toBeUndefined();
    expect(parseHibernateAfter('30 minutes')).toBeUndefined();
    expect(parseHibernateAfter('')).toBeUndefined();
    expect(parseHibernateAfter(-1)).toBeUndefined();
    expect(parseHibernateAfter(8 * 86400)).toBeUndefined(); // over the server's 7 days
    expect(parseHibernateAfter('8d')).toBeUndefined();
    expect(parseHibernateAfter(Number.NaN)).toBeUndefined();
    expect(parseHibernateAfter(true)).toBeUndefined();
    expect(parseHibernateAfter({ seconds: 5 })).toBeUndefined();
  });

  it('says a time as people do', () => {
    expect(formatIdle(0)).toBe('never');
    expect(formatIdle(45)).toBe('45 s');
    expect(formatIdle(600)).toBe('10 min');
    expect(formatIdle(3600)).toBe('1 h');
    expect(formatIdle(5400)).toBe('1 h 30 min');
    expect(formatIdle(2 * 86400 + 3600)).toBe('2 d 1 h');
  });

  it('offers never, four times and the hardware default, and finds the current one', () => {
    expect(HIBERNATE_CHOICES.map(c => c.seconds)).toEqual([0, 600, 1800, 3600, 7200, null]);
    expect(choiceOf(1800)?.label).toBe('30 min');
    expect(choiceOf(undefined)?.label).toBe("The hardware's default");
    expect(choiceOf(null)?.seconds).toBeNull();
    expect(choiceOf(1234)).toBeNull();
    // The dialog preselects by index: the current time, else the hardware's default,
    // never "Never" unless that is the notebook's time.
    expect(choiceIndex(1800)).toBe(2);
    expect(choiceIndex(0)).toBe(0);
    expect(choiceIndex(undefined)).toBe(5);
    expect(choiceIndex(1234)).toBe(5);
  });
});

describe('hibernation in the status bar', () => {
  const saved = {
    bytes: 3 * 2 ** 20,
    left_out: [{ name: 'handle', reason: 'an open file' }],
    waking: false,
    wake_error: null
  };

  it('says a hibernated kernel costs nothing, and how to wake it', () => {
    expect(hibernatedStatusText('ssh-box', saved)).toBe('ssh-box · hibernated · $0/h');
    const detail = hibernatedStatusDetail(saved);
    expect(detail).toContain('3.0 MiB');
    expect(detail).toContain('Not saved: handle.');
    expect(detail).toContain('Click to wake it');
    expect(detail).toContain('saved on the Jupyter server');
    expect(hibernatedStatusDetail({ ...saved, kept_on: 'the disk of gpubox' })).toContain(
      'of its state are saved on the disk of gpubox and its hardware is released'
    );
  });

  it('says when it wakes, and why the last wake failed', () => {
    expect(hibernatedStatusText('ssh-box', { ...saved, waking: true })).toBe('ssh-box · waking');
    expect(hibernatedStatusDetail({ ...saved, waking: true })).toContain('It is waking.');
    expect(hibernatedStatusDetail({ ...saved, wake_error: 'host down' })).toContain(
      'The last wake failed: host down'
    );
    expect(wakingStatusText('restore state', 1000, 5000)).toBe('waking: restore state · 4 s');
    expect(wakingStatusText('', 1000, 1000)).toBe('waking: starting · 0 s');
  });

  it("says a running kernel's hibernate time and whose it is", () => {
    expect(hibernateAfterText({ seconds: 1800, source: 'notebook' })).toBe(
      "Hibernates after 30 min idle (this notebook's setting)."
    );
    expect(hibernateAfterText({ seconds: 1200, source: 'target' })).toBe(
      "Hibernates after 20 min idle (the hardware's setting)."
    );
    expect(hibernateAfterText({ seconds: 0, source: 'notebook' })).toBe(
      "Never hibernates (this notebook's setting)."
    );
    expect(hibernateAfterText({ seconds: 0, source: 'target' })).toBe('');
    expect(hibernateAfterText(null)).toBe('');
  });

  it("finds the notebook's kernel on its machine", () => {
    const kernels = [
      { id: 'a', owner: 'server', execution_state: 'idle' },
      { id: 'b', owner: 'server', execution_state: null, state: 'hibernated' }
    ];
    expect(kernelOn(kernels, 'b')?.state).toBe('hibernated');
    expect(kernelOn(kernels, 'c')).toBeNull();
    expect(kernelOn(kernels, null)).toBeNull();
    expect(kernelOn(undefined, 'a')).toBeNull();
  });
});
