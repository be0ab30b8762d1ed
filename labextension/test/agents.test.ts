import { describe, expect, it } from 'vitest';

import {
  activityText,
  buildForest,
  deleteBlockedReason,
  diffAgents,
  messageBlockedReason,
  parseOverview,
  stateCounts,
  stateText,
  subtreeActive,
  subtreeIds,
  usageText,
  visibleAgents
} from '../src/agents';

import { agentRow, family } from './agentsFixtures';

const ids = (lines: { row: { session_id: string } }[]) => lines.map(line => line.row.session_id);

describe('the agents tree', () => {
  it('keeps the server order and gives each row its depth in the tree', () => {
    const forest = buildForest(family());
    expect(forest.children.get(null)).toEqual(['root', 'r2']);
    expect(forest.children.get('root')).toEqual(['a', 'b']);
    expect([...forest.depth.entries()]).toEqual(
      expect.arrayContaining([
        ['root', 0],
        ['a', 1],
        ['a1', 2],
        ['b', 1],
        ['r2', 0]
      ])
    );
  });

  it('shows a row whose parent is not listed as a root instead of dropping it', () => {
    const lines = visibleAgents([agentRow('orphan', 'gone')], new Set(), 'all');
    expect(ids(lines)).toEqual(['orphan']);
    expect(lines[0].depth).toBe(0);
  });

  it('survives a parent cycle in bad data, each row once', () => {
    const rows = [agentRow('x', 'y'), agentRow('y', 'x'), agentRow('r', null)];
    expect(ids(visibleAgents(rows, new Set(), 'all'))).toEqual(['r']);
    expect(subtreeIds(rows, 'x').sort()).toEqual(['x', 'y']);
  });

  it('lists every agent depth first with the ones that have sub-agents marked', () => {
    const lines = visibleAgents(family(), new Set(), 'all');
    expect(ids(lines)).toEqual(['root', 'a', 'a1', 'b', 'r2']);
    expect(lines.map(line => line.hasChildren)).toEqual([true, true, false, false, false]);
    expect(lines.every(line => line.matches)).toBe(true);
  });

  it('hides everything under a collapsed row and keeps the row itself', () => {
    const lines = visibleAgents(family(), new Set(['a']), 'all');
    expect(ids(lines)).toEqual(['root', 'a', 'b', 'r2']);
    expect(lines[1].collapsed).toBe(true);
    expect(ids(visibleAgents(family(), new Set(['root']), 'all'))).toEqual(['root', 'r2']);
  });

  it('does not call a row without sub-agents collapsed', () => {
    const lines = visibleAgents(family(), new Set(['b']), 'all');
    expect(lines.find(line => line.row.session_id === 'b')!.collapsed).toBe(false);
  });

  it('lists the subtree of a row', () => {
    expect(subtreeIds(family(), 'root').sort()).toEqual(['a', 'a1', 'b', 'root']);
    expect(subtreeIds(family(), 'b')).toEqual(['b']);
    expect(subtreeIds(family(), 'nope')).toEqual([]);
  });
});

describe('the state filter', () => {
  it('keeps the matches and the ancestors that place them, marked as context', () => {
    const lines = visibleAgents(family(), new Set(), 'idle');
    expect(ids(lines)).toEqual(['root', 'a', 'a1', 'b', 'r2']);
    expect(lines.map(line => line.matches)).toEqual([false, false, true, true, true]);
  });

  it('shows only running agents and their ancestors', () => {
    const lines = visibleAgents(family(), new Set(), 'running');
    expect(ids(lines)).toEqual(['root', 'a']);
    expect(lines.map(line => line.matches)).toEqual([false, true]);
  });

  it('shows nothing when no agent is in the state', () => {
    expect(visibleAgents([agentRow('r', null)], new Set(), 'waiting')).toEqual([]);
  });

  it('counts the agents in each state', () => {
    expect(stateCounts(family())).toEqual({ all: 5, running: 1, idle: 3, waiting: 1 });
  });
});

describe('diffing two snapshots', () => {
  it('names the rows added, removed and changed', () => {
    const before = new Map(family().map(row => [row.session_id, row]));
    const next = family()
      .filter(row => row.session_id !== 'b')
      .map(row => (row.session_id === 'a' ? { ...row, state: 'idle' as const } : row));
    next.push(agentRow('c', 'root'));
    expect(diffAgents(before, next)).toEqual({ added: ['c'], removed: ['b'], changed: ['a'] });
  });

  it('finds nothing in an equal snapshot', () => {
    const before = new Map(family().map(row => [row.session_id, row]));
    expect(diffAgents(before, family())).toEqual({ added: [], removed: [], changed: [] });
  });
});

describe('reading a server message', () => {
  it('takes an overview from text or an object', () => {
    const overview = { agents: family(), generated_at: '2026-12-02T07:00:00Z' };
    expect(parseOverview(JSON.stringify(overview))).toEqual(overview);
    expect(parseOverview(overview)).toEqual(overview);
  });

  it('refuses what is not an overview, and drops rows without an id', () => {
    expect(parseOverview('not json')).toBeNull();
    expect(parseOverview('{"rows": []}')).toBeNull();
    expect(parseOverview(null)).toBeNull();
    const parsed = parseOverview({ agents: [agentRow('r', null), { name: 'x' }] });
    expect(parsed?.agents.map(row => row.session_id)).toEqual(['r']);
    expect(parsed?.generated_at).toBe('');
  });
});

describe('how a row reads', () => {
  it('says what a waiting agent waits for', () => {
    expect(stateText(agentRow('r', null, { state: 'waiting', waiting_for: 'child' }))).toBe(
      'waiting for a sub-agent'
    );
    expect(stateText(agentRow('r', null, { state: 'waiting', waiting_for: 'mail' }))).toBe(
      'waiting for mail'
    );
    expect(stateText(agentRow('r', null, { state: 'running' }))).toBe('running');
  });

  it('gives own tokens and cost, and the totals only when sub-agents add to them', () => {
    expect(usageText(agentRow('r', null, { cost_own: 0.0123, cost_total: 0.0123 }))).toBe(
      '100 in · 20 out · $0.0123'
    );
    const parent = agentRow('r', null, {
      tokens_total: { input: 2500, output: 40 },
      cost_own: 0.01,
      cost_total: 0.5
    });
    expect(usageText(parent)).toBe(
      '100 in · 20 out · $0.0100 (with sub-agents 2.5k in · 40 out · $0.5000)'
    );
    expect(usageText(agentRow('r', null))).toBe('100 in · 20 out · cost unknown');
  });

  it('gives the last activity relative, with the absolute time for the tooltip', () => {
    const now = Date.parse('2026-12-02T07:05:00Z');
    const text = activityText('2026-12-02T07:00:00Z', now);
    expect(text.short).toBe('5 min ago');
    expect(text.full).toBe(new Date('2026-12-02T07:00:00Z').toLocaleString());
    expect(activityText('', now).short).toBe('no activity yet');
  });

  it('says why Message and Delete are off', () => {
    expect(messageBlockedReason(agentRow('a', 'root'))).toBeNull();
    expect(messageBlockedReason(agentRow('g', 'a', { depth: 2, can_message: false }))).toMatch(
      /parent/
    );
    expect(deleteBlockedReason(agentRow('a', 'root'))).toBeNull();
    expect(deleteBlockedReason(agentRow('r', null))).toMatch(/session list/);
    expect(
      deleteBlockedReason(agentRow('a', 'root', { state: 'running', can_delete: false }))
    ).toMatch(/Stop it first/);
  });

  it('knows whether anything in a subtree still works', () => {
    expect(subtreeActive(family(), 'root')).toBe(true);
    expect(subtreeActive(family(), 'b')).toBe(false);
  });
});
