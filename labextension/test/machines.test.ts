import { Signal } from '@lumino/signaling';

import { EVENT_GATHER_MS, MachinesModel, needsListing, withMachine } from '../src/machines';
import type { IHardwareEvent, IMachine } from '../src/model';
import { fakeKernel, fakeMachine } from './fakes';

function machine(name: string, state = 'running', kernels: string[] = []): IMachine {
  return fakeMachine({
    name,
    where: name,
    state,
    actions: ['terminate'],
    kernels: kernels.map(id => fakeKernel({ id, kernel_name: `remote-hw-${name}` }))
  });
}

function event(fields: Partial<IHardwareEvent>): IHardwareEvent {
  return { type: 'machine', time: 0, ...fields } as IHardwareEvent;
}

/** A fake API that counts its fetches and answers with `listing`. */
function fakeAPI(listing: () => IMachine[]) {
  const api = {
    fetches: 0,
    woken: [] as string[],
    machines: async () => {
      api.fetches += 1;
      await new Promise(resolve => setTimeout(resolve, 5));
      return listing();
    },
    wake: async (kernelId: string) => {
      api.woken.push(kernelId);
      return { woken: true };
    }
  };
  return api;
}

const wait = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

describe('the machines model', () => {
  it('shares one fetch among the views that ask at once', async () => {
    const api = fakeAPI(() => [machine('box')]);
    const model = new MachinesModel(api, null, 0);
    const seen: IMachine[][] = [];
    model.changed.connect((_, machines) => seen.push(machines));
    const [a, b, c] = await Promise.all([model.refresh(), model.refresh(), model.refresh()]);
    expect(api.fetches).toBe(1);
    expect(a).toBe(b);
    expect(b).toBe(c);
    expect(seen).toHaveLength(1);
    expect(model.machineOf(null, 'remote-hw-box')?.name).toBe('box');
    await model.refresh();
    expect(api.fetches).toBe(2);
    model.dispose();
  });

  it('takes a machine event as it comes, without fetching', async () => {
    const api = fakeAPI(() => [machine('a'), machine('b')]);
    const received = new Signal<object, IHardwareEvent>({});
    const model = new MachinesModel(api, { received } as never, 0);
    await model.refresh();
    const seen: string[] = [];
    model.changed.connect((_, machines) => seen.push(machines.map(m => m.state).join(',')));
    received.emit(event({ type: 'machine', machine: machine('b', 'terminated') }));
    received.emit(event({ type: 'machine', machine: machine('c', 'pending') }));
    expect(seen).toEqual(['running,terminated', 'running,terminated,pending']);
    // An ended machine may leave the listing: the listing is fetched once to say so.
    await wait(EVENT_GATHER_MS + 50);
    expect(api.fetches).toBe(2);
    expect(seen[seen.length - 1]).toBe('running,running');
    received.emit(event({ type: 'machine', machine: machine('b', 'busy') }));
    await wait(EVENT_GATHER_MS + 50);
    expect(api.fetches).toBe(2);
    model.dispose();
  });

  it('fetches once after the events that only a listing tells, gathered', async () => {
    let listing = [machine('box')];
    const api = fakeAPI(() => listing);
    const received = new Signal<object, IHardwareEvent>({});
    const model = new MachinesModel(api, { received } as never, 0);
    await model.refresh();
    listing = [machine('box', 'running', ['k-1'])];
    received.emit(event({ type: 'launch', step: 'connect', state: 'done' }));
    received.emit(event({ type: 'launch', step: 'connect channels', state: 'done' }));
    received.emit(event({ type: 'hibernation', state: 'hibernated' }));
    await wait(EVENT_GATHER_MS + 50);
    expect(api.fetches).toBe(2);
    expect(model.machineOf('k-1', null)?.name).toBe('box');
    model.dispose();
  });

  it('keeps the last listing and says why when a fetch fails', async () => {
    let fail = false;
    const api = fakeAPI(() => {
      if (fail) {
        throw new Error('the server is gone');
      }
      return [machine('box')];
    });
    const model = new MachinesModel(api, null, 0);
    await model.refresh();
    fail = true;
    await expect(model.refresh()).rejects.toThrow('the server is gone');
    expect(model.machines.map(m => m.name)).toEqual(['box']);
    expect(String(model.error)).toContain('the server is gone');
    fail = false;
    await model.refresh();
    expect(model.error).toBeNull();
    model.dispose();
  });

  it('wakes a kernel and then fetches the listing again', async () => {
    const api = fakeAPI(() => [machine('box', 'running', ['k-1'])]);
    const model = new MachinesModel(api, null, 0);
    await model.wake('k-1');
    await wait(20);
    expect(api.woken).toEqual(['k-1']);
    expect(api.fetches).toBe(1);
    model.dispose();
  });

  it('polls slowly, and not while the page is hidden', async () => {
    jest.useFakeTimers();
    try {
      const api = fakeAPI(() => []);
      const model = new MachinesModel(api, null, 1000);
      jest.advanceTimersByTime(1000);
      expect(api.fetches).toBe(1);
      Object.defineProperty(document, 'visibilityState', { value: 'hidden', configurable: true });
      jest.advanceTimersByTime(5000);
      expect(api.fetches).toBe(1);
      Object.defineProperty(document, 'visibilityState', { value: 'visible', configurable: true });
      model.dispose();
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('what the model makes of events', () => {
  it('fetches after a kernel is up, a launch failed, a hibernation ended or a switch ended', () => {
    expect(needsListing(event({ type: 'launch', step: 'connect channels', state: 'done' }))).toBe(
      true
    );
    expect(needsListing(event({ type: 'launch', step: 'connect', state: 'failed' }))).toBe(true);
    expect(needsListing(event({ type: 'launch', step: 'connect', state: 'done' }))).toBe(false);
    expect(needsListing(event({ type: 'hibernation', state: 'saving' }))).toBe(false);
    expect(needsListing(event({ type: 'hibernation', state: 'hibernated' }))).toBe(true);
    expect(needsListing(event({ type: 'switch', state: 'done' }))).toBe(true);
    expect(needsListing(event({ type: 'share' }))).toBe(false);
  });

  it('puts a machine in the place of the one of its name, or adds it', () => {
    const listing = [machine('a'), machine('b')];
    expect(withMachine(listing, machine('a', 'stopped')).map(m => m.state)).toEqual([
      'stopped',
      'running'
    ]);
    expect(withMachine(listing, machine('c')).map(m => m.name)).toEqual(['a', 'b', 'c']);
    expect(listing.map(m => m.state)).toEqual(['running', 'running']);
  });
});
