// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { renderEntry } from '../src/entryViews';
import { TranscriptModel, type ICellEntry } from '../src/transcript';
import type { AgentEvent, ChatItem } from '../src/wire';

import { entryContext } from './entryContext';

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: 's', ...fields } as unknown as AgentEvent;
}

/** The cell lines' status words (the line's title) in order. */
function cellTitles(model: TranscriptModel): string[] {
  return model.entries
    .filter((entry): entry is ICellEntry => entry.kind === 'cell')
    .map(entry => renderEntry(entry, entryContext()).title.split('\n')[0].replace(/: click to show it in the notebook$/, ''));
}

function askedCell(model: TranscriptModel, cellId: string, seq: number): void {
  model.apply(event(seq, { type: 'cell_started', turn: 1, cell_id: cellId, code: 'print(6 * 7)' }));
}

describe('a cell not run in ask mode says why', () => {
  it('live: Skip reads “skipped”, not “withdrawn by Stop”', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    askedCell(model, 'a', 1);
    model.apply(
      event(2, {
        type: 'cell_finished',
        turn: 1,
        cell_id: 'a',
        status: 'skipped',
        execution_count: null,
        preview: '(not run: the user skipped this cell in ask mode; nothing in it ran)',
        decision: 'skip'
      })
    );
    expect(cellTitles(model)).toEqual(['Cell not run (skipped with Skip)']);
  });

  it('live: Edit reads “edited”, and the edited code’s cell ran', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    askedCell(model, 'a', 1);
    model.apply(
      event(2, {
        type: 'cell_finished',
        turn: 1,
        cell_id: 'a',
        status: 'skipped',
        execution_count: null,
        preview: 'edited: the edited code runs in the next cell',
        decision: 'edit'
      })
    );
    model.apply(event(3, { type: 'cell_started', turn: 1, cell_id: 'b', code: 'print(6 * 9)' }));
    model.apply(
      event(4, { type: 'cell_finished', turn: 1, cell_id: 'b', status: 'ok', execution_count: 3, preview: '54' })
    );
    expect(cellTitles(model)).toEqual([
      'Cell not run (edited: the edited code runs in the next cell)',
      'Cell finished'
    ]);
  });

  it('live: a Stop still reads “withdrawn by Stop”', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    askedCell(model, 'a', 1);
    model.apply(
      event(2, { type: 'cell_finished', turn: 1, cell_id: 'a', status: 'skipped', execution_count: null, preview: '' })
    );
    expect(cellTitles(model)).toEqual(['Cell not run (withdrawn by Stop)']);
  });

  it('after a reload: the transcript’s decision gives the same words', () => {
    const model = new TranscriptModel();
    const items = [
      { type: 'cell', turn: 1, cell_id: 'a', code: 'x', status: 'skipped', execution_count: null, preview: '', decision: 'skip' },
      { type: 'cell', turn: 2, cell_id: 'b', code: 'y', status: 'skipped', execution_count: null, preview: '', decision: 'edit' },
      { type: 'cell', turn: 3, cell_id: 'c', code: 'z', status: 'skipped', execution_count: null, preview: '' }
    ] as unknown as ChatItem[];
    model.load(items, 5);
    expect(cellTitles(model)).toEqual([
      'Cell not run (skipped with Skip)',
      'Cell not run (edited: the edited code runs in the next cell)',
      'Cell not run (withdrawn by Stop)'
    ]);
  });
});

describe('a call plan mode did not run', () => {
  function planLine(model: TranscriptModel): HTMLElement {
    const entry = model.entries.find(e => e.kind === 'notice' && e.noticeKind === 'plan_not_run');
    expect(entry).toBeDefined();
    return renderEntry(entry!, entryContext());
  }

  function expectLineWithCode(node: HTMLElement): void {
    expect(node.textContent).toContain('plan mode');
    const details = node.querySelector<HTMLDetailsElement>('[data-testid="pal-plan-code"]');
    expect(details?.open).toBe(false);
    expect(details?.querySelector('pre')?.textContent).toBe('print(6 * 7)');
  }

  it('live: a line saying it was not run, which opens on the code', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    model.apply(
      event(1, {
        type: 'notice',
        turn: 1,
        kind: 'plan_not_run',
        text: 'Not run: this session is in plan mode, where no cell runs.',
        code: 'print(6 * 7)'
      })
    );
    expectLineWithCode(planLine(model));
  });

  it('after a reload: the same line from the transcript', () => {
    const model = new TranscriptModel();
    model.load(
      [
        {
          type: 'notice',
          turn: 1,
          kind: 'plan_not_run',
          text: 'Not run: this session is in plan mode, where no cell runs.',
          code: 'print(6 * 7)'
        }
      ] as unknown as ChatItem[],
      3
    );
    expectLineWithCode(planLine(model));
  });
});
