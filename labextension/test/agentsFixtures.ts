// Agents View rows as the server sends them (docs/agents-view.md).
import type { IAgentRow } from '../src/wire';

/** A row; `extra` fields replace the defaults. A root when `parent` is null. */
export function agentRow(
  id: string,
  parent: string | null,
  extra: Partial<IAgentRow> = {}
): IAgentRow {
  return {
    session_id: id,
    name: id,
    parent_id: parent,
    root_id: parent === null ? id : 'root',
    depth: parent === null ? 0 : 1,
    notebook: `${id}.ipynb`,
    state: 'idle',
    waiting_for: null,
    outcome: null,
    residency: 'resident',
    model: 'scripted · demo',
    tokens_own: { input: 100, output: 20 },
    tokens_total: { input: 100, output: 20 },
    cost_own: null,
    cost_total: null,
    last_activity: '2026-12-02T07:00:00Z',
    can_message: true,
    can_delete: parent !== null,
    problem: null,
    ...extra
  };
}

/** root → a (→ a1), b; and a second root r2. Depth-first as the server orders them. */
export function family(): IAgentRow[] {
  return [
    agentRow('root', null, { state: 'waiting', waiting_for: 'child' }),
    agentRow('a', 'root', { state: 'running' }),
    agentRow('a1', 'a', { depth: 2, can_message: false, state: 'idle', outcome: 'replied' }),
    agentRow('b', 'root', { outcome: 'completed', residency: 'evicted' }),
    agentRow('r2', null)
  ];
}
