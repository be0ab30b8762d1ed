/**
 * The websocket event stream of one agent session, reconnecting with the
 * last seen `seq` so that the server replays whatever was missed.
 */
import type { IDisposable } from '@lumino/disposable';
import { Signal, type ISignal } from '@lumino/signaling';

import type { AgentEvent } from './wire';

export type StreamState = 'connecting' | 'open' | 'closed';

export interface IEventStreamOptions {
  /** Builds the websocket URL for events newer than `since`. */
  urlFor: (since: number) => string;
  /** Seq of the last event the caller already has. */
  since: number;
  /** WebSocket constructor (from ServerConnection settings). */
  webSocket?: typeof WebSocket;
}

const INITIAL_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

export class EventStream implements IDisposable {
  constructor(options: IEventStreamOptions) {
    this._urlFor = options.urlFor;
    this._lastSeq = options.since;
    this._WebSocket = options.webSocket ?? WebSocket;
    this._connect();
  }

  /** Emits every event in seq order; duplicates from replays are dropped. */
  get received(): ISignal<this, AgentEvent> {
    return this._received;
  }

  /**
   * Emitted when the server's numbering started over (the server restarted
   * and rebuilt the session): the caller should reload the transcript. The
   * stream stops itself.
   */
  get restarted(): ISignal<this, void> {
    return this._restarted;
  }

  /**
   * Emitted each time a connection closes without ever having opened: the server is down, or
   * it answers but no longer has the session attached (a restart, an unload). The stream keeps
   * retrying; the caller may ask the server which it is.
   */
  get connectFailed(): ISignal<this, void> {
    return this._connectFailed;
  }

  get stateChanged(): ISignal<this, StreamState> {
    return this._stateChanged;
  }

  get state(): StreamState {
    return this._state;
  }

  get lastSeq(): number {
    return this._lastSeq;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    window.clearTimeout(this._retryTimer);
    this._closeSocket();
    Signal.clearData(this);
  }

  private _connect(): void {
    if (this._disposed) {
      return;
    }
    this._setState('connecting');
    const since = this._lastSeq;
    const socket = new this._WebSocket(this._urlFor(since));
    this._socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this._retryDelay = INITIAL_RETRY_MS;
      this._setState('open');
    };
    socket.onmessage = (message: MessageEvent) => this._onMessage(message, since);
    socket.onclose = () => {
      if (this._socket === socket) {
        this._socket = null;
        this._scheduleReconnect();
        if (!opened) {
          this._connectFailed.emit();
        }
      }
    };
    // Errors are always followed by `close`; reconnecting happens there.
    socket.onerror = () => undefined;
  }

  private _onMessage(message: MessageEvent, socketSince: number): void {
    if (typeof message.data !== 'string') {
      return;
    }
    let event: AgentEvent;
    try {
      event = JSON.parse(message.data) as AgentEvent;
    } catch {
      console.warn('prime-agent: ignoring a malformed event', message.data);
      return;
    }
    if (typeof event.seq !== 'number') {
      return;
    }
    if (event.seq <= socketSince) {
      // This socket only ever sends events newer than `since`, so an older
      // number means a new event bus on the server.
      this._closeSocket();
      this._restarted.emit();
      return;
    }
    if (event.seq <= this._lastSeq) {
      return;
    }
    this._lastSeq = event.seq;
    this._received.emit(event);
  }

  private _scheduleReconnect(): void {
    if (this._disposed) {
      return;
    }
    this._setState('closed');
    const jitter = Math.random() * 0.3 * this._retryDelay;
    this._retryTimer = window.setTimeout(
      () => this._connect(),
      this._retryDelay + jitter
    );
    this._retryDelay = Math.min(this._retryDelay * 2, MAX_RETRY_MS);
  }

  private _closeSocket(): void {
    const socket = this._socket;
    this._socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close();
    }
  }

  private _setState(state: StreamState): void {
    if (this._state !== state) {
      this._state = state;
      this._stateChanged.emit(state);
    }
  }

  private readonly _urlFor: (since: number) => string;
  private readonly _WebSocket: typeof WebSocket;
  private _socket: WebSocket | null = null;
  private _lastSeq: number;
  private _state: StreamState = 'connecting';
  private _retryDelay = INITIAL_RETRY_MS;
  private _retryTimer = 0;
  private _disposed = false;
  private readonly _received = new Signal<this, AgentEvent>(this);
  private readonly _stateChanged = new Signal<this, StreamState>(this);
  private readonly _restarted = new Signal<this, void>(this);
  private readonly _connectFailed = new Signal<this, void>(this);
}
