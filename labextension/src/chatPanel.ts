/**
 * The "Prime Agent" sidebar: transcript, composer and status line for the
 * agent session of the current notebook.
 */
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { AUTONOMOUS_INPUT_HINT } from './autonomy';
import { AutonomyControls } from './autonomyView';
import type { FollowCellsSetting } from './cellFollower';
import {
  cellExecutionCount,
  cellContentById,
  cellFirstLine,
  deleteCellsById,
  findCellIndex,
  revealCell
} from './cellNavigation';
import {
  commandLine,
  completions,
  composerHint,
  type ICommandLine,
  type ICompletion
} from './chatCommands';
import { showReply, type ICommandViewContext } from './commandViews';
import { button } from './dom';
import { linkButton, renderEntry, type IEntryViewContext } from './entryViews';
import { primeAgentIcon } from './icons';
import { CommandIds, DELIVERY } from './keyboard';
import { ModelCostControls } from './modelCostView';
import { PermissionControls } from './permissionView';
import { describe, type NotebookAgent } from './notebookAgent';
import { enterAction, inputHint } from './queue';
import { QueueView } from './queueView';
import { ReviewModel } from './review';
import { ReviewView } from './reviewView';
import { SessionListModel } from './sessionList';
import { SESSION_LIST_ID, SessionListView } from './sessionListView';
import { OLDER_SESSION_STATUS } from './takeover';
import {
  WAITING_TEXT,
  type IMessageOrigin,
  type TranscriptChange,
  type TranscriptEntry
} from './transcript';
import type { ITreeRow } from './treeView';
import type { DeliveryMode, IServerInfo, ISessionCopy } from './wire';

export interface IChatPanelOptions {
  /** Brings the notebook tab to the front before jumping to a cell. */
  activateNotebook: (agent: NotebookAgent) => void;
  /** Opens a notebook (path relative to the server root) in a tab. */
  openNotebook: (path: string) => Promise<unknown>;
  /** Renders assistant Markdown; without it replies show as plain text. */
  renderMarkdown?: IEntryViewContext['renderMarkdown'];
  /** The "follow the agent's cells in the notebook" switch. */
  followCells: FollowCellsSetting;
  /** Shows the live harness panel for the notebook (the "Harness" button). */
  openHarness?: (agent: NotebookAgent) => Promise<string>;
  /** Escape in the input: give the keyboard back to the notebook. */
  returnFocus?: (agent: NotebookAgent | null) => void;
  /** Opens a session's step-through beside the notebook (the session list's action). */
  stepThrough?: (agent: NotebookAgent | null, sessionId: string) => void;
  /** The header's "Agents" button: open the Agents View tab (docs/agents-view.md). */
  openAgentsView?: () => void;
}

/** The status of a session the server unloaded while nobody took the notebook over. */
export const UNLOADED_TEXT = 'inactive (unloaded): your next message opens it again';

/** Distance from the bottom (px) within which the transcript keeps following. */
const FOLLOW_THRESHOLD = 32;

export class ChatPanel extends Widget {
  constructor(private readonly _options: IChatPanelOptions) {
    super();
    this.id = 'prime-agent-lab-chat';
    this.addClass('pal-ChatPanel');
    this.title.icon = primeAgentIcon;
    this.title.caption = 'Prime Agent';
    this.node.dataset.testid = 'pal-chat-panel';

    const header = div('pal-header', 'pal-header');
    header.tabIndex = -1; // the session-list command focuses it
    header.setAttribute('role', 'group');
    header.setAttribute('aria-label', 'Prime Agent session');
    this._header = header;
    const titleRow = div('pal-title-row');
    const title = div('pal-title');
    title.textContent = 'Prime Agent';
    this._newSessionButton = button('New session', 'pal-new-session');
    this._newSessionButton.title = 'Start a new agent session for this notebook';
    this._newSessionButton.addEventListener('click', () => {
      void this._agent?.startNewSession();
    });
    this._harnessButton = button('Harness', 'pal-harness');
    this._harnessButton.title =
      'Show the agent’s harness (notes, memories, skills, sub-agents, refinements) live; ' +
      'it works while the agent runs a cell';
    this._harnessButton.addEventListener('click', () => void this._openHarness());
    // The buttons wrap as one group (under the title in a narrow panel), never under the sidebar.
    const headerActions = div('pal-header-actions');
    headerActions.append(this._sessionsButton, this._harnessButton, this._newSessionButton);
    if (_options.openAgentsView) {
      const agents = button('Agents', 'pal-open-agents-view');
      agents.title = 'Open the Agents View: every agent and sub-agent on this server, live';
      agents.addEventListener('click', () => _options.openAgentsView?.());
      headerActions.append(agents);
    }
    titleRow.append(title, headerActions);
    this._notebookLabel = div('pal-notebook', 'pal-notebook-path');
    this._familyLine = div('pal-family', 'pal-family');
    this._statusLine = div('pal-status', 'pal-status');
    this._autonomy = new AutonomyControls({
      turnRunning: () => this._agent?.transcript.status === 'running',
      reportError: message => this._agent?.transcript.addError(message),
      onChange: () => this._updateControls()
    });
    const controls = div('pal-controls');
    controls.append(this._followToggle(), this._autonomy.switchNode);
    header.append(
      titleRow,
      this._notebookLabel,
      this._familyLine,
      this._statusLine,
      controls,
      this._autonomy.indicator,
      this._autonomy.formSlot
    );

    this._transcriptNode = div('pal-transcript', 'pal-transcript');
    this._transcriptNode.setAttribute('aria-live', 'polite');
    this._transcriptNode.addEventListener('scroll', () => {
      const node = this._transcriptNode;
      this._following =
        node.scrollHeight - node.scrollTop - node.clientHeight < FOLLOW_THRESHOLD;
    });

    const composer = div('pal-composer');
    this._input = document.createElement('textarea');
    this._input.className = 'pal-input';
    this._input.dataset.testid = 'pal-chat-input';
    this._input.rows = 3;
    this._input.placeholder = composerHint();
    this._input.id = `${this.id}-input`;
    const inputLabel = document.createElement('label');
    inputLabel.className = 'pal-input-label pal-visually-hidden';
    inputLabel.htmlFor = this._input.id;
    inputLabel.textContent =
      'Message to the agent (Enter sends, or queues while the agent works; Alt+Enter queues; Shift+Alt+Enter steers; Shift+Enter a new line; Escape back to the notebook)';
    this._input.addEventListener('keydown', event => this._onInputKey(event));
    this._input.addEventListener('input', () => {
      this._updateControls();
      this._updateMenu();
    });
    this._input.addEventListener('blur', () => this._closeMenu());
    this._menu = div('pal-command-menu', 'pal-command-menu');
    this._menu.setAttribute('role', 'listbox');
    this._menu.setAttribute('aria-label', 'Chat commands');
    this._menu.hidden = true;
    const actions = div('pal-actions');
    this._stopButton = button('Stop', 'pal-stop');
    this._stopButton.title = 'Stop the running turn and interrupt its cell';
    this._stopButton.addEventListener('click', () => void this._stop());
    this._sendButton = button('Send', 'pal-send');
    this._sendButton.classList.add('pal-mod-primary');
    this._sendButton.addEventListener('click', () => void this._send());
    this._steerButton = button('Steer', 'pal-steer');
    this._steerButton.title =
      'Send into the running turn: the agent reads it at its next step (Shift+Alt+Enter)';
    this._steerButton.addEventListener('click', () => void this._send('steer'));
    actions.append(this._stopButton, this._steerButton, this._sendButton);
    composer.append(inputLabel, this._menu, this._input, actions);

    this._treeNode = div('pal-tree-slot', 'pal-tree-slot');
    this._treeNode.hidden = true;
    this.node.append(
      header,
      this._sessionView.node,
      this._transcriptNode,
      this._queueView.node,
      this._treeNode,
      composer
    );

    // Model and cost (docs/pairing.md, 2): the session's cost in the title row, the model
    // picker and the context use above the input's actions.
    // The model picker, context use and permission mode share one wrapping row.
    title.after(this._modelCost.headerNode);
    const settings = div('pal-composer-settings');
    settings.append(this._modelCost.composerNode, this._permission.composerNode);
    actions.before(this._permission.waitingNode, settings);
    this._render();
  }

  /** A checkbox for following the agent's cells in the notebook (remembered). */
  private _followToggle(): HTMLElement {
    const label = document.createElement('label');
    label.className = 'pal-follow';
    label.title =
      'Scroll the notebook to each cell the agent writes or runs ' +
      '(it stops for the turn once you scroll away)';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.dataset.testid = 'pal-follow-cells';
    box.checked = this._options.followCells.enabled;
    box.addEventListener('change', () => {
      this._options.followCells.enabled = box.checked;
    });
    label.append(box, document.createTextNode(' Follow the agent’s cells'));
    return label;
  }

  /** Provider and model from GET info, shown until a session says otherwise. */
  set serverInfo(info: IServerInfo | null) {
    this._serverInfo = info;
    this._renderStatus();
  }

  get agent(): NotebookAgent | null {
    return this._agent;
  }

  /** Show the session of another notebook (or none). */
  set agent(agent: NotebookAgent | null) {
    if (agent === this._agent) {
      return;
    }
    if (this._agent) {
      this._drafts.set(this._agent, this._input.value);
      this._agent.changed.disconnect(this._renderStatus, this);
      this._agent.familyChanged.disconnect(this._onFamilyChanged, this);
      this._agent.transcript.changed.disconnect(this._onTranscriptChange, this);
      this._agent.transcript.statusChanged.disconnect(this._renderStatus, this);
      this._agent.transcript.eventApplied.disconnect(this._onEventApplied, this);
      this._agent.queue.changed.disconnect(this._renderQueue, this);
      this._agent.changed.disconnect(this._syncReviews, this);
      this._agent.transcript.statusChanged.disconnect(this._syncReviews, this);
      this._agent.panel?.model?.cells.changed.disconnect(this._onNotebookCells, this);
    }
    this._agent = agent;
    this._input.value = agent ? this._draftOf(agent) : '';
    this._reviewView.model = agent ? this._reviewModelOf(agent) : null;
    this._autonomy.model = agent?.autonomy ?? null;
    this._modelCost.model = agent?.modelCost ?? null;
    this._permission.model = agent?.permission ?? null;
    this._closeTree();
    if (agent) {
      agent.changed.connect(this._renderStatus, this);
      agent.familyChanged.connect(this._onFamilyChanged, this);
      agent.transcript.changed.connect(this._onTranscriptChange, this);
      agent.transcript.statusChanged.connect(this._renderStatus, this);
      agent.transcript.eventApplied.connect(this._onEventApplied, this);
      agent.queue.changed.connect(this._renderQueue, this);
      agent.changed.connect(this._syncReviews, this);
      agent.transcript.statusChanged.connect(this._syncReviews, this);
      agent.panel?.model?.cells.changed.connect(this._onNotebookCells, this);
    }
    this._onEventApplied();
    this._following = true;
    this._render();
    if (this._sessionList.isOpen) {
      void this._sessionList.refresh(); // the list of the notebook shown now
    }
  }

  // ---------------------------------------------------------------- keyboard commands (keyboard.ts)

  /** Put the cursor in the input (false while it is disabled: no notebook). */
  focusInput(): boolean {
    if (this._input.disabled) {
      return false;
    }
    this._input.focus();
    return true;
  }

  /** Focus the header (session, New session, Harness). */
  focusHeader(): void {
    this._header.focus();
  }

  /** Open the session list (read again) and put the focus on its rows. */
  async showSessions(): Promise<void> {
    this._sessionView.node.hidden = false;
    this._sessionView.node.focus();
    await this._sessionList.show();
    if (this._sessionView.node.contains(document.activeElement)) {
      this._sessionView.focusRow();
    }
  }

  /**
   * Send what the input holds, as the Send button would (`auto`), or steer
   * the running turn with it (`steer`, as the Steer button), or queue it as
   * a follow-up (`follow_up`); idle, the server starts a turn with it
   * whatever the mode. The palette commands send, steer and queue
   * (keyboard.ts `DELIVERY`) come here, as the input's keys do.
   */
  sendMessage(mode: DeliveryMode = 'auto'): Promise<void> {
    // A half-typed command with its menu open takes the completion, as Enter does.
    if (this._completionPending()) {
      this._complete(this._completions[this._selected]);
      return Promise.resolve();
    }
    return this._send(mode);
  }

  /** Whether the input holds something to send now (the send, steer and queue commands). */
  get canSend(): boolean {
    return !this._sendButton.disabled;
  }

  /** Stop the running turn, as the Stop button would. */
  stopTurn(): Promise<void> {
    return this._stopButton.disabled ? Promise.resolve() : this._stop();
  }

  protected override onActivateRequest(_msg: Message): void {
    this.focusInput();
    // What activated the panel may take the focus back right after (the command palette gives
    // it to the notebook, a sidebar tab to itself): the input takes it again a frame later.
    requestAnimationFrame(() => {
      if (this.isVisible && !this.node.contains(document.activeElement)) {
        this.focusInput();
      }
    });
  }

  protected override onAfterShow(_msg: Message): void {
    // Content that arrived while the sidebar was closed had no height.
    this._followIfPinned();
  }

  override dispose(): void {
    this.agent = null;
    this._autonomy.dispose();
    this._modelCost.dispose();
    this._permission.dispose();
    this._reviewView.dispose();
    super.dispose();
  }

  private _render(): void {
    this._renderStatus();
    this._renderFamily();
    this._renderTranscript();
    this._renderQueue();
  }

  /** The user's queued messages, under the transcript (every viewer's alike). */
  private _renderQueue(): void {
    this._queueView.render(this._agent?.queue ?? null);
    this._followIfPinned();
  }

  /** A sub-agent's parent was found: its name and link show in the header and the task. */
  private _onFamilyChanged(): void {
    this._renderFamily();
    this._renderTranscript();
  }

  /** "sub-agent part-a of <parent>" for a sub-agent's session, nothing otherwise. */
  private _renderFamily(): void {
    const agent = this._agent;
    const parent = agent?.parent ?? null;
    this._familyLine.replaceChildren();
    this._familyLine.title = '';
    this._familyLine.hidden = parent === null;
    if (!agent || !parent) {
      return;
    }
    const name = agent.session?.name;
    this._familyLine.append(
      document.createTextNode(name ? `sub-agent ${name} of ` : 'sub-agent of ')
    );
    const path = parent.notebookPath;
    const link = linkButton('pal-parent-link', 'pal-parent-link', parent.name || path || 'its parent');
    link.title = path ? `Open ${path}` : 'Open the parent’s notebook';
    link.addEventListener('click', () =>
      this._openSender({
        sessionId: parent.sessionId,
        name: parent.name,
        relationship: 'parent',
        composed: null
      })
    );
    this._familyLine.append(link);
    this._familyLine.title = this._familyLine.textContent ?? '';
  }

  /** Open the notebook of the agent that sent a message (looked up when needed). */
  private async _openSender(origin: IMessageOrigin): Promise<void> {
    const agent = this._agent;
    if (!agent) {
      return;
    }
    const who = origin.name || origin.sessionId || 'that agent';
    try {
      const path = await agent.senderNotebookPath(origin);
      if (path) {
        await this._options.openNotebook(path);
      } else {
        agent.transcript.addError(`Could not find the notebook of ${who}.`);
      }
    } catch (error) {
      agent.transcript.addError(`Could not open the notebook of ${who}: ${describe(error)}`);
    }
  }

  private async _openNotebook(path: string): Promise<void> {
    try {
      await this._options.openNotebook(path);
    } catch (error) {
      this._agent?.transcript.addError(`Could not open ${path}: ${describe(error)}`);
    }
  }

  private _renderStatus(): void {
    const agent = this._agent;
    this._notebookLabel.textContent = agent ? agent.notebookPath : '';
    this._notebookLabel.title = agent ? agent.notebookPath : '';
    this._statusLine.replaceChildren();
    const running = agent?.transcript.status === 'running';
    this._statusLine.dataset.status = running ? 'running' : 'idle';
    this._statusLine.dataset.connection = agent?.connection ?? 'none';
    this._statusLine.dataset.session = agent?.session?.session_id ?? '';
    const dot = span('pal-status-dot');
    const text = span('pal-status-text');
    this._statusLine.append(dot, text);

    if (!agent) {
      text.textContent = 'Open a notebook to work with the agent.';
    } else {
      switch (agent.connection) {
        case 'no-kernel':
          text.textContent = 'Waiting for the notebook’s kernel…';
          break;
        case 'attaching':
          text.textContent = 'Connecting…';
          break;
        case 'reconnecting':
          text.textContent = 'Reconnecting…';
          break;
        case 'failed': {
          const retryIn = agent.retryInMs;
          text.textContent =
            `Error: ${agent.lastError ?? 'unknown'}` +
            (retryIn === null ? '' : ` Trying again in ${Math.ceil(retryIn / 1000)} s.`);
          const retry = button('Retry', 'pal-retry-connect');
          retry.addEventListener('click', () => agent.retry());
          this._statusLine.append(retry);
          break;
        }
        case 'connected': {
          const waiting = running ? agent.transcript.waitingCell : null;
          this._statusLine.dataset.waiting = waiting ? 'true' : 'false';
          text.textContent = waiting
            ? `running: ${waiting.waitingText || WAITING_TEXT}`
            : running
              ? 'running'
              : agent.transcript.status === 'inactive'
                ? agent.takenOver
                  ? `${OLDER_SESSION_STATUS[0].toUpperCase()}${OLDER_SESSION_STATUS.slice(1)}.`
                  : UNLOADED_TEXT
                : 'idle';
          break;
        }
      }
    }
    const provider = agent?.session?.provider ?? this._serverInfo?.provider;
    const model = agent?.session?.model ?? this._serverInfo?.model;
    if (provider) {
      const modelLabel = span('pal-status-model');
      modelLabel.textContent = model ? `${provider} · ${model}` : provider;
      this._statusLine.append(modelLabel);
    }
    this._autonomy.refresh(); // the run's clock goes while the turn runs
    this._sessionList.sessionShown(agent?.session?.session_id ?? null);
    this._updateControls();
  }

  private _updateControls(): void {
    const agent = this._agent;
    const ready = agent !== null && agent.session !== null;
    const running = agent?.transcript.status === 'running';
    this._input.disabled = !agent;
    const command = commandLine(this._input.value) !== null;
    const empty = this._input.value.trim() === '';
    // While a turn runs, Send queues a follow-up and Steer enters the running turn.
    this._sendButton.disabled = !ready || empty;
    const queues = enterAction(running) === 'queue' && !command;
    this._sendButton.textContent = queues ? 'Queue' : 'Send';
    this._sendButton.title = queues
      ? 'Queue a follow-up: it starts when this run ends (Enter)'
      : 'Send (Enter)';
    this._steerButton.disabled = !ready || !running || empty || command;
    this._stopButton.disabled = !ready || !running;
    this._newSessionButton.disabled = !ready || running;
    this._harnessButton.disabled = !ready || !this._options.openHarness;
    this._sessionsButton.disabled = !agent;
    // Autonomous mode: the next message starts a run, and Stop ends it.
    const autonomous = this._autonomy.enabled;
    const hint = running
      ? inputHint(true, composerHint())
      : autonomous
        ? AUTONOMOUS_INPUT_HINT
        : composerHint();
    if (this._input.placeholder !== hint) {
      this._input.placeholder = hint;
    }
    this._stopButton.title = autonomous
      ? 'Stop the autonomous run and interrupt its cell (autonomous mode turns off)'
      : 'Stop the running turn and interrupt its cell';
  }

  private _renderTranscript(): void {
    this._entryNodes.clear();
    const agent = this._agent;
    const entries = agent?.transcript.entries ?? [];
    if (entries.length === 0) {
      const empty = div('pal-empty', 'pal-empty');
      empty.textContent = agent
        ? 'The agent writes and runs cells in this notebook. Ask it something.'
        : '';
      this._transcriptNode.replaceChildren(empty);
      return;
    }
    this._transcriptNode.replaceChildren(
      ...entries.map(entry => this._createEntryNode(entry))
    );
    this._syncReviews();
    this._followIfPinned();
  }

  private _onTranscriptChange(_: unknown, change: TranscriptChange): void {
    switch (change.type) {
      case 'reset':
        this._onEventApplied();
        this._renderTranscript();
        return;
      case 'added':
        this._transcriptNode.querySelector(':scope > .pal-empty')?.remove();
        this._transcriptNode.append(this._createEntryNode(change.entry));
        break;
      case 'updated': {
        const old = this._entryNodes.get(change.entry.id);
        if (old) {
          old.replaceWith(this._createEntryNode(change.entry));
        }
        break;
      }
    }
    if (change.entry.kind === 'cell') {
      this._renderStatus(); // a cell that waits shows in the status line
    }
    this._syncReviews();
    this._followIfPinned();
  }

  // ---------------------------------------------------------------- review and revert (pairing.md, 5)

  /** The review state of a notebook's agent (kept while the panel shows other notebooks). */
  private _reviewModelOf(agent: NotebookAgent): ReviewModel {
    let model = this._reviews.get(agent);
    if (!model) {
      const notebook = () => agent.panel?.content ?? null;
      model = new ReviewModel({
        api: () => agent.api ?? null,
        sessionId: () => agent.session?.session_id ?? null,
        notebook: () => {
          const content = notebook();
          return content
            ? {
                hasCell: cellId => findCellIndex(content, cellId) >= 0,
                deleteCells: cellIds => deleteCellsById(content, cellIds),
                cellContent: cellId => cellContentById(content, cellId)
              }
            : null;
        }
      });
      this._reviews.set(agent, model);
    }
    return model;
  }

  /** The review controls follow the chat: one under each finished turn that wrote cells. */
  private _syncReviews(): void {
    const agent = this._agent;
    const model = this._reviewView.model;
    if (agent && model) {
      const sessionId = agent.session?.session_id ?? null;
      model.sync(sessionId, agent.transcript.entries, agent.transcript.status);
    }
    this._reviewView.place(id => this._entryNodes.get(id));
  }

  private _onNotebookCells(): void {
    this._reviewView.model?.notebookChanged();
  }

  /** `data-seq` on the transcript: how far the event stream got (for tests, debugging). */
  private _onEventApplied(): void {
    this._transcriptNode.dataset.seq = String(this._agent?.transcript.lastSeq ?? 0);
  }

  private _createEntryNode(entry: TranscriptEntry): HTMLElement {
    const node = renderEntry(entry, this._entryContext);
    node.classList.add('pal-entry');
    this._entryNodes.set(entry.id, node);
    return node;
  }

  private _followIfPinned(): void {
    if (this._following) {
      this._transcriptNode.scrollTop = this._transcriptNode.scrollHeight;
    }
  }

  private _onInputKey(event: KeyboardEvent): void {
    if (event.isComposing) {
      return;
    }
    const menuOpen = !this._menu.hidden && this._completions.length > 0;
    if (menuOpen && (event.key === 'ArrowDown' || event.key === 'ArrowUp')) {
      event.preventDefault();
      const step = event.key === 'ArrowDown' ? 1 : -1;
      const size = this._completions.length;
      this._selected = (this._selected + step + size) % size;
      this._renderMenu();
      return;
    }
    if (menuOpen && event.key === 'Escape') {
      event.preventDefault();
      this._closeMenu();
      return;
    }
    if (event.key === 'Escape' && this._options.returnFocus) {
      event.preventDefault();
      this._options.returnFocus(this._agent);
      return;
    }
    // Tab takes the completion; so does Enter (and Alt+Enter) while the text is not a command yet.
    const takes =
      event.key === 'Tab' || (event.key === 'Enter' && !event.shiftKey && this._completionPending());
    if (menuOpen && takes && !event.shiftKey) {
      event.preventDefault();
      this._complete(this._completions[this._selected]);
      return;
    }
    // The same keys as the steer and queue commands' shortcuts (keyboard.ts), for when
    // JupyterLab's keymap does not handle them first.
    if (event.key === 'Enter' && event.shiftKey && event.altKey) {
      event.preventDefault();
      void this._send(DELIVERY[CommandIds.steer]);
      return;
    }
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      void this._send(event.altKey ? DELIVERY[CommandIds.queue] : DELIVERY[CommandIds.send]);
    }
  }

  // ---------------------------------------------------------------- command completion

  /** The completions of the text as typed (only while the caret is at its end). */
  private _updateMenu(): void {
    const text = this._input.value;
    const atEnd = this._input.selectionStart === text.length;
    this._completions = atEnd ? completions(text) : [];
    this._selected = 0;
    this._renderMenu();
  }

  private _renderMenu(): void {
    this._menu.replaceChildren();
    this._menu.hidden = this._completions.length === 0;
    this._completions.forEach((completion, index) => {
      const item = div('pal-command-option', 'pal-command-option');
      item.setAttribute('role', 'option');
      item.setAttribute('aria-selected', String(index === this._selected));
      item.classList.toggle('pal-mod-selected', index === this._selected);
      const label = document.createElement('code');
      label.textContent = completion.label;
      item.append(label, ` ${completion.detail}`);
      // mousedown, not click: the input keeps its focus (a blur would close the menu first).
      item.addEventListener('mousedown', event => {
        event.preventDefault();
        this._complete(completion);
      });
      this._menu.append(item);
    });
  }

  private _complete(completion: ICompletion): void {
    this._input.value = completion.text;
    this._input.setSelectionRange(completion.text.length, completion.text.length);
    this._updateControls();
    this._updateMenu();
  }

  /** The command menu is open and the text is not a whole command yet. */
  private _completionPending(): boolean {
    return (
      !this._menu.hidden &&
      this._completions.length > 0 &&
      commandLine(this._input.value) === null
    );
  }

  private _closeMenu(): void {
    this._completions = [];
    this._renderMenu();
  }

  /**
   * Send the input: `auto` sends (or queues while a turn runs), `steer` steers. The input is
   * taken at once; a message typed while the one before is still on its way goes after it
   * (a quick Enter then Alt+Enter must not lose the second key, nor swap the order).
   */
  private _send(mode: DeliveryMode = 'auto'): Promise<void> {
    const agent = this._agent;
    const text = this._input.value.trim();
    if (!agent || !text || this._sendButton.disabled) {
      return Promise.resolve();
    }
    const command = commandLine(text);
    if (command) {
      this._input.value = '';
      this._closeMenu();
      this._updateControls();
      return this._runCommand(agent, command);
    }
    this._input.value = '';
    this._following = true;
    this._updateControls();
    this._sendChain = this._sendChain.then(() => this._deliver(agent, text, mode));
    return this._sendChain;
  }

  /** Post one message (`_send`); on failure the text comes back for editing. */
  private async _deliver(agent: NotebookAgent, text: string, mode: DeliveryMode): Promise<void> {
    try {
      await agent.send(text, mode);
    } catch {
      // The transcript shows the error; give the text back for editing (to its own notebook).
      if (this._agent !== agent) {
        if (!this._drafts.get(agent)) {
          this._drafts.set(agent, text);
        }
      } else if (this._input.value === '') {
        this._input.value = text;
        this._updateControls();
      }
    }
  }

  private async _stop(): Promise<void> {
    const agent = this._agent;
    if (!agent) {
      return;
    }
    this._stopButton.disabled = true;
    try {
      await agent.stop();
    } catch (error) {
      agent.transcript.addError(`Could not stop: ${describe(error)}`);
      this._updateControls();
    }
  }

  // ---------------------------------------------------------------- chat commands

  /** Run a command on the server (core/commands.py) and show its answer in its view. */
  private async _runCommand(agent: NotebookAgent, command: ICommandLine): Promise<void> {
    const sessionId = agent.session?.session_id;
    if (!sessionId) {
      agent.transcript.addError('No agent session yet: is the kernel running?');
      return;
    }
    try {
      const reply = await agent.api.runCommand(sessionId, command.name, command.args);
      if (this._agent === agent) {
        await showReply(reply, this._viewContext(agent, sessionId));
      }
    } catch (error) {
      agent.transcript.addError(`/${command.name} failed: ${describe(error)}`);
    }
  }

  /** What a command's view may do: for this agent and session. */
  private _viewContext(agent: NotebookAgent, sessionId: string): ICommandViewContext {
    const act = (work: () => Promise<void>, what: string) => () => {
      void work().catch(error => agent.transcript.addError(`${what} failed: ${describe(error)}`));
    };
    return {
      show: node => {
        this._treeNode.replaceChildren(node);
        this._treeNode.hidden = false;
      },
      close: () => this._closeTree(),
      note: text => agent.transcript.addNote(text),
      openCopy: copy => this._openCopy(agent, copy),
      openNotebook: path => void this._openNotebook(path),
      setInput: text => {
        this._input.value = text;
        this._updateControls();
        this._input.focus();
      },
      tree: {
        branch: (row: ITreeRow) =>
          act(async () => {
            const moved = await agent.api.moveLeaf(sessionId, row.id);
            this._closeTree();
            if (moved.text !== undefined) {
              this._input.value = moved.text;
              this._updateControls();
              this._input.focus();
            }
          }, 'Branching')(),
        fork: (row: ITreeRow) =>
          act(async () => {
            this._closeTree();
            await this._openCopy(agent, await agent.api.fork(sessionId, row.id));
          }, 'Forking')(),
        clone: act(async () => {
          this._closeTree();
          await this._openCopy(agent, await agent.api.clone(sessionId));
        }, 'Cloning'),
        close: () => this._closeTree()
      },
      trustProjectFile: async (path, sha256) => {
        await agent.api.trustProjectFile(path, sha256);
        return `Trusted: ${path} is in the prompt from the next model call.`;
      },
      refinements: {
        rollback: record =>
          void this._runCommand(agent, {
            name: 'refine',
            args: `rollback ${record.id}${record.scope === 'global' ? ' --global' : ''}`
          }),
        close: () => this._closeTree()
      }
    };
  }

  private _closeTree(): void {
    this._treeNode.replaceChildren();
    this._treeNode.hidden = true;
  }

  /**
   * Open a fork's or clone's notebook; a fork's message waits in that
   * notebook's input (its tab may become the shown one only after the open).
   */
  private async _openCopy(_agent: NotebookAgent | null, copy: ISessionCopy): Promise<void> {
    if (copy.text !== undefined) {
      this._draftsByPath.set(copy.notebook_path, copy.text);
    }
    await this._options.openNotebook(copy.notebook_path);
    const shown = this._agent;
    if (copy.text !== undefined && shown && shown.notebookPath === copy.notebook_path) {
      this._input.value = this._draftOf(shown);
      this._updateControls();
    }
  }

  /** The text typed for this agent's notebook and not sent (a fork's message first). */
  private _draftOf(agent: NotebookAgent): string {
    const waiting = this._draftsByPath.get(agent.notebookPath);
    if (waiting !== undefined) {
      this._draftsByPath.delete(agent.notebookPath);
      this._drafts.set(agent, waiting);
    }
    return this._drafts.get(agent) ?? '';
  }

  // ---------------------------------------------------------------- Harness

  private async _openHarness(): Promise<void> {
    const agent = this._agent;
    if (!agent || !this._options.openHarness) {
      return;
    }
    this._harnessButton.disabled = true;
    try {
      await this._options.openHarness(agent);
    } catch (error) {
      agent.transcript.addError(`Could not show the harness: ${describe(error)}`);
    } finally {
      this._updateControls();
    }
  }

  private readonly _entryContext: IEntryViewContext = {
    cellFirstLine: cellId =>
      this._agent ? cellFirstLine(this._agent.panel.content, cellId) : null,
    cellExecutionCount: cellId =>
      this._agent ? cellExecutionCount(this._agent.panel.content, cellId) : null,
    revealCell: cellId => {
      const agent = this._agent;
      if (!agent) {
        return;
      }
      this._options.activateNotebook(agent);
      void revealCell(agent.panel, cellId).then(found => {
        if (!found) {
          agent.transcript.addError('That cell is no longer in the notebook.');
        }
      });
    },
    renderMarkdown: this._options.renderMarkdown ?? null,
    entryResized: () => this._followIfPinned(),
    parentAgent: () => this._agent?.parent ?? null,
    senderNotebookPath: origin => this._agent?.knownSenderNotebookPath(origin) ?? null,
    openNotebook: path => void this._openNotebook(path),
    openSender: origin => void this._openSender(origin),
    followCurrentSession: () => void this._agent?.followCurrentSession(),
    showRefinements: () => {
      const agent = this._agent;
      if (agent) {
        void this._runCommand(agent, { name: 'refine', args: 'history' });
      }
    },
    showContext: () => {
      const agent = this._agent;
      if (agent) {
        void this._runCommand(agent, { name: 'context', args: '' });
      }
    },
    trustSession: async () => {
      const agent = this._agent;
      const sessionId = agent?.session?.session_id;
      if (!agent || !sessionId) {
        throw new Error('no session is open');
      }
      const answer = await agent.api.trustSession(sessionId);
      const signed = answer.signed ?? [];
      return signed.length
        ? `Trusted: ${signed.map(part => part.kind).join(', ')}; loading now.`
        : 'Nothing left to trust.';
    }
  };

  private _agent: NotebookAgent | null = null;
  private _serverInfo: IServerInfo | null = null;
  private _following = true;
  /** Messages go to the server one after another, in the order they were sent (`_send`). */
  private _sendChain: Promise<void> = Promise.resolve();
  private _completions: ICompletion[] = [];
  private _selected = 0;
  private readonly _menu: HTMLElement;
  private readonly _header: HTMLElement;
  private readonly _entryNodes = new Map<number, HTMLElement>();
  private readonly _notebookLabel: HTMLElement;
  private readonly _familyLine: HTMLElement;
  private readonly _statusLine: HTMLElement;
  private readonly _transcriptNode: HTMLElement;
  private readonly _treeNode: HTMLElement;
  private readonly _input: HTMLTextAreaElement;
  /** Each notebook's unsent text: the input shows the draft of the notebook shown. */
  private readonly _drafts = new WeakMap<NotebookAgent, string>();
  /** A fork's message for a notebook whose agent is not shown yet. */
  private readonly _draftsByPath = new Map<string, string>();
  private readonly _sendButton: HTMLButtonElement;
  private readonly _steerButton: HTMLButtonElement;
  private readonly _queueView = new QueueView({
    remove: messageId => this._agent?.removeQueued(messageId) ?? Promise.resolve(),
    sendNow: messageId => this._agent?.sendQueuedNow(messageId) ?? Promise.resolve()
  });
  private readonly _stopButton: HTMLButtonElement;
  private readonly _newSessionButton: HTMLButtonElement;
  private readonly _harnessButton: HTMLButtonElement;
  private readonly _autonomy: AutonomyControls;
  private readonly _modelCost = new ModelCostControls();

  // The session list (docs/pairing.md, section 1): the header's Sessions button, the list
  // under the header. Open attaches this tab to the session and puts the cursor in the input.
  private readonly _sessionList = new SessionListModel({
    api: () => this._agent?.api ?? null,
    notebookPath: () => this._agent?.notebookPath ?? null,
    currentSessionId: () => this._agent?.session?.session_id ?? null,
    openSession: async sessionId => {
      const agent = this._agent;
      if (!agent) {
        throw new Error('No notebook is open.');
      }
      await agent.openSession(sessionId);
      this.focusInput();
    },
    openCopy: copy => this._openCopy(this._agent, copy),
    stepThrough: sessionId => this._options.stepThrough?.(this._agent, sessionId)
  });
  private readonly _sessionView = new SessionListView(this._sessionList, {
    closed: () => this._sessionsButton.focus()
  });
  private readonly _sessionsButton = sessionsButton(this._sessionList, () => this.showSessions());
  private readonly _permission = new PermissionControls();
  private readonly _reviews = new WeakMap<NotebookAgent, ReviewModel>();
  private readonly _reviewView = new ReviewView({
    revealCell: cellId => this._entryContext.revealCell(cellId)
  });
}

/** The header's "Sessions" button: opens and closes the list (`aria-expanded` follows it). */
function sessionsButton(list: SessionListModel, show: () => Promise<void>): HTMLButtonElement {
  const node = button('Sessions', 'pal-sessions');
  node.title = 'The sessions of this notebook: open, fork or delete one';
  node.setAttribute('aria-controls', SESSION_LIST_ID);
  node.setAttribute('aria-expanded', 'false');
  node.addEventListener('click', () => (list.isOpen ? list.close() : void show()));
  list.changed.connect(() => node.setAttribute('aria-expanded', String(list.isOpen)));
  return node;
}

function div(className: string, testId?: string): HTMLDivElement {
  const node = document.createElement('div');
  node.className = className;
  if (testId) {
    node.dataset.testid = testId;
  }
  return node;
}

function span(className: string): HTMLSpanElement {
  const node = document.createElement('span');
  node.className = className;
  return node;
}

