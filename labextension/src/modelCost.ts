/**
 * Model and cost of a session (docs/pairing.md, section 2): the models it
 * may switch to, the one its next model call uses, each answer's footer
 * (model, tokens in and out, cost), the context use of the last call in
 * percent of the model's window, and the session's cost with its
 * sub-agents. The state logic only; the views are in modelCostView.ts.
 */
import { Signal, type ISignal } from '@lumino/signaling';

import type { IAgentUsage } from './commands';
import type { AgentEvent, ChatItem, IModelInfo, IModelList, SessionStatus } from './wire';

/** What the footer of one answer says. */
export interface IAnswerFooter {
  provider: string;
  model: string;
  input: number;
  output: number;
  /** US dollars; null when the provider declares no price for the model. */
  cost: number | null;
}

/** What the server sent about one model call: an `assistant` item or an `assistant_message` event. */
export interface IAnswerSource {
  usage?: Record<string, number>;
  provider?: string;
  model?: string;
  cost?: number | null;
}

function count(usage: Record<string, unknown> | undefined, key: string): number {
  const value = usage?.[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

/** Tokens the model read: input, cache reads and cache writes together. */
export function inputTokens(usage: Record<string, unknown> | undefined): number {
  return (
    count(usage, 'input_tokens') + count(usage, 'cache_read_tokens') + count(usage, 'cache_write_tokens')
  );
}

/** The footer of an answer, or null when the server sent no usage for it (an older server). */
export function answerFooter(source: IAnswerSource): IAnswerFooter | null {
  const usage = source.usage;
  if (!usage || typeof usage !== 'object') {
    return null;
  }
  const cost = typeof source.cost === 'number' && Number.isFinite(source.cost) ? source.cost : null;
  return {
    provider: typeof source.provider === 'string' ? source.provider : '',
    model: typeof source.model === 'string' ? source.model : '',
    input: inputTokens(usage),
    output: count(usage, 'output_tokens'),
    cost
  };
}

/** 950 → "950", 12 345 → "12.3k", 1 500 000 → "1.5M". */
export function formatTokens(tokens: number): string {
  if (tokens < 1000) {
    return String(Math.round(tokens));
  }
  if (tokens < 1_000_000) {
    return `${trim(tokens / 1000)}k`;
  }
  return `${trim(tokens / 1_000_000)}M`;
}

function trim(value: number): string {
  return (value >= 100 ? value.toFixed(0) : value.toFixed(1)).replace(/\.0$/, '');
}

/** US dollars: cents from a dollar up, four decimals below (a call often costs less than a cent). */
export function formatCost(cost: number | null): string {
  if (cost === null) {
    return 'cost unknown';
  }
  if (cost === 0) {
    return '$0';
  }
  return cost >= 1 ? `$${cost.toFixed(2)}` : `$${cost.toFixed(4)}`;
}

/** "gpt-4.1 · 1.2k in · 310 out · $0.0042". */
export function footerText(footer: IAnswerFooter): string {
  const parts = [
    footer.model || footer.provider || 'model',
    `${formatTokens(footer.input)} in`,
    `${formatTokens(footer.output)} out`,
    formatCost(footer.cost)
  ];
  return parts.join(' · ');
}

/** The last call's input in percent of the window (one decimal below 10 %), or null. */
export function contextPercent(tokens: number, window: number): number | null {
  if (!(window > 0) || tokens <= 0) {
    return null;
  }
  const percent = (100 * tokens) / window;
  return percent < 10 ? Math.round(percent * 10) / 10 : Math.round(percent);
}

/** "Context 12 % of 200k" (the title gives the tokens). */
export function contextText(percent: number | null, window: number): string {
  if (percent === null) {
    return window > 0 ? `Context – of ${formatTokens(window)}` : 'Context –';
  }
  return `Context ${percent} % of ${formatTokens(window)}`;
}

/** One option of the model picker. */
export interface IPickerOption {
  value: string;
  label: string;
}

/**
 * The picker's options: every offered model, and the session's model too when
 * it is no longer offered (it still runs on it until the user picks another).
 */
export function pickerOptions(models: readonly IModelInfo[], current: string | null): IPickerOption[] {
  const options = models.map(model => ({ value: model.name, label: model.name }));
  if (current && !models.some(model => model.name === current)) {
    options.unshift({ value: current, label: `${current} (not offered)` });
  }
  return options;
}

/** The header's and the status bar's cost: "$0.0123 with 2 sub-agents". */
export function sessionCostText(usage: IAgentUsage | null): string {
  if (!usage) {
    return '';
  }
  const agents = countAgents(usage) - 1;
  const cost = formatCost(usage.cost_total);
  return agents > 0 ? `${cost} with ${agents} sub-agent${agents === 1 ? '' : 's'}` : cost;
}

function countAgents(usage: IAgentUsage): number {
  return 1 + usage.children.reduce((total, child) => total + countAgents(child), 0);
}

/** What ModelCostModel needs of the API client. */
export interface IModelCostApi {
  getModels(): Promise<IModelList>;
  setModel(sessionId: string, model: string): Promise<IModelList>;
  getUsage(sessionId: string): Promise<IAgentUsage>;
}

/**
 * A session's model and cost, kept current: GET models and usage on attach,
 * then `assistant_message`, `model_change`, `child_status` and `turn_ended`
 * events. `changed` fires on every change.
 */
export class ModelCostModel {
  constructor(private readonly _api: IModelCostApi) {}

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get models(): readonly IModelInfo[] {
    return this._models;
  }

  /** `provider/model` of the session's next model call. */
  get current(): string | null {
    return this._current;
  }

  /** The last model call's input tokens (cache included), 0 before the first call. */
  get lastInput(): number {
    return this._lastInput;
  }

  /** The `/usage` report of the session (with its sub-agents), once read. */
  get usage(): IAgentUsage | null {
    return this._usage;
  }

  /** The session's state as the status bar shows it. */
  get status(): SessionStatus | null {
    return this._status;
  }

  set status(status: SessionStatus | null) {
    if (status !== this._status) {
      this._status = status;
      this._changed.emit();
    }
  }

  /** An error of the last switch, shown beside the picker until the next one. */
  get error(): string | null {
    return this._error;
  }

  /** The window of the current model (its offered entry), 0 when unknown. */
  get window(): number {
    return this._models.find(model => model.name === this._current)?.context_window ?? 0;
  }

  get contextPercent(): number | null {
    return contextPercent(this._lastInput, this.window);
  }

  /**
   * A session was opened: its model and status from its info, its last call's
   * input from the transcript, the offered models and its usage from the server.
   */
  async attach(
    info: { session_id: string; provider?: string | null; model?: string | null; status?: SessionStatus },
    transcript: readonly ChatItem[]
  ): Promise<void> {
    this._sessionId = info.session_id;
    this._current = info.provider && info.model ? `${info.provider}/${info.model}` : null;
    this._status = info.status ?? null;
    this._error = null;
    this._usage = null;
    this._lastInput = 0;
    for (const item of transcript) {
      if (item.type === 'assistant' && item.usage) {
        this._lastInput = inputTokens(item.usage);
      }
    }
    this._changed.emit();
    const sessionId = info.session_id;
    try {
      const list = await this._api.getModels();
      if (this._sessionId === sessionId) {
        this._models = Array.isArray(list?.models) ? list.models : [];
        this._changed.emit();
      }
    } catch (error) {
      console.warn('prime-agent: GET models failed', error);
    }
    await this.refreshUsage();
  }

  /** Fold in one event of the session. */
  applyEvent(event: AgentEvent): void {
    switch (event.type) {
      case 'assistant_message':
        if (event.usage) {
          this._lastInput = inputTokens(event.usage);
        }
        this._changed.emit();
        this._scheduleUsage();
        break;
      case 'model_change':
        this._current = `${event.provider}/${event.model}`;
        this._error = null;
        this._changed.emit();
        break;
      case 'child_status':
      case 'turn_ended':
        this._scheduleUsage();
        break;
      case 'status':
        this.status = event.status;
        break;
    }
  }

  /** Switch the session's model (from its next model call); a refusal shows as `error`. */
  async choose(name: string): Promise<void> {
    const sessionId = this._sessionId;
    if (!sessionId || name === this._current) {
      return;
    }
    try {
      const list = await this._api.setModel(sessionId, name);
      if (this._sessionId === sessionId && typeof list.current === 'string') {
        this._current = list.current;
        this._error = null;
      }
    } catch (error) {
      this._error = `Could not switch the model: ${error instanceof Error ? error.message : String(error)}`;
    }
    this._changed.emit();
  }

  /** Read the session's usage again (one request at a time, one more if asked meanwhile). */
  async refreshUsage(): Promise<void> {
    const sessionId = this._sessionId;
    if (!sessionId) {
      return;
    }
    if (this._usageInFlight) {
      this._usageAgain = true;
      return;
    }
    this._usageInFlight = true;
    try {
      const usage = await this._api.getUsage(sessionId);
      if (this._sessionId === sessionId) {
        this._usage = usage;
        this._changed.emit();
      }
    } catch (error) {
      console.warn('prime-agent: GET usage failed', error);
    } finally {
      this._usageInFlight = false;
    }
    if (this._usageAgain) {
      this._usageAgain = false;
      await this.refreshUsage();
    }
  }

  private _scheduleUsage(): void {
    void this.refreshUsage();
  }

  private _sessionId: string | null = null;
  private _models: IModelInfo[] = [];
  private _current: string | null = null;
  private _status: SessionStatus | null = null;
  private _lastInput = 0;
  private _usage: IAgentUsage | null = null;
  private _error: string | null = null;
  private _usageInFlight = false;
  private _usageAgain = false;
  private readonly _changed = new Signal<this, void>(this);
}
