/**
 * The chat transcript of one session: built from the `transcript` of
 * GET session, then kept current by folding in websocket events.
 */
import { Signal, type ISignal } from '@lumino/signaling';

import type {
  AgentEvent,
  CellStatus,
  ChatItem,
  SessionStatus
} from './types';

interface IEntryBase {
  /** Stable id for the view's DOM bookkeeping. */
  readonly id: number;
  /** Turn number; null for a user message the server has not numbered yet. */
  turn: number | null;
}

export interface IUserEntry extends IEntryBase {
  kind: 'user';
  text: string;
  pending: boolean;
}

export interface IAssistantEntry extends IEntryBase {
  kind: 'assistant';
  text: string;
  streaming: boolean;
}

export interface ICellEntry extends IEntryBase {
  kind: 'cell';
  cellId: string;
  status: CellStatus;
  executionCount: number | null;
  /** Source code when known (from `cell_started`); transcript items lack it. */
  code: string | null;
  preview: string;
}

export interface IRetryEntry extends IEntryBase {
  kind: 'retry';
  attempt: number;
  delay: number;
  message: string;
}

export interface IErrorEntry extends IEntryBase {
  kind: 'error';
  message: string;
}

export interface INoticeEntry extends IEntryBase {
  kind: 'notice';
  text: string;
}

export type TranscriptEntry =
  | IUserEntry
  | IAssistantEntry
  | ICellEntry
  | IRetryEntry
  | IErrorEntry
  | INoticeEntry;

export type TranscriptChange =
  | { type: 'reset' }
  | { type: 'added'; entry: TranscriptEntry }
  | { type: 'updated'; entry: TranscriptEntry };

const STOP_NOTICES: Record<string, string> = {
  stopped: 'Stopped.',
  max_iterations: 'Stopped: the agent reached its iteration limit.'
};

export class TranscriptModel {
  get changed(): ISignal<this, TranscriptChange> {
    return this._changed;
  }

  get statusChanged(): ISignal<this, SessionStatus> {
    return this._statusChanged;
  }

  /** Seq of the newest event folded in (also when it changed nothing). */
  get lastSeq(): number {
    return this._lastSeq;
  }

  /** Emitted after every event, with its seq. */
  get eventApplied(): ISignal<this, number> {
    return this._eventApplied;
  }

  get entries(): readonly TranscriptEntry[] {
    return this._entries;
  }

  get status(): SessionStatus {
    return this._status;
  }

  set status(status: SessionStatus) {
    if (this._status !== status) {
      this._status = status;
      this._statusChanged.emit(status);
    }
  }

  /**
   * Replace everything with the server's transcript.
   *
   * The event stream is then opened with `since=0`, so the server replays
   * its whole buffer. Replayed events that the transcript already covers
   * (seq <= `transcriptSeq`, a turn the transcript holds) are dropped, unless
   * the replay has that turn's `turn_started`: then the turn is rebuilt from
   * its events, which also restores a running turn's live cells and
   * streaming text. Events newer than `transcriptSeq` always apply.
   *
   * @param transcriptSeq - the session's `seq` when the transcript was read;
   *   null when the server did not say (every replayed event is then
   *   treated as possibly covered).
   */
  load(items: readonly ChatItem[], transcriptSeq: number | null): void {
    this._entries = items.map(item => this._entryFromItem(item));
    this._turnsInTranscript = new Set(items.map(item => item.turn));
    this._rebuiltTurns.clear();
    this._lastSeq = 0;
    this._transcriptSeq = transcriptSeq ?? Number.POSITIVE_INFINITY;
    this._streaming = null;
    this._changed.emit({ type: 'reset' });
  }

  /** Show the user's message at once, before the server numbers the turn. */
  addPendingUserMessage(text: string): IUserEntry {
    const entry: IUserEntry = {
      kind: 'user',
      id: this._nextId++,
      turn: null,
      text,
      pending: true
    };
    this._add(entry);
    return entry;
  }

  confirmUserMessage(entry: IUserEntry, turn: number): void {
    if (this._entries.includes(entry) && entry.turn === null) {
      entry.turn = turn;
      entry.pending = false;
      this._changed.emit({ type: 'updated', entry });
    }
  }

  removeEntry(entry: TranscriptEntry): void {
    const index = this._entries.indexOf(entry);
    if (index >= 0) {
      this._entries.splice(index, 1);
      this._changed.emit({ type: 'reset' });
    }
  }

  addError(message: string): void {
    this._add({ kind: 'error', id: this._nextId++, turn: null, message });
  }

  findCellEntry(cellId: string): ICellEntry | undefined {
    for (let i = this._entries.length - 1; i >= 0; i--) {
      const entry = this._entries[i];
      if (entry.kind === 'cell' && entry.cellId === cellId) {
        return entry;
      }
    }
    return undefined;
  }

  apply(event: AgentEvent): void {
    if (this._acceptsReplayOf(event)) {
      this._fold(event);
    }
    this._lastSeq = event.seq;
    this._eventApplied.emit(event.seq);
  }

  private _fold(event: AgentEvent): void {
    switch (event.type) {
      case 'status':
        this.status = event.status;
        break;
      case 'turn_started':
        this.status = 'running';
        this._onTurnStarted(event.turn ?? null, event.text);
        break;
      case 'text_delta':
        this._appendDelta(event.turn ?? null, event.text);
        break;
      case 'assistant_message':
        this._onAssistantMessage(event.turn ?? null, event.text);
        break;
      case 'cell_started':
        this._upsertCell(event.turn ?? null, event.cell_id, {
          status: 'running',
          code: event.code
        });
        break;
      case 'cell_finished':
        this._upsertCell(event.turn ?? null, event.cell_id, {
          status: event.status,
          executionCount: event.execution_count,
          preview: event.preview ?? ''
        });
        break;
      case 'retry':
        this._add({
          kind: 'retry',
          id: this._nextId++,
          turn: event.turn ?? null,
          attempt: event.attempt,
          delay: event.delay,
          message: event.message
        });
        break;
      case 'error':
        this._add({
          kind: 'error',
          id: this._nextId++,
          turn: event.turn ?? null,
          message: event.message
        });
        break;
      case 'turn_ended':
        this._onTurnEnded(
          event.turn ?? null,
          event.stop_reason,
          event.final_text ?? ''
        );
        this.status = 'idle';
        break;
    }
  }

  private _acceptsReplayOf(event: AgentEvent): boolean {
    const turn = event.turn;
    if (
      event.seq > this._transcriptSeq ||
      turn === undefined ||
      !this._turnsInTranscript.has(turn) ||
      this._rebuiltTurns.has(turn)
    ) {
      return true;
    }
    if (event.type !== 'turn_started') {
      return false;
    }
    // The replay holds this whole turn: rebuild it from its events.
    this._rebuiltTurns.add(turn);
    this._entries = this._entries.filter(entry => entry.turn !== turn);
    this._changed.emit({ type: 'reset' });
    return true;
  }

  private _onTurnStarted(turn: number | null, text: string): void {
    const pending = this._entries.find(
      (entry): entry is IUserEntry =>
        entry.kind === 'user' && entry.turn === null && entry.text === text
    );
    if (pending && turn !== null) {
      this.confirmUserMessage(pending, turn);
      return;
    }
    const known = this._entries.some(
      entry => entry.kind === 'user' && turn !== null && entry.turn === turn
    );
    if (!known) {
      this._add({
        kind: 'user',
        id: this._nextId++,
        turn,
        text,
        pending: false
      });
    }
  }

  private _appendDelta(turn: number | null, text: string): void {
    if (!this._streaming) {
      this._streaming = {
        kind: 'assistant',
        id: this._nextId++,
        turn,
        text: '',
        streaming: true
      };
      this._add(this._streaming);
    }
    this._streaming.text += text;
    this._changed.emit({ type: 'updated', entry: this._streaming });
  }

  private _onAssistantMessage(turn: number | null, text: string): void {
    const streaming = this._streaming;
    this._streaming = null;
    if (streaming) {
      if (text.trim()) {
        streaming.text = text;
        streaming.streaming = false;
        this._changed.emit({ type: 'updated', entry: streaming });
      } else {
        this.removeEntry(streaming);
      }
    } else if (text.trim()) {
      this._add({
        kind: 'assistant',
        id: this._nextId++,
        turn,
        text,
        streaming: false
      });
    }
  }

  private _upsertCell(
    turn: number | null,
    cellId: string,
    update: Partial<Pick<ICellEntry, 'status' | 'code' | 'executionCount' | 'preview'>>
  ): void {
    const existing = this.findCellEntry(cellId);
    if (existing && (existing.turn === turn || turn === null)) {
      Object.assign(existing, update);
      this._changed.emit({ type: 'updated', entry: existing });
      return;
    }
    this._add({
      kind: 'cell',
      id: this._nextId++,
      turn,
      cellId,
      status: update.status ?? 'running',
      executionCount: update.executionCount ?? null,
      code: update.code ?? null,
      preview: update.preview ?? ''
    });
  }

  private _onTurnEnded(
    turn: number | null,
    stopReason: string,
    finalText: string
  ): void {
    if (this._streaming) {
      const streaming = this._streaming;
      this._streaming = null;
      streaming.streaming = false;
      this._changed.emit({ type: 'updated', entry: streaming });
    }
    const final = finalText.trim();
    if (final) {
      const alreadyShown = this._entries.some(
        entry =>
          entry.kind === 'assistant' &&
          entry.turn === turn &&
          entry.text.trim() === final
      );
      if (!alreadyShown) {
        this._add({
          kind: 'assistant',
          id: this._nextId++,
          turn,
          text: finalText,
          streaming: false
        });
      }
    }
    const notice = STOP_NOTICES[stopReason];
    if (notice) {
      this._add({ kind: 'notice', id: this._nextId++, turn, text: notice });
    }
  }

  private _entryFromItem(item: ChatItem): TranscriptEntry {
    const id = this._nextId++;
    switch (item.type) {
      case 'user':
        return { kind: 'user', id, turn: item.turn, text: item.text, pending: false };
      case 'assistant':
        return { kind: 'assistant', id, turn: item.turn, text: item.text, streaming: false };
      case 'cell':
        return {
          kind: 'cell',
          id,
          turn: item.turn,
          cellId: item.cell_id,
          status: item.status,
          executionCount: item.execution_count,
          code: null,
          preview: item.preview ?? ''
        };
      case 'error':
        return { kind: 'error', id, turn: item.turn, message: item.message };
    }
  }

  private _add(entry: TranscriptEntry): void {
    this._entries.push(entry);
    this._changed.emit({ type: 'added', entry });
  }

  private _entries: TranscriptEntry[] = [];
  private _status: SessionStatus = 'idle';
  private _streaming: IAssistantEntry | null = null;
  private _turnsInTranscript = new Set<number>();
  private readonly _rebuiltTurns = new Set<number>();
  private _transcriptSeq = Number.POSITIVE_INFINITY;
  private _nextId = 1;
  private _lastSeq = 0;
  private readonly _eventApplied = new Signal<this, number>(this);
  private readonly _changed = new Signal<this, TranscriptChange>(this);
  private readonly _statusChanged = new Signal<this, SessionStatus>(this);
}
