/**
 * The shapes of "review and revert a turn" on the wire (docs/pairing.md,
 * section 5; docs/api.md) and the reading of what the server sent: a
 * `TurnReview` (GET `…/turns/{turn}`), a `TurnRevert` (the POST's answer and
 * the `turn_reverted` event), and the revert a chat line describes.
 */

// ---------------------------------------------------------------- wire types

import type { ITurnCell, ITurnRevert, ITurnReview } from './wire';

export type { ITurnCell, ITurnKernel, ITurnReview } from './wire';

/** The body of POST `…/turns/{turn}/revert`. */
export interface ITurnRevertRequest {
  cells_removed?: string[];
  restore_kernel?: boolean;
}

export type { ITurnRevert, ITurnRevertedEvent } from './wire';

/** The event type and notice kind of a revert (the server declares it in core/entry_types.py). */
export const TURN_REVERTED = 'turn_reverted';

// ---------------------------------------------------------------- reading what the server sent

type LooseRecord = Record<string, unknown>;

function isRecord(value: unknown): value is LooseRecord {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** What a revert did to a turn, as a `turn_reverted` event or chat item says it. */
export interface IRevertFacts {
  /** The turn it reverted. */
  turn: number;
  /** True: the whole turn; false: one cell was removed; null: the server did not say. */
  wholeTurn: boolean | null;
  cellsRemoved: string[];
}

/** The revert an event or chat item describes, or null when it is not one. */
export function revertFactsOf(raw: unknown): IRevertFacts | null {
  if (!isRecord(raw) || typeof raw.turn !== 'number') {
    return null;
  }
  if (raw.type !== TURN_REVERTED && raw.kind !== TURN_REVERTED) {
    return null;
  }
  return {
    turn: raw.turn,
    wholeTurn: typeof raw.whole_turn === 'boolean' ? raw.whole_turn : null,
    cellsRemoved: strings(raw.cells_removed)
  };
}

/** A GET `…/turns/{turn}` answer, read defensively (null: not one). */
export function readTurnReview(raw: unknown): ITurnReview | null {
  if (!isRecord(raw) || typeof raw.turn !== 'number' || !Array.isArray(raw.cells)) {
    return null;
  }
  const cells: ITurnCell[] = raw.cells.filter(isRecord).map(cell => ({
    cell_id: text(cell.cell_id),
    tool_call_id: text(cell.tool_call_id),
    execution_count: typeof cell.execution_count === 'number' ? cell.execution_count : null,
    status: text(cell.status) || 'ok',
    first_line: text(cell.first_line),
    in_notebook: cell.in_notebook !== false,
    code: text(cell.code)
  }));
  const kernel = isRecord(raw.kernel) ? raw.kernel : {};
  return {
    session_id: text(raw.session_id),
    turn: raw.turn,
    cells: cells.filter(cell => cell.cell_id !== ''),
    kernel: {
      restorable: kernel.restorable === true,
      reason: text(kernel.reason) || null,
      snapshot_time: text(kernel.snapshot_time) || null
    },
    reverted: raw.reverted === true
  };
}

/** A POST answer, read defensively. */
export function readTurnRevert(raw: unknown, turn: number): ITurnRevert {
  const loose = isRecord(raw) ? raw : {};
  const kernel = text(loose.kernel);
  return {
    turn: typeof loose.turn === 'number' ? loose.turn : turn,
    cells_removed: strings(loose.cells_removed),
    cells_kept: Array.isArray(loose.cells_kept)
      ? loose.cells_kept.filter(isRecord).map(k => ({
          cell_id: text(k.cell_id),
          first_line: text(k.first_line),
          reason: text(k.reason)
        }))
      : [],
    whole_turn: loose.whole_turn === true,
    kernel: kernel === 'restored' || kernel === 'not_restored' ? kernel : 'untouched',
    restored: strings(loose.restored),
    removed: strings(loose.removed),
    failed: Array.isArray(loose.failed)
      ? loose.failed.filter(isRecord).map(f => ({ name: text(f.name), reason: text(f.reason) }))
      : [],
    reason: text(loose.reason) || null,
    text: text(loose.text)
  };
}
