/**
 * Front-end entry point of jupyter-remote-hw: the notebook toolbar's hardware
 * picker, the status bar item, the "Remote hardware" sidebar panel, their
 * commands and settings.
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ISessionContext, MainAreaWidget } from '@jupyterlab/apputils';
import { DocumentRegistry, IDocumentWidget } from '@jupyterlab/docregistry';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { HardwareAPI, HardwareEvents } from './api';
import { showError } from './errors';
import { KernelGoneWatch } from './kernelgone';
import { MachinesModel } from './machines';
import { targetOfKernel, toolbarLabel } from './model';
import { MachinesPanel } from './panel';
import { HardwareStore, HardwareToolbarItem, IPickerSettings } from './picker';
import { SharedOutputsView } from './sharedoutputs';
import { joinShare } from './sharing';
import { joinedKernel } from './sharemodel';
import { addHardwareMonitor } from './monitor';
import { IMetadataModel, NotebookHibernateTime } from './notebooktime';
import { RemoteCellsItem } from './remotecells';
import { MachineStatus } from './statusbar';

/** Unique id of the main plugin, as listed by JupyterLab's plugin manager. */
export const PLUGIN_ID = 'jupyter-remote-hw:plugin';

/** Command ids. */
export namespace CommandIDs {
  export const pick = 'remote-hw:pick-hardware';
  export const machines = 'remote-hw:show-machines';
  export const refresh = 'remote-hw:refresh-machines';
  export const join = 'remote-hw:join-shared-session';
  export const hibernateAfter = 'remote-hw:hibernate-after';
  export const hibernateNow = 'remote-hw:hibernate-now';
}

const CHIP_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
  '<path class="jp-icon3" fill="#616161" d="M9 3v2H7a2 2 0 0 0-2 2v2H3v2h2v2H3v2h2v2a2 2 0 0 0 2 2h2v2h2v-2h2v2h2v-2h2a2 2 0 0 0 2-2v-2h2v-2h-2v-2h2V9h-2V7a2 2 0 0 0-2-2h-2V3h-2v2h-2V3H9zm-2 4h10v10H7V7zm2 2v6h6V9H9z"/>' +
  '</svg>';

/** The sidebar's icon: a chip. */
export const chipIcon = new LabIcon({ name: 'jupyter-remote-hw:chip', svgstr: CHIP_SVG });

/** The session of a notebook panel, or null for other widgets. */
function sessionOf(widget: Widget | null): ISessionContext | null {
  if (!widget || !widget.hasClass('jp-NotebookPanel')) {
    return null;
  }
  return (widget as IDocumentWidget).context?.sessionContext ?? null;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Pick cloud and cluster hardware per kernel from the notebook toolbar.',
  autoStart: true,
  optional: [ICommandPalette, ISettingRegistry, IStatusBar, ILabShell],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    labShell: ILabShell | null
  ): void => {
    const api = new HardwareAPI(app.serviceManager.serverSettings);
    const events = new HardwareEvents(app.serviceManager.serverSettings);
    // One listing of the machines, read by every view below (machines.ts).
    const machinesModel = new MachinesModel(api, events);
    const store = new HardwareStore(api, machinesModel);
    const settings: IPickerSettings = { carryByDefault: true };
    const items = new Map<string, HardwareToolbarItem>();
    const times = new Map<string, NotebookHibernateTime>();

    // The toolbar item of every notebook.
    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (panel: IDocumentWidget, context: DocumentRegistry.IContext<any>) => {
        const item = new HardwareToolbarItem(
          context.sessionContext,
          store,
          events,
          app.serviceManager,
          () => settings
        );
        if (!panel.toolbar.insertBefore('kernelName', 'remoteHardware', item)) {
          panel.toolbar.addItem('remoteHardware', item);
        }
        items.set(panel.id, item);
        // The machines this notebook's %%remote cells run on (remotecells.ts).
        const remoteCells = new RemoteCellsItem(
          machinesModel,
          context.sessionContext,
          () => void app.commands.execute(CommandIDs.machines)
        );
        if (!panel.toolbar.insertAfter('remoteHardware', 'remoteCells', remoteCells)) {
          panel.toolbar.addItem('remoteCells', remoteCells);
        }
        // A kernel whose hardware ended is not replaced without asking (kernelgone.ts).
        const gone = new KernelGoneWatch(context.sessionContext, {
          machines: machinesModel,
          hardwareLabel: async target => {
            const option = (await store.options()).find(o => o.name === target);
            return option ? toolbarLabel(option) : target;
          },
          pick: () => item.pick(),
          localKernel: () => {
            const name = app.serviceManager.kernelspecs.specs?.default ?? 'python3';
            return targetOfKernel(name) ? 'python3' : name;
          }
        });
        // The notebook's own hibernate time, sent whenever its kernel starts or changes.
        times.set(
          panel.id,
          new NotebookHibernateTime(
            context.sessionContext,
            () => (context.model as unknown as IMetadataModel) ?? null,
            api
          )
        );
        // The live outputs of a shared kernel, shown only when the kernel is one.
        if (panel instanceof MainAreaWidget) {
          panel.contentHeader.addWidget(new SharedOutputsView(context.sessionContext));
        }
        panel.disposed.connect(() => {
          gone.dispose();
          remoteCells.dispose();
          items.delete(panel.id);
          times.delete(panel.id);
        });
        return item;
      }
    });

    // Join a teammate's shared kernel: attach a kernel here, open a notebook on it.
    const join = async (): Promise<void> => {
      const result = await joinShare(api);
      if (!result) {
        return;
      }
      try {
        const kernel = joinedKernel(result);
        await app.serviceManager.kernelspecs.refreshSpecs();
        const model = await app.commands.execute('docmanager:new-untitled', {
          path: '',
          type: 'notebook'
        });
        await app.commands.execute('docmanager:open', {
          path: model.path,
          factory: 'Notebook',
          kernel
        });
      } catch (error) {
        await showError(
          'Opening a notebook on the shared kernel failed',
          `${error}\nThe kernel "${result.display_name}" is attached: pick it in a notebook's kernel menu.`
        );
      }
    };

    // The sidebar panel.
    const machines = new MachinesPanel(api, events, machinesModel, join);
    machines.openNotebook = path => void app.commands.execute('docmanager:open', { path });
    machines.title.icon = chipIcon;
    app.shell.add(machines, 'left', { rank: 950 });

    // The status bar item.
    const status = new MachineStatus(events, machinesModel);
    let showStatus = true;
    const statusShown = new Signal<MachineStatus, void>(status);
    if (statusBar) {
      statusBar.registerStatusItem('jupyter-remote-hw:status', {
        item: status,
        align: 'left',
        rank: 4,
        isActive: () => showStatus,
        activeStateChanged: statusShown
      });
    }
    const follow = (): void => {
      status.sessionContext = sessionOf(app.shell.currentWidget);
    };
    labShell?.currentChanged.connect(follow);
    follow();

    // The live hardware view of the current notebook's kernel (status bar and panel).
    addHardwareMonitor({
      api,
      statusBar,
      labShell,
      panel: machines,
      currentSession: () => sessionOf(app.shell.currentWidget),
      currentPath: () =>
        sessionOf(app.shell.currentWidget)
          ? (app.shell.currentWidget as IDocumentWidget).context.path
          : null
    });

    const currentItem = (): HardwareToolbarItem | null => {
      const widget = app.shell.currentWidget;
      return widget ? (items.get(widget.id) ?? null) : null;
    };

    app.commands.addCommand(CommandIDs.pick, {
      label: 'Pick Hardware for This Notebook…',
      caption: "Switch the notebook's kernel to other hardware",
      isEnabled: () => currentItem() !== null,
      execute: () => currentItem()?.pick()
    });
    const currentTime = (): NotebookHibernateTime | null => {
      const widget = app.shell.currentWidget;
      return widget ? (times.get(widget.id) ?? null) : null;
    };
    app.commands.addCommand(CommandIDs.hibernateAfter, {
      label: 'Hibernate After…',
      caption:
        "How long this notebook's kernel may stay idle before it hibernates; kept in the notebook",
      isEnabled: () => currentTime() !== null,
      execute: () => currentTime()?.choose()
    });
    app.commands.addCommand(CommandIDs.hibernateNow, {
      label: 'Hibernate Now',
      caption:
        "Save this notebook's variables and release its hardware ($0/h); the next cell wakes it",
      isEnabled: () => currentTime()?.canHibernate ?? false,
      execute: () => currentTime()?.hibernateNow()
    });
    for (const selector of ['.jp-RemoteHW-toolbarItem', '.jp-RemoteHW-status']) {
      app.contextMenu.addItem({ command: CommandIDs.hibernateNow, selector, rank: 9 });
      app.contextMenu.addItem({ command: CommandIDs.hibernateAfter, selector, rank: 10 });
    }
    app.commands.addCommand(CommandIDs.machines, {
      label: 'Show My Remote Machines',
      execute: () => {
        app.shell.activateById(machines.id);
        return machines.refresh();
      }
    });
    app.commands.addCommand(CommandIDs.refresh, {
      label: 'Refresh Remote Hardware',
      execute: async () => {
        await store.options(true);
        await machines.refresh();
        await status.refresh();
        await Promise.all([...items.values()].map(item => item.refresh()));
      }
    });
    app.commands.addCommand(CommandIDs.join, {
      label: 'Join Shared Session…',
      caption: 'Attach a kernel here to a kernel a teammate shared with you',
      execute: join
    });
    if (palette) {
      const category = 'Remote hardware';
      for (const command of [
        CommandIDs.pick,
        CommandIDs.hibernateNow,
        CommandIDs.hibernateAfter,
        CommandIDs.machines,
        CommandIDs.refresh,
        CommandIDs.join
      ]) {
        palette.addItem({ command, category });
      }
    }

    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(loaded => {
          const apply = (): void => {
            settings.carryByDefault = loaded.get('carryByDefault').composite as boolean;
            showStatus = loaded.get('showStatusBarItem').composite as boolean;
            statusShown.emit();
          };
          loaded.changed.connect(apply);
          apply();
        })
        .catch(reason => console.error('jupyter-remote-hw: settings not loaded', reason));
    }
  }
};

export default plugin;
