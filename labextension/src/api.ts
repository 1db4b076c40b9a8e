/**
 * Calls to the hardware REST API and the event socket of the Jupyter server.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { IHardware, IHardwareEvent, IMachine } from './model';
import {
  IJoinRequest,
  IJoinResult,
  IRevokeResult,
  IShare,
  IShareRequest,
  IShareResult
} from './sharemodel';
import type { IHibernateAfter } from './hibernateafter';
import type { IEndedMachine } from './machineactions';
import { ICarryListing, ISwitchReport } from './switchmodel';

/** The API's path under the server's base URL. */
export const API_PATH = 'jupyter-remote-hw/api';

/**
 * A request the server refused; carries the server's message, field, step and hint, and
 * its whole answer (`body`: the commands it quotes, the host key to trust).
 */
export class HardwareAPIError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly field?: string,
    readonly step?: string,
    readonly hint?: string,
    readonly body: { [key: string]: any } = {}
  ) {
    super(message);
  }
}

/** The hardware API of one Jupyter server. */
export class HardwareAPI {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  /** Call `path` under the API; the JSON answer. */
  async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const url = URLExt.join(this.settings.baseUrl, API_PATH, path);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this.settings);
    } catch (error) {
      throw new HardwareAPIError(`The Jupyter server cannot be reached: ${error}`, 0);
    }
    const text = await response.text();
    let body: any = {};
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      body = { message: text };
    }
    if (!response.ok) {
      throw new HardwareAPIError(
        body.message || response.statusText,
        response.status,
        body.field,
        body.step,
        body.hint,
        body
      );
    }
    return body as T;
  }

  private post<T>(path: string, body: unknown = {}): Promise<T> {
    return this.request<T>(path, { method: 'POST', body: JSON.stringify(body) });
  }

  /** Every hardware option. */
  async hardware(): Promise<IHardware[]> {
    return (await this.request<{ hardware: IHardware[] }>('hardware')).hardware;
  }

  /** The user's machines. */
  async machines(): Promise<IMachine[]> {
    return (await this.request<{ machines: IMachine[] }>('machines')).machines;
  }

  /** Start, stop or terminate a machine. */
  async machineAction(
    name: string,
    action: 'start' | 'stop' | 'terminate'
  ): Promise<IEndedMachine> {
    const path = `machines/${encodeURIComponent(name)}/${action}`;
    return (await this.post<{ machine: IEndedMachine }>(path)).machine;
  }

  /**
   * What a switch could carry from a session's kernel: variables and modules (with
   * whether `hardware`, the target switched to, has each module, when known).
   */
  async variables(sessionId: string, hardware?: string): Promise<ICarryListing> {
    const query = hardware ? `?hardware=${encodeURIComponent(hardware)}` : '';
    const path = `variables/${encodeURIComponent(sessionId)}${query}`;
    const listing = await this.request<Partial<ICarryListing>>(path);
    return {
      variables: listing.variables ?? [],
      modules: listing.modules ?? [],
      ranks: listing.ranks ?? []
    };
  }

  /** Switch a session's kernel to other hardware, carrying `carry`. */
  switchSession(
    sessionId: string,
    hardware: string,
    carry: string[] | 'all',
    keepOld = false
  ): Promise<ISwitchReport> {
    const path = `switch/${encodeURIComponent(sessionId)}`;
    return this.post<ISwitchReport>(path, { hardware, carry, keep_old: keepOld });
  }

  /**
   * Hibernate a kernel now: its variables saved, its hardware released. What was saved
   * and left out also comes as a `hibernation` event, which the notebook's toolbar shows.
   */
  async hibernate(kernelId: string): Promise<{ hibernated: boolean }> {
    return this.post<{ hibernated: boolean }>(`hibernate/${encodeURIComponent(kernelId)}`, {});
  }

  /**
   * Wake a hibernated kernel (its hardware started again, its variables restored),
   * on `target` when given: the kernel keeps its id and moves there.
   */
  async wake(kernelId: string, target?: string): Promise<{ woken: boolean; target?: string }> {
    const path = `wake/${encodeURIComponent(kernelId)}`;
    return this.post<{ woken: boolean; target?: string }>(path, target ? { target } : undefined);
  }

  /**
   * Set how long a kernel may stay idle before it hibernates (0: never; null: its
   * hardware's time); the time that applies now.
   */
  async setHibernateAfter(
    kernelId: string,
    seconds: number | null
  ): Promise<{ hibernate_after: IHibernateAfter; target_seconds: number }> {
    return this.request(`hibernate-after/${encodeURIComponent(kernelId)}`, {
      method: 'PUT',
      body: JSON.stringify({ seconds })
    });
  }

  /** Cancel the launch of a kernel under way (a SLURM job waiting in the queue). */
  async cancelLaunch(kernelId: string): Promise<void> {
    await this.request<unknown>(`launch/${encodeURIComponent(kernelId)}`, { method: 'DELETE' });
  }

  /** The owner's shares, newest first; `all` adds revoked and expired ones. */
  async listShares(all = false): Promise<IShare[]> {
    const path = all ? 'shares?all=1' : 'shares';
    return (await this.request<{ shares: IShare[] }>(path)).shares;
  }

  /** Share a kernel with a teammate's key; the share and the file to send them. */
  share(request: IShareRequest): Promise<IShareResult> {
    return this.post<IShareResult>('shares', request);
  }

  /** End a share: its key line goes and its connections drop. */
  revoke(shareId: string): Promise<IRevokeResult> {
    const path = `shares/${encodeURIComponent(shareId)}`;
    return this.request<IRevokeResult>(path, { method: 'DELETE' });
  }

  /** Attach a kernel of this server to a teammate's shared kernel. */
  join(request: IJoinRequest): Promise<IJoinResult> {
    return this.post<IJoinResult>('join', request);
  }
}

/**
 * The event socket, reopened after it closes (every 5 s while the server is away).
 */
export class HardwareEvents {
  constructor(readonly settings: ServerConnection.ISettings) {
    this._open();
  }

  /** Every event from the server. */
  get received(): ISignal<this, IHardwareEvent> {
    return this._received;
  }

  /** Close the socket for good. */
  dispose(): void {
    this._disposed = true;
    this._socket?.close();
  }

  private _open(): void {
    if (this._disposed) {
      return;
    }
    let url = URLExt.join(this.settings.wsUrl, API_PATH, 'events');
    const token = this.settings.token;
    if (token && this.settings.appendToken) {
      url += `?token=${encodeURIComponent(token)}`;
    }
    const socket = new this.settings.WebSocket(url);
    socket.onmessage = (message: MessageEvent) => {
      try {
        this._received.emit(JSON.parse(message.data));
      } catch (error) {
        console.warn('jupyter-remote-hw: unreadable event', error);
      }
    };
    socket.onclose = () => {
      if (!this._disposed) {
        setTimeout(() => this._open(), 5000);
      }
    };
    this._socket = socket;
  }

  private _socket: WebSocket | null = null;
  private _disposed = false;
  private _received = new Signal<this, IHardwareEvent>(this);
}
