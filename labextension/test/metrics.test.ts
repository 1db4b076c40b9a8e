import {
  IKernelMetrics,
  costLine,
  costSummary,
  formatGiB,
  formatTimeLeft,
  gpuSummary,
  isTimeLimitWarning,
  meters,
  metricsText,
  metricsTooltip
} from '../src/metrics';

function reading(overrides: Partial<IKernelMetrics> = {}): IKernelMetrics {
  return {
    kernel_id: 'k1',
    target: 'ssh-gpu-box',
    hardware: 'H100 80GB',
    where: 'gpu-box',
    time: 1000,
    cpu: { percent: 14.2, count: 8 },
    load: [0.5, 0.42, 0.3],
    memory: { used_gib: 6.21, total_gib: 31.2, percent: 19.9 },
    gpus: [
      {
        index: 0,
        name: 'NVIDIA H100 80GB HBM3',
        utilization: 37,
        memory_used_gib: 12.1,
        memory_total_gib: 79.65
      }
    ],
    kernel: { pid: 4242, cpu_percent: 3.4, memory_gib: 0.25 },
    warnings: [],
    price_per_hour: 4.1,
    cost_so_far: 1.234,
    ...overrides
  };
}

describe('the status bar text', () => {
  it('reads like Colab: GPU, RAM, CPU, then $/h and cost so far', () => {
    expect(metricsText(reading())).toBe(
      'GPU 37% · 12.1/80 GiB | RAM 6.2/31 GiB | CPU 14% | $4.10/h · $1.23'
    );
  });

  it('says no GPU and free on hardware the user owns', () => {
    expect(metricsText(reading({ gpus: [], price_per_hour: 0, cost_so_far: 0 }))).toBe(
      'no GPU | RAM 6.2/31 GiB | CPU 14% | free'
    );
  });

  it('sums several GPUs with their mean use', () => {
    const gpu = reading().gpus[0];
    const gpus = [gpu, { ...gpu, index: 1, utilization: 63, memory_used_gib: 30 }];
    expect(gpuSummary(gpus)).toBe('2 GPUs 50% · 42.1/159 GiB');
  });

  it('marks what nvidia-smi does not know', () => {
    const gpu = { ...reading().gpus[0], utilization: null, memory_total_gib: null };
    expect(gpuSummary([gpu])).toBe('GPU ?% · 12.1/? GiB');
  });

  it('says when no price is known', () => {
    expect(costSummary(reading({ price_per_hour: null, cost_so_far: null }))).toBe('price unknown');
    expect(costLine(reading({ price_per_hour: null }))).toBe(
      'Cost: no price known for this hardware'
    );
    expect(costLine(reading())).toBe('Cost: $4.10/h, $1.23 so far');
  });

  it('keeps a decimal for small sizes', () => {
    expect(formatGiB(7.81, true)).toBe('7.8');
    expect(formatGiB(79.65, true)).toBe('80');
    expect(formatGiB(null)).toBe('?');
  });
});

describe('the tooltip', () => {
  it('details every GPU, memory, CPU, the kernel, the cost and warnings', () => {
    const text = metricsTooltip(
      reading({ warnings: ['nvidia-smi failed: driver'] }),
      new Date(1003000)
    );
    expect(text.split('\n')).toEqual([
      "Hardware of this notebook's kernel: H100 80GB · gpu-box (ssh-gpu-box)",
      'GPU 0 NVIDIA H100 80GB HBM3: 37% busy, 12.1 of 79.7 GiB in use',
      'RAM: 6.2 of 31.2 GiB in use (20%)',
      'CPU: 14% of 8 CPUs; load 0.50 0.42 0.30',
      'Kernel process 4242: 3% of a CPU, 0.3 GiB',
      'Cost: $4.10/h, $1.23 so far',
      '⚠ nvidia-smi failed: driver',
      'Read 3 s ago'
    ]);
  });
});

describe('the panel bars', () => {
  it('has GPU use and memory, RAM and CPU', () => {
    const bars = meters(reading());
    expect(bars.map(b => [b.label, b.text])).toEqual([
      ['GPU', '37%'],
      ['GPU memory', '12.1 / 80 GiB'],
      ['RAM', '6.2 / 31 GiB'],
      ['CPU', '14%']
    ]);
    expect(bars[1].percent).toBeCloseTo(15.19, 1);
  });

  it('has only RAM and CPU without a GPU', () => {
    expect(meters(reading({ gpus: [] })).map(b => b.label)).toEqual(['RAM', 'CPU']);
  });

  it("has each node's bars in an allocation of several nodes, and says which was not read", () => {
    const here = reading();
    const metrics = reading({
      nodes: [
        { node: 'gpu1', cpu: here.cpu, memory: here.memory, gpus: here.gpus },
        {
          node: 'gpu2',
          cpu: { percent: 80, count: 4 },
          memory: { used_gib: 2, total_gib: 8, percent: 25 },
          gpus: [{ ...here.gpus[0], utilization: 90 }]
        },
        { node: 'gpu3', error: 'its use was not read: no answer within 15 s' }
      ]
    });
    expect(meters(metrics).map(b => [b.label, b.text])).toEqual([
      ['gpu1 GPU', '37%'],
      ['gpu1 GPU memory', '12.1 / 80 GiB'],
      ['gpu1 RAM', '6.2 / 31 GiB'],
      ['gpu1 CPU', '14%'],
      ['gpu2 GPU', '90%'],
      ['gpu2 GPU memory', '12.1 / 80 GiB'],
      ['gpu2 RAM', '2.0 / 8.0 GiB'],
      ['gpu2 CPU', '80%'],
      ['gpu3 use', 'its use was not read: no answer within 15 s']
    ]);
    const tooltip = metricsTooltip(metrics, new Date(1000 * 1000));
    expect(tooltip).toContain('Node gpu2: GPU 90% · 12.1/80 GiB | RAM 2.0/8.0 GiB | CPU 80%');
    expect(tooltip).toContain('Node gpu3: its use was not read: no answer within 15 s');
  });
});

describe('a machine with a time limit (a SLURM job)', () => {
  it('says the time left in the status bar and the tooltip', () => {
    const metrics = reading({ time_left_seconds: 545 });
    expect(metricsText(metrics).endsWith(' | 9 min left')).toBe(true);
    expect(metricsTooltip(metrics, new Date(1000 * 1000))).toContain(
      'Time limit: 9 min left; the kernel ends with the allocation'
    );
    expect(metricsText(reading())).not.toContain('left');
    expect(metricsText(reading({ time_left_seconds: null }))).not.toContain('left');
  });

  it('reads the time left as people say it', () => {
    expect(formatTimeLeft(45.9)).toBe('45 s');
    expect(formatTimeLeft(60)).toBe('1 min');
    expect(formatTimeLeft(3900)).toBe('1 h 05 min');
    expect(formatTimeLeft(-3)).toBe('0 s');
  });

  it("knows the scheduler's early warning among the events", () => {
    const warning = {
      type: 'launch' as const,
      time: 1,
      step: 'time limit',
      state: 'progress',
      detail: 'SLURM job 7 ends in 60 s (its time limit): save your work; the kernel ends with it'
    };
    expect(isTimeLimitWarning(warning)).toBe(true);
    expect(isTimeLimitWarning({ ...warning, step: 'queue' })).toBe(false);
    expect(isTimeLimitWarning({ ...warning, type: 'machine' as const })).toBe(false);
    expect(isTimeLimitWarning({ ...warning, detail: '' })).toBe(false);
  });
});
