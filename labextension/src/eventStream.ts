/**
 * The websocket event stream of one agent session, reconnecting with the
 * last seen `seq` so that the server replays whatever was missed. The
 * reconnecting is reconnectingSocket.ts's.
 */
import type { IDisposable } from '@lumino/disposable';
import { Signal, type ISignal } from '@lumino/signaling';

import { ReconnectingSocket, type StreamState } from './reconnectingSocket';
import type { AgentEvent } from './wire';

export type { StreamState } from './reconnectingSocket';

export interface IEventStreamOptions {
  /** Builds the websocket URL for events newer than `since`. */
  urlFor: (since: number) => string;
  /** Seq of the last event the caller already has. */
  since: number;
  /** WebSocket constructor (from ServerConnection settings). */
  webSocket?: typeof WebSocket;
}

export class EventStream implements IDisposable {
  constructor(options: IEventStreamOptions) {
    this._lastSeq = options.since;
    this._socketSince = options.since;
    this._socket = new ReconnectingSocket({
      url: () => {
        this._socketSince = this._lastSeq;
        return options.urlFor(this._socketSince);
      },
      onMessage: data => this._onMessage(data),
      webSocket: options.webSocket
    });
    this._socket.stateChanged.connect((_, state) => this._stateChanged.emit(state));
    this._socket.connectFailed.connect(() => this._connectFailed.emit());
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
    return this._socket.state;
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
    this._socket.dispose();
    Signal.clearData(this);
  }

  private _onMessage(data: unknown): void {
    if (typeof data !== 'string') {
      return;
    }
    let event: AgentEvent;
    try {
      event = JSON.parse(data) as AgentEvent;
    } catch {
      console.warn('prime-agent: ignoring a malformed event', data);
      return;
    }
    if (typeof event.seq !== 'number') {
      return;
    }
    if (event.seq <= this._socketSince) {
      // This socket only ever sends events newer than `since`, so an older
      // number means a new event bus on the server.
      this._socket.dispose();
      this._restarted.emit();
      return;
    }
    if (event.seq <= this._lastSeq) {
      return;
    }
    this._lastSeq = event.seq;
    this._received.emit(event);
  }

  private readonly _socket: ReconnectingSocket;
  private _lastSeq: number;
  /** The `since` of the socket now open: its events are all newer. */
  private _socketSince: number;
  private _disposed = false;
  private readonly _received = new Signal<this, AgentEvent>(this);
  private readonly _stateChanged = new Signal<this, StreamState>(this);
  private readonly _restarted = new Signal<this, void>(this);
  private readonly _connectFailed = new Signal<this, void>(this);
}
