/**
 * The chat panel's autonomous mode: the "Autonomous" switch, the form that
 * turns it on (budgets and gates), and the indicator shown while it is on.
 * The state comes from the agent's AutonomyModel (server answers and
 * `autonomy` events); the switch only ever shows what the server said.
 */
import type { IDisposable } from '@lumino/disposable';

import {
  PY_GATE_PREFIX,
  firstLine,
  formValues,
  indicatorLabel,
  indicatorText,
  isTicking,
  parseAutonomyForm,
  runElapsed,
  type AutonomyModel,
  type AutonomyRequest,
  type AutonomyState,
  type IAutonomyFormValues,
  type IGateRun
} from './autonomy';
import { button, element } from './dom';

export interface IAutonomyControlsOptions {
  /** Whether the session's turn runs now (the run's clock goes only then). */
  turnRunning: () => boolean;
  /** Show a failure in the chat (turning the mode off failed). */
  reportError: (message: string) => void;
  /** The state shown changed (the composer's placeholder follows it). */
  onChange: () => void;
  /** The clock (ms); tests pass their own. */
  now?: () => number;
}

const TICK_MS = 1000;

/** One line of help under the gates field. */
export const GATES_HELP =
  `One check per line: a shell command run in the notebook’s folder, or ${PY_GATE_PREFIX}EXPR ` +
  'checked in the notebook’s kernel. With gates, the run ends when all pass.';

let formCount = 0;

export class AutonomyControls implements IDisposable {
  constructor(private readonly _options: IAutonomyControlsOptions) {
    this.switchNode = element('button', 'pal-autonomy-switch', 'pal-autonomy-switch');
    this.switchNode.type = 'button';
    this.switchNode.setAttribute('role', 'switch');
    const track = element('span', 'pal-switch-track');
    track.setAttribute('aria-hidden', 'true');
    track.append(element('span', 'pal-switch-knob'));
    this.switchNode.append(track, element('span', 'pal-switch-label', undefined, 'Autonomous'));
    this.switchNode.addEventListener('click', () => this._onSwitch());

    this.indicator = element('div', 'pal-autonomy-indicator', 'pal-autonomy-indicator');
    // A timer's changes are not announced (it ticks); its name is the full sentence.
    this.indicator.setAttribute('role', 'timer');
    this.formSlot = element('div', 'pal-autonomy-form-slot');
    this.formSlot.hidden = true;
    this.refresh();
  }

  /** The switch (for the panel's header). */
  readonly switchNode: HTMLButtonElement;
  /** The badge shown while autonomous mode is on. */
  readonly indicator: HTMLElement;
  /** Where the form opens. */
  readonly formSlot: HTMLElement;

  get model(): AutonomyModel | null {
    return this._model;
  }

  /** Show the autonomy of another agent (or none). */
  set model(model: AutonomyModel | null) {
    if (model === this._model) {
      return;
    }
    this._model?.changed.disconnect(this._onModelChanged, this);
    this._model = model;
    model?.changed.connect(this._onModelChanged, this);
    this._closeForm(false);
    this.refresh();
  }

  /** Whether autonomous mode is on (as the server said). */
  get enabled(): boolean {
    return this._model?.state?.enabled ?? false;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.model = null;
    this._closeForm(false);
    window.clearInterval(this._timer);
  }

  /** Draw the switch and the indicator again (the state or the turn's status changed). */
  refresh(): void {
    const model = this._model;
    const state = model?.state ?? null;
    const enabled = state?.enabled ?? false;
    this.switchNode.setAttribute('aria-checked', String(enabled));
    this.switchNode.dataset.state = enabled ? 'on' : 'off';
    this.switchNode.disabled = !state || this._busy;
    this.switchNode.title = !model
      ? 'Open a notebook to work with the agent.'
      : !state
        ? model.error
          ? `Autonomous mode is not available: ${model.error}`
          : 'Reading the session’s autonomous mode…'
        : enabled
          ? 'Autonomous mode is on: click to turn it off'
          : 'Autonomous mode: the agent keeps going without you, within budgets, ' +
            'until its gates pass (click to set it up)';
    this.switchNode.classList.toggle('pal-mod-open', !this.formSlot.hidden);
    if (enabled && !this.formSlot.hidden) {
      this._closeForm(false); // turned on elsewhere (another browser)
    }
    this._renderIndicator();
    this._updateTimer();
  }

  private _onModelChanged(): void {
    this.refresh();
    this._options.onChange();
  }

  private _renderIndicator(): void {
    const state = this._model?.state ?? null;
    const enabled = state?.enabled ?? false;
    this.indicator.hidden = !enabled;
    if (!state || !enabled) {
      this.indicator.replaceChildren();
      this.indicator.removeAttribute('aria-label');
      delete this.indicator.dataset.run;
      return;
    }
    const elapsed = this._elapsed(state);
    const text = indicatorText(state, elapsed);
    const label = indicatorLabel(state, elapsed);
    this.indicator.dataset.run = !state.run ? 'none' : state.run.reason ? 'ended' : 'running';
    if (this.indicator.textContent !== text) {
      this.indicator.textContent = text;
    }
    this.indicator.setAttribute('aria-label', label);
    this.indicator.title = label;
  }

  private _elapsed(state: AutonomyState): number {
    const model = this._model;
    const now = (this._options.now ?? Date.now)();
    return runElapsed(state, model?.receivedAt ?? now, now, this._ticking(state));
  }

  private _ticking(state: AutonomyState | null): boolean {
    return isTicking(state, this._options.turnRunning());
  }

  /** A 1 s timer while the run's clock goes, none otherwise. */
  private _updateTimer(): void {
    const ticking = !this._disposed && this._ticking(this._model?.state ?? null);
    if (ticking && !this._timer) {
      this._timer = window.setInterval(() => this._renderIndicator(), TICK_MS);
    } else if (!ticking && this._timer) {
      window.clearInterval(this._timer);
      this._timer = 0;
    }
  }

  private _onSwitch(): void {
    const model = this._model;
    const state = model?.state;
    if (!model || !state || this._busy) {
      return;
    }
    if (state.enabled) {
      void this._turnOff(model);
    } else if (this.formSlot.hidden) {
      this._openForm(state);
    } else {
      this._closeForm(true);
    }
  }

  private async _turnOff(model: AutonomyModel): Promise<void> {
    this._busy = true;
    this.refresh();
    try {
      await model.update({ enabled: false });
    } catch (error) {
      this._options.reportError(`Could not turn autonomous mode off: ${describeError(error)}`);
    } finally {
      this._busy = false;
      this.refresh();
    }
  }

  private _openForm(state: AutonomyState): void {
    const form = renderAutonomyForm(
      formValues(state),
      {
        submit: request => this._turnOn(request),
        cancel: () => this._closeForm(true)
      },
      severalLinesNote(state.gates)
    );
    this.formSlot.replaceChildren(form.node);
    this.formSlot.hidden = false;
    this.switchNode.classList.add('pal-mod-open');
    document.addEventListener('keydown', this._onDocumentKeydown, true);
    form.focus();
  }

  /**
   * Escape while the form is open closes it: from the form (caught on the
   * way down, before a container of the panel can take the key), and when
   * the focus is on nothing of the form's own (the page, or the panel that
   * holds it: a click on text, a field that went away). In any other field
   * Escape is that field's.
   */
  private readonly _onDocumentKeydown = (event: KeyboardEvent): void => {
    const target = event.target;
    if (
      event.key !== 'Escape' ||
      event.isComposing || // it cancels the composition
      event.defaultPrevented ||
      this.formSlot.hidden ||
      !(target instanceof Node) ||
      !(this.formSlot.contains(target) || target.contains(this.formSlot)) ||
      this.formSlot.closest('.lm-mod-hidden') !== null // its panel is closed
    ) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    this._closeForm(true);
  };

  private async _turnOn(request: AutonomyRequest): Promise<void> {
    const model = this._model;
    if (!model) {
      throw new Error('No agent session yet: is the kernel running?');
    }
    await model.update(request);
    // The answer closed the form; the focus was in it, or lost meanwhile.
    const active = document.activeElement;
    this._closeForm(!active || active === document.body || this.formSlot.contains(active));
  }

  private _closeForm(refocus: boolean): void {
    document.removeEventListener('keydown', this._onDocumentKeydown, true);
    const hadFocus = this.formSlot.contains(document.activeElement);
    this.formSlot.replaceChildren();
    this.formSlot.hidden = true;
    this.switchNode.classList.remove('pal-mod-open');
    if (refocus || hadFocus) {
      this.switchNode.focus();
    }
  }

  private _model: AutonomyModel | null = null;
  private _busy = false;
  private _timer = 0;
  private _disposed = false;
}

export interface IAutonomyFormActions {
  /** Turn autonomous mode on; a rejection's message shows in the form. */
  submit: (request: AutonomyRequest) => Promise<void>;
  cancel: () => void;
}

/** The fields of the form: label, the value's key, what the input accepts. */
const NUMBER_FIELDS: {
  key: Exclude<keyof IAutonomyFormValues, 'gates'>;
  label: string;
  testId: string;
  inputMode: 'numeric' | 'decimal';
}[] = [
  { key: 'maxTurns', label: 'Max turns', testId: 'pal-autonomy-max-turns', inputMode: 'numeric' },
  {
    key: 'maxTokens',
    label: 'Max tokens',
    testId: 'pal-autonomy-max-tokens',
    inputMode: 'numeric'
  },
  {
    key: 'timeoutMinutes',
    label: 'Timeout (minutes)',
    testId: 'pal-autonomy-timeout',
    inputMode: 'decimal'
  },
  {
    key: 'continuations',
    label: 'Continuations',
    testId: 'pal-autonomy-continuations',
    inputMode: 'numeric'
  }
];

/**
 * The form that turns autonomous mode on: four budgets, the gates (one per
 * line) with a line of help, an error line, Cancel and "Turn on". Enter in
 * a budget (or Ctrl+Enter in the gates) submits, Escape cancels.
 */
export function renderAutonomyForm(
  values: IAutonomyFormValues,
  actions: IAutonomyFormActions,
  note: string | null = null
): { node: HTMLFormElement; focus: () => void } {
  const id = `pal-autonomy-${++formCount}`;
  const form = element('form', 'pal-autonomy-form', 'pal-autonomy-form');
  form.noValidate = true;
  // A click on its text or padding focuses the form, not the page, so Escape reaches it.
  form.tabIndex = -1;
  form.setAttribute('aria-label', 'Turn on autonomous mode');

  const inputs = new Map<keyof IAutonomyFormValues, HTMLInputElement | HTMLTextAreaElement>();
  const errorIds = new Map<keyof IAutonomyFormValues, string>();
  const grid = element('div', 'pal-autonomy-fields');
  for (const field of NUMBER_FIELDS) {
    const inputId = `${id}-${field.key}`;
    const label = element('label', 'pal-autonomy-field', undefined, field.label);
    label.htmlFor = inputId;
    const input = element('input', 'pal-autonomy-input', field.testId);
    input.id = inputId;
    input.type = 'text';
    input.inputMode = field.inputMode;
    input.autocomplete = 'off';
    input.value = values[field.key];
    label.append(input);
    grid.append(label);
    inputs.set(field.key, input);
  }

  const gatesId = `${id}-gates`;
  const gatesLabel = element('label', 'pal-autonomy-gates-label', undefined, 'Gates');
  gatesLabel.htmlFor = gatesId;
  const gates = element('textarea', 'pal-autonomy-gates', 'pal-autonomy-gates');
  gates.id = gatesId;
  gates.rows = 3;
  gates.spellcheck = false;
  gates.value = values.gates;
  gates.placeholder = `pytest -q\n${PY_GATE_PREFIX}assert abs(auc - 0.91) < 0.01`;
  const help = element('div', 'pal-autonomy-help', undefined, GATES_HELP);
  help.id = `${id}-help`;
  if (note) {
    help.append(element('div', 'pal-autonomy-note', 'pal-autonomy-note', note));
  }
  inputs.set('gates', gates);

  const error = element('div', 'pal-autonomy-error', 'pal-autonomy-error');
  error.id = `${id}-error`;
  error.setAttribute('role', 'alert');
  error.hidden = true;

  const cancel = button('Cancel', 'pal-autonomy-cancel');
  const submit = button('Turn on', 'pal-autonomy-submit');
  submit.type = 'submit';
  submit.classList.add('pal-mod-primary');
  const row = element('div', 'pal-autonomy-actions');
  row.append(cancel, submit);
  form.append(grid, gatesLabel, gates, help, error, row);

  const describedBy = (key: keyof IAutonomyFormValues) =>
    [key === 'gates' ? help.id : '', errorIds.get(key) ?? ''].filter(Boolean).join(' ');

  const showErrors = (messages: string[], fields: (keyof IAutonomyFormValues)[]) => {
    errorIds.clear();
    for (const [key, input] of inputs) {
      const bad = fields.includes(key);
      input.setAttribute('aria-invalid', String(bad));
      if (bad) {
        errorIds.set(key, error.id);
      }
      const described = describedBy(key);
      if (described) {
        input.setAttribute('aria-describedby', described);
      } else {
        input.removeAttribute('aria-describedby');
      }
    }
    error.textContent = messages.join(' ');
    error.hidden = messages.length === 0;
  };
  showErrors([], []);

  const read = (): IAutonomyFormValues => ({
    maxTurns: inputs.get('maxTurns')!.value,
    maxTokens: inputs.get('maxTokens')!.value,
    timeoutMinutes: inputs.get('timeoutMinutes')!.value,
    continuations: inputs.get('continuations')!.value,
    gates: gates.value
  });

  let busy = false;
  const onSubmit = async () => {
    if (busy) {
      return;
    }
    const result = parseAutonomyForm(read());
    if (!result.ok) {
      const fields = Object.keys(result.errors) as (keyof IAutonomyFormValues)[];
      showErrors(Object.values(result.errors) as string[], fields);
      inputs.get(fields[0])?.focus();
      return;
    }
    showErrors([], []);
    // Busy, but not `disabled`: a disabled button loses the focus (to the page).
    busy = true;
    submit.setAttribute('aria-disabled', 'true');
    submit.textContent = 'Turning on…';
    try {
      await actions.submit(result.request);
    } catch (failure) {
      // The server's own check (a 400 says which value it refuses).
      showErrors([describeError(failure)], []);
      submit.removeAttribute('aria-disabled');
      submit.textContent = 'Turn on';
      busy = false;
    }
  };

  form.addEventListener('submit', event => {
    event.preventDefault();
    void onSubmit();
  });
  cancel.addEventListener('click', () => actions.cancel());
  form.addEventListener('keydown', event => {
    if (event.key === 'Escape' && !event.isComposing) {
      event.preventDefault();
      event.stopPropagation();
      actions.cancel();
    } else if (
      event.key === 'Enter' &&
      (event.ctrlKey || event.metaKey) &&
      event.target === gates
    ) {
      event.preventDefault();
      void onSubmit();
    }
  });

  return {
    node: form,
    focus: () => inputs.get('maxTurns')?.focus()
  };
}

/**
 * What the form says when a gate set elsewhere (the command line, the API)
 * has several lines: the form's one gate per line would split it.
 */
export function severalLinesNote(gates: readonly string[]): string | null {
  const several = gates.filter(gate => firstLine(gate).cut);
  if (several.length === 0) {
    return null;
  }
  const names = several.map(gate => `“${firstLine(gate).text}”`).join(', ');
  return (
    `${several.length === 1 ? 'A gate set elsewhere has' : 'Gates set elsewhere have'} ` +
    `several lines (${names}): here each line is a gate of its own. ` +
    'Cancel keeps the gates as they are.'
  );
}

/**
 * A gate run's chat line: ✓/✗, the command in monospace (its first line
 * when it has several), the exit status, how long it took, and the first
 * line of its output.
 */
export function renderGateLine(node: HTMLElement, gate: IGateRun, passed: boolean): void {
  node.replaceChildren();
  node.classList.add('pal-gate-line');
  const head = element('div', 'pal-gate-head');
  const mark = element('span', 'pal-gate-mark', undefined, passed ? '✓' : '✗');
  mark.setAttribute('aria-hidden', 'true');
  head.append(
    mark,
    element('span', 'pal-gate-label', undefined, passed ? 'gate passed' : 'gate failed'),
    commandNode(gate.command, 'pal-gate-command')
  );
  const facts = [
    gate.exitCode === null ? 'no exit status' : `exit ${gate.exitCode}`,
    gate.seconds === null ? '' : formatGateSeconds(gate.seconds)
  ].filter(Boolean);
  head.append(element('span', 'pal-gate-facts', 'pal-gate-facts', facts.join(' · ')));
  node.append(head);
  if (gate.outputHead) {
    node.append(element('code', 'pal-gate-output', 'pal-gate-output', gate.outputHead));
  }
}

/**
 * A gate line from the notice's text alone (a server that sent no fields):
 * `backticked` parts in monospace.
 */
export function renderGateText(node: HTMLElement, text: string, passed: boolean): void {
  node.replaceChildren();
  node.classList.add('pal-gate-line');
  const mark = element('span', 'pal-gate-mark', undefined, passed ? '✓ ' : '✗ ');
  mark.setAttribute('aria-hidden', 'true');
  node.append(mark);
  text.split('`').forEach((part, index) => {
    if (part) {
      node.append(
        index % 2 === 1 ? commandNode(part) : document.createTextNode(part)
      );
    }
  });
}

/** A gate's command on one line: its first line and "…", the whole command in the tooltip. */
function commandNode(command: string, testId?: string): HTMLElement {
  const { text, cut } = firstLine(command);
  const node = element('code', 'pal-gate-command', testId, text);
  if (cut) {
    node.title = command;
  }
  return node;
}

function formatGateSeconds(seconds: number): string {
  return seconds < 10 ? `${seconds.toFixed(1)} s` : `${Math.round(seconds)} s`;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
