/**
 * What the panel says around a stop or a terminate: the confirmation, naming every
 * kernel that will end by its notebook, and the outcome, read from what the server
 * reports it really ended and kept.
 */
import { kernelTitle } from './kernelrows';
import type { IMachineKernel } from './model';
import { IMachine, machineLabel } from './model';

/** Providers of hardware the user owns: a stop ends its kernels and agent, the host runs on. */
export const OWNED_PROVIDERS = ['local', 'ssh'];

/** Whether stopping `machine` ends its kernels and agent only (the host is the user's). */
export function stopsOnlyKernels(machine: IMachine): boolean {
  return OWNED_PROVIDERS.includes(machine.provider);
}

/** A kernel a terminate left on its machine, and why. */
export interface IKeptKernel {
  id: string;
  reason: string;
}

/** The machine after a stop or terminate, with what the server ended and kept. */
export interface IEndedMachine extends IMachine {
  kernels_shut_down?: string[];
  kernels_kept?: IKeptKernel[];
  agent_stopped?: boolean;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

function kernelLine(kernel: IMachineKernel): string {
  const title = kernelTitle(kernel);
  return kernel.state === 'hibernated'
    ? `${title} (hibernated: its saved state is deleted)`
    : title;
}

/** The confirmation: the question and what is lost, then each kernel that ends by its notebook. */
export function endConfirm(
  machine: IMachine,
  action: 'stop' | 'terminate'
): { question: string; kernels: string[] } {
  const kernels = machine.kernels.map(kernelLine);
  if (action === 'stop' && stopsOnlyKernels(machine)) {
    if (!kernels.length) {
      return {
        question: `Stop ${machineLabel(machine)}? No kernel runs there; its agent stops (the host keeps running: it is yours).`,
        kernels
      };
    }
    const these = kernels.length === 1 ? 'this kernel is' : `these ${kernels.length} kernels are`;
    const their = kernels.length === 1 ? 'its' : 'their';
    return {
      question: `Stop ${machineLabel(machine)}? The host keeps running (it is yours), but its agent stops and ${these} shut down, ${their} variables lost:`,
      kernels
    };
  }
  if (action === 'stop') {
    return {
      question: `Stop ${machineLabel(machine)}? Its kernels end and their variables are lost; its disk stays, and it can be started again.`,
      kernels
    };
  }
  if (!kernels.length) {
    return {
      question: `Terminate ${machineLabel(machine)}? No kernel runs there; its agent stops.`,
      kernels
    };
  }
  const these = kernels.length === 1 ? 'This kernel is' : `These ${kernels.length} kernels are`;
  const their = kernels.length === 1 ? 'its' : 'their';
  return {
    question: `Terminate ${machineLabel(machine)}? ${these} shut down and ${their} variables lost:`,
    kernels
  };
}

/** The confirmation as a dialog body: the question, then a list of the kernels. */
export function endConfirmNode(machine: IMachine, action: 'stop' | 'terminate'): HTMLElement {
  const { question, kernels } = endConfirm(machine, action);
  const body = document.createElement('div');
  const text = document.createElement('p');
  text.textContent = question;
  body.appendChild(text);
  if (kernels.length) {
    const list = document.createElement('ul');
    list.className = 'jp-RemoteHW-endList';
    for (const kernel of kernels) {
      const item = document.createElement('li');
      item.textContent = kernel;
      list.appendChild(item);
    }
    body.appendChild(list);
  }
  return body;
}

/** What happened, from the server's answer: what ended, what was kept and why. */
export function endedMessage(
  before: IMachine,
  after: IEndedMachine,
  action: 'stop' | 'terminate'
): { message: string; type: 'success' | 'warning' } {
  if (action === 'stop' && !stopsOnlyKernels(before)) {
    return { message: `${machineLabel(before)}: ${after.state}`, type: 'success' };
  }
  const ended = after.kernels_shut_down ?? [];
  const kept = after.kernels_kept ?? [];
  const parts = [`${machineLabel(before)}: ${plural(ended.length, 'kernel')} shut down`];
  if (!kept.length) {
    const done = action === 'stop' ? 'its agent stopped' : 'terminated';
    parts.push(after.agent_stopped === false ? 'its agent keeps running' : done);
    return { message: parts.join('; '), type: 'success' };
  }
  const titles = new Map(before.kernels.map(k => [k.id, kernelTitle(k)]));
  for (const kernel of kept) {
    parts.push(`kept ${titles.get(kernel.id) ?? 'a kernel'}: ${kernel.reason}`);
  }
  parts.push(`${machineLabel(before)} is still ${after.state}`);
  return { message: parts.join('; '), type: 'warning' };
}
