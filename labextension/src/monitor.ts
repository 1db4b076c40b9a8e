/**
 * The live hardware view of the current notebook's kernel: GPU, memory and CPU use
 * and what the machine costs, read every few seconds from the host's agent (through
 * GET /jupyter-remote-hw/api/usage/<kernel>), shown in the status bar and as the
 * "Hardware" section of the "Remote hardware" panel. Reading stops while no notebook
 * is current and while the browser tab is hidden.
 */
import { ILabShell } from '@jupyterlab/application';
import { ISessionContext } from '@jupyterlab/apputils';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { HardwareAPI } from './api';
import { IKernelMetrics, costLine, meters, metricsText, metricsTooltip } from './metrics';

/** Milliseconds between readings. */
export const POLL_MS = 3000;

/** What the poller knows now. */
export interface IMetricsState {
  /** The kernel followed; null when no notebook with a kernel is current. */
  kernelId: string | null;
  /** The notebook's path, for the panel's heading. */
  path: string | null;
  metrics: IKernelMetrics | null;
  /** Why the last reading failed, or null. */
  error: string | null;
}

/** Reads the current notebook kernel's hardware use every {@link POLL_MS} ms. */
export class MetricsPoller {
  constructor(
    readonly api: HardwareAPI,
    readonly currentPath: () => string | null = () => null,
    readonly interval = POLL_MS
  ) {
    document.addEventListener('visibilitychange', this._onVisibility);
  }

  /** Emitted after every reading, and when the notebook followed changes. */
  get changed(): ISignal<this, IMetricsState> {
    return this._changed;
  }

  get state(): IMetricsState {
    return this._state;
  }

  /** Follow another notebook (or none: reading stops). */
  set sessionContext(context: ISessionContext | null) {
    if (context === this._context) {
      return;
    }
    this._context?.kernelChanged.disconnect(this._restart, this);
    this._context?.sessionChanged.disconnect(this._restart, this);
    this._context?.disposed.disconnect(this._closed, this);
    this._context = context;
    context?.kernelChanged.connect(this._restart, this);
    context?.sessionChanged.connect(this._restart, this);
    context?.disposed.connect(this._closed, this);
    this._restart();
  }

  /** The notebook followed was closed. */
  private _closed(): void {
    this.sessionContext = null;
  }

  /** Read now, then every interval while someone can see it. */
  private _restart(): void {
    window.clearTimeout(this._timer);
    this._timer = 0;
    this._generation++; // a reading under way is for what was followed before
    const kernelId = this._context?.session?.kernel?.id ?? null;
    if (kernelId !== this._state.kernelId) {
      this._state = { kernelId, path: this.currentPath(), metrics: null, error: null };
      this._changed.emit(this._state);
    }
    if (kernelId && !document.hidden) {
      void this._read(kernelId);
    }
  }

  private async _read(kernelId: string): Promise<void> {
    const generation = ++this._generation;
    let metrics: IKernelMetrics | null = null;
    let error: string | null = null;
    try {
      metrics = await this.api.request<IKernelMetrics>(`usage/${encodeURIComponent(kernelId)}`);
    } catch (failure) {
      error = failure instanceof Error ? failure.message : String(failure);
    }
    if (generation !== this._generation || this._disposed) {
      return; // the notebook or kernel changed meanwhile; that reading is under way
    }
    this._state = { ...this._state, path: this.currentPath(), metrics, error };
    this._changed.emit(this._state);
    if (!document.hidden) {
      this._timer = window.setTimeout(() => void this._read(kernelId), this.interval);
    }
  }

  private _onVisibility = (): void => {
    if (document.hidden) {
      window.clearTimeout(this._timer);
      this._timer = 0;
      this._generation++;
    } else {
      this._restart();
    }
  };

  dispose(): void {
    this._disposed = true;
    window.clearTimeout(this._timer);
    document.removeEventListener('visibilitychange', this._onVisibility);
    Signal.clearData(this);
  }

  private _context: ISessionContext | null = null;
  private _state: IMetricsState = { kernelId: null, path: null, metrics: null, error: null };
  private _changed = new Signal<this, IMetricsState>(this);
  private _timer = 0;
  private _generation = 0;
  private _disposed = false;
}

/** The status bar item: `GPU 37% · 12.1/80 GiB | RAM 6.2/31 GiB | CPU 14% | $4.10/h · $1.23`. */
export class MetricsStatus extends Widget {
  constructor(poller: MetricsPoller) {
    super();
    this.addClass('jp-RemoteHW-monitor');
    this.node.setAttribute('role', 'status');
    this.node.setAttribute('aria-label', "Hardware use of the notebook's kernel");
    poller.changed.connect((_, state) => this.render(state), this);
    this.render(poller.state);
  }

  /** Show a state: hidden without a kernel; the reason when it cannot be read. */
  render(state: IMetricsState): void {
    this.setHidden(!state.kernelId);
    if (state.metrics) {
      this.node.textContent = metricsText(state.metrics);
      this.node.title = metricsTooltip(state.metrics);
      this.node.dataset.time = String(state.metrics.time);
      this.removeClass('jp-mod-unavailable');
    } else if (state.error) {
      this.node.textContent = 'Hardware use unavailable';
      this.node.title = state.error;
      this.addClass('jp-mod-unavailable');
    } else {
      this.node.textContent = 'Hardware…';
      this.node.title = "Reading the hardware use of the notebook's kernel";
    }
  }
}

/** The panel's "Hardware" section: bars for each GPU's use and memory, RAM and CPU. */
export class HardwareSection {
  constructor(poller: MetricsPoller) {
    this.node = document.createElement('section');
    this.node.className = 'jp-RemoteHW-hardware';
    this.node.setAttribute('aria-labelledby', 'jp-RemoteHW-hardwareTitle');
    const title = document.createElement('h3');
    title.id = 'jp-RemoteHW-hardwareTitle';
    title.textContent = 'Hardware';
    this.node.appendChild(title);
    this._where = document.createElement('div');
    this._where.className = 'jp-RemoteHW-hardwareWhere';
    this.node.appendChild(this._where);
    this._bars = document.createElement('div');
    this._bars.className = 'jp-RemoteHW-meters';
    this.node.appendChild(this._bars);
    this._cost = document.createElement('div');
    this._cost.className = 'jp-RemoteHW-hardwareCost';
    this.node.appendChild(this._cost);
    poller.changed.connect((_, state) => this.render(state), this);
    this.render(poller.state);
  }

  readonly node: HTMLElement;

  /** Draw a state. */
  render(state: IMetricsState): void {
    this._bars.textContent = '';
    this._cost.textContent = '';
    const metrics = state.metrics;
    if (!state.kernelId) {
      this._where.textContent = 'Open a notebook to see the hardware its kernel runs on.';
      return;
    }
    const notebook = state.path ? state.path.split('/').pop() : 'this notebook';
    if (!metrics) {
      this._where.textContent = state.error
        ? `${notebook}: hardware use unavailable. ${state.error}`
        : `${notebook}: reading…`;
      return;
    }
    this._where.textContent =
      `${notebook} · ${metrics.hardware} · ${metrics.where || 'this machine'}` +
      (metrics.gpus.length ? '' : ' · no GPU');
    this._where.title = metricsTooltip(metrics);
    for (const meter of meters(metrics)) {
      const row = document.createElement('div');
      row.className = 'jp-RemoteHW-meter';
      row.dataset.label = meter.label;
      const label = document.createElement('span');
      label.className = 'jp-RemoteHW-meterLabel';
      label.textContent = meter.label;
      const bar = document.createElement('div');
      bar.className = 'jp-RemoteHW-meterBar';
      bar.setAttribute('role', 'meter');
      bar.setAttribute('aria-label', meter.label);
      bar.setAttribute('aria-valuemin', '0');
      bar.setAttribute('aria-valuemax', '100');
      const fill = document.createElement('div');
      fill.className = 'jp-RemoteHW-meterFill';
      const percent = Math.max(0, Math.min(100, meter.percent ?? 0));
      if (meter.percent !== null) {
        bar.setAttribute('aria-valuenow', String(Math.round(percent)));
      }
      bar.setAttribute('aria-valuetext', meter.text);
      fill.style.width = `${percent}%`;
      fill.classList.toggle('jp-mod-high', percent >= 90);
      bar.appendChild(fill);
      const value = document.createElement('span');
      value.className = 'jp-RemoteHW-meterValue';
      value.textContent = meter.text;
      row.append(label, bar, value);
      this._bars.appendChild(row);
    }
    this._cost.textContent = costLine(metrics);
  }

  private _where: HTMLElement;
  private _bars: HTMLElement;
  private _cost: HTMLElement;
}

/** Where the live view goes and which notebook is current. */
export interface IMonitorOptions {
  api: HardwareAPI;
  statusBar: IStatusBar | null;
  labShell: ILabShell | null;
  /** The panel that takes the "Hardware" section. */
  panel: { addSection(node: HTMLElement): void };
  /** The current notebook's session, or null when the current widget is not a notebook. */
  currentSession: () => ISessionContext | null;
  /** The current notebook's path (it follows renames). */
  currentPath: () => string | null;
}

/** Add the live hardware view to the status bar and the panel; returns its poller. */
export function addHardwareMonitor(options: IMonitorOptions): MetricsPoller {
  const poller = new MetricsPoller(options.api, options.currentPath);
  if (options.statusBar) {
    const followed = new Signal<MetricsPoller, void>(poller);
    poller.changed.connect(() => followed.emit());
    options.statusBar.registerStatusItem('jupyter-remote-hw:monitor', {
      item: new MetricsStatus(poller),
      align: 'left',
      rank: 5,
      // The status bar shows or hides its items itself when the current widget changes.
      isActive: () => poller.state.kernelId !== null,
      activeStateChanged: followed
    });
  }
  options.panel.addSection(new HardwareSection(poller).node);
  const follow = (): void => {
    poller.sessionContext = options.currentSession();
  };
  options.labShell?.currentChanged.connect(follow);
  follow();
  return poller;
}
