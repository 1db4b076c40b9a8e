/**
 * The left sidebar panel "Remote hardware": the user's machines with state and
 * cost, and buttons to stop or terminate them (after confirmation).
 */
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { HardwareAPI, HardwareAPIError, HardwareEvents } from './api';
import { IHardwareEvent, IMachine, errorText, formatCost, formatDuration, formatPrice } from './model';

/** The machines panel. */
export class MachinesPanel extends Widget {
  constructor(readonly api: HardwareAPI, readonly events: HardwareEvents) {
    super();
    this.id = 'jp-RemoteHW-machines';
    this.addClass('jp-RemoteHW-panel');
    this.title.caption = 'Remote hardware';
    const header = document.createElement('header');
    const title = document.createElement('h2');
    title.textContent = 'Remote hardware';
    header.appendChild(title);
    const refresh = document.createElement('button');
    refresh.className = 'jp-RemoteHW-refresh jp-mod-styled';
    refresh.textContent = 'Refresh';
    refresh.setAttribute('aria-label', 'Refresh the machines');
    refresh.addEventListener('click', () => void this.refresh());
    header.appendChild(refresh);
    this.node.appendChild(header);
    this.list = document.createElement('ul');
    this.list.className = 'jp-RemoteHW-machineList';
    this.list.setAttribute('aria-label', 'My machines');
    this.node.appendChild(this.list);
    events.received.connect(this.onEvent, this);
  }

  readonly list: HTMLUListElement;
  machines: IMachine[] = [];

  protected onAfterShow(): void {
    void this.refresh();
  }

  private onEvent(_: HardwareEvents, event: IHardwareEvent): void {
    if (event.type === 'machine' && this.isVisible) {
      void this.refresh();
    }
  }

  /** Fetch and show the machines. */
  async refresh(): Promise<void> {
    try {
      this.machines = await this.api.machines();
    } catch (error) {
      this.list.textContent = '';
      const item = document.createElement('li');
      item.className = 'jp-RemoteHW-error';
      item.textContent = `Machines cannot be listed: ${error}`;
      this.list.appendChild(item);
      return;
    }
    this.render();
  }

  private render(): void {
    this.list.textContent = '';
    if (!this.machines.length) {
      const item = document.createElement('li');
      item.className = 'jp-RemoteHW-empty';
      item.textContent = 'No machines: pick hardware from a notebook toolbar.';
      this.list.appendChild(item);
      return;
    }
    for (const machine of this.machines) {
      this.list.appendChild(this.renderMachine(machine));
    }
  }

  private renderMachine(machine: IMachine): HTMLLIElement {
    const item = document.createElement('li');
    item.className = 'jp-RemoteHW-machine';
    item.dataset.name = machine.name;
    const name = document.createElement('div');
    name.className = 'jp-RemoteHW-machineName';
    name.textContent = `${machine.name} · ${machine.hardware} · ${machine.where}`;
    item.appendChild(name);
    const facts = document.createElement('div');
    facts.className = 'jp-RemoteHW-machineFacts';
    const parts = [
      machine.state,
      `${machine.kernels.length} kernel${machine.kernels.length === 1 ? '' : 's'}`
    ];
    const price = formatPrice(machine.price_per_hour);
    if (price) {
      parts.push(price);
    }
    if (machine.cost_so_far) {
      parts.push(`${formatCost(machine.cost_so_far)} so far`);
    }
    if (machine.idle_stop_in !== null) {
      parts.push(`idle stop in ${formatDuration(machine.idle_stop_in)}`);
    }
    facts.textContent = parts.join(' · ');
    item.appendChild(facts);
    const actions = document.createElement('div');
    actions.className = 'jp-RemoteHW-machineActions';
    for (const action of ['stop', 'terminate'] as const) {
      if (!machine.actions.includes(action)) {
        continue;
      }
      const button = document.createElement('button');
      button.className = `jp-mod-styled jp-RemoteHW-${action}` + (action === 'terminate' ? ' jp-mod-warn' : '');
      button.textContent = action === 'stop' ? 'Stop' : 'Terminate';
      button.setAttribute('aria-label', `${button.textContent} ${machine.name}`);
      button.addEventListener('click', () => void this.act(machine, action));
      actions.appendChild(button);
    }
    item.appendChild(actions);
    return item;
  }

  /** Confirm, then stop or terminate a machine. */
  async act(machine: IMachine, action: 'stop' | 'terminate'): Promise<void> {
    const kernels = machine.kernels.length;
    const what =
      action === 'terminate'
        ? `Terminate ${machine.name}? Its ${kernels} kernel${kernels === 1 ? '' : 's'} will be shut down and unsaved variables lost.`
        : `Stop ${machine.name}? Its kernels end; it can be started again.`;
    const answer = await showDialog({
      title: action === 'terminate' ? 'Terminate machine' : 'Stop machine',
      body: what,
      buttons: [
        Dialog.cancelButton(),
        Dialog.warnButton({ label: action === 'terminate' ? 'Terminate' : 'Stop' })
      ]
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      await this.api.machineAction(machine.name, action);
    } catch (error) {
      const failure = error instanceof HardwareAPIError ? error : { message: String(error) };
      await showErrorMessage(`${action} ${machine.name} failed`, errorText(failure));
    }
    await this.refresh();
  }

  dispose(): void {
    this.events.received.disconnect(this.onEvent, this);
    super.dispose();
  }
}
