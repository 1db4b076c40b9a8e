import {
  IHardware,
  IMachine,
  availabilityText,
  errorText,
  filterHardware,
  formatBytes,
  formatDuration,
  formatPrice,
  gpuText,
  machineOfKernel,
  machineLabel,
  machineStatusText,
  nextSelection,
  pickerColumns,
  targetOfKernel,
  toolbarLabel,
  totalText
} from '../src/model';

function option(overrides: Partial<IHardware>): IHardware {
  return {
    name: 'local',
    kernel_name: 'remote-hw-local',
    provider: 'local',
    label: 'CPU · local',
    hardware: '2 CPUs',
    where: 'this machine',
    gpu: null,
    gpu_count: 0,
    gpu_memory_gib: null,
    vcpus: 2,
    memory_gib: 8,
    price_per_hour: 0,
    usable: true,
    why_not: null,
    machine_state: null,
    source: 'target',
    ...overrides
  };
}

const local = option({});
const a10g = option({
  name: 'g5.xlarge',
  kernel_name: 'remote-hw-g5.xlarge',
  provider: 'aws',
  label: 'A10G 22.4 GiB · g5.xlarge',
  gpu: 'A10G',
  gpu_count: 1,
  gpu_memory_gib: 24,
  vcpus: 4,
  memory_gib: 16,
  price_per_hour: 1.006,
  where: 'us-east-1',
  usable: false,
  why_not: 'no AWS credentials: run aws configure'
});
const a100 = option({
  name: 'p4d.24xlarge',
  provider: 'aws',
  label: 'A100 40 GiB · p4d.24xlarge',
  gpu: 'A100',
  gpu_count: 8,
  gpu_memory_gib: 40,
  vcpus: 96,
  memory_gib: 1152,
  price_per_hour: 32.77,
  where: 'us-east-1'
});
const sshBox = option({
  name: 'ssh-box',
  provider: 'ssh',
  label: 'SSH host · box',
  gpu: null,
  gpu_count: null,
  vcpus: null,
  memory_gib: null,
  where: 'box',
  machine_state: 'running'
});

describe('labels', () => {
  it('names the target of hardware kernels only', () => {
    expect(targetOfKernel('remote-hw-ssh-box')).toBe('ssh-box');
    expect(targetOfKernel('Remote-HW-Local')).toBe('local');
    expect(targetOfKernel('python3')).toBeNull();
    expect(targetOfKernel(undefined)).toBeNull();
  });

  it('shows the price in the toolbar only when there is one', () => {
    expect(toolbarLabel(local)).toBe('CPU · local');
    expect(toolbarLabel(a10g)).toBe('A10G 22.4 GiB · g5.xlarge · $1.01/h');
  });

  it('formats prices, sizes and durations', () => {
    expect(formatPrice(0)).toBe('free');
    expect(formatPrice(null)).toBe('');
    expect(formatPrice(32.77)).toBe('$32.77/h');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(24_000_000)).toBe('22.9 MiB');
    expect(formatBytes(1_500_000_000)).toBe('1.4 GiB');
    expect(formatDuration(4.6)).toBe('5 s');
    expect(formatDuration(720)).toBe('12 min');
    expect(formatDuration(3900)).toBe('1 h 05 min');
  });

  it('fills the picker columns, with blanks for what is unknown', () => {
    expect(pickerColumns(a100)).toEqual([
      'A100 40 GiB · p4d.24xlarge',
      '8 × A100',
      '40 GiB',
      '96',
      '1152 GiB',
      '$32.77/h',
      'us-east-1',
      'ready'
    ]);
    expect(pickerColumns(sshBox)).toEqual([
      'SSH host · box',
      '',
      '',
      '',
      '',
      'free',
      'box',
      'running'
    ]);
    expect(availabilityText({ ...sshBox, machine_state: 'stopped' })).toBe('stopped');
    // A SLURM partition says what is free now; its machine's state, when open, comes first.
    const partition = {
      ...sshBox,
      machine_state: null,
      availability: '1 of 2 GPUs free on 1 node'
    };
    expect(availabilityText(partition)).toBe('1 of 2 GPUs free on 1 node');
    expect(availabilityText({ ...partition, machine_state: 'running' })).toBe('running');
    // An SSH host is ready only once reached; a failed try says why, and for how long.
    expect(availabilityText({ ...sshBox, machine_state: null })).toBe('not connected yet');
    expect(availabilityText({ ...sshBox, provider: 'local', machine_state: null })).toBe('ready');
    const down = { reason: 'unreachable', since: 1000, detail: 'cannot reach box' };
    expect(availabilityText({ ...sshBox, machine_state: null, unreachable: down }, 1300_000)).toBe(
      'unreachable for 5 min'
    );
    const untrusted = { ...down, reason: 'host key not trusted' };
    expect(availabilityText({ ...sshBox, machine_state: null, unreachable: untrusted })).toBe(
      'host key not trusted'
    );
    expect(gpuText(local)).toBe('CPU');
    expect(availabilityText(a10g)).toBe('no AWS credentials: run aws configure');
    // With a reason apart, the column says it; what to do is in the fold line and tooltip.
    expect(
      availabilityText({ ...a10g, reason: 'no credentials', hint: 'run `aws configure`' })
    ).toBe('no credentials');
  });
});

describe('search', () => {
  const all = [local, a10g, a100, sshBox];

  it('matches words anywhere, usable options first', () => {
    expect(filterHardware(all, '').map(o => o.name)).toEqual([
      'local',
      'p4d.24xlarge',
      'ssh-box',
      'g5.xlarge'
    ]);
    expect(filterHardware(all, 'a10g').map(o => o.name)).toEqual(['g5.xlarge']);
    expect(filterHardware(all, 'AWS east').map(o => o.name)).toEqual(['p4d.24xlarge', 'g5.xlarge']);
    expect(filterHardware(all, 'tpu')).toEqual([]);
  });

  it('compares numbers, leaving out rows where the number is unknown', () => {
    expect(filterHardware(all, 'gpu_mem>=40').map(o => o.name)).toEqual(['p4d.24xlarge']);
    expect(filterHardware(all, 'price<=2').map(o => o.name)).toEqual([
      'local',
      'ssh-box',
      'g5.xlarge'
    ]);
    expect(filterHardware(all, 'vcpu>4 aws').map(o => o.name)).toEqual(['p4d.24xlarge']);
  });
});

describe('keyboard selection', () => {
  const shown = [local, a10g, a100, sshBox];

  it('moves over usable options only, wrapping around', () => {
    expect(nextSelection(shown, 'local', 'ArrowDown')?.name).toBe('p4d.24xlarge');
    expect(nextSelection(shown, 'p4d.24xlarge', 'ArrowDown')?.name).toBe('ssh-box');
    expect(nextSelection(shown, 'ssh-box', 'ArrowDown')?.name).toBe('local');
    expect(nextSelection(shown, 'local', 'ArrowUp')?.name).toBe('ssh-box');
  });

  it('starts at an end when nothing is selected, and finds nothing usable in none', () => {
    expect(nextSelection(shown, null, 'ArrowDown')?.name).toBe('local');
    expect(nextSelection(shown, null, 'ArrowUp')?.name).toBe('ssh-box');
    expect(nextSelection([a10g], null, 'ArrowDown')).toBeNull();
  });
});

/** A running cloud machine, as the machines listing gives it. */
const AWS_MACHINE: IMachine = {
  name: 'g5-1',
  provider: 'aws',
  hardware: 'A10G 24 GiB',
  where: 'us-east-1',
  state: 'running',
  kernels: [],
  price_per_hour: 1.006,
  cost_so_far: 0.42,
  idle_stop_in: 1500,
  actions: ['start', 'stop', 'terminate']
};

describe('machines and errors', () => {
  const machine = AWS_MACHINE;

  it('puts state, price, cost and idle countdown in the status bar', () => {
    expect(machineStatusText(machine)).toBe(
      'A10G 24 GiB · us-east-1 · running · $1.01/h · $0.42 so far · idle stop in 25 min'
    );
    expect(
      machineStatusText({ ...machine, price_per_hour: 0, cost_so_far: 0, idle_stop_in: null })
    ).toBe('A10G 24 GiB · us-east-1 · running · free');
  });

  it('names a machine by its hardware and place, its target only when neither is known', () => {
    expect(machineLabel(machine)).toBe('A10G 24 GiB · us-east-1');
    expect(machineLabel({ name: 'local', hardware: 'CPU', where: 'CPU' })).toBe('CPU');
    expect(machineLabel({ name: 'ssh-box', hardware: '', where: ' ' })).toBe('ssh-box');
  });

  it('says which host a lost link is reconnecting to, and for how long', () => {
    const down = { ...machine, state: 'reconnecting', where: 'gpu-box', link_down_since: 1000 };
    expect(machineStatusText(down, 1042.4)).toBe('A10G 24 GiB · gpu-box · reconnecting · 42 s');
    // Without the time (an older server), the plain state.
    expect(machineStatusText({ ...down, link_down_since: null }, 1042)).toBe(
      'A10G 24 GiB · gpu-box · reconnecting · $1.01/h · $0.42 so far · idle stop in 25 min'
    );
  });

  it('adds the step and hint to an error unless the message has them', () => {
    expect(errorText({ message: 'no route', step: 'connect', hint: 'Check ssh works.' })).toBe(
      'no route\nStep: connect\nTry: Check ssh works.'
    );
    expect(
      errorText({
        message: "failed at step 'connect': no route. Check ssh works.",
        step: 'connect',
        hint: 'Check ssh works.'
      })
    ).toBe("failed at step 'connect': no route. Check ssh works.");
  });
});

describe('machineOfKernel', () => {
  function slurmMachine(name: string, kernelIds: string[]): IMachine {
    return {
      name,
      provider: 'slurm',
      hardware: 'A100 ×1',
      where: 'SLURM dev · gpu',
      state: 'running',
      kernels: kernelIds.map(id => ({ id, owner: 'me', execution_state: 'idle' })),
      price_per_hour: 0,
      cost_so_far: 0,
      idle_stop_in: null,
      actions: []
    };
  }
  const first = slurmMachine('slurm-dev-gpu-a100', ['k1', 'k3']);
  const second = slurmMachine('slurm-dev-gpu-a100.2', ['k2']);
  const machines = [first, second];

  it('finds the allocation that lists the kernel, whatever its kernelspec names', () => {
    expect(machineOfKernel(machines, 'k2', 'remote-hw-slurm-dev-gpu-a100')).toBe(second);
    expect(machineOfKernel(machines, 'k3', 'remote-hw-slurm-dev-gpu-a100.1')).toBe(first);
  });

  it("falls back to the kernelspec's target for a kernel not listed yet", () => {
    expect(machineOfKernel(machines, 'k9', 'remote-hw-slurm-dev-gpu-a100')).toBe(first);
    expect(machineOfKernel(machines, 'k9', 'remote-hw-ssh-box')).toBeNull();
    expect(machineOfKernel(machines, null, 'python3')).toBeNull();
  });
});

describe('the total of the machines', () => {
  const base: IMachine = { ...AWS_MACHINE, idle_stop_in: null };

  it('adds what runs now, and what every machine cost so far', () => {
    const stopped = { ...base, name: 'g5-2', state: 'stopped', cost_so_far: 1.1 };
    const down = { ...base, name: 'g5-3', state: 'reconnecting', price_per_hour: 0.5 };
    const owned = { ...base, name: 'ssh-box', provider: 'ssh', price_per_hour: 0, cost_so_far: 0 };
    expect(totalText([base, stopped, down, owned])).toBe('$1.51/h now · $1.94 so far');
  });

  it('says $0/h when nothing is billed, and nothing without machines', () => {
    expect(totalText([{ ...base, state: 'stopped', cost_so_far: 0 }])).toBe('$0.00/h now');
    expect(totalText([])).toBe('');
  });

  it('names a running machine whose price is not known', () => {
    const slurm = {
      ...base,
      name: 'slurm-dev-a100',
      hardware: 'A100 ×1 of 2',
      where: 'SLURM dev',
      price_per_hour: null,
      cost_so_far: null
    };
    expect(totalText([base, slurm])).toBe(
      '$1.01/h now + A100 ×1 of 2 · SLURM dev: price unknown · $0.42 so far'
    );
  });
});
