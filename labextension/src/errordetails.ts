/**
 * What an error dialog shows of an error: its message, step and hint, the commands it
 * quotes, and the SSH host key it names when the host's key is not known yet.
 */
import type { HardwareAPIError } from './api';

/** An SSH host whose key is not known, as the error names it. */
export interface IHostKey {
  /** The host as the user names it (an ssh_config alias, or a host name). */
  destination: string;
  /** The host name it resolves to (ssh_config's HostName). */
  host: string;
  /** The port it resolves to (ssh_config's Port). */
  port: number;
  /** The SHA256 fingerprint of the key it presents. */
  fingerprint: string;
}

/** What the dialog shows of an error. */
export interface IErrorDetails {
  message: string;
  step?: string;
  hint?: string;
  /** The commands the message and hint quote, to copy. */
  commands: string[];
  /** Set when the error is an SSH host key not known yet, which the user may trust. */
  hostKey?: IHostKey;
  /** The operating system's own text of the failure, shown behind a "Details" toggle. */
  detail?: string;
}

const COMMAND = /`([^`\n]+)`/g;
/** A command with a part to fill in (`ssh <host>`) is an example, not one to copy. */
const PLACEHOLDER = /<[A-Za-z][\w -]*>/;
const UNKNOWN_KEY =
  /host key of (.+?) is not known: it presents \S+ key (SHA256:[A-Za-z0-9+/]{43}=?)/;
const TRUST_COMMAND = /`jupyter remote-hw trust ([^`\s]+)`/;

/** The commands quoted in backticks in `texts`, each once, in order. */
export function commandsIn(...texts: (string | undefined)[]): string[] {
  const found: string[] = [];
  for (const text of texts) {
    for (const match of (text ?? '').matchAll(COMMAND)) {
      if (!found.includes(match[1]) && !PLACEHOLDER.test(match[1])) {
        found.push(match[1]);
      }
    }
  }
  return found;
}

/** The unknown host key a message names ("host key of ALIAS (HOST:PORT) is not known..."). */
export function hostKeyIn(message: string): IHostKey | undefined {
  const match = UNKNOWN_KEY.exec(message);
  if (!match) {
    return undefined;
  }
  const where = /^(?:(\S+) \()?(\S+):(\d+)\)?$/.exec(match[1]);
  if (!where) {
    return undefined;
  }
  const destination = TRUST_COMMAND.exec(message)?.[1] ?? where[1] ?? where[2];
  return {
    destination: destination.replace(/^'(.*)'$/, '$1'),
    host: where[2],
    port: Number(where[3]),
    fingerprint: match[2]
  };
}

/** What to show of `error`: a refused hardware request, a Jupyter server error, or any. */
export function errorDetails(error: unknown): IErrorDetails {
  if (isAPIError(error)) {
    const body = error.body ?? {};
    const key = body.host_key;
    const hostKey: IHostKey | undefined =
      key && key.fingerprint && !key.changed
        ? {
            destination: key.destination,
            host: key.host,
            port: key.port,
            fingerprint: key.fingerprint
          }
        : undefined;
    return {
      message: error.message,
      step: error.step,
      hint: error.hint,
      commands: Array.isArray(body.commands)
        ? body.commands.filter((c: string) => !PLACEHOLDER.test(c))
        : commandsIn(error.message, error.hint),
      hostKey: hostKey ?? hostKeyIn(error.message),
      ...(typeof body.detail === 'string' && body.detail ? { detail: body.detail } : {})
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { message, commands: commandsIn(message), hostKey: hostKeyIn(message) };
}

/** A refused hardware request (api.ts's HardwareAPIError), told by its fields. */
function isAPIError(error: unknown): error is HardwareAPIError {
  return error instanceof Error && 'status' in error && 'body' in error;
}
