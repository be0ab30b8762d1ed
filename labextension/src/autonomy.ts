/**
 * Autonomous mode of a session (docs/autonomy.md): its wire types, the
 * reading of the panel's form, the indicator's text and the model that
 * keeps the state current (GET/PUT `…/autonomy` and `autonomy` events).
 */
import { Signal, type ISignal } from '@lumino/signaling';

// ---------------------------------------------------------------- wire types

// The wire shapes are core/wire.py's (generated into wire.ts).
import type {
  IAutonomyBudgets,
  IAutonomyEvent,
  IAutonomyRun,
  IAutonomyState,
  IAutonomyUpdate
} from './wire';

export type AutonomyBudgets = IAutonomyBudgets;
export type AutonomyRun = IAutonomyRun;
export type AutonomyState = IAutonomyState;
export type AutonomyEvent = IAutonomyEvent;
export type AutonomyRequest = IAutonomyUpdate;

/** Notice kinds of a gate run: a chat line each. */
export const GATE_PASSED: string = 'gate_passed';
export const GATE_FAILED: string = 'gate_failed';
export const GATE_NOTICES: ReadonlySet<string> = new Set([GATE_PASSED, GATE_FAILED]);

/** The Python check prefix of a gate (`py:assert abs(auc - 0.91) < 0.01`). */
export const PY_GATE_PREFIX = 'py:';

/** The composer's placeholder while autonomous mode is on. */
export const AUTONOMOUS_INPUT_HINT =
  'Autonomous mode is on: the next message starts an autonomous run (Stop ends it).';

// ---------------------------------------------------------------- reading what the server sent

type LooseRecord = Record<string, unknown>;

function isRecord(value: unknown): value is LooseRecord {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function finiteNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function readBudgets(raw: unknown): AutonomyBudgets | null {
  if (!isRecord(raw)) {
    return null;
  }
  const maxTurns = finiteNumber(raw.max_turns);
  const maxTokens = finiteNumber(raw.max_tokens);
  const timeout = finiteNumber(raw.timeout_minutes);
  const continuations = finiteNumber(raw.continuations);
  if (maxTurns === null || maxTokens === null || timeout === null || continuations === null) {
    return null;
  }
  return {
    max_turns: maxTurns,
    max_tokens: maxTokens,
    timeout_minutes: timeout,
    continuations
  };
}

function readRun(raw: unknown): AutonomyRun | null {
  if (!isRecord(raw)) {
    return null;
  }
  return {
    started: typeof raw.started === 'string' ? raw.started : '',
    turns: finiteNumber(raw.turns) ?? 0,
    tokens: finiteNumber(raw.tokens) ?? 0,
    elapsed_seconds: finiteNumber(raw.elapsed_seconds) ?? 0,
    continuations: finiteNumber(raw.continuations) ?? 0,
    reason: typeof raw.reason === 'string' && raw.reason ? raw.reason : null
  };
}

/**
 * The state in a server answer or event, or null when it is not one (a
 * malformed answer must not break the panel).
 */
export function readAutonomyState(raw: unknown): AutonomyState | null {
  if (!isRecord(raw) || typeof raw.enabled !== 'boolean') {
    return null;
  }
  const budgets = readBudgets(raw.budgets);
  if (!budgets) {
    return null;
  }
  const gates = Array.isArray(raw.gates)
    ? raw.gates.filter((gate): gate is string => typeof gate === 'string')
    : [];
  return { enabled: raw.enabled, budgets, gates, run: readRun(raw.run) };
}

/** The state an event carries when it is an `autonomy` event, else null. */
export function autonomyEventState(
  event: unknown
): { sessionId: string; seq: number; state: AutonomyState } | null {
  if (!isRecord(event) || event.type !== 'autonomy' || typeof event.seq !== 'number') {
    return null;
  }
  const state = readAutonomyState(event.state);
  if (!state) {
    return null;
  }
  return {
    sessionId: typeof event.session_id === 'string' ? event.session_id : '',
    seq: event.seq,
    state
  };
}

// ---------------------------------------------------------------- the form

/** The form's fields as typed. */
export interface IAutonomyFormValues {
  maxTurns: string;
  maxTokens: string;
  timeoutMinutes: string;
  continuations: string;
  /** One gate per line. */
  gates: string;
}

export type AutonomyFormField = keyof IAutonomyFormValues;

export type AutonomyFormResult =
  | { ok: true; request: AutonomyRequest }
  | { ok: false; errors: Partial<Record<AutonomyFormField, string>> };

/** The form prefilled from the server's state (its budgets and gates). */
export function formValues(state: AutonomyState): IAutonomyFormValues {
  return {
    maxTurns: String(state.budgets.max_turns),
    maxTokens: String(state.budgets.max_tokens),
    timeoutMinutes: String(state.budgets.timeout_minutes),
    continuations: String(state.budgets.continuations),
    gates: state.gates.join('\n')
  };
}

/**
 * A whole number as typed: digits with `,`, `_` or spaces between groups
 * (`80,000`, `80_000`) and, when `allowK`, a `k` for thousands (`80k`).
 */
function parseCount(text: string, allowK: boolean): number | null {
  const match = /^(\d[\d,_ ]*)(k?)$/i.exec(text.trim());
  if (!match || (match[2] && !allowK) || /[,_ ]$/.test(match[1])) {
    return null;
  }
  const value = Number(match[1].replace(/[,_ ]/g, '')) * (match[2] ? 1000 : 1);
  return Number.isSafeInteger(value) ? value : null;
}

/** The gates, one per non-blank line, trimmed. */
export function parseGates(text: string): { gates: string[]; error: string | null } {
  const gates: string[] = [];
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const gate = lines[index].trim();
    if (!gate) {
      continue;
    }
    if (gate.startsWith(PY_GATE_PREFIX) && !gate.slice(PY_GATE_PREFIX.length).trim()) {
      return {
        gates,
        error: `Line ${index + 1}: "${PY_GATE_PREFIX}" needs a Python expression after it.`
      };
    }
    gates.push(gate);
  }
  return { gates, error: null };
}

/**
 * Read the form into the PUT body that turns autonomous mode on, or say
 * what is wrong with each field (the server checks again and may refuse
 * with a message of its own).
 */
export function parseAutonomyForm(values: IAutonomyFormValues): AutonomyFormResult {
  const errors: Partial<Record<AutonomyFormField, string>> = {};
  const maxTurns = parseCount(values.maxTurns, false);
  if (maxTurns === null || maxTurns < 1) {
    errors.maxTurns = 'Max turns must be a whole number of at least 1.';
  }
  const maxTokens = parseCount(values.maxTokens, true);
  if (maxTokens === null || maxTokens < 1) {
    errors.maxTokens = 'Max tokens must be a whole number of at least 1 (80000, 80,000 or 80k).';
  }
  const timeoutText = values.timeoutMinutes.trim();
  const timeout = /^\d+(\.\d+)?$|^\.\d+$/.test(timeoutText) ? Number(timeoutText) : NaN;
  if (!(timeout > 0)) {
    errors.timeoutMinutes = 'The timeout must be a number of minutes above 0.';
  }
  const continuations = parseCount(values.continuations, false);
  if (continuations === null) {
    errors.continuations = 'Continuations must be a whole number (0 or more).';
  }
  const { gates, error } = parseGates(values.gates);
  if (error) {
    errors.gates = error;
  }
  if (Object.keys(errors).length > 0) {
    return { ok: false, errors };
  }
  return {
    ok: true,
    request: {
      enabled: true,
      budgets: {
        max_turns: maxTurns as number,
        max_tokens: maxTokens as number,
        timeout_minutes: timeout,
        continuations: continuations as number
      },
      gates
    }
  };
}

// ---------------------------------------------------------------- the indicator

/** A token count as the badge shows it: 950, 1.2k, 12k, 1.5M. */
export function formatTokens(tokens: number): string {
  const value = Math.max(0, Math.round(tokens));
  if (value < 1000) {
    return String(value);
  }
  if (value < 1_000_000) {
    const thousands = value / 1000;
    return thousands < 10 ? `${trimZero(thousands.toFixed(1))}k` : `${Math.round(thousands)}k`;
  }
  const millions = value / 1_000_000;
  return millions < 10 ? `${trimZero(millions.toFixed(1))}M` : `${Math.round(millions)}M`;
}

function trimZero(text: string): string {
  return text.endsWith('.0') ? text.slice(0, -2) : text;
}

/** A duration as a clock: 1:20, 30:00, 1:02:03. */
export function formatClock(seconds: number): string {
  const total = Math.max(0, Math.floor(seconds));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const secs = String(total % 60).padStart(2, '0');
  return hours > 0
    ? `${hours}:${String(minutes).padStart(2, '0')}:${secs}`
    : `${minutes}:${secs}`;
}

/** A duration in words, for screen readers: "1 minute 20 seconds". */
function spokenDuration(seconds: number): string {
  const total = Math.max(0, Math.floor(seconds));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const secs = total % 60;
  const parts = [
    hours ? plural(hours, 'hour') : '',
    minutes ? plural(minutes, 'minute') : '',
    secs || total === 0 ? plural(secs, 'second') : ''
  ];
  return parts.filter(Boolean).join(' ');
}

function plural(count: number, unit: string): string {
  return `${count} ${unit}${count === 1 ? '' : 's'}`;
}

/** A count with thousands separators: 80,000. */
function count(value: number): string {
  return value.toLocaleString('en-US');
}

/** Whether the run's clock is going (a run that has not ended, in a running turn). */
export function isTicking(state: AutonomyState | null, turnRunning: boolean): boolean {
  return Boolean(state?.enabled && state.run && state.run.reason === null && turnRunning);
}

/**
 * How far (s) the browser's clock may put the run's start after what the
 * server's report allows before it is not trusted: `started` is cut to
 * whole seconds (which only makes the run look older) and a report is
 * computed when it is sent.
 */
export const CLOCK_BEHIND_TOLERANCE_S = 2;
/**
 * How much older (s) than the server's report the browser's clock may make
 * the run before it is not trusted: a report replayed after a reconnection
 * can be this stale, a browser clock this far ahead is not believed.
 */
export const CLOCK_AHEAD_TOLERANCE_S = 60;

/**
 * Seconds the run has taken. While its clock goes: now − `run.started`
 * (the server's time of the start), so a page reloaded in the middle of a
 * run shows the run's time, not the time since the reload. The browser's
 * clock may differ from the server's: when `started` is unreadable, or
 * does not fit the server's `elapsed_seconds` (a report at one moment,
 * received at `receivedAt`) within the tolerances above, the report plus
 * the time since it arrived is used instead. A run whose clock has
 * stopped shows the report.
 */
export function runElapsed(
  state: AutonomyState,
  receivedAt: number,
  now: number,
  ticking: boolean
): number {
  const run = state.run;
  const said = run?.elapsed_seconds ?? 0;
  if (!run || !ticking) {
    return said;
  }
  const sinceReport = said + Math.max(0, now - receivedAt) / 1000;
  const startedAt = Date.parse(run.started);
  if (!Number.isFinite(startedAt)) {
    return sinceReport;
  }
  // How old the browser's clock made the run when the report arrived, against the report.
  const offset = (receivedAt - startedAt) / 1000 - said;
  const fromStart = (now - startedAt) / 1000;
  if (
    offset < -CLOCK_BEHIND_TOLERANCE_S ||
    offset > CLOCK_AHEAD_TOLERANCE_S ||
    fromStart < 0
  ) {
    return sinceReport;
  }
  return fromStart;
}

/** "Autonomous · 3/12 turns · 12k/80k tokens · 1:20/30:00", or the budgets before a run. */
export function indicatorText(state: AutonomyState, elapsed: number): string {
  const { budgets, run } = state;
  const limit = formatClock(budgets.timeout_minutes * 60);
  if (!run) {
    return (
      `Autonomous · next message starts a run · ${budgets.max_turns} turns · ` +
      `${formatTokens(budgets.max_tokens)} tokens · ${limit}`
    );
  }
  const parts = [
    'Autonomous',
    `${run.turns}/${budgets.max_turns} turns`,
    `${formatTokens(run.tokens)}/${formatTokens(budgets.max_tokens)} tokens`,
    `${formatClock(elapsed)}/${limit}`
  ];
  if (run.reason) {
    parts.push(`ended: ${run.reason}`);
  }
  return parts.join(' · ');
}

/**
 * The gates in one sentence, each on one line of its own and numbered when
 * there are several (a shell gate may itself hold `;` or `,`).
 */
export function gatesSentence(gates: readonly string[]): string {
  if (!gates.length) {
    return 'No gates: the run continues with the default prompt.';
  }
  if (gates.length === 1) {
    return `Gate: ${firstLine(gates[0]).text}.`;
  }
  const listed = gates.map((gate, index) => `(${index + 1}) ${firstLine(gate).text}`);
  return `Gates: ${listed.join(' ')}.`;
}

/** The indicator as a sentence (its accessible name and tooltip). */
export function indicatorLabel(state: AutonomyState, elapsed: number): string {
  const { budgets, run } = state;
  const gates = gatesSentence(state.gates);
  const limit = spokenDuration(budgets.timeout_minutes * 60);
  if (!run) {
    return (
      'Autonomous mode is on: the next message starts a run of at most ' +
      `${plural(budgets.max_turns, 'turn')}, ${count(budgets.max_tokens)} tokens ` +
      `and ${limit}. ${gates}`
    );
  }
  const ended = run.reason ? ` The last run ended: ${run.reason}.` : '';
  return (
    `Autonomous run: ${run.turns} of ${plural(budgets.max_turns, 'turn')}, ` +
    `${count(run.tokens)} of ${count(budgets.max_tokens)} tokens, ` +
    `${spokenDuration(elapsed)} of ${limit}, ` +
    `${run.continuations} of ${plural(budgets.continuations, 'continuation')}.${ended} ${gates}`
  );
}

// ---------------------------------------------------------------- gate lines

/**
 * A text on one line (a gate's command may have several): its first line
 * that is not blank, trimmed, and " …" when more lines follow.
 */
export function firstLine(text: string): { text: string; cut: boolean } {
  const lines = text.split(/\r?\n/).map(line => line.trim());
  const start = lines.findIndex(line => line !== '');
  if (start < 0) {
    return { text: '', cut: false };
  }
  const cut = lines.slice(start + 1).some(line => line !== '');
  return { text: cut ? `${lines[start]} …` : lines[start], cut };
}

/** What a gate notice says about its run, when the server sent the fields. */
export interface IGateRun {
  command: string;
  /** Null when the gate had no exit status (killed by its timeout). */
  exitCode: number | null;
  /** How long it ran, when known. */
  seconds: number | null;
  /** The first line of its output. */
  outputHead: string;
}

// The fields of a `gate_run` (core/wire.py `GateRunEvent`).
const GATE_FIELDS = {
  command: ['command'],
  exitCode: ['exit_status'],
  seconds: ['seconds'],
  outputHead: ['output']
} as const;

function firstOf(record: LooseRecord, names: readonly string[]): unknown {
  for (const name of names) {
    if (record[name] !== undefined && record[name] !== null) {
      return record[name];
    }
  }
  return undefined;
}

/** The gate run a notice item or event describes, or null when it names no command. */
export function gateRunOf(raw: unknown): IGateRun | null {
  if (!isRecord(raw)) {
    return null;
  }
  const command = firstOf(raw, GATE_FIELDS.command);
  if (typeof command !== 'string' || !command) {
    return null;
  }
  const output = firstOf(raw, GATE_FIELDS.outputHead);
  const firstLine =
    typeof output === 'string'
      ? (output.split('\n').find(line => line.trim() !== '') ?? '').trim()
      : '';
  return {
    command,
    exitCode: finiteNumber(firstOf(raw, GATE_FIELDS.exitCode)),
    seconds: finiteNumber(firstOf(raw, GATE_FIELDS.seconds)),
    outputHead: firstLine
  };
}

// ---------------------------------------------------------------- the model

/** The server routes the model uses (AgentApiClient has them). */
export interface IAutonomyApi {
  getAutonomy(sessionId: string): Promise<unknown>;
  setAutonomy(sessionId: string, request: AutonomyRequest): Promise<unknown>;
}

/**
 * The autonomy state of the session a notebook's agent is attached to: read
 * with GET when the session is (re)loaded, then kept current by `autonomy`
 * events, and changed with PUT.
 */
export class AutonomyModel {
  constructor(
    private readonly _api: IAutonomyApi,
    private readonly _now: () => number = () => Date.now()
  ) {}

  /** Emitted whenever `state` or `error` changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The state; null until the server said (or when it could not). */
  get state(): AutonomyState | null {
    return this._state;
  }

  /** When (this browser's clock, ms) the state arrived: its `elapsed_seconds` is as of then. */
  get receivedAt(): number {
    return this._receivedAt;
  }

  /** Why the state could not be read (a server without autonomous mode, ...). */
  get error(): string | null {
    return this._error;
  }

  get sessionId(): string | null {
    return this._sessionId;
  }

  /**
   * Follow another session (or the same one reloaded): forget the state and
   * read it. An `autonomy` event that arrives meanwhile wins over the answer,
   * unless it is numbered `loadedSeq` or lower: such an event (the replay
   * of the stream's buffer after a page reload) is older than the answer,
   * which replaces it.
   */
  async attach(sessionId: string | null, loadedSeq: number | null = null): Promise<void> {
    if (sessionId !== this._sessionId) {
      this._state = null;
    }
    this._sessionId = sessionId;
    this._loadedSeq = loadedSeq;
    this._current = false;
    this._error = null;
    const generation = ++this._generation;
    this._changed.emit();
    if (!sessionId) {
      return;
    }
    try {
      const answer = readAutonomyState(await this._api.getAutonomy(sessionId));
      if (generation !== this._generation) {
        return; // an event or another session came in between
      }
      if (answer) {
        this._current = true;
        this._set(answer);
      } else {
        this._error = 'the server sent no autonomy state';
        this._changed.emit();
      }
    } catch (error) {
      if (generation === this._generation) {
        this._error = error instanceof Error ? error.message : String(error);
        this._changed.emit();
      }
    }
  }

  /** Fold in an event of the session's stream; true when it was an `autonomy` event for it. */
  applyEvent(event: unknown): boolean {
    const found = autonomyEventState(event);
    if (!found || (found.sessionId && found.sessionId !== this._sessionId)) {
      return false;
    }
    const replayed = this._loadedSeq !== null && found.seq <= this._loadedSeq;
    if (replayed && this._current) {
      return true; // older than the state shown
    }
    if (!replayed) {
      this._generation++; // a GET still under way answers older news
      this._current = true;
    }
    this._error = null;
    this._set(found.state);
    return true;
  }

  /**
   * PUT the request; the answer becomes the state. Throws the server's
   * error (a 400 says what is wrong with a value) for the form to show.
   */
  async update(request: AutonomyRequest): Promise<AutonomyState> {
    const sessionId = this._sessionId;
    if (!sessionId) {
      throw new Error('No agent session yet: is the kernel running?');
    }
    const answer = readAutonomyState(await this._api.setAutonomy(sessionId, request));
    if (!answer) {
      throw new Error('The server answered without an autonomy state.');
    }
    if (sessionId === this._sessionId) {
      this._generation++;
      this._current = true;
      this._error = null;
      this._set(answer);
    }
    return answer;
  }

  private _set(state: AutonomyState): void {
    this._state = state;
    this._receivedAt = this._now();
    this._changed.emit();
  }

  private _state: AutonomyState | null = null;
  private _receivedAt = 0;
  private _error: string | null = null;
  private _sessionId: string | null = null;
  /** The session's event number when it was loaded: events up to it are older than the GET. */
  private _loadedSeq: number | null = null;
  /** Whether the state shown is the GET's answer or newer (a replayed event is older). */
  private _current = false;
  private _generation = 0;
  private readonly _changed = new Signal<this, void>(this);
}
