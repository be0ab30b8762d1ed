import { describe, expect, it } from 'vitest';

import { formatComposed } from '../src/clock';
import {
  SessionDirectory,
  knownNotebookPath,
  parentFromInfo,
  senderLabel
} from '../src/family';
import type { IChildEntry, IMessageOrigin } from '../src/transcript';
import type { ISessionInfo } from '../src/wire';

function info(sessionId: string, notebookPath: string, name?: string): ISessionInfo {
  return {
    session_id: sessionId,
    notebook_path: notebookPath,
    kernel_id: null,
    provider: null,
    model: null,
    status: 'inactive',
    turns: 1,
    created: null,
    updated: null,
    ...(name ? { name } : {})
  };
}

describe('looking sessions up', () => {
  it('reads the list again for a session it has not seen, and shares one request', async () => {
    const lists: ISessionInfo[][] = [[info('a', 'a.ipynb')], [info('a', 'a.ipynb'), info('b', 'b.ipynb')]];
    let calls = 0;
    const directory = new SessionDirectory(async () => lists[Math.min(calls++, 1)]);
    expect((await directory.find('a'))?.notebook_path).toBe('a.ipynb');
    expect((await directory.find('a'))?.notebook_path).toBe('a.ipynb');
    expect(calls).toBe(1);
    const [b1, b2] = await Promise.all([directory.find('b'), directory.find('b')]);
    expect(b1?.notebook_path).toBe('b.ipynb');
    expect(b2?.notebook_path).toBe('b.ipynb');
    expect(calls).toBe(2);
    expect(await directory.find('nobody')).toBeNull();
  });

  it('reads the list again when asked for a fresh answer (a renamed notebook)', async () => {
    let path = 'old.ipynb';
    const directory = new SessionDirectory(async () => [info('a', path)]);
    await directory.find('a');
    path = 'new.ipynb';
    expect((await directory.find('a'))?.notebook_path).toBe('old.ipynb');
    expect((await directory.find('a', true))?.notebook_path).toBe('new.ipynb');
  });

  it('reads again after a failed read', async () => {
    let fail = true;
    const directory = new SessionDirectory(async () => {
      if (fail) {
        throw new Error('offline');
      }
      return [info('a', 'a.ipynb')];
    });
    await expect(directory.find('a')).rejects.toThrow('offline');
    fail = false;
    expect((await directory.find('a'))?.notebook_path).toBe('a.ipynb');
  });

  it('names a root parent by its notebook and a sub-agent parent by its name', () => {
    expect(parentFromInfo('r', info('r', 'root.ipynb')).name).toBe('root.ipynb');
    expect(parentFromInfo('p', info('p', 'x/p.ipynb', 'planner')).name).toBe('planner');
    expect(parentFromInfo('q', null)).toEqual({ sessionId: 'q', name: '', notebookPath: null });
  });
});

describe('the sender’s notebook without asking the server', () => {
  const origin = (relationship: IMessageOrigin['relationship'], name: string, sessionId: string | null = null): IMessageOrigin => ({
    sessionId,
    name,
    relationship,
    composed: null
  });
  const childLine: IChildEntry = {
    kind: 'child',
    id: 1,
    turn: 1,
    childId: 'k1',
    name: 'part-a',
    notebookPath: 'nb.agents/part-a.ipynb',
    task: '',
    spawnCellId: null,
    status: 'running',
    preview: ''
  };
  const parent = { sessionId: 'p', name: 'nb.ipynb', notebookPath: 'nb.ipynb' };

  it('is the parent’s notebook for the parent, and a child’s from its spawn line', () => {
    expect(knownNotebookPath(origin('parent', 'nb.ipynb', 'p'), parent, [])).toBe('nb.ipynb');
    expect(knownNotebookPath(origin('child', 'part-a'), null, [childLine])).toBe('nb.agents/part-a.ipynb');
  });

  it('is unknown for a sibling, another parent, or a child without a line', () => {
    expect(knownNotebookPath(origin('sibling', 'b', 's'), parent, [childLine])).toBeNull();
    expect(knownNotebookPath(origin('parent', 'x', 'other'), parent, [])).toBeNull();
    expect(knownNotebookPath(origin('child', 'part-z'), parent, [childLine])).toBeNull();
  });
});

describe('the sender header', () => {
  it('calls the parent’s first message a task and says who sent the others', () => {
    const from = (relationship: IMessageOrigin['relationship']): IMessageOrigin => ({
      sessionId: null,
      name: 'x',
      relationship,
      composed: null
    });
    expect(senderLabel(from('parent'), true)).toBe('task from parent');
    expect(senderLabel(from('parent'), false)).toBe('from parent');
    expect(senderLabel(from('child'), true)).toBe('from child');
    expect(senderLabel(from(null), false)).toBe('from');
  });

  it('shows the time of a message from today and the date of an older one', () => {
    const now = new Date(2026, 10, 30, 15, 0);
    const today = formatComposed(new Date(2026, 10, 30, 9, 5).toISOString(), now);
    const older = formatComposed(new Date(2026, 10, 2, 9, 5).toISOString(), now);
    expect(today?.short).toMatch(/09.05|9.05/);
    expect(today?.short).not.toMatch(/Nov/);
    expect(older?.short).toMatch(/Nov|11/);
    expect(formatComposed('yesterday-ish', now)).toBeNull();
    expect(formatComposed(null, now)).toBeNull();
  });
});
