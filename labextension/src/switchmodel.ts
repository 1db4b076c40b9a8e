/**
 * What the switch routes send and receive. Free of DOM and of JupyterLab, so it
 * is unit tested on its own.
 */

/** A variable of a kernel, for the carry dialog. */
export interface IVariable {
  name: string;
  type: string;
  nbytes: number;
}

/** What a switch did. */
export interface ISwitchReport {
  session_id: string;
  kernel_id: string;
  previous_kernel_id: string;
  hardware: string;
  carried: { name: string; type: string }[];
  not_carried: { name: string; reason: string }[];
}
