/**
 * The Agents View's state (docs/agents-view.md "The tab"): the latest
 * overview, the filter, the collapsed subtrees, which rows have their
 * message input open, what is in flight and the errors the server gave.
 * Actions go to the server through `IAgentsApi`. What an action did (a
 * notice) or the server's error shows on its row until the row's state next
 * changes (but never before `READ_MS`) or the next action on the row; a
 * notice also goes after `NOTICE_MS` (docs/agents-view.md "The tab").
 */
import { Signal, type ISignal } from '@lumino/signaling';

import { diffAgents, subtreeIds, visibleAgents, type IAgentsDiff, type IVisibleAgent, type StateFilter } from './agents';
import type {
  IAgentMessageSent,
  IAgentRow,
  IAgentsOverview,
  IAgentsStopped
} from './wire';
import type { StreamState } from './reconnectingSocket';

/** What the model needs of the server (AgentApiClient has it). */
export interface IAgentsApi {
  listAgents(): Promise<IAgentsOverview>;
  messageAgent(sessionId: string, text: string): Promise<IAgentMessageSent>;
  stopAgent(sessionId: string, subtree: boolean): Promise<IAgentsStopped>;
  deleteAgent(sessionId: string): Promise<void>;
}

export type AgentAction = 'message' | 'stop' | 'stop-subtree' | 'delete';

/** How long a notice ("Stopped 1 agent.") stays on a row whose state does not change first. */
export const NOTICE_MS = 8000;

/**
 * The least time a notice or error shows: the action's own effect (the stopped row) often comes
 * a moment after its answer, and a line gone in a blink is never read.
 */
export const READ_MS = 2000;

/** What a notice or error is about: the row as the user sees its work (not its tokens). */
function stateOf(row: IAgentRow | undefined): string {
  return row ? `${row.state} ${row.waiting_for} ${row.outcome}` : '';
}

export class AgentsModel {
  constructor(private readonly _api: IAgentsApi) {}

  /** Emitted after every change; the diff names the rows whose data changed. */
  get changed(): ISignal<this, IAgentsDiff> {
    return this._changed;
  }

  get rows(): readonly IAgentRow[] {
    return this._rows;
  }

  row(sessionId: string): IAgentRow | undefined {
    return this._byId.get(sessionId);
  }

  /** True once a snapshot arrived (before it, the view says it is loading). */
  get loaded(): boolean {
    return this._loaded;
  }

  get filter(): StateFilter {
    return this._filter;
  }

  set filter(filter: StateFilter) {
    if (filter !== this._filter) {
      this._filter = filter;
      this._emit();
    }
  }

  get connection(): StreamState {
    return this._connection;
  }

  set connection(state: StreamState) {
    if (state !== this._connection) {
      this._connection = state;
      this._emit();
    }
  }

  /** A failure that belongs to no row (reading the overview). */
  get error(): string | null {
    return this._error;
  }

  /** The lines to show now. */
  visible(): IVisibleAgent[] {
    return visibleAgents(this._rows, this._collapsed, this._filter);
  }

  isCollapsed(sessionId: string): boolean {
    return this._collapsed.has(sessionId);
  }

  toggleCollapsed(sessionId: string): void {
    if (!this._collapsed.delete(sessionId)) {
      this._collapsed.add(sessionId);
    }
    this._emit();
  }

  isComposing(sessionId: string): boolean {
    return this._composing.has(sessionId);
  }

  setComposing(sessionId: string, open: boolean): void {
    if (open === this._composing.has(sessionId)) {
      return;
    }
    if (open) {
      this._composing.add(sessionId);
    } else {
      this._composing.delete(sessionId);
    }
    this._emit([sessionId]);
  }

  /** The server's error for the row's last action, or null. */
  rowError(sessionId: string): string | null {
    return this._rowErrors.get(sessionId) ?? null;
  }

  /** What the row's last action did ("Sent as mail"), or null. */
  rowNotice(sessionId: string): string | null {
    return this._rowNotices.get(sessionId) ?? null;
  }

  /** The action in flight on the row, or null. */
  busy(sessionId: string): AgentAction | null {
    return this._busy.get(sessionId) ?? null;
  }

  /** Take a snapshot from the server: it replaces the rows (a reconnect's first message too). */
  apply(overview: IAgentsOverview): void {
    const diff = diffAgents(this._byId, overview.agents);
    this._rows = overview.agents;
    this._byId = new Map(this._rows.map(row => [row.session_id, row]));
    this._loaded = true;
    this._error = null;
    for (const id of diff.removed) {
      this._clearMessages(id);
      this._composing.delete(id);
      this._collapsed.delete(id);
    }
    for (const id of diff.changed) {
      const shown = this._shown.get(id);
      if (shown !== undefined && shown.state !== stateOf(this._byId.get(id))) {
        this._clearAfter(id, shown.at + READ_MS - Date.now());
      }
    }
    this._changed.emit(diff);
  }

  /** Read the overview with a GET (the Refresh button; the socket sends it by itself). */
  async refresh(): Promise<void> {
    try {
      this.apply(await this._api.listAgents());
    } catch (error) {
      this._error = `Could not read the agents: ${describe(error)}`;
      this._emit();
    }
  }

  /** Send `text` to the agent; true when the server took it (the input can be cleared). */
  async message(sessionId: string, text: string): Promise<boolean> {
    if (!text.trim()) {
      this._fail(sessionId, 'Write a message first.');
      return false;
    }
    return this._run(sessionId, 'message', async () => {
      const answer = await this._api.messageAgent(sessionId, text);
      return answer.delivered === 'mail'
        ? 'Sent as mail from the root agent.'
        : 'Sent as a chat message.';
    });
  }

  stop(sessionId: string, subtree: boolean): Promise<boolean> {
    return this._run(sessionId, subtree ? 'stop-subtree' : 'stop', async () => {
      const answer = await this._api.stopAgent(sessionId, subtree);
      const count = answer.stopped?.length ?? 0;
      return count === 0
        ? 'Nothing was running.'
        : `Stopped ${count} agent${count === 1 ? '' : 's'}.`;
    });
  }

  async delete(sessionId: string): Promise<boolean> {
    const gone = subtreeIds(this._rows, sessionId);
    const ok = await this._run(sessionId, 'delete', async () => {
      await this._api.deleteAgent(sessionId);
      return null;
    });
    if (ok) {
      // Gone from the server: gone from the view now, not at the next snapshot.
      this.apply({
        agents: this._rows.filter(row => !gone.includes(row.session_id)),
        generated_at: ''
      });
    }
    return ok;
  }

  private async _run(
    sessionId: string,
    action: AgentAction,
    work: () => Promise<string | null>
  ): Promise<boolean> {
    if (this._busy.has(sessionId)) {
      return false;
    }
    this._busy.set(sessionId, action);
    this._clearMessages(sessionId);
    this._emit([sessionId]);
    try {
      const notice = await work();
      if (notice) {
        this._showNotice(sessionId, notice);
      }
      return true;
    } catch (error) {
      this._showError(sessionId, describe(error));
      return false;
    } finally {
      this._busy.delete(sessionId);
      this._emit([sessionId]);
    }
  }

  /** Show a failure of the row's own (not the server's) action, e.g. opening its notebook. */
  reportError(sessionId: string, message: string): void {
    this._fail(sessionId, message);
  }

  private _fail(sessionId: string, message: string): void {
    this._clearMessages(sessionId);
    this._showError(sessionId, message);
    this._emit([sessionId]);
  }

  /** A notice goes by itself after a while: it reports, and the row shows what came of it. */
  private _showNotice(sessionId: string, notice: string): void {
    this._rowNotices.set(sessionId, notice);
    this._shown.set(sessionId, { state: stateOf(this._byId.get(sessionId)), at: Date.now() });
    this._clearAfter(sessionId, NOTICE_MS);
  }

  /** An error stays until the row moves on or the next action: it must not go unread. */
  private _showError(sessionId: string, message: string): void {
    this._rowErrors.set(sessionId, message);
    this._shown.set(sessionId, { state: stateOf(this._byId.get(sessionId)), at: Date.now() });
  }

  /** Clear the row's notice or error in `ms` (now when that is 0 or less), or sooner if set so. */
  private _clearAfter(sessionId: string, ms: number): void {
    if (ms <= 0) {
      this._clearMessages(sessionId);
      return;
    }
    const pending = this._clearing.get(sessionId);
    if (pending && pending.at <= Date.now() + ms) {
      return;
    }
    if (pending) {
      clearTimeout(pending.timer);
    }
    const timer = setTimeout(() => {
      this._clearMessages(sessionId);
      this._emit([sessionId]);
    }, ms);
    this._clearing.set(sessionId, { timer, at: Date.now() + ms });
  }

  private _clearMessages(sessionId: string): void {
    this._rowErrors.delete(sessionId);
    this._rowNotices.delete(sessionId);
    this._shown.delete(sessionId);
    clearTimeout(this._clearing.get(sessionId)?.timer);
    this._clearing.delete(sessionId);
  }

  private _emit(changed: string[] = []): void {
    this._changed.emit({ added: [], removed: [], changed });
  }

  private _rows: readonly IAgentRow[] = [];
  private _byId = new Map<string, IAgentRow>();
  private _loaded = false;
  private _filter: StateFilter = 'all';
  private _connection: StreamState = 'connecting';
  private _error: string | null = null;
  private readonly _collapsed = new Set<string>();
  private readonly _composing = new Set<string>();
  private readonly _rowErrors = new Map<string, string>();
  private readonly _rowNotices = new Map<string, string>();
  /** The row's state (`stateOf`) and the time when its notice or error was shown. */
  private readonly _shown = new Map<string, { state: string; at: number }>();
  /** When the row's notice or error is due to go. */
  private readonly _clearing = new Map<
    string,
    { timer: ReturnType<typeof setTimeout>; at: number }
  >();
  private readonly _busy = new Map<string, AgentAction>();
  private readonly _changed = new Signal<this, IAgentsDiff>(this);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
