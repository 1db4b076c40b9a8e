/**
 * What the switch routes send and receive, and the logic of the carry dialog and
 * of the switch's progress over it. Free of DOM and of JupyterLab, so it is unit
 * tested on its own.
 */
import { IHardwareEvent } from './model';
import { ILaunchProgress } from './progress';

/** A variable of a kernel, for the carry dialog. */
export interface IVariable {
  name: string;
  type: string;
  nbytes: number;
  /** Whether it can be carried (pickled on trial in the kernel); absent: not checked. */
  carriable?: boolean;
  /** False when the kernel ran out of time to check it. */
  checked?: boolean;
  /** Why it cannot be carried. */
  reason?: string;
}

/** A module bound to a name in a kernel (`np` for `import numpy as np`). */
export interface IModule {
  name: string;
  module: string;
  importable: boolean;
  reason?: string;
  /** Whether the hardware switched to has it (known when its machine is open). */
  installed_there?: boolean;
  missing_reason?: string;
}

/** A `%%ranks` engine running beside a kernel. */
export interface IRank {
  rank: number;
  node: string;
}

/** `GET /jupyter-remote-hw/api/variables/<session>`: what a switch could carry. */
export interface ICarryListing {
  variables: IVariable[];
  modules: IModule[];
  /** The `%%ranks` engines running beside the kernel (absent: none). */
  ranks?: IRank[];
}

/** What a switch did. */
export interface ISwitchReport {
  session_id: string;
  kernel_id: string;
  previous_kernel_id: string;
  hardware: string;
  carried: { name: string; type: string }[];
  imported?: { name: string; module: string }[];
  not_carried: { name: string; reason: string; module?: string }[];
}

/** The import statement that binds a module to its name: `import numpy as np`. */
export function importText(module: IModule): string {
  if (module.name === module.module) {
    return `import ${module.name}`;
  }
  if (module.module.endsWith(`.${module.name}`)) {
    const parent = module.module.slice(0, -module.name.length - 1);
    return `from ${parent} import ${module.name}`;
  }
  return `import ${module.module} as ${module.name}`;
}

/** Why a module cannot be re-imported on `hardware`, or undefined when it can (or may). */
export function moduleProblem(module: IModule, hardware: string): string | undefined {
  if (!module.importable) {
    return module.reason || 'it cannot be imported by name';
  }
  if (module.installed_there === false) {
    return `not installed on ${hardware} (${module.missing_reason || 'not found'})`;
  }
  return undefined;
}

/** The line above the modules: whether it is known that the new hardware has them. */
export function modulesIntro(modules: IModule[]): string {
  const known = modules.every(m => !m.importable || m.installed_there !== undefined);
  return known
    ? 'Re-import these modules in the new kernel:'
    : 'Re-import these modules in the new kernel (where installed; any missing there are named after the switch):';
}

/** Whether a variable can be carried (one not checked is offered as carriable). */
export function isCarriable(variable: IVariable): boolean {
  return variable.carriable !== false;
}

/** Whether the listing has nothing to offer, and nothing to warn of. */
export function nothingToCarry(listing: ICarryListing): boolean {
  return !listing.variables.length && !listing.modules.length && !listing.ranks?.length;
}

/**
 * The warning for a kernel whose `%%ranks` engines run: they end with the old
 * kernel and their variables are not carried. Undefined when none run.
 */
export function ranksWarning(listing: ICarryListing): string | undefined {
  const ranks = listing.ranks || [];
  if (!ranks.length) {
    return undefined;
  }
  const nodes = [...new Set(ranks.map(r => r.node))].join(', ');
  const engines = ranks.length === 1 ? 'engine' : 'engines';
  return (
    `The ${ranks.length} %%ranks ${engines} (on ${nodes}) end with the old kernel, and ` +
    'their variables with them. To keep one, cancel and gather it first with ' +
    '`%%ranks --out NAME`.'
  );
}

/**
 * The progress after an event: a `switch` event of `sessionId` sets the step
 * (and the copy's bytes and rate as the detail); others leave it as it is.
 */
export function applySwitchEvent(
  progress: ILaunchProgress,
  event: IHardwareEvent,
  sessionId: string | undefined
): ILaunchProgress {
  if (event.type !== 'switch' || !sessionId || event.session_id !== sessionId) {
    return progress;
  }
  if (event.state === 'failed') {
    return { ...progress, failed: true, detail: event.message || '' };
  }
  return {
    ...progress,
    step: event.state,
    detail: event.detail || '',
    done: event.state === 'done'
  };
}

/** The notification after a switch: what came across, and what did not and why. */
export function switchSummary(
  label: string,
  report: ISwitchReport
): { level: 'success' | 'warning'; text: string } {
  const parts = [`Switched to ${label}`];
  if (report.carried.length) {
    parts.push(`carried ${report.carried.map(c => c.name).join(', ')}`);
  }
  if (report.imported?.length) {
    parts.push(`re-imported ${report.imported.map(m => m.name).join(', ')}`);
  }
  if (!report.not_carried.length) {
    return { level: 'success', text: parts.join('; ') };
  }
  const missing = report.not_carried.map(n => `${n.name} (${n.reason})`).join('; ');
  return { level: 'warning', text: `${parts.join('; ')}; not carried: ${missing}` };
}
