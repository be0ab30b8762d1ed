// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { AgentApiError } from '../src/api';
import type { NotebookAgent } from '../src/notebookAgent';
import { BUSY_TITLE, REVERTED_TITLE, ReviewModel, type IReviewApi } from '../src/review';
import { ReviewView } from '../src/reviewView';
import type { ITurnReview, ITurnRevertRequest } from '../src/reviewWire';
import { TranscriptModel } from '../src/transcript';
import type { AgentEvent } from '../src/wire';

import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const SESSION = 's1';

function last<T>(items: readonly T[]): T {
  return items[items.length - 1];
}

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: SESSION, ...fields } as unknown as AgentEvent;
}

/** Turn 1 writes cells `a` and `b`; `ended` false leaves it running. */
function turnOne(ended = true): AgentEvent[] {
  const events = [
    event(1, { type: 'turn_started', turn: 1, text: 'Set x and y.' }),
    event(2, { type: 'cell_started', turn: 1, cell_id: 'a', tool_call_id: 't-a', code: 'x = 2' }),
    event(3, { type: 'cell_finished', turn: 1, cell_id: 'a', tool_call_id: 't-a', status: 'ok', execution_count: 2, preview: '' }),
    event(4, { type: 'cell_started', turn: 1, cell_id: 'b', tool_call_id: 't-b', code: 'y = 3' }),
    event(5, { type: 'cell_finished', turn: 1, cell_id: 'b', tool_call_id: 't-b', status: 'ok', execution_count: 3, preview: '' }),
    event(6, { type: 'assistant_message', turn: 1, text: 'Done.' })
  ];
  return ended
    ? [...events, event(7, { type: 'turn_ended', turn: 1, stop_reason: 'end_turn', final_text: 'Done.' })]
    : events;
}

const REVIEW: ITurnReview = {
  session_id: SESSION,
  turn: 1,
  cells: [
    { cell_id: 'a', tool_call_id: 't-a', execution_count: 2, status: 'ok', first_line: 'x = 2', in_notebook: true, code: 'x = 2' },
    { cell_id: 'b', tool_call_id: 't-b', execution_count: 3, status: 'ok', first_line: 'y = 3', in_notebook: true, code: 'y = 3' }
  ],
  kernel: { restorable: true, reason: null, snapshot_time: '2026-12-02T03:04:05+00:00' },
  reverted: false
};

class StandInServer implements IReviewApi {
  posts: ITurnRevertRequest[] = [];
  refuse: Error | null = null;
  async getTurn(): Promise<unknown> {
    return structuredClone(REVIEW);
  }
  async revertTurn(_s: string, turn: number, request: ITurnRevertRequest): Promise<unknown> {
    this.posts.push(request);
    if (this.refuse) {
      throw this.refuse;
    }
    return { turn, cells_removed: request.cells_removed, whole_turn: true, kernel: 'restored', text: 'Reverted.' };
  }
}

function byTestId(root: ParentNode, id: string): HTMLElement[] {
  return Array.from(root.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`));
}

const settle = () => new Promise(resolve => setTimeout(resolve, 0));

/** A transcript with its lines in a host, the review view placing its controls among them. */
function setUp(events = turnOne()) {
  document.body.replaceChildren();
  const server = new StandInServer();
  let cells = ['user', 'a', 'b'];
  const revealed: string[] = [];
  const model = new ReviewModel({
    api: () => server,
    sessionId: () => SESSION,
    notebook: () => ({
      hasCell: id => cells.includes(id),
      deleteCells: ids => {
        const deleted = ids.filter(id => cells.includes(id));
        cells = cells.filter(id => !deleted.includes(id));
        return deleted;
      }
    })
  });
  const transcript = new TranscriptModel();
  transcript.load([], 0);
  events.forEach(e => transcript.apply(e));
  const host = document.createElement('div');
  document.body.append(host);
  const lines = new Map<number, HTMLElement>();
  for (const entry of transcript.entries) {
    const line = document.createElement('div');
    line.dataset.entry = String(entry.id);
    lines.set(entry.id, line);
    host.append(line);
  }
  const view = new ReviewView({ revealCell: id => revealed.push(id) });
  view.model = model;
  model.sync(SESSION, transcript.entries, transcript.status);
  view.place(id => lines.get(id));
  const node = () => view.nodeOf(1)!;
  const press = (target: HTMLElement, key: string) =>
    target.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true, cancelable: true }));
  return { server, model, view, host, node, revealed, press, transcript, cells: () => cells };
}

describe('the review under a turn', () => {
  it('says why Remove is disabled when the turn was reverted and an Undo brought its cells back', async () => {
    const { node, server, model } = setUp();
    server.getTurn = async () => ({ ...structuredClone(REVIEW), reverted: true });
    await model.toggle(1);
    await settle();
    const rows = byTestId(node(), 'pal-review-cell');
    expect(rows.map(row => row.dataset.inNotebook)).toEqual(['true', 'true']);
    const remove = byTestId(rows[0], 'pal-review-remove')[0] as HTMLButtonElement;
    expect(remove.disabled).toBe(true);
    expect(remove.title).toBe(REVERTED_TITLE);
  });

  it('sits after the turn’s last line, named, with the count of its cells', () => {
    const { node, host } = setUp();
    expect(host.lastElementChild).toBe(node());
    const toggle = byTestId(node(), 'pal-review-toggle')[0];
    expect(toggle.textContent).toBe('Review cells (2)');
    expect(toggle.getAttribute('aria-label')).toBe('Review the 2 cells of turn 1');
    expect(toggle.getAttribute('aria-expanded')).toBe('false');
  });

  it('lists each cell with its count, first line and status, and named Jump, Keep, Remove', async () => {
    const { node, revealed } = setUp();
    byTestId(node(), 'pal-review-toggle')[0].click();
    await settle();
    const rows = byTestId(node(), 'pal-review-cell');
    expect(rows.map(row => row.querySelector('.pal-review-count')?.textContent)).toEqual(['In [2]', 'In [3]']);
    expect(rows.map(row => row.querySelector('.pal-review-code')?.textContent)).toEqual(['x = 2', 'y = 3']);
    expect(rows.map(row => row.querySelector('.pal-review-cell-status')?.textContent)).toEqual(['ok', 'ok']);
    const names = Array.from(rows[0].querySelectorAll('button')).map(b => b.getAttribute('aria-label'));
    expect(names).toEqual(['Jump to In [2] x = 2', 'Keep In [2] x = 2', 'Remove In [2] x = 2']);
    byTestId(rows[1], 'pal-review-jump')[0].click();
    expect(revealed).toEqual(['b']);
    byTestId(rows[0], 'pal-review-keep')[0].click();
    const kept = byTestId(node(), 'pal-review-cell')[0];
    expect(kept.dataset.kept).toBe('true');
    expect(byTestId(kept, 'pal-review-keep')[0].getAttribute('aria-pressed')).toBe('true');
    expect(byTestId(node(), 'pal-review-kernel')[0].textContent).toMatch(
      /^Revert turn restores the kernel’s variables to the snapshot of /
    );
  });

  it('asks before reverting; Escape takes the question back and the focus to Revert turn', async () => {
    const { node, press, server } = setUp();
    byTestId(node(), 'pal-review-toggle')[0].click();
    await settle();
    byTestId(node(), 'pal-review-revert')[0].click();
    await settle();
    const question = byTestId(node(), 'pal-review-confirm-text')[0];
    expect(question.textContent).toMatch(/^Revert turn 1\? 2 cells will be removed from the notebook;/);
    expect(document.activeElement).toBe(byTestId(node(), 'pal-review-cancel-revert')[0]);
    press(document.activeElement as HTMLElement, 'Escape');
    expect(byTestId(node(), 'pal-review-confirm-text')).toEqual([]);
    expect(document.activeElement).toBe(byTestId(node(), 'pal-review-revert')[0]);
    expect(server.posts).toEqual([]);
    // A second Escape closes the review, the focus on its toggle.
    press(document.activeElement as HTMLElement, 'Escape');
    expect(byTestId(node(), 'pal-review-cell')).toEqual([]);
    expect(document.activeElement).toBe(byTestId(node(), 'pal-review-toggle')[0]);
  });

  it('reverts on confirmation: the cells leave the notebook and the rows say removed', async () => {
    const { node, server, cells } = setUp();
    byTestId(node(), 'pal-review-toggle')[0].click();
    await settle();
    byTestId(node(), 'pal-review-revert')[0].click();
    await settle();
    byTestId(node(), 'pal-review-confirm-revert')[0].click();
    await settle();
    expect(cells()).toEqual(['user']);
    expect(server.posts).toEqual([{ cells_removed: ['a', 'b'], restore_kernel: true }]);
    expect(byTestId(node(), 'pal-review-result')[0].textContent).toBe('Reverted.');
    expect(byTestId(node(), 'pal-review-cell').map(row => row.dataset.inNotebook)).toEqual(['false', 'false']);
    expect((byTestId(node(), 'pal-review-remove')[0] as HTMLButtonElement).disabled).toBe(true);
  });

  it('shows a refusal on the turn as an alert that says Undo brings the cells back', async () => {
    const { node, server } = setUp();
    server.refuse = new AgentApiError('the agent is running a turn: stop it first', 409);
    byTestId(node(), 'pal-review-toggle')[0].click();
    await settle();
    byTestId(node(), 'pal-review-revert')[0].click();
    await settle();
    byTestId(node(), 'pal-review-confirm-revert')[0].click();
    await settle();
    const alert = byTestId(node(), 'pal-review-error')[0];
    expect(alert.getAttribute('role')).toBe('alert');
    expect(alert.textContent).toContain('the agent is running a turn: stop it first');
    expect(alert.textContent).toContain('Nothing is lost');
  });

  it('disables Remove and Revert turn while the agent works, saying why', async () => {
    const { node, model, transcript } = setUp();
    byTestId(node(), 'pal-review-toggle')[0].click();
    await settle();
    transcript.apply(event(8, { type: 'turn_started', turn: 2, text: 'More.' }));
    model.sync(SESSION, transcript.entries, transcript.status);
    const revert = byTestId(node(), 'pal-review-revert')[0] as HTMLButtonElement;
    expect(revert.disabled).toBe(true);
    expect(revert.title).toBe(BUSY_TITLE);
    expect((byTestId(node(), 'pal-review-remove')[0] as HTMLButtonElement).disabled).toBe(true);
    expect((byTestId(node(), 'pal-review-jump')[0] as HTMLButtonElement).disabled).toBe(false);
  });

  it('says reverted when a turn_reverted event names the turn (any user’s revert)', () => {
    const { node, model, transcript } = setUp();
    transcript.apply(
      event(9, {
        type: 'turn_reverted',
        turn: 1,
        cells_removed: ['a', 'b'],
        whole_turn: true,
        kernel: 'restored',
        text: '[notice] The user reverted your turn 1.'
      })
    );
    model.sync(SESSION, transcript.entries, transcript.status);
    expect(node().dataset.reverted).toBe('true');
    expect(byTestId(node(), 'pal-review-state')[0].textContent).toBe('reverted');
  });
});

describe('the review in the chat panel', () => {
  it('appears under a finished turn only, and the revert line shows where it happened', () => {
    document.body.replaceChildren();
    const panel = standInChatPanel();
    document.body.append(panel.node);
    const agent = new StandInAgent(sessionInfo(SESSION, 'a.ipynb'));
    // A notebook without cells (the cell lines look their counts up in it).
    Object.assign(agent, { panel: { content: { model: null } } });
    agent.transcript.load([], 0);
    panel.agent = agent as unknown as NotebookAgent;
    const events = turnOne();
    events.slice(0, -1).forEach(e => agent.transcript.apply(e));
    expect(byTestId(panel.node, 'pal-review')).toEqual([]);
    agent.transcript.apply(last(events)!);
    const transcriptNode = byTestId(panel.node, 'pal-transcript')[0];
    const review = byTestId(transcriptNode, 'pal-review');
    expect(review).toHaveLength(1);
    expect(review[0].previousElementSibling?.getAttribute('data-testid')).toBe('pal-assistant');
    expect(byTestId(review[0], 'pal-review-toggle')[0].textContent).toBe('Review cells (2)');

    agent.transcript.apply(
      event(8, {
        type: 'turn_reverted',
        turn: 1,
        cells_removed: ['a', 'b'],
        whole_turn: true,
        kernel: 'restored',
        text: '[notice] The user reverted your turn 1.'
      })
    );
    const notice = transcriptNode.lastElementChild as HTMLElement;
    expect(notice.dataset.kind).toBe('turn_reverted');
    expect(notice.textContent).toBe('[notice] The user reverted your turn 1.');
    const after = byTestId(transcriptNode, 'pal-review');
    expect(after).toHaveLength(1);
    expect(after[0].dataset.reverted).toBe('true');
    expect(after[0].nextElementSibling).toBe(notice);
  });
});
