// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { renderEntry, type IEntryViewContext } from '../src/entryViews';
import {
  refinementDetails,
  refinementHeadline,
  refinementLineText,
  refinementSummary,
  renderRefineForm
} from '../src/refine';
import { formatComposed } from '../src/clock';
import { TranscriptModel } from '../src/transcript';
import type { AgentEvent } from '../src/wire';

const RECORD = {
  id: 'ref_1',
  trigger: 'user',
  scope: 'local',
  summary: 'Retry flaky tests',
  rationale: 'three flaky failures',
  expected_outcome: 'fewer reruns',
  created_at: '2026-11-30T11:00:00+00:00',
  edits: [
    { action: 'create', kind: 'memory', id: 'flaky', applied: true, error: null },
    {
      action: 'update',
      kind: 'prompt',
      id: 'base_system_prompt',
      applied: false,
      error: 'the base system prompt is not editable'
    }
  ]
};

describe('refinement records in the chat', () => {
  it('counts applied and rejected edits and keeps the reasons', () => {
    const summary = refinementSummary(RECORD);
    expect(summary).toMatchObject({ id: 'ref_1', applied: 1, rejected: 1, error: '' });
    expect(summary.rejections).toEqual([
      'update prompt base_system_prompt: the base system prompt is not editable'
    ]);
    expect(refinementLineText(summary)).toBe(
      'refinement ref_1: Retry flaky tests · 1 applied, 1 rejected'
    );
  });

  it('reads a nested record, an error and a rollback, and never throws on junk', () => {
    const failed = refinementSummary({
      refinement: { id: 'r2', scope: 'global', error: 'the planner’s reply was cut off', edits: [] }
    });
    expect(refinementLineText(failed)).toBe(
      'refinement r2 (global): no summary · 0 applied, 0 rejected · ' +
        'error: the planner’s reply was cut off'
    );
    expect(refinementLineText(refinementSummary({ id: 'r3', rollback_of: 'ref_1', edits: [RECORD.edits[0]] }))).toContain(
      'Rollback of ref_1 · create memory flaky · 1 applied'
    );
    for (const junk of [null, 7, 'x', { edits: 'no' }, { edits: [null, 3] }]) {
      expect(() => refinementSummary(junk)).not.toThrow();
    }
  });

  it('folds a live refinement event into a transcript line', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    const text = 'Refinement ref_1 applied 1 edit, rejected 1.';
    const event = { seq: 1, session_id: 's', type: 'refinement', refinement: RECORD, text };
    model.apply(event as unknown as AgentEvent);
    const [entry] = model.entries;
    expect(entry.kind).toBe('refinement');
    const showRefinements = vi.fn();
    const node = renderEntry(entry, { showRefinements } as unknown as IEntryViewContext);
    expect(node.dataset.testid).toBe('pal-refinement');
    expect(node.dataset.applied).toBe('1');
    expect(node.dataset.rejected).toBe('1');
    expect(node.textContent).toContain('Retry flaky tests');
    (node.querySelector('[data-testid="pal-refinement-open"]') as HTMLButtonElement).click();
    expect(showRefinements).toHaveBeenCalledOnce();
  });

  it('shows a refinement item of a reloaded transcript', () => {
    const model = new TranscriptModel();
    const item = { type: 'refinement', turn: 2, text: 'Refinement ref_1 …', refinement: RECORD };
    model.load([item as never], 5);
    expect(model.entries.map(e => e.kind)).toEqual(['refinement']);
    const [entry] = model.entries;
    expect(entry.kind === 'refinement' && entry.record.id).toBe('ref_1');
  });
});

describe('the rollback form', () => {
  it('lists refinements newest first with a Rollback button for those that applied edits', () => {
    const rollback = vi.fn();
    const close = vi.fn();
    const nothing = { id: 'r0', summary: 'nothing useful', edits: [] };
    const form = renderRefineForm([nothing, RECORD], { rollback, close });
    const rows = [...form.querySelectorAll<HTMLElement>('[data-testid="pal-refine-row"]')];
    expect(rows.map(row => row.dataset.refinementId)).toEqual(['ref_1', 'r0']);
    const buttons = rows.map(
      row => row.querySelector('[data-testid="pal-refine-rollback"]') as HTMLButtonElement
    );
    expect(buttons[1].disabled).toBe(true);
    buttons[0].click();
    expect(rollback).toHaveBeenCalledWith(expect.objectContaining({ id: 'ref_1' }));
    expect(buttons[0].disabled).toBe(true);
    (form.querySelector('[data-testid="pal-refine-close"]') as HTMLButtonElement).click();
    expect(close).toHaveBeenCalledOnce();
  });

  it('tells refinements apart by what they changed and when, the id only in the tooltip', () => {
    const second = {
      id: 'refine_20261130123000999',
      summary: 'Remember the data path',
      created_at: '2026-11-30T12:30:00+00:00',
      edits: [{ action: 'update', kind: 'memory', id: 'data_path', applied: true, error: null }]
    };
    const form = renderRefineForm([RECORD, second], { rollback: vi.fn(), close: vi.fn() });
    const rows = [...form.querySelectorAll<HTMLElement>('[data-testid="pal-refine-row"]')];
    const what = rows.map(row => row.querySelector('[data-testid="pal-refine-what"]')!.textContent);
    expect(what).toEqual(['Remember the data path', 'Retry flaky tests']);
    const details = rows.map(row => row.querySelector('[data-testid="pal-refine-details"]')!.textContent!);
    expect(details[0]).toContain('update memory data_path');
    expect(details[1]).toContain('create memory flaky · 1 applied, 1 rejected');
    expect(details[0]).not.toBe(details[1]);
    for (const [row, id] of [[rows[0], second.id], [rows[1], RECORD.id]] as const) {
      expect(row.textContent).not.toContain(id);
      const label = row.querySelector<HTMLElement>('[data-testid="pal-refine-label"]')!;
      expect(label.title).toContain(`id ${id}`);
      const rollback = row.querySelector<HTMLButtonElement>('[data-testid="pal-refine-rollback"]')!;
      expect(rollback.getAttribute('aria-label')).toBe(`Roll back: ${row.querySelector('[data-testid="pal-refine-what"]')!.textContent}`);
    }
  });

  it('dates a refinement by its time of day today and by its date before', () => {
    const record = refinementSummary({ ...RECORD, created_at: new Date(2026, 10, 30, 11, 5).toISOString() });
    const sameDay = refinementDetails(record, new Date(2026, 10, 30, 18, 0));
    const later = refinementDetails(record, new Date(2026, 11, 2, 9, 0));
    expect(sameDay).toMatch(/^[^·]*11.05[^·]* · create memory flaky/);
    expect(sameDay).not.toMatch(/Nov/);
    expect(later).toMatch(/^[^·]*(Nov|11)[^·]*11.05[^·]* · /);
    expect(refinementHeadline(refinementSummary({ id: 'x', edits: [] }))).toBe('No summary');
  });

  it('says how to plan one when there are none', () => {
    const form = renderRefineForm([], { rollback: vi.fn(), close: vi.fn() });
    expect(form.textContent).toContain('No refinements yet');
  });
});

/** A rollback event as the server sends it: the undone refinement in words, the entry restored. */
const UNDONE_AT = '2026-11-30T11:00:00+00:00';
const ROLLBACK = {
  id: 'refine_20261130120000456',
  trigger: 'rollback',
  scope: 'local',
  summary: 'Rollback of refine_20261130110000123: Retry flaky tests',
  rollback_of: 'refine_20261130110000123',
  rolled_back: { summary: 'Retry flaky tests', created_at: UNDONE_AT },
  created_at: '2026-11-30T12:00:00+00:00',
  edits: [
    {
      action: 'delete',
      kind: 'memory',
      id: 'flaky',
      applied: true,
      error: null,
      before: { id: 'flaky', kind: 'memory', title: 'Rerun flaky tests' },
      after: null
    }
  ]
};

describe('a rollback in the chat', () => {
  function rollbackLine(): HTMLElement {
    const model = new TranscriptModel();
    model.load([], 0);
    const event = { seq: 1, session_id: 's', type: 'refinement', refinement: ROLLBACK, text: 'x' };
    model.apply(event as unknown as AgentEvent);
    return renderEntry(model.entries[0], {} as IEntryViewContext);
  }

  it('says in words what it rolled back: the refinement’s summary and time, the entry’s kind and title', () => {
    const line = rollbackLine();
    const text = line.querySelector('.pal-refinement-text')?.textContent ?? '';
    expect(text).toContain('Rollback of “Retry flaky tests”');
    expect(text).toContain(formatComposed(UNDONE_AT)!.short);
    expect(text).toContain('memory “Rerun flaky tests”');
    expect(text).toContain('1 applied, 0 rejected');
    expect(text).not.toMatch(/refine_/);
  });

  it('keeps the ids in the tooltip', () => {
    const title = rollbackLine().querySelector<HTMLElement>('.pal-refinement-text')!.title;
    expect(title).toContain('refine_20261130120000456');
    expect(title).toContain('refine_20261130110000123');
  });

  it('reads as the /refine history row of the same rollback: one headline for both', () => {
    const record = refinementSummary(ROLLBACK);
    const headline = refinementHeadline(record);
    expect(refinementLineText(record)).toContain(headline);
    const form = renderRefineForm([ROLLBACK], { rollback: () => {}, close: () => {} });
    expect(form.querySelector('[data-testid="pal-refine-what"]')?.textContent).toBe(headline);
  });
});
