/**
 * Prime Agent Lab: the "Prime Agent" chat sidebar bound to the current
 * notebook, and badges on the cells the agent wrote.
 */
import {
  ILayoutRestorer,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry, renderMarkdown } from '@jupyterlab/rendermime';

import { AgentCellMarker } from './agentCellMarker';
import { AgentApiClient } from './api';
import { FollowCellsSetting } from './cellFollower';
import { openHarnessView } from './harnessView';
import { ChatPanel } from './chatPanel';
import { SessionDirectory } from './family';
import { primeAgentIcon } from './icons';
import { NotebookAgent } from './notebookAgent';

const PLUGIN_ID = '@prime-agent-lab/labextension:plugin';

export namespace CommandIds {
  export const openPanel = 'prime-agent-lab:open-panel';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Chat with the Prime Agent about the current notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILayoutRestorer, ICommandPalette, IRenderMimeRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    rendermime: IRenderMimeRegistry | null
  ) => {
    const api = new AgentApiClient(app.serviceManager.serverSettings);
    const agents = new Map<NotebookPanel, NotebookAgent>();
    const followCells = new FollowCellsSetting();
    const directory = new SessionDirectory(() => api.listSessions());

    const agentFor = (panel: NotebookPanel): NotebookAgent => {
      let agent = agents.get(panel);
      if (!agent) {
        agent = new NotebookAgent(
          panel,
          api,
          app.serviceManager.contents,
          followCells,
          directory
        );
        agents.set(panel, agent);
        panel.disposed.connect(() => {
          agents.get(panel)?.dispose();
          agents.delete(panel);
        });
      }
      return agent;
    };

    const chat = new ChatPanel({
      followCells,
      openHarness: agent =>
        openHarnessView(agent.panel, view =>
          app.shell.add(view, 'main', { ref: agent.panel.id, mode: 'split-bottom' })
        ),
      activateNotebook: agent => app.shell.activateById(agent.panel.id),
      openNotebook: path => app.commands.execute('docmanager:open', { path }),
      renderMarkdown: rendermime
        ? (host, source) =>
            renderMarkdown({
              host,
              source,
              trusted: false,
              sanitizer: rendermime.sanitizer,
              resolver: null,
              linkHandler: rendermime.linkHandler,
              shouldTypeset: true,
              latexTypesetter: rendermime.latexTypesetter,
              markdownParser: rendermime.markdownParser
            })
        : null
    });
    app.shell.add(chat, 'right', { rank: 650 });
    restorer?.add(chat, chat.id);

    const follow = (panel: NotebookPanel | null) => {
      chat.agent = panel && !panel.isDisposed ? agentFor(panel) : null;
    };
    tracker.currentChanged.connect((_, panel) => follow(panel));
    follow(tracker.currentWidget);

    tracker.forEach(panel => new AgentCellMarker(panel));
    tracker.widgetAdded.connect((_, panel) => new AgentCellMarker(panel));

    api
      .getInfo()
      .then(info => (chat.serverInfo = info))
      .catch(error =>
        console.warn('prime-agent: GET prime-agent/api/info failed', error)
      );

    app.commands.addCommand(CommandIds.openPanel, {
      label: 'Open Prime Agent',
      icon: primeAgentIcon,
      execute: () => app.shell.activateById(chat.id)
    });
    palette?.addItem({ command: CommandIds.openPanel, category: 'Prime Agent' });
  }
};

export default plugin;
