import type { IMachineKernel } from '../src/model';
import { endConfirm, endConfirmNode, endedMessage } from '../src/machineactions';
import { IMachine } from '../src/model';
import { fakeKernel, fakeMachine } from './fakes';

function kernel(overrides: Partial<IMachineKernel> = {}): IMachineKernel {
  return fakeKernel({
    kernel_name: 'remote-hw-gpu-box',
    path: 'train.ipynb',
    started: 1000,
    uptime_seconds: 59,
    ...overrides
  });
}

function machine(kernels: IMachineKernel[]): IMachine {
  return fakeMachine({ name: 'gpu-box', hardware: 'A10G 24GB', where: 'gpu-box', kernels });
}

describe('the terminate confirmation', () => {
  it('names every kernel that ends by its notebook, %%remote and hibernated ones too', () => {
    const three = machine([
      kernel(),
      kernel({ id: 'k-2', owner: 'magic:laptop:12', path: null }),
      kernel({ id: 'k-3', path: 'old.ipynb', state: 'hibernated' })
    ]);
    const { question, kernels } = endConfirm(three, 'terminate');
    expect(question).toBe(
      'Terminate A10G 24GB · gpu-box? These 3 kernels are shut down and their variables lost:'
    );
    expect(kernels).toEqual([
      'train.ipynb · Python 3 (ipykernel)',
      '%%remote · Python 3 (ipykernel)',
      'old.ipynb · Python 3 (ipykernel) (hibernated: its saved state is deleted)'
    ]);
    const node = endConfirmNode(three, 'terminate');
    expect(Array.from(node.querySelectorAll('li')).map(li => li.textContent)).toEqual(kernels);
  });

  it('says when nothing runs there', () => {
    const { question, kernels } = endConfirm(machine([]), 'terminate');
    expect(question).toBe('Terminate A10G 24GB · gpu-box? No kernel runs there; its agent stops.');
    expect(kernels).toEqual([]);
    expect(endConfirmNode(machine([]), 'terminate').querySelector('ul')).toBeNull();
  });
});

describe('what a terminate reports', () => {
  it('says terminated only when nothing was kept', () => {
    const before = machine([kernel({ owner: 'magic:laptop:12', path: null })]);
    const done = endedMessage(
      before,
      {
        ...before,
        state: 'terminated',
        kernels_shut_down: ['k-1'],
        kernels_kept: [],
        agent_stopped: true
      },
      'terminate'
    );
    expect(done).toEqual({
      message: 'A10G 24GB · gpu-box: 1 kernel shut down; terminated',
      type: 'success'
    });
  });

  it('names what was kept and why, and the state the machine is really in', () => {
    const before = machine([kernel(), kernel({ id: 'k-2', path: 'other.ipynb' })]);
    const reason = 'started by another Jupyter server of yours; shut it down from there';
    const done = endedMessage(
      before,
      {
        ...before,
        state: 'running',
        kernels_shut_down: ['k-1'],
        kernels_kept: [{ id: 'k-2', reason }],
        agent_stopped: false
      },
      'terminate'
    );
    expect(done.type).toBe('warning');
    expect(done.message).toBe(
      `A10G 24GB · gpu-box: 1 kernel shut down; kept other.ipynb · Python 3 (ipykernel): ${reason}; A10G 24GB · gpu-box is still running`
    );
  });
});

describe('stopping hardware the user owns', () => {
  it('ends its kernels and agent and says the host runs on', () => {
    const host = machine([kernel()]);
    expect(endConfirm(host, 'stop').question).toBe(
      'Stop A10G 24GB · gpu-box? The host keeps running (it is yours), but its agent stops and this kernel is shut down, its variables lost:'
    );
    expect(endConfirm(machine([]), 'stop').question).toBe(
      'Stop A10G 24GB · gpu-box? No kernel runs there; its agent stops (the host keeps running: it is yours).'
    );
    const done = endedMessage(
      host,
      {
        ...host,
        state: 'stopped',
        kernels_shut_down: ['k-1'],
        kernels_kept: [],
        agent_stopped: true
      },
      'stop'
    );
    expect(done).toEqual({
      message: 'A10G 24GB · gpu-box: 1 kernel shut down; its agent stopped',
      type: 'success'
    });
  });

  it('keeps a cloud machine’s stop as it was: its kernels end, its disk stays', () => {
    const cloud = { ...machine([kernel()]), provider: 'aws', actions: ['stop', 'terminate'] };
    expect(endConfirm(cloud, 'stop').question).toContain('its disk stays');
    expect(endedMessage(cloud, { ...cloud, state: 'stopped' }, 'stop')).toEqual({
      message: 'A10G 24GB · gpu-box: stopped',
      type: 'success'
    });
  });
});
