// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { renderEntry, type IEntryViewContext } from '../src/entryViews';
import {
  describeRefineAnswer,
  parseRefineCommand,
  refinementLineText,
  refinementSummary,
  renderRefineForm
} from '../src/refine';
import { parseChatCommand } from '../src/treeView';
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

describe('parseRefineCommand', () => {
  it('reads a bare /refine as a local refinement without instructions', () => {
    expect(parseRefineCommand('/refine')).toEqual({
      command: 'refine',
      action: 'run',
      instructions: null,
      global: false
    });
    expect(parseRefineCommand('  /refine  ')).toMatchObject({ action: 'run', instructions: null });
  });

  it('takes instructions, multi-line, and --global before them', () => {
    expect(parseRefineCommand('/refine promote the retry pattern\nto a skill')).toEqual({
      command: 'refine',
      action: 'run',
      instructions: 'promote the retry pattern\nto a skill',
      global: false
    });
    expect(parseRefineCommand('/refine --global house style')).toEqual({
      command: 'refine',
      action: 'run',
      instructions: 'house style',
      global: true
    });
    expect(parseRefineCommand('/refine --global')).toMatchObject({
      action: 'run',
      instructions: null,
      global: true
    });
  });

  it('keeps --global inside the instructions as text', () => {
    expect(parseRefineCommand('/refine explain --global flags')).toMatchObject({
      instructions: 'explain --global flags',
      global: false
    });
  });

  it('reads rollback with one id, --global before or after it', () => {
    expect(parseRefineCommand('/refine rollback ref_1')).toEqual({
      command: 'refine',
      action: 'rollback',
      id: 'ref_1',
      global: false
    });
    expect(parseRefineCommand('/refine rollback ref_1 --global')).toMatchObject({
      action: 'rollback',
      id: 'ref_1',
      global: true
    });
    expect(parseRefineCommand('/refine --global rollback ref_1')).toMatchObject({
      action: 'rollback',
      global: true
    });
  });

  it('makes a bare rollback, or one with two ids, a usage error', () => {
    const bare = parseRefineCommand('/refine rollback');
    expect(bare).toMatchObject({ action: 'usage' });
    expect(bare && 'error' in bare ? bare.error : '').toContain('/refine rollback <id>');
    expect(parseRefineCommand('/refine rollback --global')).toMatchObject({ action: 'usage' });
    expect(parseRefineCommand('/refine rollback a b')).toMatchObject({ action: 'usage' });
  });

  it('lets -- start instructions that look like a subcommand', () => {
    expect(parseRefineCommand('/refine -- rollback the retry change')).toMatchObject({
      action: 'run',
      instructions: 'rollback the retry change'
    });
    expect(parseRefineCommand('/refine --global -- history of errors')).toMatchObject({
      action: 'run',
      instructions: 'history of errors',
      global: true
    });
  });

  it('reads history alone as the form, with more words as instructions', () => {
    expect(parseRefineCommand('/refine history')).toEqual({
      command: 'refine',
      action: 'history'
    });
    expect(parseRefineCommand('/refine history of failures')).toMatchObject({
      action: 'run',
      instructions: 'history of failures'
    });
    expect(parseRefineCommand('/refine --global history')).toMatchObject({ action: 'usage' });
  });

  it('rejects an unknown option and leaves other text alone', () => {
    expect(parseRefineCommand('/refine --globl x')).toMatchObject({ action: 'usage' });
    expect(parseRefineCommand('/refined')).toBeNull();
    expect(parseRefineCommand('please /refine')).toBeNull();
    expect(parseRefineCommand('/tree')).toBeNull();
    expect(parseChatCommand('/refine')).toBeNull();
  });
});

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
      'rollback of ref_1 · 1 applied'
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

  it('says how to plan one when there are none', () => {
    const form = renderRefineForm([], { rollback: vi.fn(), close: vi.fn() });
    expect(form.textContent).toContain('No refinements yet');
  });
});

describe('the server’s answers', () => {
  it('says what was scheduled, queued or refused', () => {
    expect(describeRefineAnswer({ scheduled: true, note: 'planning in the background' }, 'x')).toBe(
      'planning in the background'
    );
    expect(describeRefineAnswer({ scheduled: true }, 'scheduled')).toBe('scheduled');
    expect(describeRefineAnswer({ scheduled: false, reason: 'a plan is in flight' }, 'x')).toBe(
      'not scheduled: a plan is in flight'
    );
    expect(
      describeRefineAnswer(
        { queued: true, applied: false, note: 'queued: applies at the next turn boundary' },
        'x'
      )
    ).toBe('queued: applies at the next turn boundary');
  });
});
