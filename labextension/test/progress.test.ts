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
    expect(progressText(progress, 3400)).toBe('ssh-box: prepare host (uploading the agent) · 3 s');
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
