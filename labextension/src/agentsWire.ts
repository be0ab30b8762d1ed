/**
 * The Agents View's wire shapes (docs/agents-view.md), declared here until
 * the generated wire.ts carries them (core/wire.py, branch agents-api); at
 * that merge this file re-exports the generated types instead.
 */

export type AgentRunState = 'running' | 'idle' | 'waiting';
export type AgentWaitingFor = 'mail' | 'child';
export type AgentOutcome = 'replied' | 'completed' | 'error' | 'stopped';
export type AgentResidency = 'resident' | 'evicted';

export interface IAgentTokens {
  input: number;
  output: number;
}

/** One agent of the overview: a root (depth 0) or a sub-agent. */
export interface IAgentRow {
  session_id: string;
  name: string;
  parent_id: string | null;
  root_id: string;
  depth: number;
  notebook: string | null;
  state: AgentRunState;
  waiting_for: AgentWaitingFor | null;
  outcome: AgentOutcome | null;
  residency: AgentResidency;
  model: string;
  tokens_own: IAgentTokens;
  tokens_total: IAgentTokens;
  cost_own: number | null;
  cost_total: number | null;
  last_activity: string;
  can_message: boolean;
  can_delete: boolean;
}

/** Every agent, depth first (roots newest first, children in creation order). */
export interface IAgentsOverview {
  agents: IAgentRow[];
  generated_at: string;
}

/** `POST agents/{id}/message`'s answer. */
export interface IAgentMessageDelivered {
  delivered: 'chat' | 'mail';
}

/** `POST agents/{id}/stop`'s answer. */
export interface IAgentsStopped {
  stopped: string[];
}
