import { Signal } from '@lumino/signaling';

// JupyterLab's packages are ES modules jest does not load; the watch asks through the
// `ask` option here, so the dialog is never built.
jest.mock('@jupyterlab/apputils', () => ({ Dialog: class {}, showDialog: jest.fn() }));

import { KernelGoneWatch, goneQuestion, hardwareEnded } from '../src/kernelgone';
import { MachinesModel } from '../src/machines';
import type { IMachine } from '../src/model';
import { fakeKernel, fakeMachine } from './fakes';

const KERNEL = { id: 'k-1', name: 'remote-hw-ssh-box' };

function machine(state: string, kernels: string[] = ['k-1']): IMachine {
  return fakeMachine({
    state,
    actions: ['start', 'stop'],
    kernels: kernels.map(id => fakeKernel({ id, kernel_name: KERNEL.name, path: 'fit.ipynb' }))
  });
}

/** A notebook's session context: its kernel, the signals, and what was asked of it. */
function notebook(kernel: typeof KERNEL | null = KERNEL) {
  const owner = {};
  const context = {
    name: 'fit.ipynb',
    path: 'analysis/fit.ipynb',
    isTerminating: false,
    isDisposed: false,
    session: kernel ? { kernel } : null,
    kernelPreference: { autoStartDefault: false, shouldStart: true, name: KERNEL.name },
    kernelChanged: new Signal<object, any>(owner),
    sessionChanged: new Signal<object, any>(owner),
    changeKernel: jest.fn(async () => null)
  };
  return context;
}

function watch(listing: IMachine[], context = notebook()) {
  const model = new MachinesModel(
    { machines: async () => listing, wake: jest.fn() } as any,
    null,
    0
  );
  const ask = jest.fn(async () => 'later' as const);
  const pick = jest.fn(async () => undefined);
  const gone = new KernelGoneWatch(context as any, {
    machines: model,
    hardwareLabel: async () => 'A10G 24 GiB · box',
    pick,
    localKernel: () => 'python3',
    ask
  });
  const lose = (how: 'session' | 'kernel') => {
    context.session = null;
    if (how === 'session') {
      context.sessionChanged.emit({ name: 'session', oldValue: {}, newValue: null });
    } else {
      context.kernelChanged.emit({ name: 'kernel', oldValue: KERNEL, newValue: null });
    }
  };
  return { context, model, ask, pick, gone, lose };
}

const flush = () => new Promise(resolve => setTimeout(resolve, 0));

describe('a notebook whose kernel ended', () => {
  it('asks where to run next when the hardware ended, and no cell starts a kernel meanwhile', async () => {
    for (const listing of [[], [machine('stopped', [])], [machine('terminated', [])]]) {
      for (const how of ['session', 'kernel'] as const) {
        const { context, ask, lose } = watch(listing);
        lose(how);
        await flush();
        await flush();
        expect(ask).toHaveBeenCalledTimes(1);
        const [notebookName, hardware, asked] = (ask.mock.calls[0] as unknown[]) ?? [];
        expect(notebookName).toBe('fit.ipynb');
        expect(hardware).toBe('A10G 24 GiB · box');
        expect(asked).toEqual(listing[0] ?? null);
        // "Not now": JupyterLab's next cell opens its kernel picker instead of a kernel.
        expect(context.kernelPreference.shouldStart).toBe(false);
        expect(context.kernelPreference.autoStartDefault).toBe(false);
        expect(context.changeKernel).not.toHaveBeenCalled();
      }
    }
  });

  it('does not ask when the user shut the kernel down on hardware that runs on', async () => {
    const { ask, lose } = watch([machine('running', [])]);
    lose('session');
    await flush();
    await flush();
    expect(ask).not.toHaveBeenCalled();

    const terminating = notebook();
    const { ask: asked, lose: loseIt } = watch([], terminating);
    terminating.isTerminating = true; // JupyterLab's own "Shut Down Kernel"
    loseIt('session');
    await flush();
    expect(asked).not.toHaveBeenCalled();
  });

  it('does not ask for a notebook closed meanwhile, nor when a switch put a kernel in its place', async () => {
    // The tab was closed as the hardware ended: nobody is there to ask.
    const closed = notebook();
    const { ask: askClosed, lose: loseClosed } = watch([], closed);
    closed.isDisposed = true;
    loseClosed('session');
    await flush();
    await flush();
    expect(askClosed).not.toHaveBeenCalled();

    // A switch: the old kernel goes first, the new one comes before the listing is read.
    const { context, ask, lose } = watch([]);
    lose('kernel');
    context.session = { kernel: { id: 'k-2', name: 'remote-hw-ssh-other' } };
    context.kernelChanged.emit({
      name: 'kernel',
      oldValue: null,
      newValue: context.session.kernel
    });
    await flush();
    await flush();
    expect(ask).not.toHaveBeenCalled();
    expect(context.kernelPreference.shouldStart).toBe(true); // JupyterLab's own, untouched
  });

  it('starts what the user chose, and gives JupyterLab its preference back after', async () => {
    const { context, ask, pick, lose } = watch([]);
    ask.mockResolvedValueOnce('again' as any);
    lose('session');
    await flush();
    await flush();
    expect(context.changeKernel).toHaveBeenCalledWith({ name: KERNEL.name });
    // The new kernel arrives: the preference is JupyterLab's again.
    context.session = { kernel: { id: 'k-2', name: KERNEL.name } };
    context.sessionChanged.emit({ name: 'session', oldValue: null, newValue: {} });
    expect(context.kernelPreference.shouldStart).toBe(true);

    ask.mockResolvedValueOnce('local' as any);
    context.session = null;
    context.sessionChanged.emit({ name: 'session', oldValue: {}, newValue: null });
    await flush();
    await flush();
    expect(context.changeKernel).toHaveBeenLastCalledWith({ name: 'python3' });

    ask.mockResolvedValueOnce('other' as any);
    context.session = { kernel: { id: 'k-3', name: KERNEL.name } };
    context.sessionChanged.emit({ name: 'session', oldValue: null, newValue: {} });
    context.session = null;
    context.sessionChanged.emit({ name: 'session', oldValue: {}, newValue: null });
    await flush();
    await flush();
    expect(pick).toHaveBeenCalledTimes(1);
  });
});

describe('the question', () => {
  it('names the notebook, the hardware, how it ended and what is lost', () => {
    expect(hardwareEnded(null)).toBe(true);
    expect(hardwareEnded(machine('terminated'))).toBe(true);
    expect(hardwareEnded(machine('running'))).toBe(false);
    const text = goneQuestion('fit.ipynb', 'A10G 24 GiB · box', machine('terminated', []));
    expect(text).toContain("fit.ipynb's kernel, A10G 24 GiB · box, was terminated");
    expect(text).toContain('variables it held are gone');
    expect(goneQuestion('fit.ipynb', 'box', null)).toContain('was released');
  });
});
