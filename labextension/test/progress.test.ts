import { applyLaunchEvent, progressText, startsNotebookKernel } from '../src/progress';

describe('launch progress', () => {
  const start = {
    target: 'ssh-box',
    step: 'starting',
    detail: '',
    startedAt: 0,
    failed: false,
    done: false
  };

  it('keeps the kernel being launched, for a cancel', () => {
    expect(start).not.toHaveProperty('kernelId');
    const named = applyLaunchEvent(start, {
      type: 'launch',
      time: 1,
      target: 'ssh-box',
      kernel_id: 'k-42',
      step: 'queue',
      state: 'progress',
      detail: '#1 in the gpu queue (Resources), job 7 PENDING'
    });
    expect(named.kernelId).toBe('k-42');
    // Events without a kernel (the provider's own notices) leave it be.
    const notice = applyLaunchEvent(named, {
      type: 'launch',
      time: 2,
      target: 'ssh-box',
      kernel_id: '',
      step: 'time limit',
      state: 'progress',
      detail: 'job 7 ends in 280 s'
    });
    expect(notice.kernelId).toBe('k-42');
    // Another target's launch is not this one.
    const other = applyLaunchEvent(named, {
      type: 'launch',
      time: 3,
      target: 'local',
      kernel_id: 'k-9',
      step: 'start kernel',
      state: 'started'
    });
    expect(other.kernelId).toBe('k-42');
  });

  it('follows the steps of its own target', () => {
    let progress = applyLaunchEvent(start, {
      type: 'launch',
      time: 1,
      target: 'ssh-box',
      step: 'connect',
      state: 'started'
    });
    expect(progress.step).toBe('connect');
    progress = applyLaunchEvent(progress, {
      type: 'launch',
      time: 2,
      target: 'ssh-box',
      step: 'prepare host',
      state: 'progress',
      detail: 'prepare host: uploading the agent'
    });
    expect(progressText(progress, 3400)).toBe('ssh-box: prepare host · 3 s · uploading the agent');
    const other = applyLaunchEvent(progress, {
      type: 'launch',
      time: 3,
      target: 'local',
      step: 'start kernel',
      state: 'started'
    });
    expect(other).toBe(progress);
    progress = applyLaunchEvent(progress, {
      type: 'launch',
      time: 4,
      target: 'ssh-box',
      step: 'start kernel',
      state: 'failed',
      detail: 'no ipykernel'
    });
    expect(progress.failed).toBe(true);
    expect(progress.step).toBe('start kernel');
  });

  it('ends when the channels are connected', () => {
    const progress = applyLaunchEvent(start, {
      type: 'launch',
      time: 1,
      target: 'ssh-box',
      step: 'connect channels',
      state: 'done'
    });
    expect(progress.done).toBe(true);
  });
});

describe('a launch begun outside the picker', () => {
  const started = {
    type: 'launch' as const,
    time: 1,
    target: 'ssh-box',
    step: 'connect',
    state: 'started'
  };

  it('is followed by the notebook whose kernel is starting there', () => {
    expect(startsNotebookKernel(started, 'remote-hw-ssh-box', 'initializing')).toBe(true);
    expect(startsNotebookKernel(started, 'remote-hw-ssh-box', 'restarting')).toBe(true);
  });

  it('is not followed by other notebooks, nor by one whose kernel runs', () => {
    expect(startsNotebookKernel(started, 'remote-hw-local', 'initializing')).toBe(false);
    expect(startsNotebookKernel(started, 'python3', 'initializing')).toBe(false);
    expect(startsNotebookKernel(started, 'remote-hw-ssh-box', 'idle')).toBe(false);
    expect(
      startsNotebookKernel({ ...started, state: 'progress' }, 'remote-hw-ssh-box', 'starting')
    ).toBe(false);
  });
});
