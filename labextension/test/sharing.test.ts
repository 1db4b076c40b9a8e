import {
  IJoinResult,
  IShare,
  activeShares,
  formatAgo,
  formatTimeLeft,
  isSharedKernel,
  joinSummary,
  joinedKernel,
  joinsText,
  parseShareFile,
  publicKeyProblem,
  roleText,
  shareFacts,
  shareFileNote,
  sharedOutput,
  shortKernelId,
  stripAnsi
} from '../src/sharemodel';

const NOW = 1_790_000_000;

function share(overrides: Partial<IShare>): IShare {
  return {
    share_id: 'Qm3kTz0aLx7c',
    role: 'collaborator',
    teammate: 'ada@laptop',
    fingerprint: 'SHA256:abc',
    kernel_id: '3f2a9c1e-5b7d-4c1a-9e0f-123456789abc',
    target: 'ssh-box',
    created: NOW - 600,
    expires: NOW + 8 * 3600 - 600,
    revoked: null,
    state: 'active',
    joins: [],
    ...overrides
  };
}

describe('roles', () => {
  it('says what each role lets the teammate do', () => {
    expect(roleText('viewer')).toBe('viewer: sees outputs only');
    expect(roleText('collaborator')).toBe('collaborator: runs code, sees variables');
    expect(roleText('admin')).toBe('admin');
  });

  it('warns collaborators that the file holds the kernel key, and not viewers', () => {
    expect(shareFileNote('collaborator')).toMatch(/holds the kernel's key.*Send it privately/);
    expect(shareFileNote('viewer')).toMatch(/no kernel key/);
    expect(shareFileNote('viewer')).not.toMatch(/privately/);
  });
});

describe('times', () => {
  it('counts down to the expiry and says when it has passed', () => {
    expect(formatTimeLeft(NOW + 8 * 3600, NOW)).toBe('8 h 00 min left');
    expect(formatTimeLeft(NOW + 125, NOW)).toBe('2 min left');
    expect(formatTimeLeft(NOW + 30, NOW)).toBe('30 s left');
    expect(formatTimeLeft(NOW, NOW)).toBe('expired');
    expect(formatTimeLeft(NOW - 5, NOW)).toBe('expired');
  });

  it('says how long ago something happened', () => {
    expect(formatAgo(NOW - 10, NOW)).toBe('just now');
    expect(formatAgo(NOW - 720, NOW)).toBe('12 min ago');
    expect(formatAgo(NOW - 3900, NOW)).toBe('1 h 05 min ago');
  });
});

describe('shares in the panel', () => {
  it('counts joins and names the latest', () => {
    expect(joinsText(share({}), NOW)).toBe('not joined yet');
    expect(joinsText(share({ joins: [{ time: NOW - 180, detail: 'sshd 42' }] }), NOW)).toBe(
      '1 join, last 3 min ago'
    );
    const joins = [
      { time: NOW - 3600, detail: 'a' },
      { time: NOW - 5, detail: 'b' },
      { time: NOW - 600, detail: 'c' }
    ];
    expect(joinsText(share({ joins }), NOW)).toBe('3 joins, last just now');
  });

  it('shows kernel, machine, time left and joins on one line', () => {
    expect(shortKernelId('3f2a9c1e-5b7d-4c1a')).toBe('3f2a9c1e');
    expect(shareFacts(share({}), NOW)).toBe(
      'kernel 3f2a9c1e on ssh-box · 7 h 50 min left · not joined yet'
    );
    // Where the machines listing knows them: the notebook and the hardware, not ids.
    expect(
      shareFacts(share({}), NOW, { kernel: 'train.ipynb', machine: 'A10G 24 GiB · box' })
    ).toBe('train.ipynb on A10G 24 GiB · box · 7 h 50 min left · not joined yet');
  });

  it('keeps only shares in force, newest first', () => {
    const older = share({ share_id: 'old', created: NOW - 5000 });
    const newer = share({ share_id: 'new', created: NOW - 10 });
    const revoked = share({ share_id: 'rev', state: 'revoked', revoked: NOW - 1 });
    const lapsed = share({ share_id: 'lapsed', expires: NOW - 1 });
    const ids = activeShares([older, revoked, newer, lapsed], NOW).map(s => s.share_id);
    expect(ids).toEqual(['new', 'old']);
  });
});

describe('the teammate key', () => {
  it('accepts a public key line and leaves checking it to the server', () => {
    expect(publicKeyProblem('ssh-ed25519 AAAAC3Nza ada@laptop\n')).toBeNull();
    expect(publicKeyProblem('not a key at all')).toBeNull();
  });

  it('asks for a key when there is none', () => {
    expect(publicKeyProblem('  \n')).toMatch(/\.pub file, one line/);
  });

  it('never lets a private key go out', () => {
    // The armour is put together here, so secret scanners do not take this file for a key.
    const armour = (edge: string) => `-----${edge} OPENSSH ${'PRIVATE'} KEY-----`;
    const pem = `${armour('BEGIN')}\nb3BlbnNzaC1rZXk=\n${armour('END')}`;
    expect(publicKeyProblem(pem)).toMatch(/private key: nothing was sent/);
  });
});

describe('share files', () => {
  const file = {
    format: 'jupyter-remote-hw-share',
    version: 1,
    share_id: 'Qm3kTz0aLx7c',
    role: 'viewer',
    kernel_id: 'k',
    owner: 'root@box',
    host: '127.0.0.1',
    port: 22,
    user: 'root',
    expires: NOW + 60
  };

  it('reads a share file from its JSON', () => {
    expect(parseShareFile(`  ${JSON.stringify(file)}\n`)).toEqual(file);
  });

  it('says why text is not a share file', () => {
    expect(() => parseShareFile('')).toThrow(/Pick the share file/);
    expect(() => parseShareFile('{"format": ')).toThrow(/not JSON/);
    expect(() => parseShareFile('[1, 2]')).toThrow(/not a share file/);
    expect(() => parseShareFile('{"format": "jupyter-kernel"}')).toThrow(
      /"format" is not "jupyter-remote-hw-share"/
    );
  });
});

describe('joins', () => {
  const result: IJoinResult = {
    kernel: { id: 'kid', name: 'remote-hw-share-Qm3k', execution_state: 'idle' },
    kernel_name: 'remote-hw-share-Qm3k',
    display_name: 'Shared by root@box (collaborate)',
    role: 'collaborator',
    owner: 'root@box',
    expires: NOW + 3600
  };

  it('opens the kernel the server started', () => {
    expect(joinedKernel(result)).toEqual({ id: 'kid', name: 'remote-hw-share-Qm3k' });
    const flat = { ...result, kernel: undefined, kernel_id: 'kid2' };
    expect(joinedKernel(flat)).toEqual({ id: 'kid2', name: 'remote-hw-share-Qm3k' });
    expect(() => joinedKernel({ ...result, kernel: undefined })).toThrow(/named no kernel/);
  });

  it('sums up the join', () => {
    expect(joinSummary(result, NOW)).toBe(
      'Attached to the kernel root@box shared, as collaborator; 1 h 00 min left.'
    );
  });
});

describe('outputs of a shared kernel', () => {
  const other = (msgType: string, content: any) => ({
    header: { msg_type: msgType },
    parent_header: { session: 'owner-client' },
    content
  });

  it('knows the kernels that joining installs', () => {
    expect(isSharedKernel('remote-share-qm3ktz0alx7c')).toBe(true);
    expect(isSharedKernel('remote-hw-ssh-box')).toBe(false);
    expect(isSharedKernel(undefined)).toBe(false);
  });

  it("shows other clients' inputs, streams, results and errors", () => {
    expect(
      sharedOutput(other('execute_input', { code: 'print(1)', execution_count: 3 }), 'me')
    ).toEqual({ kind: 'input', text: 'In [3]: print(1)' });
    expect(sharedOutput(other('stream', { name: 'stdout', text: '1\n' }), 'me')).toEqual({
      kind: 'stdout',
      text: '1\n'
    });
    expect(sharedOutput(other('stream', { name: 'stderr', text: 'warn\n' }), 'me')?.kind).toBe(
      'stderr'
    );
    expect(sharedOutput(other('execute_result', { data: { 'text/plain': '42' } }), 'me')).toEqual({
      kind: 'result',
      text: '42'
    });
    const error = other('error', {
      ename: 'NameError',
      evalue: "name 'z' is not defined",
      traceback: ["\u001b[0;31mNameError\u001b[0m: name 'z' is not defined"]
    });
    expect(sharedOutput(error, 'me')).toEqual({
      kind: 'error',
      text: "NameError: name 'z' is not defined"
    });
  });

  it('shows images as images and never HTML', () => {
    const png = other('display_data', {
      data: { 'image/png': 'iVBORw0KGgo=', 'text/plain': '<Figure>' }
    });
    expect(sharedOutput(png, 'me')).toEqual({
      kind: 'result',
      text: '<Figure>',
      image: { mime: 'image/png', data: 'iVBORw0KGgo=' }
    });
    const html = other('display_data', { data: { 'text/html': '<script>x()</script>' } });
    expect(sharedOutput(html, 'me')).toBeNull();
  });

  it("leaves out this page's own requests and status messages", () => {
    const own = {
      ...other('stream', { name: 'stdout', text: 'mine' }),
      parent_header: { session: 'me' }
    };
    expect(sharedOutput(own, 'me')).toBeNull();
    expect(sharedOutput({ ...own, parent_header: {} }, 'me')).toBeNull();
    expect(sharedOutput(other('status', { execution_state: 'busy' }), 'me')).toBeNull();
  });

  it('strips terminal colours', () => {
    expect(stripAnsi('\u001b[1;32mok\u001b[0m')).toBe('ok');
  });
});
