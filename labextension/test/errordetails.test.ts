// JupyterLab's and Lumino's widget packages, as the unit tests stand them in (fakes.ts).
jest.mock('@jupyterlab/apputils', () => jest.requireActual('./fakes').apputils);
jest.mock('@jupyterlab/coreutils', () => jest.requireActual('./fakes').coreutils);
jest.mock('@jupyterlab/services', () => jest.requireActual('./fakes').services);
jest.mock('@lumino/widgets', () => jest.requireActual('./fakes').luminoWidgets);

import { HardwareAPIError } from '../src/api';
import { commandsIn, errorDetails, hostKeyIn } from '../src/errordetails';
import { ErrorBody } from '../src/errors';

const FINGERPRINT = 'SHA256:ROv2lbSq13PnELtUMKtQJ8qzZ+VpjGOl9+aMdrWhXFo';
const UNKNOWN =
  "Launching a kernel on ssh-newbox failed at step 'connect' after 0.0 s: host key of " +
  `newbox (127.0.0.1:2222) is not known: it presents ssh-ed25519 key ${FINGERPRINT}. ` +
  "Nothing was trusted automatically. If that is your machine's key, trust it with " +
  '`jupyter remote-hw trust newbox`, or add it with ' +
  '`ssh-keyscan -p 2222 127.0.0.1 >> ~/.ssh/known_hosts` (or connect once with ' +
  '`ssh newbox` and accept it), then retry.';

describe('commandsIn', () => {
  it('lists each quoted command once, in order', () => {
    expect(commandsIn('run `a b` then `c`', undefined, 'or `a b`')).toEqual(['a b', 'c']);
    expect(commandsIn('nothing to run')).toEqual([]);
    expect(commandsIn('check that `ssh <host>` works')).toEqual([]);
  });
});

describe('hostKeyIn', () => {
  it('reads the alias, its real address and the fingerprint', () => {
    expect(hostKeyIn(UNKNOWN)).toEqual({
      destination: 'newbox',
      host: '127.0.0.1',
      port: 2222,
      fingerprint: FINGERPRINT
    });
  });

  it('reads a host named by its address', () => {
    const message = `host key of 10.0.0.5:22 is not known: it presents ssh-rsa key ${FINGERPRINT}.`;
    expect(hostKeyIn(message)).toEqual({
      destination: '10.0.0.5',
      host: '10.0.0.5',
      port: 22,
      fingerprint: FINGERPRINT
    });
  });

  it('offers nothing to trust for a changed key or another error', () => {
    expect(
      hostKeyIn(`HOST KEY CHANGED for newbox (127.0.0.1:2222): it now presents ${FINGERPRINT}`)
    ).toBeUndefined();
    expect(hostKeyIn('cannot reach deadhost (127.0.0.1:1): Connection refused')).toBeUndefined();
  });
});

describe('errorDetails', () => {
  it("takes the server's fields when it sends them", () => {
    const error = new HardwareAPIError(UNKNOWN, 502, undefined, 'connect', undefined, {
      commands: ['jupyter remote-hw trust newbox'],
      host_key: {
        destination: 'newbox',
        host: 'box.example.org',
        port: 2222,
        fingerprint: FINGERPRINT,
        changed: false
      }
    });
    const details = errorDetails(error);
    expect(details.commands).toEqual(['jupyter remote-hw trust newbox']);
    expect(details.hostKey).toEqual({
      destination: 'newbox',
      host: 'box.example.org',
      port: 2222,
      fingerprint: FINGERPRINT
    });
    expect(details.step).toBe('connect');
  });

  it('never offers to trust a changed key', () => {
    const error = new HardwareAPIError('HOST KEY CHANGED', 502, undefined, 'connect', undefined, {
      host_key: { destination: 'a', host: 'a', port: 22, fingerprint: FINGERPRINT, changed: true }
    });
    expect(errorDetails(error).hostKey).toBeUndefined();
  });

  it('reads any other error from its message', () => {
    const details = errorDetails(new Error(UNKNOWN));
    expect(details.commands).toHaveLength(3);
    expect(details.hostKey?.port).toBe(2222);
    expect(errorDetails('plain').message).toBe('plain');
  });
});

describe('the OS detail', () => {
  const REFUSED =
    "Launching a kernel on ssh-gone failed at step 'connect' after 0.0 s: cannot reach gone " +
    '(127.0.0.1:2) : nothing accepts connections on that port.';
  const OS = "[Errno 111] Connect call failed ('127.0.0.1', 2)";

  it("is taken from the server's answer and shown closed behind Details", () => {
    const error = new HardwareAPIError(REFUSED, 502, undefined, 'connect', undefined, {
      detail: OS
    });
    const details = errorDetails(error);
    expect(details.detail).toBe(OS);
    const body = new ErrorBody(details);
    const toggle = body.node.querySelector('details.jp-RemoteHW-error-detail');
    expect(toggle).not.toBeNull();
    expect((toggle as HTMLDetailsElement).open).toBe(false);
    expect(toggle?.querySelector('summary')?.textContent).toBe('Details');
    expect(toggle?.querySelector('pre')?.textContent).toBe(OS);
    // The words come first and do not repeat the OS's text.
    const message = body.node.querySelector('.jp-RemoteHW-error-message')?.textContent;
    expect(message).toBe(REFUSED);
    expect(message).not.toContain('Errno');
  });

  it('adds no toggle when there is nothing more to say', () => {
    const body = new ErrorBody(errorDetails(new HardwareAPIError(REFUSED, 502)));
    expect(body.node.querySelector('details')).toBeNull();
  });
});
