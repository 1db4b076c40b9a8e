import { Signal } from '@lumino/signaling';

// JupyterLab's and Lumino's widget packages, as the unit tests stand them in (fakes.ts).
jest.mock('@jupyterlab/apputils', () => jest.requireActual('./fakes').apputils);
jest.mock('@jupyterlab/coreutils', () => jest.requireActual('./fakes').coreutils);
jest.mock('@jupyterlab/services', () => jest.requireActual('./fakes').services);
jest.mock('@lumino/widgets', () => jest.requireActual('./fakes').luminoWidgets);

import type { HardwareAPI, HardwareEvents } from '../src/api';
import type { IMachineKernel } from '../src/model';
import type { IMachine } from '../src/model';
import { MachinesModel } from '../src/machines';
import { MachineStatus } from '../src/statusbar';
import { fakeKernel, fakeMachine } from './fakes';

const KERNEL_ID = 'k-1';

function machine(kernel: Partial<IMachineKernel>): IMachine {
  return fakeMachine({ kernels: [fakeKernel({ id: KERNEL_ID, ...kernel })] });
}

const flush = () => new Promise(resolve => setTimeout(resolve, 0));

describe('the status bar item while a kernel wakes', () => {
  it('stops saying "waking" once the kernel is idle, even when no wake step says so', async () => {
    let listing = [
      machine({
        state: 'hibernated',
        hibernated: { bytes: 10, saved_at: 1, left_out: [], waking: false, wake_error: null }
      })
    ];
    const api = { machines: async () => listing } as unknown as HardwareAPI;
    const owner = {};
    const received = new Signal<object, any>(owner);
    const events = { received } as unknown as HardwareEvents;
    const model = new MachinesModel(api, events, 0);
    const status = new MachineStatus(events, model);
    const statusChanged = new Signal<object, string>(owner);
    const context = {
      session: { kernel: { id: KERNEL_ID, name: 'remote-hw-ssh-box' } },
      kernelChanged: new Signal<object, unknown>(owner),
      statusChanged
    };
    status.sessionContext = context as any;
    await flush();
    expect(status.hibernated).toBe(true);

    // A cell wakes it: a step shows; then the last step's event is lost.
    received.emit({
      type: 'launch',
      time: 0,
      kernel_id: KERNEL_ID,
      step: 'connect',
      state: 'started'
    });
    expect(status.node.classList.contains('jp-mod-waking')).toBe(true);
    expect(status.text).toContain('connect');
    listing = [machine({})];
    statusChanged.emit('idle');
    await flush();
    expect(status.node.classList.contains('jp-mod-waking')).toBe(false);
    expect(status.text).toContain('A10G 24 GiB · box');
    expect(status.text).not.toContain('waking');
    status.dispose();
    model.dispose();
  });
});
