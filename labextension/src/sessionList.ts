/**
 * The session list of a notebook (docs/pairing.md, section 1; docs/ui.md
 * "Session list"): its sessions newest first, with Open, Fork and Delete.
 * The server owns the list (`GET .../sessions?notebook=`); this model keeps
 * the last answer, which row is busy, which row asks to confirm a delete,
 * and the errors (the list's, and each row's in the server's words). The
 * view is sessionListView.ts.
 *
 * Open and Continue are one action: attaching by id loads the session as
 * the notebook's agent (on the notebook's kernel), which is both reading it
 * and continuing it; Open also puts the cursor in the input.
 */
import { Signal, type ISignal } from '@lumino/signaling';

import { formatCost } from './modelCost';
import type { ISessionCopy, ISessionListItem } from './wire';

/** What the model needs of the API client (AgentApiClient has it). */
export interface ISessionListApi {
  listNotebookSessions(notebookPath: string): Promise<ISessionListItem[]>;
  deleteSession(sessionId: string): Promise<void>;
  fork(sessionId: string, entryId: string): Promise<ISessionCopy>;
}

/** What the model needs of the panel: the notebook, its session, and how to switch. */
export interface ISessionListHost {
  /** The server of the notebook shown, or null (no notebook). */
  api(): ISessionListApi | null;
  /** The notebook the list is of, or null (no notebook). */
  notebookPath(): string | null;
  /** The session this tab shows (marked current), or null. */
  currentSessionId(): string | null;
  /** Attach this tab to the session and show it (rejects with the server's reason). */
  openSession(sessionId: string): Promise<void>;
  /** Open a fork's notebook; its message waits in the input there. */
  openCopy(copy: ISessionCopy): Promise<void>;
  /** Open the session's step-through beside the notebook (docs/teaching.md); absent: no action. */
  stepThrough?(sessionId: string): void;
}

export const NO_MESSAGE_TITLE = '(no message yet)';
export const NO_FORK_POINT = 'No message of yours to fork from yet.';

export class SessionListModel {
  constructor(private readonly _host: ISessionListHost) {}

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get isOpen(): boolean {
    return this._open;
  }

  get loading(): boolean {
    return this._loading;
  }

  get items(): readonly ISessionListItem[] {
    return this._items;
  }

  /** Why the list could not be read (the last refresh), or null. */
  get error(): string | null {
    return this._error;
  }

  /** The session whose action runs now, or null (one action at a time). */
  get busy(): string | null {
    return this._busy;
  }

  /** The session whose Delete waits for a confirmation, or null. */
  get confirming(): string | null {
    return this._confirming;
  }

  /** The notebook the list shows. */
  get notebookPath(): string | null {
    return this._notebook;
  }

  /** The session this tab shows. */
  get currentSessionId(): string | null {
    return this._host.currentSessionId();
  }

  /** The server's (or the model's) words for what failed on a row. */
  rowError(sessionId: string): string | null {
    return this._rowErrors.get(sessionId) ?? null;
  }

  /** Open the list and read it again. */
  show(): Promise<void> {
    this._open = true;
    this._confirming = null;
    this._rowErrors.clear();
    return this.refresh();
  }

  close(): void {
    if (!this._open) {
      return;
    }
    this._open = false;
    this._confirming = null;
    this._changed.emit();
  }

  /** Read the list again; an answer that a newer refresh overtook is dropped. */
  async refresh(): Promise<void> {
    const notebook = this._host.notebookPath();
    const api = this._host.api();
    const request = ++this._request;
    this._notebook = notebook;
    if (notebook === null || api === null) {
      this._items = [];
      this._error = 'Open a notebook to see its sessions.';
      this._loading = false;
      this._changed.emit();
      return;
    }
    this._loading = true;
    this._changed.emit();
    try {
      const items = await api.listNotebookSessions(notebook);
      if (request !== this._request) {
        return;
      }
      this._items = items;
      this._error = null;
    } catch (error) {
      if (request !== this._request) {
        return;
      }
      this._error = `Could not list the sessions: ${describe(error)}`;
    }
    this._loading = false;
    this._changed.emit();
  }

  /**
   * The tab shows `sessionId` now (a New session, an Open, a switch): an
   * open list is read again, so its current mark and its rows follow.
   */
  sessionShown(sessionId: string | null): void {
    if (sessionId === this._shown) {
      return;
    }
    this._shown = sessionId;
    if (this._open) {
      void this.refresh();
    }
  }

  /** Open (and continue) a session in this tab; the list closes once it shows. */
  async open(sessionId: string): Promise<boolean> {
    const done = await this._act(sessionId, () => this._host.openSession(sessionId));
    if (done) {
      this.close();
    }
    return done;
  }

  /** Whether rows offer "Step through" (the host can open it). */
  get canStepThrough(): boolean {
    return this._host.stepThrough !== undefined;
  }

  /** Open the session's step-through (read-only: the list stays as it is). */
  stepThrough(sessionId: string): void {
    this._host.stepThrough?.(sessionId);
  }

  /** Fork from the session's last message of the user; the copy opens in its own tab. */
  async fork(sessionId: string): Promise<boolean> {
    const item = this._items.find(i => i.session_id === sessionId);
    const entryId = item?.last_user_entry_id;
    if (!entryId) {
      this._setRowError(sessionId, NO_FORK_POINT);
      return false;
    }
    const done = await this._act(sessionId, async () => {
      await this._host.openCopy(await this._requireApi().fork(sessionId, entryId));
    });
    if (done) {
      await this.refresh();
    }
    return done;
  }

  /** The first step of Delete: the row asks to confirm. */
  askDelete(sessionId: string): void {
    this._confirming = sessionId;
    this._rowErrors.delete(sessionId);
    this._changed.emit();
  }

  cancelDelete(): void {
    if (this._confirming !== null) {
      this._confirming = null;
      this._changed.emit();
    }
  }

  /** Delete after the confirmation; a refusal (409) stays on the row in the server's words. */
  async confirmDelete(sessionId: string): Promise<boolean> {
    if (this._confirming !== sessionId) {
      return false;
    }
    this._confirming = null;
    const done = await this._act(sessionId, () => this._requireApi().deleteSession(sessionId));
    if (done) {
      this._items = this._items.filter(i => i.session_id !== sessionId);
      await this.refresh();
    }
    return done;
  }

  private async _act(sessionId: string, work: () => Promise<void>): Promise<boolean> {
    if (this._busy !== null) {
      return false;
    }
    this._busy = sessionId;
    this._rowErrors.delete(sessionId);
    this._changed.emit();
    try {
      await work();
      return true;
    } catch (error) {
      this._rowErrors.set(sessionId, describe(error));
      return false;
    } finally {
      this._busy = null;
      this._changed.emit();
    }
  }

  private _requireApi(): ISessionListApi {
    const api = this._host.api();
    if (api === null) {
      throw new Error('No notebook is open.');
    }
    return api;
  }

  private _setRowError(sessionId: string, text: string): void {
    this._rowErrors.set(sessionId, text);
    this._changed.emit();
  }

  private _open = false;
  private _loading = false;
  private _items: ISessionListItem[] = [];
  private _error: string | null = null;
  private _busy: string | null = null;
  private _confirming: string | null = null;
  private _notebook: string | null = null;
  private _request = 0;
  private _shown: string | null = null;
  private readonly _rowErrors = new Map<string, string>();
  private readonly _changed = new Signal<this, void>(this);
}

/** A row's title: the first message, or that there is none yet. */
export function rowTitle(item: ISessionListItem): string {
  return item.title || NO_MESSAGE_TITLE;
}

/** "just now", "5 min ago", "3 h ago", "2 days ago", else the date; "" for no time. */
export function relativeTime(iso: string | null, now: number = Date.now()): string {
  const stamp = iso ? Date.parse(iso) : NaN;
  if (Number.isNaN(stamp)) {
    return '';
  }
  const seconds = Math.max(0, Math.round((now - stamp) / 1000));
  if (seconds < 60) {
    return 'just now';
  }
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) {
    return `${minutes} min ago`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 24) {
    return `${hours} h ago`;
  }
  const days = Math.floor(hours / 24);
  if (days < 7) {
    return `${days} day${days === 1 ? '' : 's'} ago`;
  }
  return new Date(stamp).toISOString().slice(0, 10);
}

/** The row's cost: with its sub-agents, and its own part when they spent anything. */
export function rowCost(item: ISessionListItem): string {
  const total = formatCost(item.cost_total);
  if (item.cost_total === item.cost) {
    return total;
  }
  return `${total} with sub-agents (own ${formatCost(item.cost)})`;
}

/** The row's model: "provider · model", or what is known of it. */
export function rowModel(item: ISessionListItem): string {
  if (item.provider && item.model) {
    return `${item.provider} · ${item.model}`;
  }
  return item.model || item.provider || 'model unknown';
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
