/**
 * A session's permission mode and the agent cells waiting for approval
 * (docs/pairing.md, section 4): `GET .../permission` on each load, then the
 * `permission`, `cell_awaiting_approval`, `cell_approved` and `cell_skipped`
 * events. The views are permissionView.ts.
 */
import { Signal, type ISignal } from '@lumino/signaling';

import type { AgentEvent, IPermissionState, PermissionMode } from './wire';

/** Weakest first: the order `max_permission` caps. */
export const PERMISSION_MODES: readonly PermissionMode[] = ['plan', 'ask', 'auto'];

/** What each mode does, for the selector's titles. */
export const MODE_TITLES: Record<PermissionMode, string> = {
  plan: 'Plan: no cell runs; the agent answers in text',
  ask: 'Ask: each agent cell waits for your Run, Edit or Skip',
  auto: 'Auto: agent cells run as the agent writes them'
};

/** The modes a session may choose under `cap`. */
export function allowedModes(cap: PermissionMode): PermissionMode[] {
  return PERMISSION_MODES.slice(0, PERMISSION_MODES.indexOf(cap) + 1);
}

/** One agent cell waiting for the user. */
export interface IWaitingCell {
  toolCallId: string;
  cellId: string;
  code: string;
}

/** How a waiting cell was answered: run as written, run edited, not run (Skip), or the Stop. */
export type CellAnswer = 'ran' | 'edited' | 'skipped' | 'stopped';

/** What PermissionModel needs of the API client. */
export interface IPermissionApi {
  getPermission(sessionId: string): Promise<IPermissionState>;
  setPermission(sessionId: string, mode: PermissionMode): Promise<IPermissionState>;
  decideCell(
    sessionId: string,
    toolCallId: string,
    action: 'approve' | 'skip',
    code?: string
  ): Promise<IPermissionState>;
}

function isMode(value: unknown): value is PermissionMode {
  return typeof value === 'string' && (PERMISSION_MODES as readonly string[]).includes(value);
}

export class PermissionModel {
  constructor(private readonly _api: IPermissionApi) {}

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get mode(): PermissionMode | null {
    return this._mode;
  }

  get cap(): PermissionMode {
    return this._cap;
  }

  /** The cells waiting for approval, oldest first. */
  get waiting(): readonly IWaitingCell[] {
    return this._waiting;
  }

  /** How a cell that waited was answered (from its event), if this tab saw the event. */
  answerOf(toolCallId: string): CellAnswer | null {
    return this._answers.get(toolCallId) ?? null;
  }

  /** The server's last refusal (a mode above the cap, a cell no longer waiting). */
  get error(): string | null {
    return this._error;
  }

  async attach(sessionId: string | null): Promise<void> {
    this._sessionId = sessionId;
    this._mode = null;
    this._waiting = [];
    this._error = null;
    this._changed.emit();
    if (!sessionId) {
      return;
    }
    try {
      const state = await this._api.getPermission(sessionId);
      if (this._sessionId === sessionId) {
        this._load(state);
      }
    } catch (error) {
      console.warn('prime-agent: GET permission failed', error);
    }
  }

  applyEvent(event: AgentEvent): void {
    switch (event.type) {
      case 'permission':
        this._mode = event.mode;
        this._cap = event.cap;
        this._error = null;
        break;
      case 'cell_awaiting_approval':
        if (!this._waiting.some(cell => cell.toolCallId === event.tool_call_id)) {
          this._waiting = [
            ...this._waiting,
            { toolCallId: event.tool_call_id, cellId: event.cell_id, code: event.code }
          ];
        }
        break;
      case 'cell_approved':
      case 'cell_skipped':
        this._answers.set(
          event.tool_call_id,
          event.type === 'cell_skipped'
            ? event.decision === 'skip'
              ? 'skipped'
              : 'stopped'
            : event.edited
              ? 'edited'
              : 'ran'
        );
        this._waiting = this._waiting.filter(cell => cell.toolCallId !== event.tool_call_id);
        break;
      default:
        return;
    }
    this._changed.emit();
  }

  async choose(mode: string): Promise<void> {
    if (!this._sessionId || !isMode(mode) || mode === this._mode) {
      return;
    }
    await this._call(id => this._api.setPermission(id, mode));
  }

  /** Run the waiting cell; with `code`, that code runs in a new cell instead. */
  approve(toolCallId: string, code?: string): Promise<void> {
    return this._call(id => this._api.decideCell(id, toolCallId, 'approve', code));
  }

  skip(toolCallId: string): Promise<void> {
    return this._call(id => this._api.decideCell(id, toolCallId, 'skip'));
  }

  private async _call(request: (sessionId: string) => Promise<IPermissionState>): Promise<void> {
    const sessionId = this._sessionId;
    if (!sessionId) {
      return;
    }
    try {
      const state = await request(sessionId);
      if (this._sessionId === sessionId) {
        this._error = null;
        this._load(state);
      }
    } catch (error) {
      this._error = error instanceof Error ? error.message : String(error);
      this._changed.emit();
    }
  }

  private _load(state: IPermissionState): void {
    this._mode = isMode(state?.mode) ? state.mode : null;
    this._cap = isMode(state?.cap) ? state.cap : 'auto';
    const waiting = new Set(Array.isArray(state?.waiting) ? state.waiting : []);
    // The server's list is the truth; the code of a cell comes from its event.
    this._waiting = this._waiting.filter(cell => waiting.has(cell.toolCallId));
    this._changed.emit();
  }

  private _sessionId: string | null = null;
  private _mode: PermissionMode | null = null;
  private _cap: PermissionMode = 'auto';
  private _waiting: IWaitingCell[] = [];
  private readonly _answers = new Map<string, CellAnswer>();
  private _error: string | null = null;
  private readonly _changed = new Signal<this, void>(this);
}
