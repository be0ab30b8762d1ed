/**
 * A websocket that reconnects by itself: after a drop it waits
 * `RECONNECT_DELAYS_MS` in turn (each with up to 30 % jitter, so that many
 * tabs do not come back at once), then the last one for ever; an open
 * socket starts the schedule over. The chat's event stream (eventStream.ts)
 * and the Agents View's (agentsStream.ts) are both one of these.
 */
import type { IDisposable } from '@lumino/disposable';
import { Signal, type ISignal } from '@lumino/signaling';

import { RetrySchedule } from './retrySchedule';

export type StreamState = 'connecting' | 'open' | 'closed';

/** Milliseconds before each reconnect: doubling from half a second, then every 10 s. */
export const RECONNECT_DELAYS_MS: readonly number[] = [500, 1000, 2000, 4000, 8000, 10_000];

/** Up to this share of a delay is added at random. */
export const RECONNECT_JITTER = 0.3;

export interface IReconnectingSocketOptions {
  /** The URL of the next attempt; called once per attempt, just before it. */
  url: () => string;
  /** Each message's data, from the socket now open only. */
  onMessage: (data: unknown) => void;
  /** WebSocket constructor (from ServerConnection settings). */
  webSocket?: typeof WebSocket;
}

export class ReconnectingSocket implements IDisposable {
  constructor(options: IReconnectingSocketOptions) {
    this._url = options.url;
    this._onMessage = options.onMessage;
    this._WebSocket = options.webSocket ?? WebSocket;
    this._connect();
  }

  get stateChanged(): ISignal<this, StreamState> {
    return this._stateChanged;
  }

  get state(): StreamState {
    return this._state;
  }

  /**
   * Emitted each time a connection closes without ever having opened: the server is down, or
   * it answers but refuses the socket (a 404 handshake). It keeps retrying; the owner may ask
   * the server which it is.
   */
  get connectFailed(): ISignal<this, void> {
    return this._connectFailed;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Close the socket and never reconnect; emits nothing more. */
  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._retry.cancel();
    const socket = this._socket;
    this._socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close();
    }
    Signal.clearData(this);
  }

  private _connect(): void {
    if (this._disposed) {
      return;
    }
    this._setState('connecting');
    const socket = new this._WebSocket(this._url());
    this._socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this._retry.reset();
      this._setState('open');
    };
    socket.onmessage = (message: MessageEvent) => {
      if (this._socket === socket) {
        this._onMessage(message.data);
      }
    };
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

  private _scheduleReconnect(): void {
    if (this._disposed) {
      return;
    }
    this._setState('closed');
    this._retry.schedule(() => this._connect());
  }

  private _setState(state: StreamState): void {
    if (this._state !== state) {
      this._state = state;
      this._stateChanged.emit(state);
    }
  }

  private readonly _url: () => string;
  private readonly _onMessage: (data: unknown) => void;
  private readonly _WebSocket: typeof WebSocket;
  private readonly _retry = new RetrySchedule(RECONNECT_DELAYS_MS, {
    keepLast: true,
    jitter: RECONNECT_JITTER
  });
  private _socket: WebSocket | null = null;
  private _state: StreamState = 'connecting';
  private _disposed = false;
  private readonly _stateChanged = new Signal<this, StreamState>(this);
  private readonly _connectFailed = new Signal<this, void>(this);
}
