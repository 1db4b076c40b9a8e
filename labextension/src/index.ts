/**
 * Front-end entry point of jupyter-remote-hw.
 *
 * For now the plugin only announces itself; the hardware picker, status bar
 * item, machines panel and share dialog will be registered from here.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

/** Unique id of the main plugin, as listed by JupyterLab's plugin manager. */
export const PLUGIN_ID = 'jupyter-remote-hw:plugin';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Pick cloud and cluster hardware per kernel or per cell.',
  autoStart: true,
  activate: (app: JupyterFrontEnd): void => {
    console.log('jupyter-remote-hw: extension activated');
  }
};

export default plugin;
