/**
 * Wire types of the Prime Agent server API (see docs/api.md).
 */

export type SessionStatus = 'idle' | 'running';

export type CellStatus =
  | 'running'
  | 'ok'
  | 'error'
  | 'timeout'
  | 'died'
  | 'interrupted';

export interface IServerInfo {
  version: string;
  provider: string;
  model: string;
  output_cap?: number;
  cell_timeout?: number;
}

export interface ISessionInfo {
  session_id: string;
  notebook_path: string;
  kernel_id: string;
  provider: string;
  model: string;
  status: SessionStatus;
  turns: number;
  created: string;
  updated: string;
  /**
   * Seq of the newest event the server had emitted for this session when it
   * answered. Sent by the server but not yet in docs/api.md.
   */
  seq?: number;
}

export type ChatItem =
  | { type: 'user'; turn: number; text: string }
  | { type: 'assistant'; turn: number; text: string }
  | {
      type: 'cell';
      turn: number;
      cell_id: string;
      status: CellStatus;
      execution_count: number | null;
      preview: string;
    }
  | { type: 'error'; turn: number; message: string };

export interface ISessionWithTranscript extends ISessionInfo {
  transcript: ChatItem[];
}

interface IEventBase {
  seq: number;
  session_id: string;
  turn?: number;
}

export type AgentEvent = IEventBase &
  (
    | { type: 'status'; status: SessionStatus }
    | { type: 'turn_started'; text: string }
    | { type: 'text_delta'; text: string }
    | { type: 'assistant_message'; text: string; tool_calls?: number }
    | { type: 'cell_started'; cell_id: string; code: string }
    | {
        type: 'cell_finished';
        cell_id: string;
        status: CellStatus;
        execution_count: number | null;
        preview: string;
      }
    | { type: 'retry'; attempt: number; delay: number; message: string }
    | { type: 'error'; message: string; kind?: string }
    | { type: 'turn_ended'; stop_reason: string; final_text?: string }
  );

export type AgentEventType = AgentEvent['type'];
