/**
 * Review and revert a turn (docs/pairing.md, section 5): which turns of the
 * chat can be reviewed, the state of each turn's review (its cells from GET
 * `…/turns/{turn}`, kept and removed ones, the revert question, errors),
 * and the texts the view shows. The view is reviewView.ts; the wire shapes
 * and their reading are reviewWire.ts's.
 *
 * The panel deletes the cells itself, through the notebook model in one
 * transaction (so JupyterLab's undo brings them back), and then tells the
 * server which ids it deleted (POST `…/turns/{turn}/revert`).
 */
import { Signal, type ISignal } from '@lumino/signaling';

import { formatComposed } from './clock';
import {
  readTurnRevert,
  readTurnReview,
  type IRevertFacts,
  type ITurnCell,
  type ITurnKernel,
  type ITurnReview,
  type ITurnRevert,
  type ITurnRevertRequest
} from './reviewWire';
import type { SessionStatus } from './wire';

// ---------------------------------------------------------------- the turns of the chat

/** The transcript entry fields this module reads (transcript.ts's entries have them). */
export interface IReviewEntry {
  readonly id: number;
  readonly turn: number | null;
  readonly kind: string;
  readonly cellId?: string;
  /** Set on a `turn_reverted` notice. */
  readonly revert?: IRevertFacts;
}

/** A finished turn that wrote cells: its review control goes after `anchorId`'s line. */
export interface IReviewableTurn {
  turn: number;
  /** The cells of the turn the chat lists (before the review is read). */
  cellIds: string[];
  /** The id of the turn's last line in the chat (a revert notice does not count). */
  anchorId: number;
}

/**
 * The turns that have a review control: each turn with at least one cell
 * line, except the turn that runs now (the newest, while the session runs).
 */
export function reviewableTurns(
  entries: readonly IReviewEntry[],
  status: SessionStatus
): IReviewableTurn[] {
  const turns = new Map<number, IReviewableTurn>();
  let newest = -Infinity;
  for (const entry of entries) {
    if (entry.turn === null || entry.revert) {
      continue;
    }
    newest = Math.max(newest, entry.turn);
    const known = turns.get(entry.turn);
    const cellIds = known?.cellIds ?? [];
    if (entry.kind === 'cell' && entry.cellId && !cellIds.includes(entry.cellId)) {
      cellIds.push(entry.cellId);
    }
    turns.set(entry.turn, { turn: entry.turn, cellIds, anchorId: entry.id });
  }
  return [...turns.values()].filter(
    turn => turn.cellIds.length > 0 && !(status === 'running' && turn.turn === newest)
  );
}

/** What the chat says was reverted, by turn: the whole turn, or single cells. */
export interface ITurnReverts {
  whole: boolean;
  cells: Set<string>;
}

export function revertsByTurn(entries: readonly IReviewEntry[]): Map<number, ITurnReverts> {
  const reverts = new Map<number, ITurnReverts>();
  for (const entry of entries) {
    const facts = entry.revert;
    if (!facts) {
      continue;
    }
    const known = reverts.get(facts.turn) ?? { whole: false, cells: new Set<string>() };
    known.whole ||= facts.wholeTurn === true;
    facts.cellsRemoved.forEach(id => known.cells.add(id));
    reverts.set(facts.turn, known);
  }
  return reverts;
}

// ---------------------------------------------------------------- texts

/** The review control's label. */
export function toggleLabel(count: number): string {
  return `Review cells (${count})`;
}

/** "In [3]" (or "In [ ]" for a cell that has no count). */
export function cellLabel(cell: Pick<ITurnCell, 'execution_count'>): string {
  return `In [${cell.execution_count ?? ' '}]`;
}

/** "cells" or "cell" after a count. */
function cells(count: number): string {
  return `${count} ${count === 1 ? 'cell' : 'cells'}`;
}

/** "the snapshot of 14:03" (the time the server took it). */
function snapshotName(kernel: ITurnKernel): string {
  const time = formatComposed(kernel.snapshot_time);
  return time ? `the snapshot of ${time.short}` : 'the snapshot taken before the turn';
}

const NO_SNAPSHOT = 'no snapshot from before the turn';

/** What "Revert turn" would do to the kernel, for the review's foot. */
export function kernelLine(kernel: ITurnKernel): string {
  return kernel.restorable
    ? `Revert turn restores the kernel’s variables to ${snapshotName(kernel)}.`
    : `Revert turn cannot restore the kernel: ${kernel.reason ?? NO_SNAPSHOT}.`;
}

/** Why a revert leaves a cell of the turn in the notebook (the server's words too). */
export const CHANGED_BY_YOU = 'changed by you';
export const NOT_THIS_AGENTS = "not this agent's cell";

/** A cell of the notebook as the revert checks it: its source and `metadata.prime_agent`. */
export interface IReviewCellContent {
  source: string;
  mark: unknown;
}

/**
 * Why a revert must keep this cell (null: it may go): it is not this
 * session's agent cell of the turn, or its source is not the code the agent
 * wrote (the user changed it).
 */
export function cellKeptReason(
  content: IReviewCellContent,
  sessionId: string | null,
  turn: number,
  code: string
): string | null {
  const mark = content.mark;
  const ours =
    typeof mark === 'object' &&
    mark !== null &&
    (mark as Record<string, unknown>).session_id === sessionId &&
    (mark as Record<string, unknown>).turn === turn &&
    (mark as Record<string, unknown>).role === 'agent';
  if (!ours) {
    return NOT_THIS_AGENTS;
  }
  return content.source === code ? null : CHANGED_BY_YOU;
}

/** "1 cell you changed is kept", "2 cells that are not this agent’s are kept". */
function keptPhrase(reasons: readonly string[]): string[] {
  const changed = reasons.filter(r => r === CHANGED_BY_YOU).length;
  const foreign = reasons.length - changed;
  const phrases: string[] = [];
  if (changed > 0) {
    phrases.push(`${cells(changed)} you changed ${changed === 1 ? 'is' : 'are'} kept`);
  }
  if (foreign > 0) {
    phrases.push(
      `${cells(foreign)} that ${foreign === 1 ? 'is' : 'are'} not this agent’s ` +
        `${foreign === 1 ? 'is' : 'are'} kept`
    );
  }
  return phrases;
}

/** The question before "Revert turn": what will happen (`kept`: why each kept cell stays). */
export function confirmationText(
  review: ITurnReview,
  toRemove: number,
  kept: readonly string[] = []
): string {
  const gone = review.cells.length - toRemove - kept.length;
  const removal = [
    toRemove > 0
      ? `${cells(toRemove)} will be removed from the notebook` +
        (gone > 0 ? ` (${gone} already gone)` : '')
      : kept.length > 0
        ? 'no cell of it will be removed from the notebook'
        : 'no cell of it is left in the notebook',
    ...keptPhrase(kept)
  ].join('; ');
  const kernel = review.kernel.restorable
    ? `the kernel’s variables will be restored to ${snapshotName(review.kernel)}`
    : `the kernel will not be restored (${review.kernel.reason ?? NO_SNAPSHOT}): ` +
      'what its cells set stays in the kernel';
  const undo =
    toRemove > 0 ? ' The notebook’s Undo (Z) brings the cells back, not the variables.' : '';
  return `Revert turn ${review.turn}? ${capitalise(removal)}; ${kernel}.${undo}`;
}

/** The line when another user (or tab) reverted the turn first. */
export function revertedElsewhereText(turn: number): string {
  return (
    `Turn ${turn} was reverted by another user (or in another tab) first; ` +
    'its line in the chat says what that revert did.'
  );
}

/** The question before removing a cell the user changed. */
export const REMOVE_CHANGED_TEXT =
  'You changed this cell since the agent wrote it. Remove it anyway? Undo brings it back.';

/** Why Remove is disabled once the whole turn was reverted (an Undo may bring rows back). */
export const REVERTED_TITLE =
  'This turn was reverted: the server records no more removals for it ' +
  '(delete the cell in the notebook itself)';

/** The line after a revert the server refused (the cells are deleted locally). */
export function revertErrorText(message: string, deletedHere: number): string {
  const lost =
    deletedHere > 0
      ? ` Nothing is lost: the ${cells(deletedHere)} were deleted in this notebook only, ` +
        'and its Undo (Escape, then Z) brings them back.'
      : '';
  return `The server did not record the revert: ${message}.${lost}`;
}

/** Why the revert controls are disabled while the agent works. */
export const BUSY_TITLE = 'The agent is working: stop it or wait for the turn to end first';

/** The line after a revert that went through (the server's text when it sent one). */
export function resultText(result: ITurnRevert): string {
  if (result.text) {
    return result.text;
  }
  const what = result.whole_turn
    ? `Turn ${result.turn} reverted: ${cells(result.cells_removed.length)} removed`
    : `Removed ${cells(result.cells_removed.length)} of turn ${result.turn}`;
  const kernel =
    result.kernel === 'restored'
      ? `; variables restored${result.restored.length ? ` (${result.restored.join(', ')})` : ''}`
      : result.kernel === 'not_restored'
        ? `; the kernel was not restored${result.reason ? ` (${result.reason})` : ''}`
        : '';
  return `${what}${kernel}.`;
}

function capitalise(value: string): string {
  return value.charAt(0).toUpperCase() + value.slice(1);
}

// ---------------------------------------------------------------- the model

/** The server routes the review uses (api.ts's client). */
export interface IReviewApi {
  getTurn(sessionId: string, turn: number): Promise<unknown>;
  revertTurn(sessionId: string, turn: number, request: ITurnRevertRequest): Promise<unknown>;
}

/** The notebook the session writes into. */
export interface IReviewNotebook {
  hasCell(cellId: string): boolean;
  /** Delete these cells in one undoable step; answers the ids it deleted. */
  deleteCells(cellIds: readonly string[]): string[];
  /** The cell's source and agent mark (null: not in the notebook). */
  cellContent?(cellId: string): IReviewCellContent | null;
}

export interface IReviewHost {
  api(): IReviewApi | null;
  sessionId(): string | null;
  notebook(): IReviewNotebook | null;
}

/** One turn's review as the view shows it. */
export interface ITurnReviewState {
  open: boolean;
  loading: boolean;
  review: ITurnReview | null;
  /** Cells marked reviewed ("Keep") in this view. */
  kept: Set<string>;
  /** The revert question is shown. */
  confirming: boolean;
  /** The cell (one the user changed) whose "Remove anyway?" question is shown. */
  confirmingRemove: string | null;
  /** A revert or removal is under way. */
  busy: boolean;
  error: string | null;
  /** What the last revert or removal from this view did. */
  result: string | null;
  /** The server refused this view's last revert (`error` says why). */
  revertFailed: boolean;
}

function emptyState(): ITurnReviewState {
  return {
    open: false,
    loading: false,
    review: null,
    kept: new Set(),
    confirming: false,
    confirmingRemove: null,
    busy: false,
    error: null,
    result: null,
    revertFailed: false
  };
}

export class ReviewModel {
  constructor(private readonly _host: IReviewHost) {}

  /** Emitted with the turn whose state changed (null: every turn, the list of turns). */
  get changed(): ISignal<this, number | null> {
    return this._changed;
  }

  /** The turns with a review control, in chat order. */
  get turns(): readonly IReviewableTurn[] {
    return this._turns;
  }

  get running(): boolean {
    return this._running;
  }

  state(turn: number): ITurnReviewState {
    let state = this._states.get(turn);
    if (!state) {
      state = emptyState();
      this._states.set(turn, state);
    }
    return state;
  }

  /** The whole turn was reverted (from the chat, the review or this view's revert). */
  isReverted(turn: number): boolean {
    return (
      this._reverts.get(turn)?.whole === true || this._states.get(turn)?.review?.reverted === true
    );
  }

  /**
   * The cell is not in the notebook: the notebook says (an Undo brings a
   * removed cell back), else the chat's reverts and the server's answer.
   */
  isRemoved(turn: number, cell: ITurnCell): boolean {
    const notebook = this._host.notebook();
    if (notebook) {
      return !notebook.hasCell(cell.cell_id);
    }
    return this._reverts.get(turn)?.cells.has(cell.cell_id) === true || !cell.in_notebook;
  }

  /** The notebook's cells changed (a removal, an Undo): the open reviews show it. */
  notebookChanged(): void {
    if ([...this._states.values()].some(state => state.open)) {
      this._changed.emit(null);
    }
  }

  /**
   * Follow the chat: which turns are reviewable and what was reverted. A
   * new session forgets every review; a revert of an open turn reads its
   * review again.
   */
  sync(sessionId: string | null, entries: readonly IReviewEntry[], status: SessionStatus): void {
    const fresh = sessionId !== this._sessionId;
    if (fresh) {
      this._sessionId = sessionId;
      this._states.clear();
      this._reverts = new Map();
    }
    const reverts = revertsByTurn(entries);
    const newReverts = [...reverts].filter(
      ([turn, facts]) => !sameReverts(this._reverts.get(turn), facts)
    );
    const turns = reviewableTurns(entries, status);
    const running = status === 'running';
    // Called on every change of the chat (streamed text too): tell the view only what changed.
    const same =
      !fresh &&
      running === this._running &&
      newReverts.length === 0 &&
      reverts.size === this._reverts.size &&
      sameTurns(turns, this._turns);
    this._reverts = reverts;
    this._running = running;
    this._turns = turns;
    if (!same) {
      this._changed.emit(null);
    }
    // A review read before a branch moved may be of another turn with this number: read again.
    for (const { turn, cellIds } of turns) {
      const state = this._states.get(turn);
      const known = new Set(state?.review?.cells.map(cell => cell.cell_id) ?? []);
      if (state?.review && cellIds.some(id => !known.has(id))) {
        state.review = null;
        if (state.open) {
          void this._load(turn);
        }
      }
    }
    for (const [turn, facts] of newReverts) {
      if (facts.whole) {
        this._settleFailedRevert(turn);
      }
      // An open review shows the revert; a chat line that does not say whether the whole turn
      // was reverted (an older item) is settled by the server's review (`reverted`).
      if (this._states.get(turn)?.open || (!facts.whole && facts.cells.size === 0)) {
        void this._load(turn);
      }
    }
  }

  /** Open (and read) or close a turn's review. */
  async toggle(turn: number): Promise<void> {
    const state = this.state(turn);
    state.open = !state.open;
    state.confirming = false;
    this._changed.emit(turn);
    if (state.open) {
      await this._load(turn);
    }
  }

  close(turn: number): void {
    const state = this.state(turn);
    if (state.open) {
      state.open = false;
      state.confirming = false;
      this._changed.emit(turn);
    }
  }

  /** "Keep": the cell is reviewed (in this view; a second click takes it back). */
  keep(turn: number, cellId: string): void {
    const kept = this.state(turn).kept;
    if (!kept.delete(cellId)) {
      kept.add(cellId);
    }
    this._changed.emit(turn);
  }

  /**
   * Why a revert keeps this cell of the turn (null: it may go, or it is not
   * in the notebook): read from the live notebook model.
   */
  keptReason(turn: number, cell: ITurnCell): string | null {
    const content = this._host.notebook()?.cellContent?.(cell.cell_id);
    return content ? cellKeptReason(content, this._host.sessionId(), turn, cell.code) : null;
  }

  /**
   * "Remove": delete one cell (undoable), then tell the server (the kernel
   * is untouched). A cell the user changed asks first; a cell that is not
   * this agent's is never removed.
   */
  async removeCell(turn: number, cellId: string): Promise<void> {
    const state = this.state(turn);
    const cell = state.review?.cells.find(c => c.cell_id === cellId);
    const reason = cell ? this.keptReason(turn, cell) : null;
    if (reason === NOT_THIS_AGENTS) {
      state.error = `That cell is ${NOT_THIS_AGENTS}: it is not removed.`;
      this._changed.emit(turn);
      return;
    }
    if (reason === CHANGED_BY_YOU && state.confirmingRemove !== cellId) {
      state.confirmingRemove = cellId;
      this._changed.emit(turn);
      return;
    }
    state.confirmingRemove = null;
    await this._revert(turn, [cellId], false);
  }

  cancelRemove(turn: number): void {
    const state = this.state(turn);
    if (state.confirmingRemove !== null) {
      state.confirmingRemove = null;
      this._changed.emit(turn);
    }
  }

  /** "Revert turn": ask first (the review is read when it is not yet). */
  async askRevert(turn: number): Promise<void> {
    const state = this.state(turn);
    if (this._running || state.busy) {
      return;
    }
    state.error = null;
    state.result = null;
    if (!state.review) {
      await this._load(turn);
    }
    if (state.review) {
      state.confirming = true;
      this._changed.emit(turn);
    }
  }

  cancelRevert(turn: number): void {
    const state = this.state(turn);
    if (state.confirming) {
      state.confirming = false;
      this._changed.emit(turn);
    }
  }

  /** The cells of the turn still in the notebook that a revert deletes (not those it keeps). */
  cellsLeft(turn: number): string[] {
    const review = this.state(turn).review;
    const notebook = this._host.notebook();
    if (!review || !notebook) {
      return [];
    }
    return review.cells
      .filter(cell => notebook.hasCell(cell.cell_id) && this.keptReason(turn, cell) === null)
      .map(cell => cell.cell_id);
  }

  /** Why each cell of the turn still in the notebook that a revert keeps stays. */
  cellsKept(turn: number): string[] {
    const review = this.state(turn).review;
    const notebook = this._host.notebook();
    if (!review || !notebook) {
      return [];
    }
    return review.cells
      .filter(cell => notebook.hasCell(cell.cell_id))
      .map(cell => this.keptReason(turn, cell))
      .filter((reason): reason is string => reason !== null);
  }

  /** The question's text for the turn (empty before the review is read). */
  confirmation(turn: number): string {
    const review = this.state(turn).review;
    return review
      ? confirmationText(review, this.cellsLeft(turn).length, this.cellsKept(turn))
      : '';
  }

  /** Delete the turn's cells still in the notebook in one step, then POST the revert. */
  async confirmRevert(turn: number): Promise<void> {
    const state = this.state(turn);
    state.confirming = false;
    await this._revert(turn, this.cellsLeft(turn), true);
  }

  private async _revert(turn: number, cellIds: string[], wholeTurn: boolean): Promise<void> {
    const state = this.state(turn);
    const api = this._host.api();
    const sessionId = this._host.sessionId();
    const notebook = this._host.notebook();
    if (state.busy) {
      return;
    }
    if (this._running) {
      state.error = BUSY_TITLE + '.';
      this._changed.emit(turn);
      return;
    }
    if (!api || !sessionId || !notebook) {
      state.error = 'No agent session is open for this notebook.';
      this._changed.emit(turn);
      return;
    }
    state.error = null;
    state.result = null;
    const deleted = notebook.deleteCells(cellIds);
    if (!wholeTurn && deleted.length === 0) {
      state.error = 'That cell is no longer in the notebook.';
      this._changed.emit(turn);
      return;
    }
    state.busy = true;
    this._changed.emit(turn);
    try {
      const answer = await api.revertTurn(sessionId, turn, {
        cells_removed: deleted,
        restore_kernel: wholeTurn
      });
      const result = readTurnRevert(answer, turn);
      state.result = resultText(result);
      if (result.whole_turn && state.review) {
        state.review.reverted = true;
      }
    } catch (error) {
      state.error = revertErrorText(describe(error), deleted.length);
      state.revertFailed = true;
    } finally {
      state.busy = false;
      this._changed.emit(turn);
    }
    if (state.open || state.revertFailed) {
      await this._load(turn);
    }
    this._settleFailedRevert(turn);
  }

  /**
   * A revert this view sent was refused because another user's came first:
   * say so, without the promise that Undo brings the cells back (the
   * winner's Undo does, not this one).
   */
  private _settleFailedRevert(turn: number): void {
    const state = this.state(turn);
    if (state.revertFailed && this.isReverted(turn)) {
      state.revertFailed = false;
      state.error = null;
      state.result = revertedElsewhereText(turn);
      this._changed.emit(turn);
    }
  }

  private async _load(turn: number): Promise<void> {
    const state = this.state(turn);
    const api = this._host.api();
    const sessionId = this._host.sessionId();
    if (!api || !sessionId) {
      state.error = 'No agent session is open for this notebook.';
      this._changed.emit(turn);
      return;
    }
    state.loading = true;
    this._changed.emit(turn);
    try {
      const review = readTurnReview(await api.getTurn(sessionId, turn));
      if (sessionId !== this._sessionId && this._sessionId !== null) {
        return; // another session meanwhile
      }
      if (review) {
        state.review = review;
      } else {
        state.error = `The server’s answer for turn ${turn} could not be read.`;
      }
    } catch (error) {
      state.error = `Could not read the cells of turn ${turn}: ${describe(error)}`;
    } finally {
      state.loading = false;
      this._changed.emit(turn);
    }
  }

  private _sessionId: string | null = null;
  private _running = false;
  private _turns: IReviewableTurn[] = [];
  private _reverts = new Map<number, ITurnReverts>();
  private readonly _states = new Map<number, ITurnReviewState>();
  private readonly _changed = new Signal<this, number | null>(this);
}

function sameReverts(a: ITurnReverts | undefined, b: ITurnReverts): boolean {
  return (
    a !== undefined &&
    a.whole === b.whole &&
    a.cells.size === b.cells.size &&
    [...b.cells].every(id => a.cells.has(id))
  );
}

function sameTurns(a: readonly IReviewableTurn[], b: readonly IReviewableTurn[]): boolean {
  return (
    a.length === b.length &&
    a.every(
      (turn, i) =>
        turn.turn === b[i].turn &&
        turn.anchorId === b[i].anchorId &&
        turn.cellIds.length === b[i].cellIds.length
    )
  );
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
