// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { renderEntry, type IEntryViewContext } from '../src/entryViews';
import type { ICellEntry, INoticeEntry } from '../src/transcript';

import { entryContext } from './entryContext';

function context(
  notebookCount: number | null = null,
  family: Partial<IEntryViewContext> = {}
): IEntryViewContext {
  return entryContext({
    cellFirstLine: () => 'x = 1',
    cellExecutionCount: () => notebookCount,
    ...family
  });
}

function cell(fields: Partial<ICellEntry>): ICellEntry {
  return {
    kind: 'cell',
    id: 1,
    turn: 1,
    cellId: 'c',
    status: 'ok',
    executionCount: null,
    code: 'x = 1',
    preview: '',
    waitingText: '',
    ...fields
  };
}

describe('cell lines', () => {
  it('says that a cell waits for the user’s cell', () => {
    const node = renderEntry(
      cell({ status: 'waiting', waitingText: 'waiting for your cell to finish' }),
      context()
    );
    expect(node.dataset.status).toBe('waiting');
    expect(node.querySelector('[data-testid="pal-cell-waiting"]')?.textContent).toBe(
      'waiting for your cell to finish'
    );
  });

  it('takes the execution count from the notebook when the server sent none', () => {
    const node = renderEntry(cell({ status: 'interrupted' }), context(2));
    expect(node.querySelector('.pal-cell-count')?.textContent).toBe('[2]');
  });

  it('renders a status it does not know without throwing', () => {
    const entry = cell({ status: 'vanished' as ICellEntry['status'] });
    expect(() => renderEntry(entry, context())).not.toThrow();
  });
});

describe('notices', () => {
  it('renders a kernel restart as a warning the screen reader announces', () => {
    const notice: INoticeEntry = {
      kind: 'notice',
      id: 2,
      turn: 1,
      text: 'The agent restarted the kernel: your variables are gone.',
      tone: 'warning',
      noticeKind: 'kernel_restarted'
    };
    const node = renderEntry(notice, context());
    expect(node.dataset.testid).toBe('pal-notice');
    expect(node.dataset.kind).toBe('kernel_restarted');
    expect(node.classList.contains('pal-mod-warning')).toBe(true);
    expect(node.getAttribute('role')).toBe('alert');
  });

  const untrusted: INoticeEntry = {
    kind: 'notice',
    id: 3,
    turn: null,
    text: 'This session holds files that were not made here ...',
    tone: 'warning',
    noticeKind: 'session_untrusted'
  };

  it('offers Trust and restore on an untrusted session and says what came of it', async () => {
    const calls: string[] = [];
    const node = renderEntry(
      untrusted,
      context(null, {
        trustSession: () => {
          calls.push('trust');
          return Promise.resolve('Trusted: snapshot; loading now.');
        }
      })
    );
    const trust = node.querySelector<HTMLButtonElement>('[data-testid="pal-trust-button"]');
    expect(trust?.textContent).toBe('Trust and restore');
    trust?.click();
    expect(trust?.disabled).toBe(true);
    await Promise.resolve();
    await Promise.resolve();
    expect(calls).toEqual(['trust']);
    expect(node.querySelector('[data-testid="pal-trust-result"]')?.textContent).toBe(
      'Trusted: snapshot; loading now.'
    );
  });

  it('gives the button back when trusting fails', async () => {
    const node = renderEntry(
      untrusted,
      context(null, { trustSession: () => Promise.reject(new Error('no session')) })
    );
    const trust = node.querySelector<HTMLButtonElement>('[data-testid="pal-trust-button"]');
    trust?.click();
    await Promise.resolve();
    await Promise.resolve();
    expect(trust?.disabled).toBe(false);
    expect(node.querySelector('[data-testid="pal-trust-result"]')?.textContent).toBe(
      'Could not trust: no session'
    );
  });

  it('has no trust button where the panel cannot trust', () => {
    const node = renderEntry(untrusted, context());
    expect(node.querySelector('[data-testid="pal-trust-button"]')).toBeNull();
  });
});

describe('the untrusted project files notice', () => {
  const notice: INoticeEntry = {
    kind: 'notice',
    id: 4,
    turn: null,
    text: 'When this agent started, this project held instruction files:\n- AGENTS.md (25 bytes)',
    tone: 'warning',
    noticeKind: 'project_untrusted'
  };

  it('offers to review and trust them in /context', () => {
    const showContext = vi.fn();
    const node = renderEntry(notice, context(null, { showContext }));
    const review = node.querySelector<HTMLButtonElement>('[data-testid="pal-project-review"]');
    expect(review?.textContent).toBe('Review and trust…');
    review?.click();
    expect(showContext).toHaveBeenCalledTimes(1);
    expect(node.querySelector('[data-testid="pal-trust-button"]')).toBeNull();
  });
});

describe('bidirectional text', () => {
  const RLO = '\u202e';

  it('isolates each bubble, so an override character cannot reach past its text', () => {
    const user = renderEntry({ kind: 'user', id: 1, turn: 1, text: `hi ${RLO}olleh`, pending: false, origin: null }, context());
    const answer = renderEntry({ kind: 'assistant', id: 2, turn: 1, text: `ok ${RLO}kayo`, streaming: false }, context());
    const message = renderEntry(
      {
        kind: 'agent_message',
        id: 3,
        turn: 1,
        text: `${RLO}gnirts`,
        origin: { sessionId: 's2', name: `x${RLO}y`, relationship: 'child', composed: null }
      },
      context()
    );
    const isolated = [
      user,
      answer,
      message.querySelector<HTMLElement>('.pal-message-text')!,
      message.querySelector<HTMLElement>('[data-testid="pal-sender-link"]')!
    ];
    for (const node of isolated) {
      expect(node.getAttribute('dir')).toBe('auto');
      expect(node.classList.contains('pal-bidi-isolate')).toBe(true);
    }
    const code = renderEntry(cell({ code: `${RLO}1 = x` }), context()).querySelector('.pal-cell-code')!;
    expect(code.getAttribute('dir')).toBe('ltr'); // code reads left to right, isolated too
    expect(code.classList.contains('pal-bidi-isolate')).toBe(true);
  });
});
