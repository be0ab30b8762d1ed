// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { renderEntry, type IEntryViewContext } from '../src/entryViews';
import type {
  IAgentMessageEntry,
  IChildEntry,
  IMessageOrigin,
  INoticeEntry,
  IUserEntry
} from '../src/transcript';

import { entryContext } from './entryContext';

const PARENT_ID = '20261130-090000-a1b2c3';

interface IRecorder {
  context: IEntryViewContext;
  opened: string[];
  senders: IMessageOrigin[];
}

function recorder(family: Partial<IEntryViewContext> = {}): IRecorder {
  const opened: string[] = [];
  const senders: IMessageOrigin[] = [];
  return {
    opened,
    senders,
    context: entryContext({
      openNotebook: path => opened.push(path),
      openSender: origin => senders.push(origin),
      ...family
    })
  };
}

function child(fields: Partial<IChildEntry> = {}): IChildEntry {
  return {
    kind: 'child',
    id: 1,
    turn: 1,
    childId: 'k1',
    name: 'part-a',
    notebookPath: 'analysis.agents/part-a.ipynb',
    task: 'Summarise part A',
    spawnCellId: 'cell-1',
    status: 'running',
    preview: '',
    ...fields
  };
}

function fromParent(turn: number, composed: string | null = '2026-11-30T09:00:02Z'): IUserEntry {
  return {
    kind: 'user',
    id: 2,
    turn,
    text: 'Summarise part A',
    pending: false,
    origin: { sessionId: PARENT_ID, name: 'analysis.ipynb', relationship: 'parent', composed }
  };
}

function byTestId(node: HTMLElement, testId: string): HTMLElement | null {
  return node.querySelector(`[data-testid="${testId}"]`);
}

describe('the line of a spawned sub-agent', () => {
  it('says which sub-agent was spawned for what, and opens its notebook from the link', () => {
    const { context, opened } = recorder();
    const node = renderEntry(child(), context);
    expect(node.dataset.testid).toBe('pal-child');
    expect(byTestId(node, 'pal-child-link')?.closest('.pal-child-text')?.textContent).toBe(
      'spawned sub-agent part-a: Summarise part A'
    );
    byTestId(node, 'pal-child-link')?.click();
    expect(opened).toEqual(['analysis.agents/part-a.ipynb']);
  });

  it('shows the child’s status as a badge', () => {
    for (const status of ['running', 'replied', 'completed', 'error', 'idle', 'inactive'] as const) {
      const node = renderEntry(child({ status }), recorder().context);
      const badge = byTestId(node, 'pal-child-status');
      expect(node.dataset.status).toBe(status);
      expect(badge?.dataset.status).toBe(status);
      expect(badge?.textContent).toBe(status);
    }
  });

  it('shows no badge while the status is unknown, and the preview in the tooltip', () => {
    const node = renderEntry(child({ status: null, preview: 'Part A: +12 %' }), recorder().context);
    expect(byTestId(node, 'pal-child-status')).toBeNull();
    expect(node.dataset.status).toBe('unknown');
    expect(node.title).toContain('Part A: +12 %');
  });
});

describe('messages from other agents', () => {
  it('shows a child’s message in its own bubble with the sender and the compose time', () => {
    const { context, senders } = recorder({
      senderNotebookPath: () => 'analysis.agents/part-a.ipynb'
    });
    const origin: IMessageOrigin = {
      sessionId: 'k1',
      name: 'part-a',
      relationship: 'child',
      composed: '2026-11-30T09:01:20+00:00'
    };
    const entry: IAgentMessageEntry = { kind: 'agent_message', id: 3, turn: 2, text: 'Addendum.', origin };
    const node = renderEntry(entry, context);
    expect(node.dataset.testid).toBe('pal-agent-message');
    expect(node.dataset.relationship).toBe('child');
    expect(node.dataset.startsTurn).toBe('false');
    expect(byTestId(node, 'pal-message-sender')?.textContent).toMatch(/^from child part-a/);
    const time = node.querySelector('time');
    expect(time?.dateTime).toBe('2026-11-30T09:01:20+00:00');
    expect(time?.textContent).not.toBe('');
    expect(node.querySelector('.pal-message-text')?.textContent).toBe('Addendum.');
    const link = byTestId(node, 'pal-sender-link');
    expect(link?.dataset.path).toBe('analysis.agents/part-a.ipynb');
    link?.click();
    expect(senders).toEqual([origin]);
  });

  it('shows a message that started a turn as another agent’s, not the user’s', () => {
    const entry: IUserEntry = {
      kind: 'user',
      id: 4,
      turn: 3,
      text: 'Part A: +12 %',
      pending: false,
      origin: { sessionId: 'k1', name: 'part-a', relationship: 'child', composed: null }
    };
    const node = renderEntry(entry, recorder().context);
    expect(node.dataset.testid).toBe('pal-agent-message');
    expect(node.dataset.startsTurn).toBe('true');
    expect(node.querySelector('time')).toBeNull();
  });

  it('names a sender it cannot link without a link', () => {
    const origin: IMessageOrigin = { sessionId: null, name: 'ghost', relationship: 'sibling', composed: 'not a date' };
    const node = renderEntry({ kind: 'agent_message', id: 5, turn: 1, text: 'boo', origin }, recorder().context);
    expect(byTestId(node, 'pal-sender-link')).toBeNull();
    expect(byTestId(node, 'pal-sender-name')?.textContent).toBe('ghost');
    expect(node.querySelector('time')).toBeNull();
  });

  it('keeps the researcher’s own message a user bubble', () => {
    const entry: IUserEntry = { kind: 'user', id: 6, turn: 1, text: 'hi', pending: false, origin: null };
    expect(renderEntry(entry, recorder().context).dataset.testid).toBe('pal-user');
  });
});

describe('a sub-agent’s chat', () => {
  const parent = { sessionId: PARENT_ID, name: 'analysis.ipynb', notebookPath: 'analysis.ipynb' };

  it('shows the first message as the task from the parent, linked to the parent notebook', () => {
    const { context, senders } = recorder({
      parentAgent: () => parent,
      senderNotebookPath: origin => (origin.relationship === 'parent' ? 'analysis.ipynb' : null)
    });
    const node = renderEntry(fromParent(1), context);
    expect(byTestId(node, 'pal-message-sender')?.textContent).toMatch(
      /^task from parent analysis\.ipynb/
    );
    const link = byTestId(node, 'pal-sender-link');
    expect(link?.title).toBe('Open analysis.ipynb');
    link?.click();
    expect(senders[0]).toMatchObject({ sessionId: PARENT_ID, relationship: 'parent' });
  });

  it('shows later messages from the parent with the same sender', () => {
    const node = renderEntry(fromParent(2), recorder({ parentAgent: () => parent }).context);
    expect(byTestId(node, 'pal-message-sender')?.textContent).toMatch(
      /^from parent analysis\.ipynb/
    );
  });

  it('takes the first turn for the parent’s task when the server did not name the sender', () => {
    const entry: IUserEntry = { kind: 'user', id: 7, turn: 1, text: 'Summarise part A', pending: false, origin: null };
    const node = renderEntry(entry, recorder({ parentAgent: () => parent }).context);
    expect(node.dataset.testid).toBe('pal-agent-message');
    expect(byTestId(node, 'pal-message-sender')?.textContent).toMatch(
      /^task from parent analysis\.ipynb/
    );
  });
});

describe('notices about sub-agents', () => {
  it('renders a failed child as a warning and a completed one as information', () => {
    const notice = (noticeKind: INoticeEntry['noticeKind'], tone: INoticeEntry['tone']): INoticeEntry => ({
      kind: 'notice',
      id: 8,
      turn: 1,
      text: 'part-b …',
      tone,
      noticeKind
    });
    const failed = renderEntry(notice('child_error', 'warning'), recorder().context);
    expect(failed.getAttribute('role')).toBe('alert');
    expect(failed.dataset.kind).toBe('child_error');
    const completed = renderEntry(notice('child_completed', 'info'), recorder().context);
    expect(completed.getAttribute('role')).toBeNull();
    expect(completed.dataset.tone).toBe('info');
  });
});
