/**
 * The Agents View's websocket (`GET prime-agent/api/agents/events`): the
 * server sends the whole overview on connect and again whenever a row
 * changes. A dropped socket reconnects as reconnectingSocket.ts does; the
 * snapshot a new socket sends first replaces whatever the view held, so
 * nothing missed while away stays stale.
 */
import type { IDisposable } from '@lumino/disposable';
import { Signal, type ISignal } from '@lumino/signaling';

import { parseOverview } from './agents';
import { ReconnectingSocket, type StreamState } from './reconnectingSocket';
import type { IAgentsOverview } from './wire';

export interface IAgentsStreamOptions {
  url: () => string;
  webSocket?: typeof WebSocket;
}

export class AgentsStream implements IDisposable {
  constructor(options: IAgentsStreamOptions) {
    this._socket = new ReconnectingSocket({
      url: options.url,
      onMessage: data => this._onMessage(data),
      webSocket: options.webSocket
    });
    this._socket.stateChanged.connect((_, state) => this._stateChanged.emit(state));
  }

  /** Every overview the server sends, in order. */
  get snapshot(): ISignal<this, IAgentsOverview> {
    return this._snapshot;
  }

  get stateChanged(): ISignal<this, StreamState> {
    return this._stateChanged;
  }

  get state(): StreamState {
    return this._socket.state;
  }

  get isDisposed(): boolean {
    return this._socket.isDisposed;
  }

  dispose(): void {
    if (this._socket.isDisposed) {
      return;
    }
    this._socket.dispose();
    Signal.clearData(this);
  }

  private _onMessage(data: unknown): void {
    const overview = parseOverview(data);
    if (overview) {
      this._snapshot.emit(overview);
    } else {
      console.warn('prime-agent: ignoring a malformed agents overview', data);
    }
  }

  private readonly _socket: ReconnectingSocket;
  private readonly _snapshot = new Signal<this, IAgentsOverview>(this);
  private readonly _stateChanged = new Signal<this, StreamState>(this);
}
