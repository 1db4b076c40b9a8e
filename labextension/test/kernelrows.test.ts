import {
  formatUptime,
  kernelFacts,
  kernelRow,
  kernelTitle,
  listingKey,
  tickKernelRows
} from '../src/kernelrows';
import type { IMachine, IMachineKernel } from '../src/model';
import { fakeMachine } from './fakes';

function machine(overrides: Partial<IMachine> = {}): IMachine {
  return fakeMachine({ name: 'gpu-box', hardware: 'A10G 24GB', where: 'gpu-box', ...overrides });
}

const kernel: IMachineKernel = {
  id: '5f46cffa-8194-4208-adaa-5ea21f5a0980',
  owner: 'server',
  execution_state: 'busy',
  state: 'busy',
  kernel_name: 'remote-hw-gpu-box',
  display_name: 'Python 3 (ipykernel)',
  path: 'analysis/train.ipynb',
  started: 1000,
  uptime_seconds: 59,
  cost_so_far: 0
};

describe('kernel rows', () => {
  it('name a kernel by its notebook and kernel name', () => {
    expect(kernelTitle(kernel)).toBe('analysis/train.ipynb · Python 3 (ipykernel)');
    expect(kernelTitle({ ...kernel, path: null, owner: 'magic:host:12' })).toBe(
      '%%remote · Python 3 (ipykernel)'
    );
    // A %%remote kernel whose notebook the server knows is named by it.
    expect(kernelTitle({ ...kernel, owner: 'magic:host:12' })).toBe(
      'analysis/train.ipynb · %%remote'
    );
    expect(kernelTitle({ ...kernel, path: null })).toBe('no notebook · Python 3 (ipykernel)');
  });

  it('count uptime on from the listing and price it by the machine', () => {
    expect(kernelFacts(kernel, machine(), 0)).toEqual(['A10G 24GB', 'busy', 'up 59 s', 'free']);
    expect(kernelFacts(kernel, machine(), 2)).toEqual([
      'A10G 24GB',
      'busy',
      'up 1 min 01 s',
      'free'
    ]);
    const cloud = machine({ price_per_hour: 3.6, state: 'reconnecting' });
    expect(
      kernelFacts({ ...kernel, state: 'reconnecting', uptime_seconds: 3600 }, cloud, 0)
    ).toEqual(['A10G 24GB', 'reconnecting', 'up 1 h 00 min', '$3.60 so far']);
    expect(kernelFacts({ ...kernel, uptime_seconds: 1 }, cloud, 0)[3]).toBe('$0.0010 so far');
    expect(kernelFacts({ ...kernel, uptime_seconds: null }, cloud, 0)).toEqual([
      'A10G 24GB',
      'busy',
      'uptime unknown'
    ]);
    expect(formatUptime(7325)).toBe('2 h 02 min');
  });

  it('show the id only as a tooltip, and tick', () => {
    const list = document.createElement('ul');
    const row = kernelRow(kernel, machine(), 10000, null);
    list.appendChild(row);
    expect(row.textContent).not.toContain('5f46cffa');
    expect(row.title).toContain(kernel.id);
    expect(row.querySelector('button')).toBeNull();
    tickKernelRows(list, 15000);
    expect(row.querySelector('.jp-RemoteHW-kernelFacts')!.textContent).toBe(
      'A10G 24GB · busy · up 1 min 04 s · free'
    );
  });

  it('say when someone else can run code in the kernel, and only then', () => {
    const plain = kernelRow(kernel, machine(), 10000, null);
    expect(plain.querySelector('.jp-RemoteHW-runByOthers')).toBeNull();
    const shared = kernelRow({ ...kernel, run_by_others: true }, machine(), 10000, null);
    const note = shared.querySelector<HTMLElement>('.jp-RemoteHW-runByOthers')!;
    expect(note.textContent).toBe('Others can run code here');
    expect(note.title).toContain('rebuilt only as plain data');
  });

  it("open the kernel's notebook from its title, when it has one", () => {
    const opened: string[] = [];
    const row = kernelRow(kernel, machine(), 10000, null, path => opened.push(path));
    const title = row.querySelector<HTMLButtonElement>('button.jp-RemoteHW-openNotebook')!;
    expect(title.textContent).toBe('analysis/train.ipynb · Python 3 (ipykernel)');
    expect(title.title).toBe(`Open analysis/train.ipynb (kernel ${kernel.id} (remote-hw-gpu-box))`);
    title.click();
    expect(opened).toEqual(['analysis/train.ipynb']);
    const remote = kernelRow(
      { ...kernel, path: null, owner: 'magic:host:1' },
      machine(),
      10000,
      null,
      () => 0
    );
    expect(remote.querySelector('button')).toBeNull();
  });
});

describe('listing key', () => {
  it('changes with states, not with time moving on', () => {
    const one = [machine({ kernels: [kernel] })];
    const later = [
      machine({ cost_so_far: 1, kernels: [{ ...kernel, uptime_seconds: 99, cost_so_far: 2 }] })
    ];
    expect(listingKey(later)).toBe(listingKey(one));
    expect(listingKey([machine({ kernels: [{ ...kernel, state: 'idle' }] })])).not.toBe(
      listingKey(one)
    );
    expect(listingKey([])).not.toBe(listingKey(one));
  });
});

describe('a hibernated kernel', () => {
  const machine = {
    name: 'ssh-box',
    hardware: 'A10G 24 GiB',
    price_per_hour: 1.2,
    kernels: []
  } as unknown as IMachine;
  const kernel: IMachineKernel = {
    id: 'k1',
    owner: 'server',
    execution_state: 'idle',
    state: 'hibernated',
    path: 'train.ipynb',
    uptime_seconds: 3600,
    hibernated: { bytes: 1.5 * 2 ** 30, saved_at: 0, left_out: [] }
  };

  it('says it hibernates, what it keeps and that it costs nothing', () => {
    expect(kernelFacts(kernel, machine, 10)).toEqual([
      'A10G 24 GiB',
      'hibernated',
      '1.5 GiB saved',
      '$0/h'
    ]);
    const failed = { ...kernel, hibernated: { bytes: 512, wake_error: 'host unreachable' } };
    expect(kernelFacts(failed, machine, 0)).toEqual([
      'A10G 24 GiB',
      'hibernated',
      '512 B saved',
      '$0/h',
      'last wake failed: host unreachable'
    ]);
    const waking = { ...kernel, hibernated: { bytes: 2048, waking: true } };
    expect(kernelFacts(waking, machine, 0).slice(1, 3)).toEqual(['waking', '2.0 KiB saved']);
    const kept = { ...kernel, hibernated: { bytes: 2048, kept_on: 'SLURM cluster dev' } };
    expect(kernelFacts(kept, machine, 0)[2]).toBe('2.0 KiB saved on SLURM cluster dev');
  });

  it('has a Wake button, which a running kernel has not', () => {
    const woken: string[] = [];
    const row = kernelRow(kernel, machine, Date.now(), null, null, () => woken.push('k1'));
    const button = row.querySelector<HTMLButtonElement>('button.jp-RemoteHW-wakeKernel');
    expect(button?.textContent).toBe('Wake');
    button?.click();
    expect(woken).toEqual(['k1']);
    const running = kernelRow(
      { ...kernel, state: 'idle', hibernated: null },
      machine,
      Date.now(),
      null,
      null,
      () => woken.push('no')
    );
    expect(running.querySelector('button.jp-RemoteHW-wakeKernel')).toBeNull();
  });
});
