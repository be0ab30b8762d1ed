/**
 * The step-through of a saved session (docs/teaching.md, "Step-through"):
 * the state of the view, without the DOM. The server folds the session's
 * log into steps (`GET .../sessions/<id>/steps`); this model keeps which
 * step is shown, and a lane for each sub-agent the current step spawned,
 * each lane with the sub-agent's own steps (fetched by its id) and its own
 * position. The view is stepThroughView.ts.
 */
import { Signal, type ISignal } from '@lumino/signaling';

import { relativeTime, rowTitle } from './sessionList';
import type { ISessionListItem, ISessionStep, ISessionSteps, IStepChild } from './wire';

/** What the model needs of the API client (AgentApiClient has it). */
export interface IStepsApi {
  getSteps(sessionId: string): Promise<ISessionSteps>;
}

/** One session's steps and the one shown. */
export class StepCursor {
  constructor(readonly session: ISessionSteps) {}

  get steps(): readonly ISessionStep[] {
    return this.session.steps;
  }

  get index(): number {
    return this._index;
  }

  get current(): ISessionStep | null {
    return this.session.steps[this._index] ?? null;
  }

  get atStart(): boolean {
    return this._index <= 0;
  }

  get atEnd(): boolean {
    return this._index >= this.session.steps.length - 1;
  }

  /** Moves by `delta` steps within the session; false when it could not move. */
  move(delta: number): boolean {
    const next = Math.min(Math.max(this._index + delta, 0), this.session.steps.length - 1);
    if (next === this._index || next < 0) {
      return false;
    }
    this._index = next;
    return true;
  }

  /** `Step 2 of 5` (`No steps` for a session that ran no model call). */
  get counter(): string {
    const count = this.session.steps.length;
    return count === 0 ? 'No steps' : `Step ${this._index + 1} of ${count}`;
  }

  private _index = 0;
}

/** A sub-agent's lane: loading, its steps, or why they could not be read. */
export interface ILane {
  child: IStepChild;
  cursor: StepCursor | null;
  error: string | null;
}

export class StepThroughModel {
  constructor(
    private readonly _api: IStepsApi,
    readonly sessionId: string
  ) {}

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The session's steps once loaded (null while loading or after an error). */
  get root(): StepCursor | null {
    return this._root;
  }

  get error(): string | null {
    return this._error;
  }

  /** The lanes of the sub-agents the current step spawned, in spawn order. */
  get lanes(): readonly ILane[] {
    const step = this._root?.current;
    return step ? this.lanesOf(step) : [];
  }

  /**
   * The lanes of the sub-agents `step` spawned (a lane's step too: a tree of
   * any depth), fetching the steps of those not fetched yet.
   */
  lanesOf(step: ISessionStep): ILane[] {
    const lanes = step.children.map(child => this._lane(child));
    for (const lane of lanes) {
      this._fetch(lane);
    }
    return lanes;
  }

  async load(): Promise<void> {
    try {
      this._root = new StepCursor(await this._api.getSteps(this.sessionId));
      this._error = null;
    } catch (error) {
      this._error = `The steps of session ${this.sessionId} could not be read: ${messageOf(error)}`;
    }
    this._changed.emit();
    void this.lanes; // fetch the first step's sub-agents' steps
  }

  /** Next (+1) or previous (-1) step of the session. */
  move(delta: number): void {
    if (this._root?.move(delta)) {
      this._changed.emit();
      void this.lanes;
    }
  }

  /** Next or previous step in one sub-agent's lane. */
  moveLane(childId: string, delta: number): void {
    if (this._lanes.get(childId)?.cursor?.move(delta)) {
      this._changed.emit();
    }
  }

  private _lane(child: IStepChild): ILane {
    let lane = this._lanes.get(child.session_id);
    if (!lane) {
      lane = { child, cursor: null, error: null };
      this._lanes.set(child.session_id, lane);
    }
    return lane;
  }

  /** Fetches a lane's steps once; the view renders again when they come. */
  private _fetch(lane: ILane): void {
    const id = lane.child.session_id;
    if (lane.cursor || lane.error || this._loading.has(id)) {
      return;
    }
    this._loading.add(id);
    this._api
      .getSteps(id)
      .then(steps => (lane.cursor = new StepCursor(steps)))
      .catch(error => (lane.error = `Its steps could not be read: ${messageOf(error)}`))
      .finally(() => {
        this._loading.delete(id);
        this._changed.emit();
      });
  }

  private _root: StepCursor | null = null;
  private _error: string | null = null;
  private readonly _lanes = new Map<string, ILane>();
  private readonly _loading = new Set<string>();
  private readonly _changed = new Signal<this, void>(this);
}

/** An observation's lines, each marked when it is where the output was cut. */
export function observationLines(step: ISessionStep): { text: string; cut: boolean }[] {
  if (step.observation === null) {
    return [];
  }
  const cuts = new Set(step.cut_lines);
  // Python's splitlines() numbered the lines: a trailing newline makes no extra line.
  const lines = step.observation.replace(/\r\n?/g, '\n').replace(/\n$/, '').split('\n');
  return lines.map((text, index) => ({ text, cut: cuts.has(index) }));
}

/** `Turn 2 · cell 1 · ok · 0.4 s` for a step's heading. */
export function stepHeading(step: ISessionStep): string {
  const parts: string[] = [];
  if (step.turn !== null) {
    parts.push(`Turn ${step.turn}`);
  }
  if (step.code === null) {
    parts.push('answer');
  } else {
    parts.push(step.execution_count !== null ? `cell [${step.execution_count}]` : 'cell');
    if (step.status) {
      parts.push(step.status);
    }
  }
  if (step.cell_seconds !== null) {
    parts.push(`${step.cell_seconds.toFixed(1)} s`);
  }
  return parts.join(' · ');
}

/** `1,200 in · 80 out` for a step's model call (empty: not recorded). */
export function tokenLine(step: ISessionStep): string {
  const usage = step.usage;
  if (!usage) {
    return '';
  }
  const figures: string[] = [];
  if (typeof usage.input_tokens === 'number') {
    figures.push(`${usage.input_tokens.toLocaleString('en-US')} in`);
  }
  if (typeof usage.output_tokens === 'number') {
    figures.push(`${usage.output_tokens.toLocaleString('en-US')} out`);
  }
  const took = step.model_seconds !== null ? `model ${step.model_seconds.toFixed(1)} s` : '';
  return [...figures, took].filter(Boolean).join(' · ');
}

/** The step-through's keys: ArrowRight next, ArrowLeft previous (Up and Down scroll). */
export function stepDelta(key: string): number {
  return key === 'ArrowRight' ? 1 : key === 'ArrowLeft' ? -1 : 0;
}

/** The fenced Markdown the view renders a cell's code from (highlighted as the chat's blocks). */
export function codeMarkdown(code: string): string {
  const longest = Math.max(2, ...(code.match(/`+/g) ?? []).map(run => run.length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}python\n${code}\n${fence}`;
}

/**
 * The palette command's choices: one label per session of the notebook
 * that can be read (`title · when · turns · id`, unique by the id), newest
 * first as the server lists them, mapped to the session id.
 */
export function sessionChoices(
  items: readonly ISessionListItem[],
  now: number = Date.now()
): Map<string, string> {
  const choices = new Map<string, string>();
  for (const item of items) {
    if (item.status === 'broken') {
      continue;
    }
    const when = relativeTime(item.updated ?? item.created, now);
    const turns = `${item.turns} turn${item.turns === 1 ? '' : 's'}`;
    const label = [rowTitle(item), when, turns, item.session_id].filter(Boolean).join(' · ');
    choices.set(label, item.session_id);
  }
  return choices;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
