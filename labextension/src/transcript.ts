/**
 * The chat transcript of one session: built from the `transcript` of
 * GET session, then kept current by folding in websocket events.
 *
 * It reads whatever the server sends: an item or event it does not know
 * (a newer server) is shown as a neutral line when it has text and ignored
 * otherwise; it never throws.
 */
import { Signal, type ISignal } from '@lumino/signaling';

import {
  STOP_NOTICES,
  WARNING_NOTICES,
  type AgentEvent,
  type CellDecision,
  type CellStatus,
  type ChatItem,
  type ChatItemType,
  type ChildStatus,
  type NoticeKind,
  type Relationship,
  type SessionStatus
} from './wire';
import { refinementSummary, type IRefinementSummary } from './refine';
import { gateRunOf, type IGateRun } from './autonomy';
import { answerFooter, type IAnswerFooter } from './modelCost';
import { revertFactsOf, TURN_REVERTED, type IRevertFacts } from './reviewWire';

interface IEntryBase {
  /** Stable id for the view's DOM bookkeeping. */
  readonly id: number;
  /** Turn number; null for a user message the server has not numbered yet. */
  turn: number | null;
}

/**
 * Who wrote a message that came from another agent of the family, as the
 * receiving session sees it.
 */
export interface IMessageOrigin {
  /** The sender's session, when the server named it. */
  sessionId: string | null;
  /** The sender's name (a sub-agent's name; a root is known by its notebook). */
  name: string;
  /** The sender as seen from this session, when the server said. */
  relationship: Relationship | null;
  /** When the sender wrote it (ISO 8601), when known. */
  composed: string | null;
}

/** A message that started a turn: the researcher's, or another agent's (`origin`). */
export interface IUserEntry extends IEntryBase {
  kind: 'user';
  text: string;
  pending: boolean;
  /** Set when another agent sent it (a parent's task, a sibling's message, ...). */
  origin: IMessageOrigin | null;
  /**
   * Set on the user's message sent while a turn ran: `steer` (it entered the
   * running turn here) or `follow_up` (it waited queued and started this turn).
   */
  mode?: 'steer' | 'follow_up';
}

/** Another agent's message, taken into a running turn. */
export interface IAgentMessageEntry extends IEntryBase {
  kind: 'agent_message';
  text: string;
  origin: IMessageOrigin;
}

/** A sub-agent this session spawned; its status follows `child_status`. */
export interface IChildEntry extends IEntryBase {
  kind: 'child';
  childId: string;
  name: string;
  /** The child notebook's path, relative to the server root. */
  notebookPath: string;
  task: string;
  /** The agent cell that spawned it, when the server said. */
  spawnCellId: string | null;
  /** Null until the server says (an older transcript without `status`). */
  status: ChildStatus | null;
  /** The start of the child's last answer. */
  preview: string;
}

export interface IAssistantEntry extends IEntryBase {
  kind: 'assistant';
  text: string;
  streaming: boolean;
  /** Model, tokens and cost of the call that gave it, when the server sent them. */
  footer?: IAnswerFooter | null;
}

/**
 * A cell line's state: how it ended (from the server), or `running`, or
 * `waiting` (written, held until the user's running cell finishes).
 */
export type CellLineStatus = CellStatus | 'running' | 'waiting';

export interface ICellEntry extends IEntryBase {
  kind: 'cell';
  cellId: string;
  status: CellLineStatus;
  executionCount: number | null;
  /** Source code when known (events and newer transcripts carry it). */
  code: string | null;
  preview: string;
  /** What the cell waits for while `status` is `waiting`. */
  waitingText: string;
  /**
   * Why a `skipped` cell did not run: the user's Skip or Edit in ask mode;
   * null (or absent): withdrawn by Stop.
   */
  decision?: CellDecision | null;
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

/**
 * Something the user must know that is not an error: a stop notice, a
 * kernel notice (`warning`: e.g. the kernel was restarted and the user's
 * variables are gone), or an item this panel does not know (`info`).
 */
export interface INoticeEntry extends IEntryBase {
  kind: 'notice';
  text: string;
  tone: 'info' | 'warning';
  /**
   * The notice kind (`kernel_restarted`, ...), one of the panel's own
   * (`stop`, `taken_over`), or null when unknown.
   */
  noticeKind: NoticeKind | PanelNoticeKind | null;
  /** A gate run's command, exit status, time and output (`gate_passed`, `gate_failed`). */
  gate?: IGateRun;
  /**
   * A `turn_reverted` line: the turn it reverted. The line itself has no turn
   * (`turn: null`): it stays where the revert happened, after later turns.
   */
  revert?: IRevertFacts;
  /** `plan_not_run`: the code the model asked to run. */
  code?: string;
}

/** Notice kinds the panel makes itself (the server's are `NoticeKind`). */
/**
 * Lines the panel makes itself: `stop`, `taken_over`, and `command_reply` (a chat command's
 * answer to the user who asked, e.g. `/refine`'s "planning in the background"; it is not in the
 * session, so other viewers and a reload do not show it).
 */
export type PanelNoticeKind = 'stop' | 'taken_over' | 'command_reply';

/** A refinement of the harness was applied, rolled back or failed (`refinement`). */
export interface IRefinementEntry extends IEntryBase {
  kind: 'refinement';
  record: IRefinementSummary;
}

export type TranscriptEntry =
  | IRefinementEntry
  | IUserEntry
  | IAgentMessageEntry
  | IChildEntry
  | IAssistantEntry
  | ICellEntry
  | IRetryEntry
  | IErrorEntry
  | INoticeEntry;

export type TranscriptChange =
  | { type: 'reset' }
  | { type: 'added'; entry: TranscriptEntry }
  | { type: 'updated'; entry: TranscriptEntry };

/** The user's answer that kept a cell from running, when the server names one. */
function cellDecision(value: unknown): CellDecision | null {
  return value === 'skip' || value === 'edit' ? value : null;
}

/** The status line's text while an agent cell waits (when the event has none). */
export const WAITING_TEXT = 'waiting for your cell to finish';

const RELATIONSHIPS = new Set<string>(['parent', 'child', 'sibling']);
const CHILD_STATUSES = new Set<string>([
  'running',
  'idle',
  'inactive',
  'replied',
  'completed',
  'error',
  'stopped'
]);

type LooseRecord = Record<string, unknown>;

function refinementEntry(id: number, turn: number | null, raw: unknown): IRefinementEntry {
  return { kind: 'refinement', id, turn, record: refinementSummary(raw) };
}

/** Reads one chat item of type `K` into its transcript entry (null: nothing to show). */
type ItemReader<K extends ChatItemType> = (
  item: Extract<ChatItem, { type: K }>,
  id: number,
  turn: number | null
) => TranscriptEntry | null;

/**
 * The entry of each chat item type the server declares (`ChatItemType` is
 * generated from core/wire.py and core/entry_types.py): a type without a
 * reader here does not compile.
 */
const ITEM_ENTRIES: { [K in ChatItemType]: ItemReader<K> } = {
  user: (item, id, turn) =>
    // A sub-agent's notice to the model: shown as its notice line.
    item.notice
      ? null
      : {
          kind: 'user',
          id,
          turn,
          text: text(item.text),
          pending: false,
          origin: originOf(item),
          ...userMode(item.mode)
        },
  agent_message: (item, id, turn) =>
    item.notice
      ? null
      : {
          kind: 'agent_message',
          id,
          turn,
          text: text(item.text),
          origin: originOf(item) ?? { ...UNKNOWN_ORIGIN }
        },
  child: (item, id, turn) => ({
    kind: 'child',
    id,
    turn,
    childId: text(item.rlm_child_id),
    name: text(item.name),
    notebookPath: text(item.notebook_path),
    task: text(item.task),
    spawnCellId: text(item.spawn_cell_id) || null,
    status: childStatus(item.status),
    preview: text(item.preview)
  }),
  assistant: (item, id, turn) => ({
    kind: 'assistant',
    id,
    turn,
    text: text(item.text),
    streaming: false,
    footer: answerFooter(item)
  }),
  cell: (item, id, turn) => ({
    kind: 'cell',
    id,
    turn,
    cellId: text(item.cell_id),
    status: item.status ?? 'ok',
    executionCount: typeof item.execution_count === 'number' ? item.execution_count : null,
    code: typeof item.code === 'string' && item.code ? item.code : null,
    preview: text(item.preview),
    waitingText: '',
    decision: cellDecision(item.decision)
  }),
  error: (item, id, turn) => ({ kind: 'error', id, turn, message: text(item.message) }),
  refinement: (item, id, turn) => refinementEntry(id, turn, item),
  notice: (item, id, turn) => ({
    kind: 'notice',
    id,
    turn,
    text: text(item.text),
    tone: noticeTone(item.kind),
    noticeKind: item.kind ?? (item.stop_reason ? 'stop' : null),
    ...gateOf(item),
    ...codeOf(item)
  })
};

/** A notice's code (`plan_not_run`), when it has one. */
function codeOf(raw: unknown): { code?: string } {
  const code = raw && typeof raw === 'object' ? (raw as LooseRecord).code : undefined;
  return typeof code === 'string' && code ? { code } : {};
}

/** Warning-styled notice kinds, as core/entry_types.py declares them. */
function noticeTone(kind: string | null | undefined): 'info' | 'warning' {
  return kind && WARNING_NOTICES.has(kind as NoticeKind) ? 'warning' : 'info';
}

/** `{gate}` for a notice that describes a gate run, `{}` otherwise. */
function gateOf(raw: unknown): { gate?: IGateRun } {
  const gate = gateRunOf(raw);
  return gate ? { gate } : {};
}

export class TranscriptModel {
  get changed(): ISignal<this, TranscriptChange> {
    return this._changed;
  }

  get statusChanged(): ISignal<this, SessionStatus> {
    return this._statusChanged;
  }

  /**
   * Emitted for each event that is new since the transcript was loaded
   * (not one replayed from the server's buffer that the transcript already
   * covered), after it was folded in.
   */
  get liveEvent(): ISignal<this, AgentEvent> {
    return this._liveEvent;
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

  /** The newest cell that waits for the user's cell to finish, if any. */
  get waitingCell(): ICellEntry | null {
    for (let i = this._entries.length - 1; i >= 0; i--) {
      const entry = this._entries[i];
      if (entry.kind === 'cell' && entry.status === 'waiting') {
        return entry;
      }
    }
    return null;
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
    const entries: TranscriptEntry[] = [];
    const turns = new Set<number>();
    for (const item of Array.isArray(items) ? items : []) {
      const entry = this._entryFromItem(item);
      if (entry) {
        entries.push(entry);
      }
      const turn = (item as LooseRecord | null)?.turn;
      if (typeof turn === 'number') {
        turns.add(turn);
      }
    }
    this._entries = placeChildrenAfterTheirCells(entries);
    this._turnlessInTranscript = this._entries.filter(entry => entry.turn === null);
    this._turnsInTranscript = turns;
    this._childStatusInTranscript = new Map(
      entries
        .filter((entry): entry is IChildEntry => entry.kind === 'child' && entry.status !== null)
        .map(entry => [entry.childId, { status: entry.status, preview: entry.preview }])
    );
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
      pending: true,
      origin: null
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

  /** A neutral line from the panel itself (the answer to `/refine`, say). */
  addNote(text: string): void {
    if (text) {
      this.addPanelNotice('command_reply', text, 'info');
    }
  }

  /** A line of the panel's own (not from the server), e.g. the takeover line. */
  addPanelNotice(kind: PanelNoticeKind, text: string, tone: 'info' | 'warning'): INoticeEntry {
    const entry: INoticeEntry = {
      kind: 'notice',
      id: this._nextId++,
      turn: null,
      text,
      tone,
      noticeKind: kind
    };
    this._add(entry);
    return entry;
  }

  /** The line of a sub-agent this session spawned, by its id. */
  findChildEntry(childId: string): IChildEntry | undefined {
    return this._entries.find(
      (entry): entry is IChildEntry => entry.kind === 'child' && entry.childId === childId
    );
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
    if (!event || typeof event !== 'object' || typeof event.seq !== 'number') {
      return;
    }
    const live = event.seq > this._transcriptSeq;
    if (this._acceptsReplayOf(event)) {
      try {
        this._fold(event, live);
      } catch (error) {
        // A malformed event must not stop the stream; show what we can.
        console.warn('prime-agent: could not apply an event', event, error);
      }
    }
    this._lastSeq = event.seq;
    this._eventApplied.emit(event.seq);
    if (live) {
      this._liveEvent.emit(event);
    }
  }

  private _fold(event: AgentEvent, live: boolean): void {
    const turn = turnOf(event);
    if (isRevertEvent(event)) {
      this._addNotice(null, text((event as unknown as LooseRecord).text), TURN_REVERTED, event);
      return;
    }
    switch (event.type) {
      case 'status':
        this.status = event.status;
        break;
      case 'turn_started':
        this.status = 'running';
        if (!event.notice) {
          // A sub-agent's notice to the model has its own notice line.
          this._onTurnStarted(
            turn,
            text(event.text),
            originOf(event),
            event.from_user ? userMode(event.mode) : {}
          );
        }
        break;
      case 'agent_message':
        if (event.notice) {
          break;
        }
        if (event.from_user) {
          // The user's steer: their message, where it entered the running turn.
          this._add({
            kind: 'user',
            id: this._nextId++,
            turn,
            text: text(event.text),
            pending: false,
            origin: null,
            ...userMode(event.mode)
          });
          break;
        }
        this._add({
          kind: 'agent_message',
          id: this._nextId++,
          turn,
          text: text(event.text),
          origin: originOf(event) ?? { ...UNKNOWN_ORIGIN }
        });
        break;
      case 'child_spawned':
        this._onChildSpawned(turn, event, live);
        break;
      case 'child_status':
        this._onChildStatus(event, live);
        break;
      case 'text_delta':
        this._appendDelta(turn, text(event.text));
        break;
      case 'assistant_message':
        this._onAssistantMessage(turn, text(event.text), answerFooter(event));
        break;
      case 'cell_started': {
        const existing = this.findCellEntry(event.cell_id);
        const waiting = existing?.turn === turn && existing?.status === 'waiting';
        this._upsertCell(turn, event.cell_id, {
          status: waiting ? 'waiting' : 'running',
          code: text(event.code)
        });
        break;
      }
      case 'cell_waiting':
        this._upsertCell(turn, event.cell_id, {
          status: 'waiting',
          waitingText: text(event.text) || WAITING_TEXT
        });
        break;
      case 'cell_running':
        this._upsertCell(turn, event.cell_id, { status: 'running', waitingText: '' });
        break;
      case 'cell_finished': {
        const update: Partial<ICellEntry> = {
          status: event.status,
          preview: text(event.preview),
          waitingText: '',
          decision: cellDecision(event.decision)
        };
        // Keep a count already known when the server has none to give.
        if (typeof event.execution_count === 'number') {
          update.executionCount = event.execution_count;
        }
        this._upsertCell(turn, event.cell_id, update);
        break;
      }
      case 'retry':
        this._add({
          kind: 'retry',
          id: this._nextId++,
          turn,
          attempt: event.attempt,
          delay: event.delay,
          message: text(event.message)
        });
        break;
      case 'error':
        this._add({ kind: 'error', id: this._nextId++, turn, message: text(event.message) });
        break;
      case 'notice':
        this._addNotice(turn, text(event.text), event.kind, event);
        break;
      case 'turn_ended':
        this._onTurnEnded(turn, event.stop_reason, text(event.final_text));
        this.status = 'idle';
        break;
      case 'refinement':
        this._add(refinementEntry(this._nextId++, turn, event));
        break;
      default:
        // An event this panel does not know (a newer server): nothing to show.
        break;
    }
  }

  private _acceptsReplayOf(event: AgentEvent): boolean {
    const turn = turnOf(event);
    if (turn === null) {
      // A turn-less notice or error is in the transcript already; a status
      // is harmless to replay (the newest one wins), and so is a child's
      // (`_onChildStatus` lets the transcript's own child status win).
      if (event.seq <= this._transcriptSeq && this._rebuiltTurns.size > 0) {
        this._keepInOrder(event);
      }
      return (
        event.seq > this._transcriptSeq ||
        event.type === 'status' ||
        event.type === 'child_status'
      );
    }
    if (
      event.seq > this._transcriptSeq ||
      this._rebuiltTurns.has(turn) ||
      !this._turnsInTranscript.has(turn)
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

  /**
   * Turns rebuilt from the replay go to the end of the chat; a turn-less
   * line from the transcript (a notice, an error, a refinement applied while
   * the agent was idle, a sub-agent spawned from the user's own cell) that
   * came after them moves along when its replayed event arrives, so it stays
   * where it was.
   */
  private _keepInOrder(event: AgentEvent): void {
    const index = this._turnlessInTranscript.findIndex(entry => showsEvent(entry, event));
    if (index < 0) {
      return;
    }
    const [entry] = this._turnlessInTranscript.splice(index, 1);
    const at = this._entries.indexOf(entry);
    if (at < 0 || at === this._entries.length - 1) {
      return;
    }
    this._entries.splice(at, 1);
    this._entries.push(entry);
    this._changed.emit({ type: 'reset' });
  }

  private _onTurnStarted(
    turn: number | null,
    text: string,
    origin: IMessageOrigin | null,
    mode: Pick<IUserEntry, 'mode'> = {}
  ): void {
    // Another agent's message never confirms what the user is sending.
    const pending = origin
      ? undefined
      : this._entries.find(
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
        pending: false,
        origin,
        ...mode
      });
    }
  }

  private _onChildSpawned(
    turn: number | null,
    event: Extract<AgentEvent, { type: 'child_spawned' }>,
    live: boolean
  ): void {
    const childId = text(event.rlm_child_id);
    if (!childId) {
      return;
    }
    // A turn rebuilt from the replay: the transcript knew the child's state.
    const known = live ? undefined : this._childStatusInTranscript.get(childId);
    const fields = {
      name: text(event.name),
      notebookPath: text(event.notebook_path),
      task: text(event.task),
      spawnCellId: text(event.spawn_cell_id) || null
    };
    const existing = this.findChildEntry(childId);
    if (existing) {
      Object.assign(existing, fields);
      this._changed.emit({ type: 'updated', entry: existing });
      return;
    }
    this._add({
      kind: 'child',
      id: this._nextId++,
      turn,
      childId,
      ...fields,
      status: known?.status ?? 'running',
      preview: known?.preview ?? ''
    });
  }

  /**
   * A child's new state. A replayed one the transcript already covers does
   * not override the state the transcript carried (which is newer); a live
   * one for a child this panel has no line for adds the line.
   */
  private _onChildStatus(
    event: Extract<AgentEvent, { type: 'child_status' }>,
    live: boolean
  ): void {
    const childId = text(event.rlm_child_id);
    const status = childStatus(event.status);
    if (!childId || !status) {
      return;
    }
    if (!live && this._childStatusInTranscript.has(childId)) {
      return;
    }
    const preview = text(event.preview);
    const existing = this.findChildEntry(childId);
    if (existing) {
      existing.status = status;
      if (preview) {
        existing.preview = preview;
      }
      existing.name = text(event.name) || existing.name;
      existing.notebookPath = text(event.notebook_path) || existing.notebookPath;
      this._changed.emit({ type: 'updated', entry: existing });
    } else if (live) {
      this._add({
        kind: 'child',
        id: this._nextId++,
        turn: null,
        childId,
        name: text(event.name),
        notebookPath: text(event.notebook_path),
        task: '',
        spawnCellId: null,
        status,
        preview
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

  private _onAssistantMessage(
    turn: number | null,
    text: string,
    footer: IAnswerFooter | null
  ): void {
    const streaming = this._streaming;
    this._streaming = null;
    if (streaming) {
      if (text.trim()) {
        streaming.text = text;
        streaming.streaming = false;
        streaming.footer = footer;
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
        streaming: false,
        footer
      });
    }
  }

  private _upsertCell(
    turn: number | null,
    cellId: string,
    update: Partial<
      Pick<ICellEntry, 'status' | 'code' | 'executionCount' | 'preview' | 'waitingText' | 'decision'>
    >
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
      preview: update.preview ?? '',
      waitingText: update.waitingText ?? '',
      decision: update.decision ?? null
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
    this._settleUnfinishedCells(turn);
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
    const notice = (STOP_NOTICES as Record<string, string | undefined>)[stopReason];
    if (notice) {
      this._add({
        kind: 'notice',
        id: this._nextId++,
        turn,
        text: notice,
        tone: 'info',
        noticeKind: 'stop'
      });
    }
  }

  /**
   * A turn that ended leaves no cell spinning: a cell still waiting was
   * withdrawn before it ran (`skipped`); one still running was cut off.
   */
  private _settleUnfinishedCells(turn: number | null): void {
    for (const entry of this._entries) {
      if (
        entry.kind === 'cell' &&
        (entry.turn === turn || turn === null) &&
        (entry.status === 'waiting' || entry.status === 'running')
      ) {
        entry.status = entry.status === 'waiting' ? 'skipped' : 'interrupted';
        entry.waitingText = '';
        this._changed.emit({ type: 'updated', entry });
      }
    }
  }

  private _addNotice(turn: number | null, text: string, kind: unknown, raw?: unknown): void {
    if (!text) {
      return;
    }
    const noticeKind = typeof kind === 'string' ? (kind as NoticeKind) : null;
    const revert = revertFactsOf(raw);
    this._add({
      kind: 'notice',
      id: this._nextId++,
      turn: revert ? null : turn,
      text,
      tone: noticeTone(noticeKind),
      noticeKind,
      ...gateOf(raw),
      ...codeOf(raw),
      ...(revert ? { revert } : {})
    });
  }

  /** The entry for one transcript item, or null for one with nothing to show. */
  private _entryFromItem(item: ChatItem): TranscriptEntry | null {
    if (!item || typeof item !== 'object') {
      return null;
    }
    const id = this._nextId++;
    const turn = typeof item.turn === 'number' ? item.turn : null;
    const read = (ITEM_ENTRIES as Partial<Record<string, ItemReader<ChatItemType>>>)[
      item.type
    ];
    const revert = revertFactsOf(item);
    if (revert) {
      // A revert's line (a `notice` item of kind `turn_reverted`, or an item of that type).
      const said = text((item as unknown as LooseRecord).text);
      return said
        ? {
            kind: 'notice',
            id,
            turn: null,
            text: said,
            tone: noticeTone(TURN_REVERTED),
            noticeKind: TURN_REVERTED as NoticeKind,
            revert
          }
        : null;
    }
    if (read) {
      return read(item, id, turn);
    }
    // An item this panel does not know (a newer server): a neutral line
    // when it says something, nothing otherwise.
    const loose = item as unknown as LooseRecord;
    const said = text(loose.text) || text(loose.message);
    return said
      ? { kind: 'notice', id, turn, text: said, tone: 'info', noticeKind: null }
      : null;
  }

  private _add(entry: TranscriptEntry): void {
    this._entries.push(entry);
    this._changed.emit({ type: 'added', entry });
  }

  private _entries: TranscriptEntry[] = [];
  private _status: SessionStatus = 'idle';
  private _streaming: IAssistantEntry | null = null;
  private _turnsInTranscript = new Set<number>();
  /** The transcript's turn-less lines not yet matched with their replayed event. */
  private _turnlessInTranscript: TranscriptEntry[] = [];
  private readonly _rebuiltTurns = new Set<number>();
  private _transcriptSeq = Number.POSITIVE_INFINITY;
  /** Each child's state as the transcript carried it, by child id. */
  private _childStatusInTranscript = new Map<
    string,
    { status: ChildStatus | null; preview: string }
  >();
  private _nextId = 1;
  private _lastSeq = 0;
  private readonly _eventApplied = new Signal<this, number>(this);
  private readonly _liveEvent = new Signal<this, AgentEvent>(this);
  private readonly _changed = new Signal<this, TranscriptChange>(this);
  private readonly _statusChanged = new Signal<this, SessionStatus>(this);
}

/** `{mode}` for the user's steer or queued follow-up, `{}` otherwise. */
function userMode(mode: unknown): Pick<IUserEntry, 'mode'> {
  return mode === 'steer' || mode === 'follow_up' ? { mode } : {};
}

/** Whether `entry` (a transcript line) is the line `event` made live. */
function showsEvent(entry: TranscriptEntry, event: AgentEvent): boolean {
  if (isRevertEvent(event)) {
    return (
      entry.kind === 'notice' &&
      entry.revert !== undefined &&
      entry.text === text((event as unknown as LooseRecord).text)
    );
  }
  switch (event.type) {
    case 'notice':
      return entry.kind === 'notice' && entry.text === text(event.text);
    case 'error':
      return entry.kind === 'error' && entry.message === text(event.message);
    case 'refinement':
      return (
        entry.kind === 'refinement' && entry.record.id === refinementSummary(event).id
      );
    case 'child_spawned':
      return entry.kind === 'child' && entry.childId === text(event.rlm_child_id);
    default:
      return false;
  }
}

/**
 * A `turn_reverted` event (not in the generated `AgentEvent` yet; review.ts
 * declares its shape until wire.ts does).
 */
function isRevertEvent(event: AgentEvent): boolean {
  return (event as { type: string }).type === TURN_REVERTED;
}

/**
 * The event's turn, or null for a session-level event (status, some notices).
 * A revert names the turn it reverted, but its line belongs where it
 * happened: it is replayed as a line without a turn.
 */
function turnOf(event: AgentEvent): number | null {
  if (isRevertEvent(event)) {
    return null;
  }
  const turn = (event as { turn?: unknown }).turn;
  return typeof turn === 'number' ? turn : null;
}

/**
 * A transcript from an older server lists a cell's line at its result, after
 * the sub-agents the cell spawned; live, their lines came after the cell's
 * line. Put each child that names a spawning cell listed after it right
 * after that cell (and its earlier children). A newer server lists the cell
 * where it started, so its children are already in place and stay there.
 */
function placeChildrenAfterTheirCells(entries: TranscriptEntry[]): TranscriptEntry[] {
  const cellsAhead = new Set<string>();
  const spawnedBy = new Map<TranscriptEntry, string>();
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i];
    if (entry.kind === 'cell') {
      cellsAhead.add(entry.cellId);
    } else if (entry.kind === 'child' && entry.spawnCellId && cellsAhead.has(entry.spawnCellId)) {
      spawnedBy.set(entry, entry.spawnCellId);
    }
  }
  const children = new Map<string, IChildEntry[]>();
  for (const entry of entries) {
    const cellId = spawnedBy.get(entry);
    if (cellId) {
      children.set(cellId, [...(children.get(cellId) ?? []), entry as IChildEntry]);
    }
  }
  const placed: TranscriptEntry[] = [];
  for (const entry of entries) {
    if (spawnedBy.has(entry)) {
      continue;
    }
    placed.push(entry);
    if (entry.kind === 'cell') {
      placed.push(...(children.get(entry.cellId) ?? []));
      children.delete(entry.cellId);
    }
  }
  return placed;
}

/** The sender named in an item or event, or null when a person wrote it. */
function originOf(record: unknown): IMessageOrigin | null {
  const loose = (record ?? {}) as LooseRecord;
  const name = text(loose.from_name);
  const sessionId = text(loose.from_session_id);
  const relationship = text(loose.relationship);
  if (!name && !sessionId && !relationship) {
    return null;
  }
  return {
    sessionId: sessionId || null,
    name,
    relationship: RELATIONSHIPS.has(relationship) ? (relationship as Relationship) : null,
    composed: text(loose.composed) || null
  };
}

/** An agent message whose sender the server did not name. */
const UNKNOWN_ORIGIN: IMessageOrigin = {
  sessionId: null,
  name: '',
  relationship: null,
  composed: null
};

function childStatus(value: unknown): ChildStatus | null {
  return typeof value === 'string' && CHILD_STATUSES.has(value)
    ? (value as ChildStatus)
    : null;
}

/** A string field of a wire object, or '' when it is missing or not a string. */
function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}
