// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { refinementShortText, refinementSummary, renderRefineForm } from '../src/refine';
import { renderRefinementLine } from '../src/refine';
import { expandable, ID_LIMIT, shortenId, shortenText, SUMMARY_LIMIT } from '../src/shorten';

const LONG_SUMMARY =
  'Promote the retry pattern for flaky network tests into a skill, and add a memory about ' +
  'the staging server that times out on Mondays during the backup window';
const LONG_ID = 'refine_20261130110000123';

describe('shortening', () => {
  it('keeps short text and cuts long text at a word with an ellipsis', () => {
    expect(shortenText('Retry flaky tests')).toBe('Retry flaky tests');
    const short = shortenText(LONG_SUMMARY);
    expect(short.length).toBeLessThanOrEqual(SUMMARY_LIMIT);
    expect(short.endsWith('…')).toBe(true);
    expect(LONG_SUMMARY.startsWith(short.slice(0, -1))).toBe(true);
    expect(short.slice(0, -1)).not.toMatch(/\s$/);
  });

  it('shows a long id as its prefix and its tail', () => {
    expect(shortenId('ref_1')).toBe('ref_1');
    expect(shortenId(LONG_ID)).toBe('refine_…000123');
    expect(shortenId(LONG_ID).length).toBeLessThanOrEqual(ID_LIMIT + 1);
    expect(shortenId('x'.repeat(40))).toBe(`…${'x'.repeat(6)}`);
  });

  it('gives a disclosure with the whole text only when there is more to show', () => {
    expect(expandable('same', 'same').tagName).toBe('SPAN');
    const details = expandable('short…', 'short and long') as HTMLDetailsElement;
    expect(details.tagName).toBe('DETAILS');
    expect(details.open).toBe(false);
    expect(details.querySelector('summary')?.textContent).toBe('short…');
    expect(details.querySelector('[data-testid="pal-expandable-full"]')?.textContent).toBe(
      'short and long'
    );
  });
});

describe('long refinements in the chat', () => {
  const record = refinementSummary({
    id: LONG_ID,
    summary: LONG_SUMMARY,
    edits: [{ action: 'create', kind: 'skill', id: 'retry', applied: true }]
  });

  it('shortens the line’s id and summary and keeps the whole line on expand', () => {
    const line = renderRefinementLine(record, null);
    const summary = line.querySelector('summary')!;
    expect(summary.textContent).toBe(refinementShortText(record));
    expect(summary.textContent).toContain('refine_…000123');
    expect(summary.textContent).toContain('1 applied, 0 rejected');
    const full = line.querySelector('[data-testid="pal-expandable-full"]')!;
    expect(full.textContent).toContain(LONG_SUMMARY);
    expect(full.textContent).toContain(LONG_ID);
    expect(line.dataset.refinementId).toBe(LONG_ID);
  });

  it('names a rollback in /refine history by the refinement it undid, the ids in the tooltip', () => {
    const original = {
      id: LONG_ID,
      summary: 'Retry flaky tests',
      edits: [{ action: 'create', kind: 'skill', id: 'retry', applied: true }]
    };
    const rollback = { id: 'refine_20261130120000456', rollback_of: LONG_ID, edits: [] };
    const orphan = { id: 'refine_20261130130000789', rollback_of: 'refine_20261130090000999', edits: [] };
    const form = renderRefineForm([original, rollback, orphan], { rollback: () => {}, close: () => {} });
    const [orphanRow, rollbackRow] = form.querySelectorAll<HTMLElement>('[data-testid="pal-refine-row"]');
    const what = (row: HTMLElement) => row.querySelector('[data-testid="pal-refine-what"]')?.textContent;
    expect(what(rollbackRow)).toBe('Rollback of “Retry flaky tests”');
    expect(what(orphanRow)).toBe('Rollback of refine_…000999');
    const tooltip = rollbackRow.querySelector<HTMLElement>('[data-testid="pal-refine-label"]')!.title;
    expect(tooltip).toContain('id refine_20261130120000456');
    expect(orphanRow.querySelector<HTMLElement>('[data-testid="pal-refine-label"]')!.title).toContain(
      'refine_20261130090000999'
    );
    expect(rollbackRow.textContent).not.toContain('refinement refine_');
  });

  it('leaves a short line as plain text', () => {
    const line = renderRefinementLine(refinementSummary({ id: 'ref_1', summary: 'ok', edits: [] }), null);
    expect(line.querySelector('details')).toBeNull();
  });
});
