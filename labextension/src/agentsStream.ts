/**
 * The Agents View's websocket (`GET prime-agent/api/agents/events`): the
 * server sends the whole overview on connect and again whenever a row
 * changes. A dropped socket reconnects with a growing delay, as
 * eventStream.ts does; the snapshot a new socket sends first replaces
 * whatever the view held, so nothing missed while away stays stale.
 */
import type { IDisposable } from '@lumino/disposable';
import { Signal, type ISignal } from '@lumino/signaling';

import { parseOverview } from './agents';
import type { IAgentsOverview } from './wire';
import type { StreamState } from './eventStream';

const INITIAL_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

export interface IAgentsStreamOptions {
  url: () => string;
  webSocket?: typeof WebSocket;
}

export class AgentsStream implements IDisposable {
  constructor(options: IAgentsStreamOptions) {
    this._url = options.url;
    this._WebSocket = options.webSocket ?? WebSocket;
    this._connect();
  }

  /** Every overview the server sends, in order. */
  get snapshot(): ISignal<this, IAgentsOverview> {
    return this._snapshot;
  }

  get stateChanged(): ISignal<this, StreamState> {
    return this._stateChanged;
  }

  get state(): StreamState {
    return this._state;
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
    const socket = new this._WebSocket(this._url());
    this._socket = socket;
    socket.onopen = () => {
      this._retryDelay = INITIAL_RETRY_MS;
      this._setState('open');
    };
    socket.onmessage = (message: MessageEvent) => {
      const overview = parseOverview(message.data);
      if (overview) {
        this._snapshot.emit(overview);
      } else {
        console.warn('prime-agent: ignoring a malformed agents overview', message.data);
      }
    };
    socket.onclose = () => {
      if (this._socket === socket) {
        this._socket = null;
        this._scheduleReconnect();
      }
    };
    // Errors are always followed by `close`; reconnecting happens there.
    socket.onerror = () => undefined;
  }

  private _scheduleReconnect(): void {
    if (this._disposed) {
      return;
    }
    this._setState('closed');
    const jitter = Math.random() * 0.3 * this._retryDelay;
    this._retryTimer = window.setTimeout(() => this._connect(), this._retryDelay + jitter);
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

  private readonly _url: () => string;
  private readonly _WebSocket: typeof WebSocket;
  private _socket: WebSocket | null = null;
  private _state: StreamState = 'connecting';
  private _retryDelay = INITIAL_RETRY_MS;
  private _retryTimer = 0;
  private _disposed = false;
  private readonly _snapshot = new Signal<this, IAgentsOverview>(this);
  private readonly _stateChanged = new Signal<this, StreamState>(this);
}
