/**
 * The agent session of one notebook tab: reports the tab's kernel to the
 * server (bindings), attaches or resumes a session, loads its transcript
 * and keeps it current through the event stream.
 */
import type { DocumentChange } from '@jupyter/ydoc';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Contents } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { Signal, type ISignal } from '@lumino/signaling';

import { AgentApiClient, AgentApiError } from './api';
import { AutonomyModel } from './autonomy';
import { CellFollower, type FollowCellsSetting } from './cellFollower';
import { EventStream, type StreamState } from './eventStream';
import { ModelCostModel } from './modelCost';
import { PermissionModel } from './permission';
import { RetrySchedule } from './retrySchedule';
import { markAwaitingCells } from './approvalPrompt';
import { Takeover } from './takeover';
import {
  findSenderNotebook,
  knownNotebookPath,
  parentFromInfo,
  type IParentAgent,
  type SessionDirectory
} from './family';
import { QueueModel } from './queue';
import { TranscriptModel, type IMessageOrigin } from './transcript';
import type { AgentEvent, DeliveryMode, ISessionInfo } from './wire';

export type AgentConnection =
  /** Waiting for the notebook to load or its kernel to start. */
  | 'no-kernel'
  | 'attaching'
  | 'connected'
  | 'reconnecting'
  | 'failed';

interface IBindingKey {
  path: string;
  kernelId: string;
  documentId: string | undefined;
}

export class NotebookAgent implements IDisposable {
  constructor(
    readonly panel: NotebookPanel,
    private readonly _api: AgentApiClient,
    private readonly _contents: Contents.IManager,
    followSetting: FollowCellsSetting,
    private readonly _directory: SessionDirectory
  ) {
    this._follower = new CellFollower(panel.content, followSetting);
    this.transcript.liveEvent.connect(this._onLiveEvent, this);
    panel.sessionContext.kernelChanged.connect(this._scheduleSync, this);
    panel.context.pathChanged.connect(this._scheduleSync, this);
    panel.context.model.sharedModel.changed.connect(this._onDocumentChange, this);
    this.permission.changed.connect(this._markAwaitingCells, this);
    panel.content.model?.cells.changed.connect(this._markAwaitingCells, this);
    this._scheduleSync();
  }

  /** The prompt of each cell waiting for approval says so, not `[*]` (approvalPrompt.ts). */
  private _markAwaitingCells(): void {
    const waiting = new Set(this.permission.waiting.map(cell => cell.cellId));
    markAwaitingCells(this.panel.content.widgets, waiting);
  }

  readonly transcript = new TranscriptModel();

  /** The session's autonomous mode (GET on each load, then `autonomy` events). */
  readonly autonomy = new AutonomyModel(this._api);

  /** The user's messages waiting for the agent (GET on each load, then `queue` events). */
  readonly queue = new QueueModel();
  /** The session's model and cost (GET on each load, then events; docs/pairing.md, 2). */
  readonly modelCost = new ModelCostModel(this._api);
  /** The session's permission mode and waiting cells (GET on each load, then events; pairing.md, 4). */
  readonly permission = new PermissionModel(this._api);

  /** Emitted when `connection`, `session` or `lastError` change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Emitted when `parent` changes (a sub-agent's session was opened). */
  get familyChanged(): ISignal<this, void> {
    return this._familyChanged;
  }

  /** The agent that spawned this session, when it is a sub-agent's. */
  get parent(): IParentAgent | null {
    return this._parent;
  }

  get connection(): AgentConnection {
    return this._connection;
  }

  get session(): ISessionInfo | null {
    return this._session;
  }

  /** Server path of the notebook, without a drive prefix. */
  get notebookPath(): string {
    return this._contents.localPath(this.panel.context.path);
  }

  get lastError(): string | null {
    return this._lastError;
  }

  /** After a failure: milliseconds until the panel tries again by itself. */
  get retryInMs(): number | null {
    return this._retry.pendingDelayMs;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._retry.cancel();
    this._follower.dispose();
    this._stream?.dispose();
    this._stream = null;
    this.panel.content.model?.cells.changed.disconnect(this._markAwaitingCells, this);
    Signal.clearData(this.autonomy);
    Signal.clearData(this.queue);
    Signal.clearData(this.modelCost);
    Signal.clearData(this.permission);
    Signal.clearData(this);
  }

  /**
   * Send a user message. Idle, it starts a turn and the transcript shows it
   * at once; while a turn runs, it steers (`steer`) or waits as a follow-up
   * (`auto`, `follow_up`), shown in the queue once the server's `queue`
   * event arrives. A session that is no longer attached (another session
   * took over the notebook; the server answers 404) gets nothing: the
   * transcript says so and offers the switch, and the rejection
   * (`SessionTakenOverError`) tells the caller to keep the text. A 404 while
   * the notebook has no other loaded session means the session only unloaded
   * (an idle sub-agent evicted): it is attached again by id and the message
   * sent once more.
   */
  send(text: string, mode: DeliveryMode = 'auto'): Promise<void> {
    return this._sendMessage(text, mode, true);
  }

  /**
   * `send`; `mayReopen`: a 404 for a session that only unloaded (nobody took
   * the notebook over) attaches it again and sends once more.
   */
  private async _sendMessage(text: string, mode: DeliveryMode, mayReopen: boolean): Promise<void> {
    const session = this._session;
    if (!session) {
      this.transcript.addError('No agent session yet: is the kernel running?');
      return;
    }
    if (this._takeover.staleSessionId === session.session_id) {
      throw this._takeover.refuseSend(this.transcript, session.session_id);
    }
    const running = this.transcript.status === 'running';
    const pending = running ? null : this.transcript.addPendingUserMessage(text);
    if (pending) {
      this._follower.newTurn();
    }
    try {
      const answer = await this._api.sendMessage(session.session_id, text, mode);
      if (pending && answer.delivery_status === 'started' && typeof answer.turn === 'number') {
        this.transcript.confirmUserMessage(pending, answer.turn);
      } else if (pending) {
        this.transcript.removeEntry(pending); // a turn began meanwhile: it waits in the queue
      }
    } catch (error) {
      if (pending) {
        this.transcript.removeEntry(pending);
      }
      if (error instanceof AgentApiError && error.status === 404) {
        if (mayReopen && !(await this._anotherSessionAttached(session.session_id))) {
          // Only unloaded (an idle sub-agent evicted): it is still this notebook's session.
          try {
            await this._attachById(session.session_id);
          } catch (reopenError) {
            this.transcript.addError(`Could not send the message: ${describe(reopenError)}`);
            throw reopenError;
          }
          return this._sendMessage(text, mode, false);
        }
        throw this._takeover.refuseSend(this.transcript, session.session_id);
      }
      // The server's own words (a 409 names the session that holds the kernel).
      this.transcript.addError(`Could not send the message: ${describe(error)}`);
      throw error;
    }
  }

  /**
   * Whether the notebook has a loaded session other than `sessionId` (it
   * took the notebook over). Unknown (the list failed) counts as yes: the
   * refusal keeps the message and offers the switch.
   */
  private async _anotherSessionAttached(sessionId: string): Promise<boolean> {
    try {
      const sessions = await this._api.listNotebookSessions(this.notebookPath);
      return sessions.some(
        item =>
          item.session_id !== sessionId && (item.status === 'idle' || item.status === 'running')
      );
    } catch {
      return true;
    }
  }

  /** The API client, for the branching commands of the chat panel. */
  get api(): AgentApiClient {
    return this._api;
  }

  /** Remove a queued message (the `queue` event updates every view). */
  async removeQueued(messageId: string): Promise<void> {
    await this._queueAction(
      sessionId => this._api.removeQueuedMessage(sessionId, messageId),
      'remove the queued message'
    );
  }

  /** Send a queued message now (into the running turn, or as a turn). */
  async sendQueuedNow(messageId: string): Promise<void> {
    await this._queueAction(
      sessionId => this._api.sendQueuedNow(sessionId, messageId),
      'send the queued message'
    );
  }

  private async _queueAction(
    action: (sessionId: string) => Promise<unknown>,
    what: string
  ): Promise<void> {
    const sessionId = this._session?.session_id;
    if (!sessionId) {
      return;
    }
    try {
      await action(sessionId);
    } catch (error) {
      this.transcript.addError(`Could not ${what}: ${describe(error)}`);
    }
  }

  async stop(): Promise<void> {
    if (this._session) {
      await this._api.stopTurn(this._session.session_id);
    }
  }

  /**
   * The notebook of the agent that sent a message: known from the family
   * when possible, otherwise looked up in the server's session list.
   */
  senderNotebookPath(origin: IMessageOrigin): Promise<string | null> {
    return findSenderNotebook(origin, this._parent, this.transcript.entries, this._directory);
  }

  /** The sender's notebook when the panel knows it without asking the server. */
  knownSenderNotebookPath(origin: IMessageOrigin): string | null {
    return knownNotebookPath(origin, this._parent, this.transcript.entries);
  }

  /**
   * Try again at once after a failure (server restarted, extension missing,
   * ...), with the automatic retries counted from the start again.
   */
  retry(): void {
    this._retry.reset();
    this._scheduleSync();
  }

  /** The session this tab shows when another session took over the notebook, else null. */
  get takenOver(): string | null {
    return this._takeover.staleSessionId;
  }

  /** Show the notebook's current session (the takeover line's "Switch to it"). */
  followCurrentSession(): Promise<void> {
    const stale = this._takeover.staleSessionId;
    return stale ? this._followNotebookSession(stale) : Promise.resolve();
  }

  /** Start over with a fresh session for this notebook; this tab follows it. */
  startNewSession(): Promise<void> {
    return this._enqueue(async () => {
      // Its `inactive` event may come before the switch: that one is ours.
      this._leftSessionId = this._session?.session_id ?? null;
      this._setConnection('attaching');
      const session = await this._api.attachSession({
        notebookPath: this.notebookPath,
        kernelId: this._kernelId() ?? undefined,
        newSession: true
      });
      await this._switchTo(session);
    });
  }

  /**
   * Attach this notebook to one of its sessions (the session list's Open)
   * and show it here. The server loads it as the notebook's agent on the
   * notebook's kernel, so the session attached before is detached (a tab
   * that showed it gets the takeover line). A refusal (a turn runs on the
   * kernel: 409) rejects with the server's reason and leaves this tab as it
   * was; it is not retried.
   */
  openSession(sessionId: string): Promise<void> {
    if (sessionId === this._session?.session_id && this._takeover.staleSessionId !== sessionId) {
      return Promise.resolve(); // shown and attached already
    }
    return this._attachById(sessionId);
  }

  /** Attach session `sessionId` to the notebook and show it (openSession, a reopen). */
  private _attachById(sessionId: string): Promise<void> {
    let refused: unknown = null;
    const step = this._enqueue(async () => {
      const left = this._leftSessionId;
      const current = this._session?.session_id ?? null;
      if (current !== sessionId) {
        // Its `inactive` event may come before the switch: that one is ours.
        this._leftSessionId = current;
      }
      let session: ISessionInfo;
      try {
        session = await this._api.attachSession({
          notebookPath: this.notebookPath,
          kernelId: this._kernelId() ?? undefined,
          sessionId
        });
      } catch (error) {
        this._leftSessionId = left;
        refused = error;
        return;
      }
      this._takeover.clear(); // attached (again): a taken-over session is the notebook's now
      this._setConnection('attaching');
      await this._switchTo(session);
    });
    return step.then(() => {
      if (refused !== null) {
        throw refused;
      }
    });
  }

  /**
   * Run `step` after the steps before it; failures show in the status line
   * and are tried again with backoff (a notebook that was being written, a
   * server restarting), a success ends the retries.
   */
  private _enqueue(step: () => Promise<void>): Promise<void> {
    this._syncChain = this._syncChain
      .then(step)
      .then(() => this._retry.reset())
      .catch(error => this._fail(error));
    return this._syncChain;
  }

  private _scheduleSync(): void {
    void this._enqueue(() => this._sync());
  }

  private _onDocumentChange(_: unknown, change: DocumentChange): void {
    // jupyter-collaboration sets `document_id` once the provider has synced.
    if (change.stateChange?.some(state => state.name === 'document_id')) {
      this._scheduleSync();
    }
  }

  private async _sync(): Promise<void> {
    await this.panel.context.ready;
    if (this._disposed) {
      return;
    }
    const kernelId = this._kernelId();
    if (!kernelId) {
      this._setConnection('no-kernel');
      return;
    }
    const binding: IBindingKey = {
      path: this.notebookPath,
      kernelId,
      documentId: this._documentId()
    };
    if (!sameBinding(binding, this._postedBinding)) {
      try {
        await this._api.postBinding(binding);
        this._postedBinding = binding;
      } catch (error) {
        // The session route can still find the kernel on its own.
        console.warn('prime-agent: could not post the notebook binding', error);
      }
    }
    const current = this._session;
    if (
      current &&
      current.kernel_id === kernelId &&
      current.notebook_path === binding.path &&
      this._stream
    ) {
      return;
    }
    if (!current) {
      this._setConnection('attaching');
    }
    const session = await this._api.attachSession({
      notebookPath: binding.path,
      kernelId,
      sessionId: current?.session_id
    });
    if (this._disposed) {
      return;
    }
    if (current && this._stream && session.session_id === current.session_id) {
      this._takeover.clear(); // attached again
      this._setSession({ ...current, ...session });
      this._changed.emit();
      return;
    }
    await this._switchTo(session);
  }

  /**
   * Load the session's transcript and follow its events. `replay` asks for
   * the server's whole buffer (events of a turn the transcript does not have
   * yet); after a branch the transcript is the whole truth, and replaying
   * would bring back the abandoned turns.
   */
  private async _switchTo(session: ISessionInfo, replay = true): Promise<void> {
    this._stream?.dispose();
    this._stream = null;
    const detail = await this._api.getSession(session.session_id);
    if (this._disposed) {
      return;
    }
    const { transcript, queue, ...info } = detail;
    this._setSession(info);
    this._lastError = null;
    this._changed.emit();
    this.transcript.load(
      transcript ?? [],
      typeof info.seq === 'number' ? info.seq : null
    );
    this.transcript.status = info.status;
    this.queue.load(queue, typeof info.seq === 'number' ? info.seq : null);
    this._takeover.reloaded(this.transcript, info.session_id);
    void this._findParent(info);
    // Read before the stream opens: an `autonomy` event from it is newer,
    // except those the replay brings up to `seq` (older than this answer).
    void this.autonomy.attach(info.session_id, typeof info.seq === 'number' ? info.seq : null);
    void this.modelCost.attach(info, transcript ?? []);
    void this.permission.attach(info.session_id);
    // Replay the server's whole buffer; the transcript drops what it has.
    const stream = new EventStream({
      urlFor: since => this._api.eventsUrl(session.session_id, since),
      since: replay || typeof info.seq !== 'number' ? 0 : info.seq,
      webSocket: this._api.serverSettings.WebSocket
    });
    stream.received.connect(this._onEvent, this);
    stream.stateChanged.connect(this._onStreamState, this);
    stream.restarted.connect(this._onStreamRestarted, this);
    stream.connectFailed.connect(this._onConnectFailed, this);
    this._stream = stream;
    this._onStreamState(stream, stream.state);
  }

  /** Look up the parent of a sub-agent's session (its name and notebook). */
  private async _findParent(info: ISessionInfo): Promise<void> {
    const parentId = info.parent_session_id;
    this._setParent(parentId ? parentFromInfo(parentId, null) : null);
    if (!parentId) {
      return;
    }
    try {
      const parent = await this._directory.find(parentId);
      if (!this._disposed && this._session?.session_id === info.session_id) {
        this._setParent(parentFromInfo(parentId, parent));
      }
    } catch (error) {
      console.warn('prime-agent: could not look up the parent session', error);
    }
  }

  private _setParent(parent: IParentAgent | null): void {
    const same =
      parent === this._parent ||
      (parent !== null &&
        this._parent !== null &&
        parent.sessionId === this._parent.sessionId &&
        parent.name === this._parent.name &&
        parent.notebookPath === this._parent.notebookPath);
    if (!same) {
      this._parent = parent;
      this._familyChanged.emit();
    }
  }

  /**
   * Attach to the session the notebook uses now (the newest one), unless
   * this tab already switched away from `staleSessionId`, and reload its
   * transcript and events.
   */
  private _followNotebookSession(staleSessionId: string): Promise<void> {
    return this._enqueue(async () => {
      const kernelId = this._kernelId();
      if (this._disposed || this._session?.session_id !== staleSessionId || !kernelId) {
        return;
      }
      this._setConnection('attaching');
      const session = await this._api.attachSession({
        notebookPath: this.notebookPath,
        kernelId
      });
      await this._switchTo(session);
    });
  }

  private _onLiveEvent(_: TranscriptModel, event: AgentEvent): void {
    switch (event.type) {
      case 'status':
        if (
          event.status === 'inactive' &&
          typeof event.taken_over_by === 'string' &&
          event.taken_over_by !== event.session_id &&
          event.session_id === this._session?.session_id &&
          event.session_id !== this._leftSessionId
        ) {
          // Another session took over this notebook (another user's New
          // session): stay on this one and offer the switch (takeover.ts).
          // An `inactive` without `taken_over_by` only unloaded the session
          // (nobody replaced it): no line; the next message opens it again.
          if (this._takeover.mark(this.transcript, event.session_id)) {
            this._changed.emit();
          }
        }
        break;
      case 'turn_started':
        this._follower.newTurn();
        break;
      case 'branch_moved': {
        // The transcript is the current branch: load it again.
        const session = this._session;
        if (session) {
          void this._enqueue(() => this._switchTo(session, false));
        }
        break;
      }
      case 'cell_started':
      case 'cell_running':
        void this._follower.follow(event.cell_id);
        break;
    }
  }

  private _onEvent(_: EventStream, event: AgentEvent): void {
    this.autonomy.applyEvent(event);
    this.queue.apply(event);
    this.modelCost.applyEvent(event);
    this.permission.applyEvent(event);
    this.transcript.apply(event);
    if (this._session && event.type === 'status') {
      this._setSession({ ...this._session, status: event.status });
    }
    if (this._session && event.type === 'model_change') {
      this._setSession({ ...this._session, provider: event.provider, model: event.model });
      this._changed.emit();
    }
  }

  private _onStreamRestarted(): void {
    const session = this._session;
    if (session) {
      void this._enqueue(() => this._switchTo(session));
    }
  }

  /**
   * The events socket was refused: when the server answers that it no longer has the session
   * attached (it restarted, or unloaded an idle sub-agent), attach it again rather than knock
   * on the socket for ever. A server that does not answer yet is retried by the stream.
   */
  private _onConnectFailed(): void {
    const session = this._session;
    if (!session || this._checkingSession) {
      return;
    }
    this._checkingSession = true;
    this._api
      .getSession(session.session_id)
      .then(
        () => undefined,
        (error: unknown) => {
          const gone = error instanceof AgentApiError && error.status === 404;
          if (gone && this._session === session && !this._disposed) {
            this._onStreamRestarted();
          }
        }
      )
      .finally(() => {
        this._checkingSession = false;
      });
  }

  private _onStreamState(_: EventStream, state: StreamState): void {
    if (state === 'open') {
      this._setConnection('connected');
    } else if (this._connection === 'connected') {
      this._setConnection('reconnecting');
    }
  }

  /** The tab's session; its id also marks the notebook's node (`data-pal-session`). */
  private _setSession(session: ISessionInfo): void {
    this._session = session;
    this.panel.node.dataset.palSession = session.session_id;
  }

  private _kernelId(): string | null {
    return this.panel.sessionContext.session?.kernel?.id ?? null;
  }

  private _documentId(): string | undefined {
    const value = this.panel.context.model.sharedModel.getState('document_id');
    return typeof value === 'string' ? value : undefined;
  }

  private _fail(error: unknown): void {
    if (this._disposed) {
      return;
    }
    this._lastError = describe(error);
    this._retry.schedule(() => {
      this._setConnection('attaching');
      this._scheduleSync();
    });
    this._setConnection('failed');
    this._changed.emit();
  }

  private _setConnection(connection: AgentConnection): void {
    if (this._connection !== connection) {
      this._connection = connection;
      if (connection !== 'failed') {
        this._lastError = null;
      }
      this._changed.emit();
    }
  }

  private readonly _follower: CellFollower;
  private readonly _retry = new RetrySchedule();
  private readonly _takeover = new Takeover();
  /** The session this tab left by its own New session. */
  private _leftSessionId: string | null = null;
  private _connection: AgentConnection = 'attaching';
  private _session: ISessionInfo | null = null;
  private _checkingSession = false; // `_onConnectFailed` is asking the server
  private _parent: IParentAgent | null = null;
  private _stream: EventStream | null = null;
  private _postedBinding: IBindingKey | null = null;
  private _lastError: string | null = null;
  private _syncChain: Promise<void> = Promise.resolve();
  private _disposed = false;
  private readonly _changed = new Signal<this, void>(this);
  private readonly _familyChanged = new Signal<this, void>(this);
}

function sameBinding(a: IBindingKey, b: IBindingKey | null): boolean {
  return (
    b !== null &&
    a.path === b.path &&
    a.kernelId === b.kernelId &&
    a.documentId === b.documentId
  );
}

export function describe(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  return String(error);
}
