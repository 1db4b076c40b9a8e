import { codeParts, foldCount, foldHardware, foldText } from '../src/folding';
import { IHardware } from '../src/model';

function row(name: string, overrides: Partial<IHardware> = {}): IHardware {
  return {
    name,
    kernel_name: `remote-hw-${name}`,
    provider: 'aws',
    provider_title: 'AWS',
    label: name,
    hardware: name,
    where: 'us-east-1',
    gpu: null,
    gpu_count: 0,
    gpu_memory_gib: null,
    vcpus: 2,
    memory_gib: 8,
    price_per_hour: 1,
    usable: false,
    why_not: 'no credentials — set AWS_PROFILE or run `aws configure`',
    reason: 'no credentials',
    hint: 'set AWS_PROFILE or run `aws configure`',
    machine_state: null,
    source: 'catalog',
    ...overrides
  };
}

const local = row('local', {
  provider: 'local',
  provider_title: 'This machine',
  usable: true,
  why_not: null,
  reason: null,
  hint: null
});
const aws = [row('aws-g5-xlarge'), row('aws-p5-48xlarge'), row('aws-p5e-48xlarge')];
const link = row('ssh-box', {
  provider: 'ssh',
  provider_title: 'SSH',
  reason: 'link down',
  hint: 'it is being re-established; try again in a moment',
  why_not: 'link down — it is being re-established; try again in a moment'
});

describe('folding unusable hardware', () => {
  it('folds the rows of a provider with one reason into one line, usable rows first', () => {
    const entries = foldHardware([...aws, local, link], new Set());
    expect(entries.map(e => (e.kind === 'option' ? e.option.name : `fold ${e.fold.key}`))).toEqual([
      'local',
      'fold aws:no credentials',
      'ssh-box' // a lone unusable row stays itself
    ]);
    const fold = entries[1];
    if (fold.kind !== 'fold') {
      throw new Error('not a fold');
    }
    expect(foldText(fold.fold)).toBe(
      'AWS: no credentials — set AWS_PROFILE or run `aws configure`'
    );
    expect(foldCount(fold.fold)).toBe('3 types');
    expect(fold.expanded).toBe(false);
  });

  it('expands a fold to its rows', () => {
    const entries = foldHardware([local, ...aws], new Set(['aws:no credentials']));
    expect(entries.map(e => (e.kind === 'option' ? e.option.name : 'fold'))).toEqual([
      'local',
      'fold',
      'aws-g5-xlarge',
      'aws-p5-48xlarge',
      'aws-p5e-48xlarge'
    ]);
  });

  it('shows the commands of a hint as code', () => {
    expect(codeParts('set AWS_PROFILE or run `aws configure`')).toEqual([
      { text: 'set AWS_PROFILE or run ', code: false },
      { text: 'aws configure', code: true }
    ]);
  });
});
