/**
 * Prime Agent Lab: the "Prime Agent" chat sidebar bound to the current
 * notebook, and badges on the cells the agent wrote.
 */
import {
  ILayoutRestorer,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Dialog, ICommandPalette, showDialog, WidgetTracker } from '@jupyterlab/apputils';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry, renderMarkdown } from '@jupyterlab/rendermime';
import { IStatusBar } from '@jupyterlab/statusbar';

import { AgentCellMarker, agentMetadata } from './agentCellMarker';
import { AgentApiClient } from './api';
import { AgentsModel } from './agentsModel';
import { AgentsStream } from './agentsStream';
import { AGENTS_VIEW_ID, AgentsView } from './agentsView';
import { FollowCellsSetting } from './cellFollower';
import { addCodeBlockActions, insertCodeBelow } from './codeBlocks';
import { openHarnessView } from './harnessView';
import { ChatPanel } from './chatPanel';
import { SessionDirectory } from './family';
import { primeAgentIcon } from './icons';
import { AgentStatusItem } from './statusItem';
import {
  CommandIds,
  composerCommand,
  DELIVERY,
  nextAgentCellIndex,
  type ComposerCommandId,
  PANEL_COMMANDS,
  type PanelCommandId
} from './keyboard';
import { NotebookAgent } from './notebookAgent';
import { StepThroughOpener } from './stepThroughOpener';

const PLUGIN_ID = '@prime-agent-lab/labextension:plugin';

export { CommandIds };

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Chat with the Prime Agent about the current notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILayoutRestorer, ICommandPalette, IRenderMimeRegistry, IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    rendermime: IRenderMimeRegistry | null,
    statusBar: IStatusBar | null
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

    // Answers in the chat and in the step-through render the same way (code blocks included).
    const markdown = rendermime
      ? (host: HTMLElement, source: string) =>
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
          }).then(() => {
            addCodeBlockActions(host, { insertBelow: code => insertIntoNotebook(code) });
          })
      : null;
    const stepThrough = new StepThroughOpener(app, api, markdown);

    const chat = new ChatPanel({
      followCells,
      openHarness: agent =>
        openHarnessView(agent.panel, view =>
          app.shell.add(view, 'main', { ref: agent.panel.id, mode: 'split-bottom' })
        ),
      activateNotebook: agent => app.shell.activateById(agent.panel.id),
      openNotebook: path => app.commands.execute('docmanager:open', { path }),
      openAgentsView: () => void app.commands.execute(CommandIds.openAgentsView),
      returnFocus: agent => {
        const panel = agent?.panel ?? tracker.currentWidget;
        if (panel && !panel.isDisposed) {
          app.shell.activateById(panel.id);
          panel.content.activate();
        }
      },
      renderMarkdown: markdown,
      stepThrough: (agent, sessionId) => stepThrough.open(sessionId, agent?.panel ?? null)
    });
    app.shell.add(chat, 'right', { rank: 650 });
    restorer?.add(chat, chat.id);

    // The status bar shows the current notebook's agent: its state and cost (pairing.md, 2).
    const statusItem = new AgentStatusItem();
    statusBar?.registerStatusItem(`${PLUGIN_ID}:agent-status`, {
      item: statusItem,
      align: 'left',
      rank: 5
    });

    const follow = (panel: NotebookPanel | null) => {
      chat.agent = panel && !panel.isDisposed ? agentFor(panel) : null;
      statusItem.agent = chat.agent;
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

    /** "Insert below" on an answer's code block: into the notebook the chat shows. */
    const insertIntoNotebook = (code: string): boolean => {
      const panel = chat.agent?.panel;
      if (!panel || panel.isDisposed) {
        return false;
      }
      return insertCodeBelow(panel.content, code);
    };

    // Show the panel, then move the cursor into it: the palette gives the focus back to the
    // notebook right after a command ran, so the input takes it a frame later.
    const showChat = (then: () => void) => {
      app.shell.activateById(chat.id);
      requestAnimationFrame(then);
    };
    const focusChat = () => showChat(() => chat.focusInput());

    // The Agents View (docs/agents-view.md): one tab, brought to the front when open, put back
    // by the layout restorer after a reload. Its socket lives as long as the tab.
    const agentsTracker = new WidgetTracker<AgentsView>({ namespace: 'prime-agent-lab-agents' });
    const openAgentsView = (): AgentsView => {
      let view = agentsTracker.find(widget => widget.id === AGENTS_VIEW_ID) ?? null;
      if (!view || view.isDisposed) {
        const model = new AgentsModel(api);
        const stream = new AgentsStream({
          url: () => api.agentsEventsUrl(),
          webSocket: app.serviceManager.serverSettings.WebSocket
        });
        stream.snapshot.connect((_, overview) => model.apply(overview));
        stream.stateChanged.connect((_, state) => (model.connection = state));
        const shown = new AgentsView({
          model,
          openNotebook: path => app.commands.execute('docmanager:open', { path }),
          openChat: async path => {
            await app.commands.execute('docmanager:open', { path });
            app.shell.activateById(chat.id);
          },
          confirm: async (title, body) =>
            (
              await showDialog({
                title,
                body,
                buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
              })
            ).button.accept
        });
        shown.disposed.connect(() => stream.dispose());
        view = shown;
        void agentsTracker.add(view);
      }
      if (!view.isAttached) {
        app.shell.add(view, 'main');
      }
      app.shell.activateById(view.id);
      return view;
    };
    restorer?.restore(agentsTracker, {
      command: CommandIds.openAgentsView,
      name: () => 'agents-view'
    });

    const execute: Record<PanelCommandId, () => unknown> = {
      [CommandIds.openPanel]: focusChat,
      [CommandIds.focusChat]: focusChat,
      [CommandIds.send]: composerCommand(chat, CommandIds.send).execute,
      [CommandIds.steer]: composerCommand(chat, CommandIds.steer).execute,
      [CommandIds.queue]: composerCommand(chat, CommandIds.queue).execute,
      [CommandIds.stop]: () => chat.stopTurn(),
      [CommandIds.sessionList]: () => showChat(() => void chat.showSessions()),
      [CommandIds.openAgentsView]: () => openAgentsView(),
      [CommandIds.nextAgentCell]: () => {
        const panel = tracker.currentWidget;
        if (!panel?.model) {
          return;
        }
        const notebook = panel.content;
        const cells = notebook.model!.cells;
        const isAgent = Array.from({ length: cells.length }, (_, index) =>
          agentMetadata(cells.get(index)) !== null
        );
        const next = nextAgentCellIndex(isAgent, notebook.activeCellIndex);
        if (next >= 0) {
          app.shell.activateById(panel.id);
          notebook.mode = 'command';
          notebook.deselectAll();
          notebook.activeCellIndex = next;
          void notebook.scrollToItem(next, 'smart');
        }
      },
      [CommandIds.stepThrough]: () => stepThrough.pick(tracker.currentWidget)
    };
    for (const command of PANEL_COMMANDS) {
      app.commands.addCommand(command.id, {
        label: command.label,
        caption: command.caption,
        icon: command.id === CommandIds.openPanel ? primeAgentIcon : undefined,
        execute: execute[command.id],
        // Send, steer and queue take the chat input: with nothing to send they are off.
        isEnabled:
          command.id in DELIVERY
            ? composerCommand(chat, command.id as ComposerCommandId).isEnabled
            : undefined
      });
      palette?.addItem({ command: command.id, category: 'Prime Agent' });
    }
  }
};

export default plugin;
