/**
 * The Agents View's pure parts (docs/agents-view.md "The tab"): the tree of
 * every agent from the server's rows, what a state filter and collapsed
 * subtrees leave visible, what changed between two snapshots, and how a row
 * reads. No DOM here: agentsView.ts renders, agentsModel.ts holds the state.
 */
import { formatCost, formatTokens } from './modelCost';
import { relativeTime } from './sessionList';
import type { AgentState, IAgentRow, IAgentTokens, IAgentsOverview } from './wire';

/** The filter's choices: every agent, or those in one state. */
export const STATE_FILTERS = ['all', 'running', 'idle', 'waiting'] as const;
export type StateFilter = (typeof STATE_FILTERS)[number];

/** The agents as a forest: children by parent (in the server's order), depth by tree position. */
export interface IAgentForest {
  byId: Map<string, IAgentRow>;
  /** Children ids by parent id; `null` holds the roots (and rows whose parent is not listed). */
  children: Map<string | null, string[]>;
  /** Depth in the forest (a row whose parent is missing counts as a root). */
  depth: Map<string, number>;
}

export function buildForest(rows: readonly IAgentRow[]): IAgentForest {
  const byId = new Map(rows.map(row => [row.session_id, row]));
  const children = new Map<string | null, string[]>();
  for (const row of rows) {
    const parent = row.parent_id !== null && byId.has(row.parent_id) ? row.parent_id : null;
    const siblings = children.get(parent) ?? [];
    siblings.push(row.session_id);
    children.set(parent, siblings);
  }
  const depth = new Map<string, number>();
  const stack = (children.get(null) ?? []).map(id => ({ id, level: 0 }));
  while (stack.length > 0) {
    const { id, level } = stack.pop()!;
    if (depth.has(id)) {
      continue; // a parent cycle in bad data: each row once
    }
    depth.set(id, level);
    for (const child of children.get(id) ?? []) {
      stack.push({ id: child, level: level + 1 });
    }
  }
  return { byId, children, depth };
}

/** One line of the view. */
export interface IVisibleAgent {
  row: IAgentRow;
  depth: number;
  /** Has sub-agents (listed), so it can collapse. */
  hasChildren: boolean;
  collapsed: boolean;
  /** Passes the filter itself; false for an ancestor shown only to place a match. */
  matches: boolean;
}

/** Whether a row passes the state filter. */
export function matchesFilter(row: IAgentRow, filter: StateFilter): boolean {
  return filter === 'all' || row.state === filter;
}

/**
 * The lines to show, depth first in the server's order: rows that pass the
 * filter, with their ancestors (so a match keeps its place in the tree),
 * and nothing under a collapsed row.
 */
export function visibleAgents(
  rows: readonly IAgentRow[],
  collapsed: ReadonlySet<string>,
  filter: StateFilter
): IVisibleAgent[] {
  const forest = buildForest(rows);
  const shown = new Set<string>();
  for (const row of rows) {
    if (!matchesFilter(row, filter)) {
      continue;
    }
    // The match and its ancestors; stop at one already shown (its ancestors are too).
    let id: string | null = row.session_id;
    const seen = new Set<string>();
    while (id !== null && forest.byId.has(id) && !shown.has(id) && !seen.has(id)) {
      seen.add(id);
      shown.add(id);
      id = forest.byId.get(id)!.parent_id;
    }
  }
  const lines: IVisibleAgent[] = [];
  const visited = new Set<string>();
  const stack = [...(forest.children.get(null) ?? [])].reverse();
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (visited.has(id) || !shown.has(id)) {
      continue;
    }
    visited.add(id);
    const row = forest.byId.get(id)!;
    const kids = forest.children.get(id) ?? [];
    const isCollapsed = collapsed.has(id) && kids.length > 0;
    lines.push({
      row,
      depth: forest.depth.get(id) ?? 0,
      hasChildren: kids.length > 0,
      collapsed: isCollapsed,
      matches: matchesFilter(row, filter)
    });
    if (!isCollapsed) {
      for (let index = kids.length - 1; index >= 0; index--) {
        stack.push(kids[index]);
      }
    }
  }
  return lines;
}

/** The ids of a row and everything under it. */
export function subtreeIds(rows: readonly IAgentRow[], rootId: string): string[] {
  const forest = buildForest(rows);
  const ids: string[] = [];
  const stack = [rootId];
  const seen = new Set<string>();
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (seen.has(id) || !forest.byId.has(id)) {
      continue;
    }
    seen.add(id);
    ids.push(id);
    stack.push(...(forest.children.get(id) ?? []));
  }
  return ids;
}

/** What changed from one snapshot to the next, by session id. */
export interface IAgentsDiff {
  added: string[];
  removed: string[];
  /** Rows present in both whose fields differ. */
  changed: string[];
}

export function diffAgents(
  previous: ReadonlyMap<string, IAgentRow>,
  next: readonly IAgentRow[]
): IAgentsDiff {
  const added: string[] = [];
  const changed: string[] = [];
  const present = new Set<string>();
  for (const row of next) {
    present.add(row.session_id);
    const before = previous.get(row.session_id);
    if (!before) {
      added.push(row.session_id);
    } else if (!sameRow(before, row)) {
      changed.push(row.session_id);
    }
  }
  const removed = [...previous.keys()].filter(id => !present.has(id));
  return { added, removed, changed };
}

function sameRow(a: IAgentRow, b: IAgentRow): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * An overview from a websocket message or a GET, or null when the text is
 * not one (a malformed message is dropped, not shown as an empty tree).
 */
export function parseOverview(data: unknown): IAgentsOverview | null {
  let value: unknown = data;
  if (typeof data === 'string') {
    try {
      value = JSON.parse(data);
    } catch {
      return null;
    }
  }
  if (!value || typeof value !== 'object') {
    return null;
  }
  const agents = (value as { agents?: unknown }).agents;
  if (!Array.isArray(agents)) {
    return null;
  }
  const rows = agents.filter(
    (row): row is IAgentRow =>
      !!row &&
      typeof row === 'object' &&
      typeof (row as IAgentRow).session_id === 'string' &&
      typeof (row as IAgentRow).state === 'string'
  );
  const generated = (value as { generated_at?: unknown }).generated_at;
  return { agents: rows, generated_at: typeof generated === 'string' ? generated : '' };
}

// ------------------------------------------------------------------------------ how a row reads

/** The state badge: "running", "idle", "waiting for mail", "waiting for a sub-agent". */
export function stateText(row: IAgentRow): string {
  if (row.state === 'waiting') {
    if (row.waiting_for === 'mail') {
      return 'waiting for mail';
    }
    if (row.waiting_for === 'child') {
      return 'waiting for a sub-agent';
    }
    return 'waiting';
  }
  return row.state;
}

/** The outcome badge ("no outcome yet" before its first task or turn ended). */
export function outcomeText(row: IAgentRow): string {
  return row.outcome ?? 'no outcome yet';
}

/** "1.2k in · 310 out". */
export function tokensText(tokens: IAgentTokens | null | undefined): string {
  const input = tokens?.input ?? 0;
  const output = tokens?.output ?? 0;
  return `${formatTokens(input)} in · ${formatTokens(output)} out`;
}

/** Own figures, and the total with the sub-agents when that differs. */
export function usageText(row: IAgentRow): string {
  const own = `${tokensText(row.tokens_own)} · ${formatCost(row.cost_own)}`;
  const sameTokens =
    row.tokens_own.input === row.tokens_total.input &&
    row.tokens_own.output === row.tokens_total.output;
  if (sameTokens && row.cost_own === row.cost_total) {
    return own;
  }
  return `${own} (with sub-agents ${tokensText(row.tokens_total)} · ${formatCost(row.cost_total)})`;
}

/** The last activity as "5 min ago", and the absolute time for its tooltip. */
export function activityText(iso: string, now: number = Date.now()): { short: string; full: string } {
  const stamp = Date.parse(iso);
  if (Number.isNaN(stamp)) {
    return { short: 'no activity yet', full: iso || 'no activity recorded' };
  }
  return { short: relativeTime(iso, now), full: new Date(stamp).toLocaleString() };
}

/** What a screen reader says for a row. */
export function rowLabel(row: IAgentRow, now: number = Date.now()): string {
  return [
    row.parent_id ? `sub-agent ${row.name}` : `agent ${row.name}`,
    stateText(row),
    `outcome ${outcomeText(row)}`,
    row.residency,
    activityText(row.last_activity, now).short,
    row.problem ?? ''
  ]
    .filter(Boolean)
    .join(', ');
}

/** Why the Message button is off (null: it is on). */
export function messageBlockedReason(row: IAgentRow): string | null {
  if (row.can_message) {
    return null;
  }
  if (row.problem) {
    return row.problem;
  }
  if (row.depth >= 2) {
    return 'You message as the root agent, which reaches only its own sub-agents: ask this agent’s parent to message it';
  }
  return 'The server does not let you message this agent';
}

/** Why Delete is off (null: it is on). */
export function deleteBlockedReason(row: IAgentRow): string | null {
  if (row.can_delete) {
    return null;
  }
  if (row.problem) {
    return row.problem;
  }
  if (!row.parent_id) {
    return 'A root agent is deleted from its notebook’s session list';
  }
  if (row.state !== 'idle') {
    return 'Stop it first: a running or waiting sub-agent cannot be deleted';
  }
  return 'The server does not let you delete this agent';
}

/** Whether anything in a row's subtree is running or waiting (Stop subtree has work). */
export function subtreeActive(rows: readonly IAgentRow[], rootId: string): boolean {
  const byId = new Map(rows.map(row => [row.session_id, row]));
  return subtreeIds(rows, rootId).some(id => byId.get(id)!.state !== 'idle');
}

/** The states counted, for the filter's labels. */
export function stateCounts(rows: readonly IAgentRow[]): Record<StateFilter, number> {
  const counts: Record<StateFilter, number> = { all: rows.length, running: 0, idle: 0, waiting: 0 };
  for (const row of rows) {
    if (row.state in counts) {
      counts[row.state as AgentState] += 1;
    }
  }
  return counts;
}
