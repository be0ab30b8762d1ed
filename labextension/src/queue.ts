/**
 * The user's queue of one session (docs/pairing.md, "Steer and queue"):
 * messages sent while a turn ran that wait for the agent, a `steer` for the
 * running turn's next model call, a `follow_up` for after the run.
 *
 * The server owns the queue: GET session carries it (`queue`), and every
 * change is a `queue` event carrying the whole queue after it, so each
 * viewer shows the same list in the same order. This model only keeps the
 * newest state it was told.
 */
import { Signal, type ISignal } from '@lumino/signaling';

import type { AgentEvent, IQueuedMessage, IQueueState } from './wire';

/** What Enter does in the input, by whether a turn runs. */
export type EnterAction = 'send' | 'queue';

/** The input's placeholder: what Enter (and Shift+Alt+Enter) does now. */
export function inputHint(running: boolean, idleHint: string): string {
  return running
    ? 'The agent is working… Enter queues a follow-up for when it is done; ' +
        'Shift+Alt+Enter steers the running turn (read at its next step)'
    : idleHint;
}

/** Enter sends when idle and queues a follow-up while a turn runs. */
export function enterAction(running: boolean): EnterAction {
  return running ? 'queue' : 'send';
}

const EMPTY: IQueueState = { items: [], paused: false };

export class QueueModel {
  /** Emitted when the items or `paused` change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get items(): readonly IQueuedMessage[] {
    return this._state.items;
  }

  /** A Stop (or a server restart) held the queue: nothing starts until the user sends. */
  get paused(): boolean {
    return this._state.paused;
  }

  /**
   * The queue from GET session, read at event `seq` (events up to it are
   * older than this state and are ignored when replayed).
   */
  load(state: unknown, seq: number | null): void {
    this._seq = seq ?? 0;
    this._set(queueState(state));
  }

  /** Folds in a `queue` event newer than what the model holds. */
  apply(event: AgentEvent): void {
    if (!event || event.type !== 'queue' || typeof event.seq !== 'number') {
      return;
    }
    if (event.seq <= this._seq) {
      return;
    }
    this._seq = event.seq;
    this._set(queueState(event.state));
  }

  clear(): void {
    this._seq = 0;
    this._set(EMPTY);
  }

  private _set(state: IQueueState): void {
    if (sameState(state, this._state)) {
      return;
    }
    this._state = state;
    this._changed.emit();
  }

  private _state: IQueueState = EMPTY;
  private _seq = 0;
  private readonly _changed = new Signal<this, void>(this);
}

/** A queue state read defensively (a newer or older server may differ). */
export function queueState(raw: unknown): IQueueState {
  const loose = (raw ?? {}) as { items?: unknown; paused?: unknown };
  const items = Array.isArray(loose.items) ? loose.items : [];
  return {
    items: items.filter(isQueuedMessage).map(item => ({ ...item })),
    paused: loose.paused === true
  };
}

function isQueuedMessage(raw: unknown): raw is IQueuedMessage {
  const item = raw as Partial<IQueuedMessage> | null;
  return (
    !!item &&
    typeof item.message_id === 'string' &&
    typeof item.text === 'string' &&
    (item.mode === 'steer' || item.mode === 'follow_up')
  );
}

function sameState(a: IQueueState, b: IQueueState): boolean {
  return (
    a.paused === b.paused &&
    a.items.length === b.items.length &&
    a.items.every(
      (item, i) =>
        item.message_id === b.items[i].message_id &&
        item.mode === b.items[i].mode &&
        item.text === b.items[i].text
    )
  );
}
