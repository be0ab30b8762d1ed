/**
 * The Agents View (docs/agents-view.md "The tab"): a main-area tab with
 * every agent of the server as a tree, live from the agents websocket, and
 * per row the actions a user needs on an agent (open its notebook or its
 * chat, message it, stop it or its subtree, delete a finished sub-agent).
 *
 * Each agent's row is built once and updated in place, and rows move only
 * when their place changed: a snapshot never takes the focus out of a
 * message being typed, and a collapsed subtree stays collapsed.
 */
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  activityText,
  deleteBlockedReason,
  messageBlockedReason,
  outcomeText,
  rowLabel,
  STATE_FILTERS,
  stateCounts,
  stateText,
  subtreeActive,
  usageText,
  type IVisibleAgent,
  type StateFilter
} from './agents';
import type { AgentsModel } from './agentsModel';
import { button, element } from './dom';
import { primeAgentIcon } from './icons';

export const AGENTS_VIEW_ID = 'prime-agent-lab-agents-view';

/** How often the "5 min ago" texts are brought up to date. */
const CLOCK_MS = 30_000;
/** Deeper rows indent no further (the tree stays readable; `aria-level` keeps the depth). */
const MAX_INDENT_LEVELS = 8;

export interface IAgentsViewOptions {
  model: AgentsModel;
  openNotebook: (path: string) => void | Promise<unknown>;
  /** Open the notebook and show the Prime Agent panel, which follows it. */
  openChat: (path: string) => void | Promise<unknown>;
  /** Ask before a delete; true goes ahead. */
  confirm: (title: string, body: string) => Promise<boolean>;
  now?: () => number;
}

const FILTER_LABELS: Record<StateFilter, string> = {
  all: 'All',
  running: 'Running',
  idle: 'Idle',
  waiting: 'Waiting'
};

/** The nodes of one agent's row that updates touch. */
interface IRowNodes {
  item: HTMLLIElement;
  line: HTMLElement;
  toggle: HTMLButtonElement;
  name: HTMLElement;
  notebook: HTMLElement;
  state: HTMLElement;
  outcome: HTMLElement;
  residency: HTMLElement;
  model: HTMLElement;
  usage: HTMLElement;
  activity: HTMLTimeElement;
  openNotebook: HTMLButtonElement;
  openChat: HTMLButtonElement;
  message: HTMLButtonElement;
  stop: HTMLButtonElement;
  stopSubtree: HTMLButtonElement;
  remove: HTMLButtonElement;
  problem: HTMLElement;
  compose: HTMLFormElement;
  input: HTMLInputElement;
  send: HTMLButtonElement;
  notice: HTMLElement;
  error: HTMLElement;
}

export class AgentsView extends Widget {
  constructor(private readonly _options: IAgentsViewOptions) {
    super();
    this.id = AGENTS_VIEW_ID;
    this.addClass('pal-AgentsView');
    this.title.label = 'Agents';
    this.title.caption = 'Every Prime Agent and sub-agent on this server';
    this.title.icon = primeAgentIcon;
    this.title.closable = true;
    this.node.dataset.testid = 'pal-agents-view';

    const head = element('div', 'pal-agents-head');
    const title = element('h2', 'pal-agents-title', undefined, 'Agents');
    const filters = element('div', 'pal-agents-filters', 'pal-agents-filters');
    filters.setAttribute('role', 'group');
    filters.setAttribute('aria-label', 'Show agents in a state');
    for (const filter of STATE_FILTERS) {
      const choice = button(FILTER_LABELS[filter], 'pal-agents-filter');
      choice.dataset.filter = filter;
      choice.addEventListener('click', () => (this._model.filter = filter));
      this._filterButtons.set(filter, choice);
      filters.append(choice);
    }
    this._connection.className = 'pal-agents-connection';
    this._connection.dataset.testid = 'pal-agents-connection';
    this._connection.setAttribute('role', 'status');
    const refresh = button('Refresh', 'pal-agents-refresh');
    refresh.title = 'Read every agent again from the server';
    refresh.addEventListener('click', () => void this._model.refresh());
    head.append(title, filters, this._connection, refresh);

    this._error.className = 'pal-agents-error';
    this._error.dataset.testid = 'pal-agents-error';
    this._error.setAttribute('role', 'alert');
    this._empty.className = 'pal-agents-empty';
    this._empty.dataset.testid = 'pal-agents-empty';
    this._list.className = 'pal-agents-rows';
    this._list.dataset.testid = 'pal-agents-rows';
    this._list.setAttribute('aria-label', 'Agents, each root followed by its sub-agents');
    this.node.append(head, this._error, this._empty, this._list);

    this._model.changed.connect(this.render, this);
    this._clock = window.setInterval(() => this._tick(), CLOCK_MS);
    this._render();
  }

  private get _model(): AgentsModel {
    return this._options.model;
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearInterval(this._clock);
    this._model.changed.disconnect(this.render, this);
    super.dispose();
  }

  /**
   * Closing the tab ends it (socket included): a closed tab is not kept alive, so the
   * restorer does not bring back a tab the user closed.
   */
  protected override onCloseRequest(msg: Message): void {
    super.onCloseRequest(msg);
    this.dispose();
  }

  /** Bring the DOM to the model's state (synchronously, on every model change). */
  render(): void {
    this._render();
  }

  /** The row node of an agent, if it is shown. */
  rowNode(sessionId: string): HTMLElement | null {
    return this._nodes.get(sessionId)?.item ?? null;
  }

  private _render(): void {
    const model = this._model;
    const now = this._now();
    const counts = stateCounts(model.rows);
    for (const [filter, choice] of this._filterButtons) {
      setText(choice, `${FILTER_LABELS[filter]} (${counts[filter]})`);
      choice.setAttribute('aria-pressed', String(model.filter === filter));
      choice.classList.toggle('pal-mod-selected', model.filter === filter);
    }
    const connection =
      model.connection === 'open' ? 'live' : model.connection === 'connecting' ? 'connecting…' : 'reconnecting…';
    setText(this._connection, connection);
    this._connection.dataset.state = model.connection;
    setText(this._error, model.error ?? '');
    this._error.hidden = model.error === null;

    const visible = model.visible();
    const emptyText = !model.loaded
      ? 'Loading…'
      : model.rows.length === 0
        ? 'No agents yet: an agent appears here once a notebook’s chat has a session.'
        : visible.length === 0
          ? `No ${model.filter} agents.`
          : '';
    setText(this._empty, emptyText);
    this._empty.hidden = emptyText === '';

    // A row hidden by the filter or a collapsed parent keeps its nodes (and a draft in its
    // input) for when it shows again; the nodes of an agent that is gone are dropped.
    const wanted = new Set(visible.map(line => line.row.session_id));
    for (const [id, nodes] of this._nodes) {
      if (!wanted.has(id)) {
        nodes.item.remove();
        if (!model.row(id)) {
          this._nodes.delete(id);
        }
      }
    }
    // Walk the wanted order; a node moves only when it is not already in place, so the
    // row holding the focus stays where it is while others are put around it.
    let cursor: ChildNode | null = this._list.firstChild;
    for (const line of visible) {
      const id = line.row.session_id;
      let nodes = this._nodes.get(id);
      if (!nodes) {
        nodes = this._buildRow(id);
        this._nodes.set(id, nodes);
      }
      this._updateRow(nodes, line, now);
      if (cursor === nodes.item) {
        cursor = cursor.nextSibling;
      } else {
        this._list.insertBefore(nodes.item, cursor);
      }
    }
  }

  private _tick(): void {
    const now = this._now();
    for (const [id, nodes] of this._nodes) {
      const row = this._model.row(id);
      if (row) {
        const activity = activityText(row.last_activity, now);
        setText(nodes.activity, activity.short);
        nodes.item.setAttribute('aria-label', rowLabel(row, now));
      }
    }
  }

  private _buildRow(id: string): IRowNodes {
    const item = element('li', 'pal-agent-row', 'pal-agent-row');
    item.dataset.sessionId = id;
    const line = element('div', 'pal-agent-line');
    const toggle = button('', 'pal-agent-toggle');
    toggle.addEventListener('click', () => this._model.toggleCollapsed(id));
    const name = element('span', 'pal-agent-name', 'pal-agent-name');
    const notebook = element('span', 'pal-agent-notebook', 'pal-agent-notebook');
    const badges = element('span', 'pal-agent-badges');
    const state = element('span', 'pal-agent-badge pal-agent-state', 'pal-agent-state');
    const outcome = element('span', 'pal-agent-badge pal-agent-outcome', 'pal-agent-outcome');
    const residency = element('span', 'pal-agent-badge pal-agent-residency', 'pal-agent-residency');
    badges.append(state, outcome, residency);
    line.append(toggle, name, notebook, badges);

    const meta = element('div', 'pal-agent-meta');
    const model = element('span', 'pal-agent-model', 'pal-agent-model');
    const usage = element('span', 'pal-agent-usage', 'pal-agent-usage');
    const activity = element('time', 'pal-agent-activity', 'pal-agent-activity');
    meta.append(model, usage, activity);

    const actions = element('div', 'pal-agent-actions');
    actions.setAttribute('role', 'group');
    const openNotebook = button('Notebook', 'pal-agent-open-notebook');
    openNotebook.addEventListener('click', () => this._open(id, this._options.openNotebook));
    const openChat = button('Chat', 'pal-agent-open-chat');
    openChat.addEventListener('click', () => this._open(id, this._options.openChat));
    const message = button('Message', 'pal-agent-message');
    message.addEventListener('click', () => {
      const open = !this._model.isComposing(id);
      this._model.setComposing(id, open);
      if (open) {
        this._nodes.get(id)?.input.focus();
      }
    });
    const stop = button('Stop', 'pal-agent-stop');
    stop.addEventListener('click', () => void this._model.stop(id, false));
    const stopSubtree = button('Stop subtree', 'pal-agent-stop-subtree');
    stopSubtree.addEventListener('click', () => void this._model.stop(id, true));
    const remove = button('Delete', 'pal-agent-delete');
    remove.addEventListener('click', () => void this._delete(id));
    actions.append(openNotebook, openChat, message, stop, stopSubtree, remove);

    const compose = element('form', 'pal-agent-compose', 'pal-agent-compose');
    const input = element('input', 'pal-agent-input', 'pal-agent-input');
    input.type = 'text';
    input.placeholder = 'Message…';
    const send = button('Send', 'pal-agent-send');
    send.type = 'submit';
    const cancel = button('Cancel', 'pal-agent-cancel');
    cancel.addEventListener('click', () => this._closeCompose(id));
    compose.append(input, send, cancel);
    compose.addEventListener('submit', event => {
      event.preventDefault();
      void this._send(id);
    });
    input.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        this._closeCompose(id);
      }
    });

    const notice = element('div', 'pal-agent-notice', 'pal-agent-notice');
    notice.setAttribute('role', 'status');
    const error = element('div', 'pal-agent-error', 'pal-agent-error');
    error.setAttribute('role', 'alert');
    // Why the server refuses this session (a forged header) or that its folder is gone.
    const problem = element('div', 'pal-agent-problem', 'pal-agent-problem');
    item.append(line, meta, problem, actions, compose, notice, error);
    return {
      item,
      line,
      toggle,
      name,
      notebook,
      state,
      outcome,
      residency,
      model,
      usage,
      activity,
      openNotebook,
      openChat,
      message,
      stop,
      stopSubtree,
      remove,
      problem,
      compose,
      input,
      send,
      notice,
      error
    };
  }

  private _updateRow(nodes: IRowNodes, line: IVisibleAgent, now: number): void {
    const model = this._model;
    const row = line.row;
    const id = row.session_id;
    const item = nodes.item;
    item.dataset.state = row.state;
    item.dataset.outcome = row.outcome ?? 'none';
    item.dataset.residency = row.residency;
    item.dataset.depth = String(line.depth);
    item.dataset.name = row.name;
    item.classList.toggle('pal-mod-context', !line.matches);
    item.setAttribute('aria-label', rowLabel(row, now));
    item.setAttribute('aria-level', String(line.depth + 1));
    nodes.line.style.paddingInlineStart = `${Math.min(line.depth, MAX_INDENT_LEVELS) * 20}px`;

    nodes.toggle.hidden = !line.hasChildren;
    nodes.toggle.setAttribute('aria-expanded', String(!line.collapsed));
    setText(nodes.toggle, line.collapsed ? '▸' : '▾');
    const toggleLabel = `${line.collapsed ? 'Show' : 'Hide'} the sub-agents of ${row.name}`;
    nodes.toggle.setAttribute('aria-label', toggleLabel);
    nodes.toggle.title = toggleLabel;
    setText(nodes.name, row.name);
    setText(nodes.notebook, row.notebook ?? 'no notebook');
    nodes.notebook.title = row.notebook ?? '';
    setText(nodes.state, stateText(row));
    nodes.state.dataset.state = row.state;
    nodes.state.title = 'State: what the agent does now';
    setText(nodes.outcome, outcomeText(row));
    nodes.outcome.dataset.outcome = row.outcome ?? 'none';
    nodes.outcome.title = 'Outcome: how its last task or turn ended';
    setText(nodes.residency, row.residency);
    nodes.residency.title =
      row.residency === 'evicted'
        ? 'Unloaded from memory; its log and outcome stay, a message loads it again'
        : 'Loaded in the server';
    setText(nodes.model, row.model || 'model unknown');
    const usage = usageText(row);
    setText(nodes.usage, usage);
    nodes.usage.title = `Tokens and cost: ${usage}`;
    const activity = activityText(row.last_activity, now);
    setText(nodes.activity, activity.short);
    nodes.activity.dateTime = row.last_activity;
    nodes.activity.title = `Last activity: ${activity.full}`;

    const busy = model.busy(id);
    const noNotebook = row.notebook === null;
    for (const [control, verb] of [
      [nodes.openNotebook, 'Open the notebook of'],
      [nodes.openChat, 'Open the chat of']
    ] as const) {
      control.disabled = noNotebook;
      control.title = noNotebook ? 'This agent has no notebook' : `${verb} ${row.name}`;
      control.setAttribute('aria-label', `${verb} ${row.name}`);
    }
    const blocked = messageBlockedReason(row);
    nodes.message.disabled = blocked !== null;
    nodes.message.title = blocked ?? `Send ${row.name} a message`;
    nodes.message.setAttribute('aria-label', `Message ${row.name}`);
    const composing = model.isComposing(id) && blocked === null;
    nodes.message.setAttribute('aria-expanded', String(composing));
    nodes.compose.hidden = !composing;
    nodes.input.setAttribute('aria-label', `Message to ${row.name}`);
    // Read-only, not disabled, while it is sent: a disabled input would drop the focus.
    nodes.input.readOnly = busy === 'message';
    nodes.input.setAttribute('aria-busy', String(busy === 'message'));
    nodes.send.disabled = busy === 'message';

    const active = row.state !== 'idle';
    nodes.stop.disabled = !active || busy !== null;
    nodes.stop.title = active ? `Stop ${row.name}’s work` : 'It is idle: nothing to stop';
    nodes.stop.setAttribute('aria-label', `Stop ${row.name}`);
    nodes.stopSubtree.hidden = !line.hasChildren;
    const subtreeBusy = subtreeActive(model.rows, id);
    nodes.stopSubtree.disabled = !subtreeBusy || busy !== null;
    nodes.stopSubtree.title = subtreeBusy
      ? `Stop ${row.name} and every agent under it`
      : 'Nothing in this subtree runs';
    nodes.stopSubtree.setAttribute('aria-label', `Stop ${row.name} and its sub-agents`);
    const deleteBlocked = deleteBlockedReason(row);
    nodes.remove.disabled = deleteBlocked !== null || busy !== null;
    nodes.remove.title = deleteBlocked ?? `Take ${row.name} and its sub-agents out of the tree (asks first)`;
    nodes.remove.setAttribute('aria-label', `Delete ${row.name}`);

    setText(nodes.problem, row.problem ?? '');
    nodes.problem.hidden = row.problem === null;
    item.dataset.problem = row.problem === null ? 'none' : 'yes';

    const notice = model.rowNotice(id);
    setText(nodes.notice, notice ?? '');
    nodes.notice.hidden = notice === null;
    const error = model.rowError(id);
    setText(nodes.error, error ?? '');
    nodes.error.hidden = error === null;
  }

  /** Open the agent's notebook (or chat); a failure shows on its row. */
  private _open(id: string, open: (path: string) => void | Promise<unknown>): void {
    const path = this._model.row(id)?.notebook;
    if (!path) {
      return;
    }
    const report = (error: unknown) =>
      this._model.reportError(
        id,
        `Could not open ${path}: ${error instanceof Error ? error.message : String(error)}`
      );
    try {
      Promise.resolve(open(path)).catch(report);
    } catch (error) {
      report(error);
    }
  }

  private async _send(id: string): Promise<void> {
    const nodes = this._nodes.get(id);
    if (!nodes) {
      return;
    }
    const sent = await this._model.message(id, nodes.input.value);
    const now = this._nodes.get(id);
    if (sent && now) {
      now.input.value = '';
      const hadFocus = now.item.contains(document.activeElement);
      this._model.setComposing(id, false);
      if (hadFocus) {
        now.message.focus();
      }
    } else {
      now?.input.focus();
    }
  }

  private _closeCompose(id: string): void {
    this._model.setComposing(id, false);
    this._nodes.get(id)?.message.focus();
  }

  private async _delete(id: string): Promise<void> {
    const row = this._model.row(id);
    if (!row) {
      return;
    }
    const yes = await this._options.confirm(
      `Delete ${row.name}?`,
      `This takes sub-agent ${row.name} and the agents under it out of the tree: they leave ` +
        'this view and their parent’s family. Their session logs and notebooks stay on disk.'
    );
    if (yes) {
      await this._model.delete(id);
    }
  }

  private _now(): number {
    return this._options.now?.() ?? Date.now();
  }

  private readonly _filterButtons = new Map<StateFilter, HTMLButtonElement>();
  private readonly _connection = document.createElement('span');
  private readonly _error = document.createElement('div');
  private readonly _empty = document.createElement('div');
  private readonly _list = document.createElement('ul');
  private readonly _nodes = new Map<string, IRowNodes>();
  private readonly _clock: number;
}

/** Set a text only when it differs (no mutation, no lost selection in it). */
function setText(node: HTMLElement, text: string): void {
  if (node.textContent !== text) {
    node.textContent = text;
  }
}
