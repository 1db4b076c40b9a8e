import { Signal } from '@lumino/signaling';

// JupyterLab's and Lumino's widget packages, as the unit tests stand them in (fakes.ts).
jest.mock('@jupyterlab/apputils', () => jest.requireActual('./fakes').apputils);
jest.mock('@jupyterlab/coreutils', () => jest.requireActual('./fakes').coreutils);
jest.mock('@jupyterlab/services', () => jest.requireActual('./fakes').services);
jest.mock('@lumino/widgets', () => jest.requireActual('./fakes').luminoWidgets);

import type { ISessionContext } from '@jupyterlab/apputils';
import type { HardwareAPI, HardwareEvents } from '../src/api';
import { MachinesModel } from '../src/machines';
import type { IMachine, IMachineKernel } from '../src/model';
import {
  RemoteCellsItem,
  remoteCellsOf,
  remoteCellsText,
  remoteCellsTitle,
  runsElsewhere
} from '../src/remotecells';
import { fakeKernel, fakeMachine } from './fakes';

function kernel(id: string, owner: string, path: string | null): IMachineKernel {
  return fakeKernel({ id, owner, path });
}

function machine(name: string, state: string, kernels: IMachineKernel[]): IMachine {
  return fakeMachine({
    name,
    hardware: name === 'ssh-a' ? 'A10G 24 GiB' : 'T4 16 GiB',
    where: name.slice(4),
    state,
    kernels,
    actions: []
  });
}

const MAGIC = 'magic:laptop:4242';

describe('the machines of a notebook’s %%remote cells', () => {
  const listing = [
    machine('ssh-a', 'running', [
      kernel('k1', MAGIC, 'train.ipynb'),
      kernel('k2', 'server', 'train.ipynb'), // the notebook's own kernel: not %%remote
      kernel('k3', MAGIC, 'other.ipynb')
    ]),
    machine('ssh-b', 'reconnecting', [kernel('k4', MAGIC, 'train.ipynb')])
  ];

  it('are those holding a %%remote kernel of that notebook', () => {
    const found = remoteCellsOf(listing, 'train.ipynb');
    expect(found.map(f => [f.machine.name, f.kernels])).toEqual([
      ['ssh-a', 1],
      ['ssh-b', 1]
    ]);
    expect(remoteCellsOf(listing, 'nothing.ipynb')).toEqual([]);
    expect(remoteCellsOf(listing, null)).toEqual([]);
  });

  it('read as hardware, not target names, with a state other than running', () => {
    expect(remoteCellsText(remoteCellsOf(listing, 'other.ipynb'))).toBe('%%remote · A10G 24 GiB');
    expect(remoteCellsText(remoteCellsOf(listing, 'train.ipynb'))).toBe('%%remote · 2 machines');
    expect(remoteCellsText([])).toBe('');
    // A host only the notebook's kernel reaches: its state is not this server's to say.
    const unwatched = [machine('ssh-a', 'unknown', [kernel('k1', MAGIC, 'u.ipynb')])];
    expect(remoteCellsText(remoteCellsOf(unwatched, 'u.ipynb'))).toBe('%%remote · A10G 24 GiB');
    expect(remoteCellsTitle(remoteCellsOf(unwatched, 'u.ipynb'))).toContain(
      'A10G 24 GiB on a: 1 kernel'
    );
    const title = remoteCellsTitle(remoteCellsOf(listing, 'train.ipynb'));
    expect(title).toContain('A10G 24 GiB on a: running, 1 kernel');
    expect(title).toContain('T4 16 GiB on b: reconnecting, 1 kernel');
    expect(title).not.toContain('ssh-');
  });

  it('are looked for after cells that run elsewhere', () => {
    expect(runsElsewhere('%%remote ssh-a\nx = 1')).toBe(true);
    expect(runsElsewhere('  %remote_hw')).toBe(true);
    expect(runsElsewhere('x = "%%remote"')).toBe(false);
  });
});

describe('the toolbar sign', () => {
  it('shows once the listing names a %%remote kernel of the notebook, and reads it again after such a cell ran, not after others', async () => {
    let listing: IMachine[] = [];
    let reads = 0;
    const api = {
      machines: async () => {
        reads += 1;
        return listing;
      }
    } as unknown as HardwareAPI;
    const events = { received: new Signal<object, any>({}) } as unknown as HardwareEvents;
    const model = new MachinesModel(api, events, 0);
    const statusChanged = new Signal<object, string>({});
    const iopubMessage = new Signal<object, any>({});
    const context = {
      path: 'train.ipynb',
      statusChanged,
      iopubMessage
    } as unknown as ISessionContext;
    const ran = (code: string) => {
      statusChanged.emit('busy');
      iopubMessage.emit({ header: { msg_type: 'execute_input' }, content: { code } });
      statusChanged.emit('idle');
    };
    const shown: string[] = [];
    const item = new RemoteCellsItem(model, context, () => shown.push('panel'));
    expect(item.node.classList.contains('jp-mod-empty')).toBe(true);

    // A plain cell ran: the listing is not read for it, even in a notebook that has
    // %%remote cells elsewhere.
    ran('x = 1');
    await Promise.resolve();
    expect(reads).toBe(0);

    // A %%remote cell ran: the listing is read again, and the sign shows its machine.
    listing = [machine('ssh-a', 'running', [kernel('k1', MAGIC, 'train.ipynb')])];
    ran('%%remote ssh-a\ny = 2');
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(reads).toBe(1);
    expect(item.node.classList.contains('jp-mod-empty')).toBe(false);
    expect(item.node.textContent).toBe('%%remote · A10G 24 GiB');
    expect(item.node.classList.contains('jp-mod-notRunning')).toBe(false);
    item.node.click();
    expect(shown).toEqual(['panel']);

    // Its link drops: the sign says so; its kernel ends: the sign goes.
    listing = [machine('ssh-a', 'reconnecting', [kernel('k1', MAGIC, 'train.ipynb')])];
    await model.refresh();
    expect(item.node.textContent).toBe('%%remote · A10G 24 GiB · reconnecting');
    expect(item.node.classList.contains('jp-mod-notRunning')).toBe(true);
    listing = [];
    await model.refresh();
    expect(item.node.classList.contains('jp-mod-empty')).toBe(true);
    item.dispose();
    model.dispose();
  });
});
