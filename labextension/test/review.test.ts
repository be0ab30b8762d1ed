import { YNotebook } from '@jupyter/ydoc';
import type { Notebook } from '@jupyterlab/notebook';
import { describe, expect, it } from 'vitest';

import { AgentApiError } from '../src/api';
import { cellContentById, deleteCellsById } from '../src/cellNavigation';
import {
  ReviewModel,
  cellKeptReason,
  CHANGED_BY_YOU,
  NOT_THIS_AGENTS,
  confirmationText,
  revertErrorText,
  revertedElsewhereText,
  revertsByTurn,
  reviewableTurns,
  type IReviewApi,
  type IReviewNotebook
} from '../src/review';
import { revertFactsOf, type ITurnReview, type ITurnRevertRequest } from '../src/reviewWire';
import { TranscriptModel } from '../src/transcript';
import type { AgentEvent, ChatItem } from '../src/wire';

const SESSION = 's1';

function last<T>(items: readonly T[]): T {
  return items[items.length - 1];
}

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: SESSION, ...fields } as unknown as AgentEvent;
}

/** Turn `turn` writes and runs `cells`, then answers. */
function turnEvents(first: number, turn: number, cells: string[]): AgentEvent[] {
  const events: AgentEvent[] = [event(first, { type: 'turn_started', turn, text: `go ${turn}` })];
  let seq = first;
  for (const cell of cells) {
    events.push(
      event(++seq, { type: 'cell_started', turn, cell_id: cell, tool_call_id: `t-${cell}`, code: `${cell} = 1` }),
      event(++seq, {
        type: 'cell_finished',
        turn,
        cell_id: cell,
        tool_call_id: `t-${cell}`,
        status: 'ok',
        execution_count: seq,
        preview: ''
      })
    );
  }
  events.push(
    event(++seq, { type: 'assistant_message', turn, text: `done ${turn}` }),
    event(++seq, { type: 'turn_ended', turn, stop_reason: 'end_turn', final_text: `done ${turn}` })
  );
  return events;
}

function revertEvent(seq: number, turn: number, whole: boolean, cells: string[]): AgentEvent {
  return event(seq, {
    type: 'turn_reverted',
    turn,
    cells_removed: cells,
    whole_turn: whole,
    kernel: whole ? 'restored' : 'untouched',
    restored: whole ? ['x'] : [],
    removed: [],
    failed: [],
    reason: null,
    text: `[notice] The user reverted your turn ${turn}.`
  });
}

function live(events: AgentEvent[]): TranscriptModel {
  const model = new TranscriptModel();
  model.load([], 0);
  events.forEach(e => model.apply(e));
  return model;
}

function review(turn: number, cells: string[], extra: Partial<ITurnReview> = {}): ITurnReview {
  return {
    session_id: SESSION,
    turn,
    cells: cells.map((id, i) => ({
      cell_id: id,
      tool_call_id: `t-${id}`,
      execution_count: i + 2,
      status: 'ok',
      first_line: `${id} = ${i + 2}`,
      in_notebook: true,
      code: `${id} = ${i + 2}`
    })),
    kernel: { restorable: true, reason: null, snapshot_time: '2026-12-02T03:04:05+00:00' },
    reverted: false,
    ...extra
  };
}

/** The server's two routes, as the contract says (409 while a turn runs). */
class StandInServer implements IReviewApi {
  reviews = new Map<number, ITurnReview>();
  posts: [number, ITurnRevertRequest][] = [];
  refuse: AgentApiError | null = null;

  async getTurn(_sessionId: string, turn: number): Promise<unknown> {
    const found = this.reviews.get(turn);
    if (!found) {
      throw new AgentApiError(`no turn ${turn}`, 404);
    }
    return structuredClone(found);
  }

  async revertTurn(_sessionId: string, turn: number, request: ITurnRevertRequest): Promise<unknown> {
    this.posts.push([turn, request]);
    if (this.refuse) {
      throw this.refuse;
    }
    const whole = request.restore_kernel !== false;
    const found = this.reviews.get(turn)!;
    if (whole) {
      found.reverted = true;
    }
    return {
      turn,
      cells_removed: request.cells_removed ?? [],
      whole_turn: whole,
      kernel: whole ? 'restored' : 'untouched',
      restored: whole ? ['x'] : [],
      removed: whole ? ['y'] : [],
      failed: [],
      reason: null,
      text: whole ? `Turn ${turn} reverted.` : `One cell of turn ${turn} removed.`
    };
  }
}

/** A notebook as a list of cell ids; `deleteCells` records each call (one call: one step). */
class StandInNotebook implements IReviewNotebook {
  constructor(public cells: string[]) {}
  deletions: string[][] = [];

  hasCell(cellId: string): boolean {
    return this.cells.includes(cellId);
  }

  deleteCells(cellIds: readonly string[]): string[] {
    const deleted = cellIds.filter(id => this.cells.includes(id));
    this.deletions.push(deleted);
    this.cells = this.cells.filter(id => !deleted.includes(id));
    return deleted;
  }
}

/** A notebook whose cells have a source and an agent mark (the user may have typed in one). */
class MarkedNotebook extends StandInNotebook {
  sources = new Map<string, string>();
  marks = new Map<string, unknown>();

  cellContent(cellId: string): { source: string; mark: unknown } | null {
    if (!this.hasCell(cellId)) {
      return null;
    }
    return { source: this.sources.get(cellId) ?? '', mark: this.marks.get(cellId) ?? null };
  }
}

/** setUp's turn 1 (`a = 2`, `b = 3`) in a notebook that marks both as this agent's cells. */
function setUpMarked() {
  const server = new StandInServer();
  server.reviews.set(1, review(1, ['a', 'b']));
  const notebook = new MarkedNotebook(['user', 'a', 'b']);
  notebook.sources.set('user', 'mine = 1');
  ['a', 'b'].forEach((id, i) => {
    notebook.sources.set(id, `${id} = ${i + 2}`);
    notebook.marks.set(id, { session_id: SESSION, turn: 1, role: 'agent' });
  });
  const model = new ReviewModel({
    api: () => server,
    sessionId: () => SESSION,
    notebook: () => notebook
  });
  const transcript = live(turnEvents(1, 1, ['a', 'b']));
  model.sync(SESSION, transcript.entries, transcript.status);
  return { server, notebook, model, transcript };
}

function setUp(cells = ['user', 'a', 'b']) {
  const server = new StandInServer();
  server.reviews.set(1, review(1, ['a', 'b']));
  const notebook = new StandInNotebook(cells);
  const model = new ReviewModel({
    api: () => server,
    sessionId: () => SESSION,
    notebook: () => notebook
  });
  const transcript = live(turnEvents(1, 1, ['a', 'b']));
  model.sync(SESSION, transcript.entries, transcript.status);
  return { server, notebook, model, transcript };
}

describe('which turns have a review', () => {
  it('lists each finished turn that wrote cells, anchored on its last line', () => {
    const transcript = live([...turnEvents(1, 1, ['a', 'b']), ...turnEvents(20, 2, [])]);
    const turns = reviewableTurns(transcript.entries, transcript.status);
    expect(turns.map(t => [t.turn, t.cellIds])).toEqual([[1, ['a', 'b']]]);
    const lastLine = last(transcript.entries.filter(e => e.turn === 1))!;
    expect(turns[0].anchorId).toBe(lastLine.id);
  });

  it('leaves out the turn that runs now, and lists it once it ended', () => {
    const events = turnEvents(1, 1, ['a']);
    const transcript = live(events.slice(0, -1));
    transcript.status = 'running';
    expect(reviewableTurns(transcript.entries, 'running')).toEqual([]);
    transcript.apply(last(events)!);
    expect(reviewableTurns(transcript.entries, transcript.status).map(t => t.turn)).toEqual([1]);
  });
});

describe('a turn_reverted event in the chat', () => {
  it('is a notice line where it happened, after later turns, and marks the turn reverted', () => {
    const transcript = live([
      ...turnEvents(1, 1, ['a', 'b']),
      ...turnEvents(20, 2, ['c']),
      revertEvent(40, 1, true, ['a', 'b'])
    ]);
    const lastLine = last(transcript.entries)!;
    expect(lastLine.kind).toBe('notice');
    expect(lastLine.turn).toBeNull();
    expect(lastLine.kind === 'notice' && lastLine.noticeKind).toBe('turn_reverted');
    expect(lastLine.kind === 'notice' && lastLine.text).toBe('[notice] The user reverted your turn 1.');
    // Turn 1's review stays under turn 1: the notice is not its last line.
    const turns = reviewableTurns(transcript.entries, transcript.status);
    expect(turns.map(t => t.turn)).toEqual([1, 2]);
    const turn1Last = last(transcript.entries.filter(e => e.turn === 1))!;
    expect(turns[0].anchorId).toBe(turn1Last.id);
    expect(revertsByTurn(transcript.entries).get(1)?.whole).toBe(true);
  });

  it('reads the same after a reload: the notice item, the replay covered by it dropped', () => {
    const events = [...turnEvents(1, 1, ['a']), ...turnEvents(20, 2, ['c']), revertEvent(40, 1, true, ['a'])];
    const items = [
      { type: 'user', turn: 1, text: 'go 1' },
      { type: 'cell', turn: 1, cell_id: 'a', status: 'ok', execution_count: 2, preview: '' },
      { type: 'assistant', turn: 1, text: 'done 1' },
      { type: 'user', turn: 2, text: 'go 2' },
      { type: 'cell', turn: 2, cell_id: 'c', status: 'ok', execution_count: 3, preview: '' },
      { type: 'assistant', turn: 2, text: 'done 2' },
      {
        type: 'notice',
        turn: 1,
        kind: 'turn_reverted',
        text: '[notice] The user reverted your turn 1.',
        whole_turn: true,
        cells_removed: ['a']
      }
    ] as unknown as ChatItem[];
    const kinds = (model: TranscriptModel) =>
      model.entries.map(e => (e.kind === 'notice' ? `notice:${e.noticeKind}` : `${e.kind}:${e.turn}`));
    const reloaded = new TranscriptModel();
    reloaded.load(items, 40);
    // The server's buffer still has turn 2's start: turn 2 is rebuilt from it, the revert
    // line keeps its place after it.
    events.filter(e => e.seq >= 20).forEach(e => reloaded.apply(e));
    expect(kinds(reloaded)).toEqual(kinds(live(events)));
    expect(revertsByTurn(reloaded.entries).get(1)?.whole).toBe(true);
    // The whole buffer replayed (both turns rebuilt): the line still comes last.
    const again = new TranscriptModel();
    again.load(items, 40);
    events.forEach(e => again.apply(e));
    expect(kinds(again)).toEqual(kinds(live(events)));
  });

  it('reads the revert from the event or item fields, and nothing else', () => {
    expect(revertFactsOf({ type: 'turn_reverted', turn: 3, whole_turn: false, cells_removed: ['a', 7] })).toEqual({
      turn: 3,
      wholeTurn: false,
      cellsRemoved: ['a']
    });
    expect(revertFactsOf({ type: 'notice', kind: 'turn_reverted', turn: 3 })?.wholeTurn).toBeNull();
    expect(revertFactsOf({ type: 'notice', kind: 'kernel_died', turn: 3 })).toBeNull();
    expect(revertFactsOf({ type: 'turn_reverted' })).toBeNull();
  });
});

describe('the revert question', () => {
  it('says how many cells go and the time of the snapshot the kernel goes back to', () => {
    const text = confirmationText(review(4, ['a', 'b']), 2);
    expect(text).toMatch(/^Revert turn 4\? 2 cells will be removed from the notebook; /);
    expect(text).toMatch(/the kernel’s variables will be restored to the snapshot of \S+/);
    expect(text).toContain('Undo (Z) brings the cells back, not the variables');
  });

  it('says why the kernel cannot be restored, and which cells are gone already', () => {
    const text = confirmationText(
      review(4, ['a', 'b'], {
        kernel: { restorable: false, reason: 'the kernel restarted during the turn', snapshot_time: null }
      }),
      1
    );
    expect(text).toContain('1 cell will be removed from the notebook (1 already gone)');
    expect(text).toContain(
      'the kernel will not be restored (the kernel restarted during the turn): what its cells set stays in the kernel'
    );
  });
});

describe('ReviewModel', () => {
  it('reads the turn’s cells when the review opens', async () => {
    const { model } = setUp();
    expect(model.turns.map(t => t.turn)).toEqual([1]);
    await model.toggle(1);
    expect(model.state(1).open).toBe(true);
    expect(model.state(1).review?.cells.map(c => c.first_line)).toEqual(['a = 2', 'b = 3']);
  });

  it('reverts: deletes the cells still in the notebook in one step, then posts their ids', async () => {
    const { model, notebook, server } = setUp(['user', 'b']); // `a` was deleted by the user
    await model.askRevert(1);
    expect(model.state(1).confirming).toBe(true);
    expect(model.confirmation(1)).toContain('1 cell will be removed from the notebook (1 already gone)');
    await model.confirmRevert(1);
    expect(notebook.deletions).toEqual([['b']]);
    expect(notebook.cells).toEqual(['user']);
    expect(server.posts).toEqual([[1, { cells_removed: ['b'], restore_kernel: true }]]);
    expect(model.state(1).result).toBe('Turn 1 reverted.');
    expect(model.isReverted(1)).toBe(true);
    expect(model.state(1).error).toBeNull();
  });

  it('removes one cell: the kernel untouched', async () => {
    const { model, notebook, server } = setUp();
    await model.toggle(1);
    await model.removeCell(1, 'a');
    expect(notebook.cells).toEqual(['user', 'b']);
    expect(server.posts).toEqual([[1, { cells_removed: ['a'], restore_kernel: false }]]);
    expect(model.isReverted(1)).toBe(false);
    expect(model.isRemoved(1, model.state(1).review!.cells[0])).toBe(true);
  });

  it('sends nothing for a cell that is no longer in the notebook', async () => {
    const { model, server } = setUp(['user', 'b']);
    await model.removeCell(1, 'a');
    expect(server.posts).toEqual([]);
    expect(model.state(1).error).toBe('That cell is no longer in the notebook.');
  });

  it('shows a refusal on the turn and says that Undo brings the deleted cells back', async () => {
    const { model, server, notebook } = setUp();
    server.refuse = new AgentApiError('a turn is running: stop it first', 409);
    await model.askRevert(1);
    await model.confirmRevert(1);
    expect(notebook.cells).toEqual(['user']);
    expect(model.state(1).error).toBe(revertErrorText('a turn is running: stop it first', 2));
    expect(model.state(1).error).toContain('Nothing is lost: the 2 cells were deleted in this notebook only');
    expect(model.state(1).error).toContain('Undo (Escape, then Z) brings them back');
    expect(model.state(1).busy).toBe(false);
  });

  it('does nothing to the notebook while the agent works', async () => {
    const { model, notebook, server, transcript } = setUp();
    await model.toggle(1);
    model.sync(SESSION, transcript.entries, 'running');
    expect(model.running).toBe(true);
    await model.askRevert(1);
    expect(model.state(1).confirming).toBe(false);
    await model.removeCell(1, 'a');
    expect(notebook.deletions).toEqual([]);
    expect(server.posts).toEqual([]);
  });

  it('marks a turn reverted from another user’s revert and reads its open review again', async () => {
    const { model, server, transcript } = setUp();
    await model.toggle(1);
    server.reviews.get(1)!.reverted = true;
    transcript.apply(revertEvent(50, 1, true, ['a', 'b']));
    model.sync(SESSION, transcript.entries, transcript.status);
    expect(model.isReverted(1)).toBe(true);
    await Promise.resolve();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(model.state(1).review?.reverted).toBe(true);
  });

  it('asks the server about a revert line that does not say what it reverted', async () => {
    const { model, server, transcript } = setUp();
    server.reviews.get(1)!.reverted = true;
    transcript.load(
      [
        { type: 'cell', turn: 1, cell_id: 'a', status: 'ok', execution_count: 2, preview: '' },
        { type: 'notice', turn: 1, kind: 'turn_reverted', text: '[notice] The user reverted your turn 1.' }
      ] as unknown as ChatItem[],
      10
    );
    model.sync(SESSION, transcript.entries, transcript.status);
    expect(model.isReverted(1)).toBe(false);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(model.isReverted(1)).toBe(true);
    expect(model.state(1).open).toBe(false);
  });

  it('reads an open review again when the chat’s turn has cells it did not list (a branch)', async () => {
    const { model, server } = setUp();
    await model.toggle(1);
    server.reviews.set(1, review(1, ['c']));
    const branched = live(turnEvents(1, 1, ['c']));
    model.sync(SESSION, branched.entries, branched.status);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(model.state(1).review?.cells.map(cell => cell.cell_id)).toEqual(['c']);
  });

  it('keeps a cell as reviewed, and forgets everything for another session', async () => {
    const { model, transcript } = setUp();
    model.keep(1, 'a');
    expect(model.state(1).kept.has('a')).toBe(true);
    model.keep(1, 'a');
    expect(model.state(1).kept.has('a')).toBe(false);
    model.keep(1, 'b');
    model.sync('other', transcript.entries, transcript.status);
    expect(model.state(1).kept.size).toBe(0);
  });
});

describe('a cell the user changed, or that is not this agent’s', () => {
  it('is kept by Revert turn, and the question says so', async () => {
    const { model, notebook, server } = setUpMarked();
    notebook.sources.set('a', 'a = 2\nprint("typed by the user")');
    await model.toggle(1);
    expect(model.keptReason(1, model.state(1).review!.cells[0])).toBe(CHANGED_BY_YOU);
    await model.askRevert(1);
    expect(model.confirmation(1)).toContain(
      '1 cell will be removed from the notebook; 1 cell you changed is kept;'
    );
    await model.confirmRevert(1);
    expect(notebook.cells).toEqual(['user', 'a']);
    expect(server.posts).toEqual([[1, { cells_removed: ['b'], restore_kernel: true }]]);
  });

  it('asks before Remove deletes it', async () => {
    const { model, notebook, server } = setUpMarked();
    notebook.sources.set('a', 'a = 20');
    await model.toggle(1);
    await model.removeCell(1, 'a');
    expect(model.state(1).confirmingRemove).toBe('a');
    expect(notebook.deletions).toEqual([]);
    await model.removeCell(1, 'a'); // "Remove anyway"
    expect(notebook.cells).toEqual(['user', 'b']);
    expect(server.posts).toEqual([[1, { cells_removed: ['a'], restore_kernel: false }]]);
  });

  it('is never deleted when the log names a cell the notebook does not mark as this agent’s', async () => {
    const { model, notebook, server } = setUpMarked();
    server.reviews.set(1, review(1, ['user', 'b'])); // the session log was edited
    notebook.sources.set('user', 'user = 2');
    await model.toggle(1);
    expect(model.keptReason(1, model.state(1).review!.cells[0])).toBe(NOT_THIS_AGENTS);
    await model.removeCell(1, 'user');
    expect(notebook.deletions).toEqual([]);
    expect(model.state(1).error).toContain(NOT_THIS_AGENTS);
    await model.askRevert(1);
    expect(model.confirmation(1)).toContain('1 cell that is not this agent’s is kept');
    await model.confirmRevert(1);
    expect(notebook.cells).toContain('user');
    expect(server.posts).toEqual([[1, { cells_removed: ['b'], restore_kernel: true }]]);
  });
});

describe('two users revert the same turn', () => {
  it('the one that lost is told the other reverted it, without the promise of Undo', async () => {
    const { model, server } = setUp();
    await model.askRevert(1);
    server.reviews.get(1)!.reverted = true; // the other user's revert came first
    server.refuse = new AgentApiError('turn 1 was reverted already', 409);
    await model.confirmRevert(1);
    expect(model.state(1).error).toBeNull();
    expect(model.state(1).result).toBe(revertedElsewhereText(1));
    expect(model.state(1).result).not.toContain('Undo');
  });
});

describe('deleting cells through the notebook model', () => {
  /** A Notebook whose model is a real shared notebook (what `deleteCellsById` reads). */
  function notebookOf(shared: YNotebook): Notebook {
    const cells = {
      get length() {
        return shared.cells.length;
      },
      get: (index: number) => ({ id: shared.cells[index].id })
    };
    return { model: { sharedModel: shared, cells } } as unknown as Notebook;
  }

  it('deletes them in one transaction that one Undo brings back, ids and all', () => {
    const shared = YNotebook.create();
    shared.insertCells(0, [
      { cell_type: 'code', source: 'x = 1' },
      { cell_type: 'code', source: 'x = 2' },
      { cell_type: 'code', source: 'y = 3' }
    ]);
    shared.clearUndoHistory();
    const ids = shared.cells.map(cell => cell.id);
    const deleted = deleteCellsById(notebookOf(shared), [ids[2], ids[1], 'gone']);
    expect(deleted).toEqual([ids[1], ids[2]]);
    expect(shared.cells.map(cell => cell.getSource())).toEqual(['x = 1']);
    shared.undo();
    expect(shared.cells.map(cell => cell.id)).toEqual(ids);
  });

  it('leaves an empty code cell when it deletes the last ones, as JupyterLab does', () => {
    const shared = YNotebook.create();
    shared.insertCells(0, [{ cell_type: 'code', source: 'x = 2' }]);
    const [id] = shared.cells.map(cell => cell.id);
    expect(deleteCellsById(notebookOf(shared), [id])).toEqual([id]);
    expect(shared.cells.map(cell => cell.getSource())).toEqual(['']);
  });

  it('reads a cell’s source and agent mark, which say whether a revert may delete it', () => {
    const shared = YNotebook.create();
    const mark = { session_id: SESSION, turn: 1, role: 'agent' };
    shared.insertCells(0, [
      { cell_type: 'code', source: 'x = 2', metadata: { prime_agent: mark } },
      { cell_type: 'code', source: 'x = 2' }
    ]);
    const [agent, user] = shared.cells.map(cell => cell.id);
    const content = cellContentById(notebookOf(shared), agent)!;
    expect(content).toEqual({ source: 'x = 2', mark });
    expect(cellKeptReason(content, SESSION, 1, 'x = 2')).toBeNull();
    expect(cellKeptReason(content, SESSION, 1, 'x = 1')).toBe(CHANGED_BY_YOU);
    expect(cellKeptReason(content, SESSION, 2, 'x = 2')).toBe(NOT_THIS_AGENTS);
    expect(cellKeptReason(content, 'other', 1, 'x = 2')).toBe(NOT_THIS_AGENTS);
    const mine = cellContentById(notebookOf(shared), user)!;
    expect(cellKeptReason(mine, SESSION, 1, 'x = 2')).toBe(NOT_THIS_AGENTS);
    expect(cellContentById(notebookOf(shared), 'gone')).toBeNull();
  });
});
