// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from 'vitest';

import {
  AUTONOMOUS_INPUT_HINT,
  AutonomyModel,
  type AutonomyRequest,
  type AutonomyState
} from '../src/autonomy';
import { AutonomyControls } from '../src/autonomyView';
import { AgentApiError } from '../src/api';
import { renderEntry } from '../src/entryViews';
import type { NotebookAgent } from '../src/notebookAgent';
import { TranscriptModel, type INoticeEntry } from '../src/transcript';
import type { AgentEvent, ChatItem } from '../src/wire';

import { entryContext } from './entryContext';
import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

// JupyterLab's icon registry needs its web components, which load only in a
// browser; the panel's icon plays no part in these tests.
vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const OFF: AutonomyState = {
  enabled: false,
  budgets: { max_turns: 12, max_tokens: 80_000, timeout_minutes: 30, continuations: 3 },
  gates: ['pytest -q'],
  run: null
};

function on(run: AutonomyState['run'] = null, fields: Partial<AutonomyState> = {}): AutonomyState {
  return { ...OFF, enabled: true, run, ...fields };
}

const RUN = {
  started: '2026-12-01T18:00:00+00:00',
  turns: 3,
  tokens: 12_000,
  elapsed_seconds: 80,
  continuations: 1,
  reason: null
};

/** The server's autonomy routes: PUT answers what `put` returns (or throws). */
function server(initial: AutonomyState = OFF) {
  let current = initial;
  const api = {
    getAutonomy: vi.fn(async () => current),
    setAutonomy: vi.fn(async (_session: string, request: AutonomyRequest) => {
      current = {
        ...current,
        enabled: request.enabled,
        budgets: request.budgets ?? current.budgets,
        gates: request.gates ?? current.gates
      };
      return current;
    })
  };
  return api;
}

let clock = 1_000_000;
const now = () => clock;

async function attachedModel(api = server()) {
  const model = new AutonomyModel(api, now);
  await model.attach('s1');
  return model;
}

function controlsFor(model: AutonomyModel | null, turnRunning = false) {
  const errors: string[] = [];
  const onChange = vi.fn();
  const controls = new AutonomyControls({
    turnRunning: () => turnRunning,
    reportError: message => errors.push(message),
    onChange,
    now
  });
  document.body.append(controls.switchNode, controls.indicator, controls.formSlot);
  controls.model = model;
  const find = <T extends HTMLElement = HTMLElement>(testId: string) =>
    document.querySelector<T>(`[data-testid="${testId}"]`);
  return { controls, errors, onChange, find };
}

/** Resolves once the pending promise callbacks (a mocked server's answers) have run. */
const settle = () => new Promise(resolve => setTimeout(resolve, 0));

afterEach(() => {
  document.body.replaceChildren();
  vi.useRealTimers();
  clock = 1_000_000;
});

describe('the Autonomous switch', () => {
  it('is off and disabled until the server said, then off and usable', async () => {
    const model = new AutonomyModel(server(), now);
    const { controls, find } = controlsFor(model);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    expect(toggle.getAttribute('role')).toBe('switch');
    expect(toggle.getAttribute('aria-checked')).toBe('false');
    expect(toggle.disabled).toBe(true);
    await model.attach('s1');
    expect(toggle.disabled).toBe(false);
    expect(find('pal-autonomy-indicator')!.hidden).toBe(true);
    controls.dispose();
  });

  it('opens the form prefilled from the server, focused on its first field; Escape closes it', async () => {
    const model = await attachedModel();
    const { controls, find } = controlsFor(model);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    toggle.click();
    const form = find('pal-autonomy-form')!;
    expect(form).not.toBeNull();
    const maxTurns = find<HTMLInputElement>('pal-autonomy-max-turns')!;
    expect(maxTurns.value).toBe('12');
    expect(find<HTMLInputElement>('pal-autonomy-max-tokens')!.value).toBe('80000');
    expect(find<HTMLInputElement>('pal-autonomy-timeout')!.value).toBe('30');
    expect(find<HTMLInputElement>('pal-autonomy-continuations')!.value).toBe('3');
    expect(find<HTMLTextAreaElement>('pal-autonomy-gates')!.value).toBe('pytest -q');
    expect(document.activeElement).toBe(maxTurns);
    // Every field has a label, and the gates their line of help.
    for (const input of Array.from(form.querySelectorAll('input, textarea'))) {
      expect(form.querySelector(`label[for="${input.id}"]`)).not.toBeNull();
    }
    const gates = find('pal-autonomy-gates')!;
    const help = document.getElementById(gates.getAttribute('aria-describedby')!);
    expect(help?.textContent).toContain('py:EXPR');

    maxTurns.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    expect(find('pal-autonomy-form')).toBeNull();
    expect(document.activeElement).toBe(toggle);
    expect(toggle.getAttribute('aria-checked')).toBe('false');
    controls.dispose();
  });

  it('closes on Escape from every field and button of the form, the gates included; focus returns to the switch', async () => {
    const model = await attachedModel();
    const { controls, find } = controlsFor(model);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    const places = [
      'pal-autonomy-max-turns',
      'pal-autonomy-max-tokens',
      'pal-autonomy-timeout',
      'pal-autonomy-continuations',
      'pal-autonomy-gates',
      'pal-autonomy-cancel',
      'pal-autonomy-submit',
      'pal-autonomy-form' // its blank part, clicked, holds the focus (tabindex -1)
    ];
    for (const testId of places) {
      toggle.click();
      const place = find(testId)!;
      place.focus();
      expect(document.activeElement, testId).toBe(place);
      const escape = new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true });
      place.dispatchEvent(escape);
      expect(find('pal-autonomy-form'), testId).toBeNull();
      expect(escape.defaultPrevented, testId).toBe(true);
      expect(document.activeElement, testId).toBe(toggle);
    }
    controls.dispose();
  });

  it('closes on Escape when the focus was lost to the page or the panel, past a container that takes keys, and not from another field or a composition', async () => {
    const model = await attachedModel();
    const { controls, find } = controlsFor(model);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    const escape = (target: EventTarget) =>
      target.dispatchEvent(
        new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true })
      );

    // A click on the form's text (or a field that went away) leaves the focus on the page.
    toggle.click();
    (document.activeElement as HTMLElement).blur();
    expect(document.activeElement).toBe(document.body);
    escape(document.body);
    expect(find('pal-autonomy-form')).toBeNull();
    expect(document.activeElement).toBe(toggle);

    // The panel that holds the form (a focusable container) counts as lost focus too.
    const panel = document.createElement('div');
    panel.tabIndex = -1;
    document.body.append(panel);
    panel.append(controls.switchNode, controls.indicator, controls.formSlot);
    toggle.click();
    panel.focus();
    escape(panel);
    expect(find('pal-autonomy-form')).toBeNull();
    expect(document.activeElement).toBe(toggle);

    // Not while its panel is closed (a hidden sidebar).
    toggle.click();
    (document.activeElement as HTMLElement).blur();
    panel.classList.add('lm-mod-hidden');
    escape(document.body);
    expect(find('pal-autonomy-form')).not.toBeNull();
    panel.classList.remove('lm-mod-hidden');
    escape(document.body);
    expect(find('pal-autonomy-form')).toBeNull();

    // A container of the panel that takes keys on their way down does not keep Escape from it.
    const swallow = (event: Event) => event.stopPropagation();
    panel.addEventListener('keydown', swallow, true);
    toggle.click();
    escape(find('pal-autonomy-gates')!);
    expect(find('pal-autonomy-form')).toBeNull();
    expect(document.activeElement).toBe(toggle);
    panel.removeEventListener('keydown', swallow, true);

    // Escape that ends an input method's composition is the composition's.
    toggle.click();
    const gates = find('pal-autonomy-gates')!;
    gates.focus();
    gates.dispatchEvent(
      new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, isComposing: true })
    );
    expect(find('pal-autonomy-form')).not.toBeNull();
    find<HTMLButtonElement>('pal-autonomy-cancel')!.click();

    // Escape in another field (the chat's input) is that field's.
    const chatInput = document.createElement('textarea');
    panel.append(chatInput);
    toggle.click();
    chatInput.focus();
    escape(chatInput);
    expect(find('pal-autonomy-form')).not.toBeNull();
    expect(document.activeElement).toBe(chatInput);

    // Closed, the form no longer listens.
    find<HTMLButtonElement>('pal-autonomy-cancel')!.click();
    expect(find('pal-autonomy-form')).toBeNull();
    chatInput.blur();
    chatInput.focus();
    escape(document.body);
    expect(document.activeElement).toBe(chatInput);
    controls.dispose();
  });

  it('keeps the focus on Turn on while the server answers; after a refusal Escape still closes the form', async () => {
    const api = server();
    let refuse!: (error: Error) => void;
    api.setAutonomy.mockImplementationOnce(
      () => new Promise((_, reject) => (refuse = reject))
    );
    const model = await attachedModel(api);
    const { controls, find } = controlsFor(model);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    toggle.click();
    const submit = find<HTMLButtonElement>('pal-autonomy-submit')!;
    submit.focus();
    submit.click();
    // A disabled button loses the focus (to the page, in Chromium): it says it is busy instead.
    expect(submit.disabled).toBe(false);
    expect(submit.getAttribute('aria-disabled')).toBe('true');
    expect(submit.textContent).toBe('Turning on…');
    submit.click(); // a second click while busy sends nothing more
    expect(api.setAutonomy).toHaveBeenCalledTimes(1);
    expect(document.activeElement).toBe(submit);
    refuse(new AgentApiError('max_turns must be at most 1000', 400));
    await settle();
    expect(find('pal-autonomy-error')!.textContent).toBe('max_turns must be at most 1000');
    expect(submit.hasAttribute('aria-disabled')).toBe(false);
    expect(document.activeElement).toBe(submit);
    submit.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    expect(find('pal-autonomy-form')).toBeNull();
    expect(document.activeElement).toBe(toggle);
    controls.dispose();
  });

  it('returns the focus to the switch once turned on, even when it was lost meanwhile', async () => {
    const model = await attachedModel();
    const { controls, find } = controlsFor(model);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    toggle.click();
    const submit = find<HTMLButtonElement>('pal-autonomy-submit')!;
    submit.focus();
    submit.click();
    // A click on a blank part of the page while the server answers: the focus is nowhere.
    const gone = document.createElement('button');
    document.body.append(gone);
    gone.focus();
    gone.remove();
    expect(document.activeElement).toBe(document.body);
    await settle();
    expect(find('pal-autonomy-form')).toBeNull();
    expect(toggle.getAttribute('aria-checked')).toBe('true');
    expect(document.activeElement).toBe(toggle);
    controls.dispose();
  });

  it('says when a gate set elsewhere has several lines, which the form would split', async () => {
    const several = 'python - <<EOF\nimport sys\nEOF';
    const model = await attachedModel(server({ ...OFF, gates: ['pytest -q', several] }));
    const { controls, find } = controlsFor(model);
    find('pal-autonomy-switch')!.click();
    const note = find('pal-autonomy-note')!;
    expect(note.textContent).toBe(
      'A gate set elsewhere has several lines (“python - <<EOF …”): here each line is a gate ' +
        'of its own. Cancel keeps the gates as they are.'
    );
    const gates = find('pal-autonomy-gates')!;
    expect(document.getElementById(gates.getAttribute('aria-describedby')!)?.contains(note)).toBe(true);
    find<HTMLButtonElement>('pal-autonomy-cancel')!.click();
    controls.dispose();
    document.body.replaceChildren();

    const plain = controlsFor(await attachedModel(server()));
    plain.find('pal-autonomy-switch')!.click();
    expect(plain.find('pal-autonomy-form')).not.toBeNull();
    expect(plain.find('pal-autonomy-note')).toBeNull();
    plain.controls.dispose();
  });

  it('shows what is wrong with a field and sends nothing', async () => {
    const api = server();
    const model = await attachedModel(api);
    const { controls, find } = controlsFor(model);
    find('pal-autonomy-switch')!.click();
    const maxTurns = find<HTMLInputElement>('pal-autonomy-max-turns')!;
    maxTurns.value = '0';
    find<HTMLButtonElement>('pal-autonomy-submit')!.click();
    await settle();
    const error = find('pal-autonomy-error')!;
    expect(error.hidden).toBe(false);
    expect(error.getAttribute('role')).toBe('alert');
    expect(error.textContent).toMatch(/Max turns/);
    expect(maxTurns.getAttribute('aria-invalid')).toBe('true');
    expect(maxTurns.getAttribute('aria-describedby')).toBe(error.id);
    expect(api.setAutonomy).not.toHaveBeenCalled();
    controls.dispose();
  });

  it('turns on with the form’s budgets and gates; the indicator shows them', async () => {
    const api = server();
    const model = await attachedModel(api);
    const { controls, find, onChange } = controlsFor(model);
    find('pal-autonomy-switch')!.click();
    find<HTMLInputElement>('pal-autonomy-max-turns')!.value = '5';
    find<HTMLInputElement>('pal-autonomy-max-tokens')!.value = '20k';
    find<HTMLTextAreaElement>('pal-autonomy-gates')!.value = 'pytest -q\n\npy:assert ok\n';
    find<HTMLButtonElement>('pal-autonomy-submit')!.click();
    await settle();
    expect(api.setAutonomy).toHaveBeenCalledWith('s1', {
      enabled: true,
      budgets: { max_turns: 5, max_tokens: 20_000, timeout_minutes: 30, continuations: 3 },
      gates: ['pytest -q', 'py:assert ok']
    });
    expect(find('pal-autonomy-form')).toBeNull();
    expect(find('pal-autonomy-switch')!.getAttribute('aria-checked')).toBe('true');
    expect(controls.enabled).toBe(true);
    expect(onChange).toHaveBeenCalled();
    const indicator = find('pal-autonomy-indicator')!;
    expect(indicator.hidden).toBe(false);
    expect(indicator.textContent).toBe(
      'Autonomous · next message starts a run · 5 turns · 20k tokens · 30:00'
    );
    expect(indicator.getAttribute('aria-label')).toContain('the next message starts a run');
    controls.dispose();
  });

  it('shows the server’s refusal in the form and lets the user try again', async () => {
    const api = server();
    api.setAutonomy.mockRejectedValueOnce(
      new AgentApiError('timeout_minutes must be at most 1440', 400)
    );
    const model = await attachedModel(api);
    const { controls, find } = controlsFor(model);
    find('pal-autonomy-switch')!.click();
    find<HTMLInputElement>('pal-autonomy-timeout')!.value = '5000';
    const submit = find<HTMLButtonElement>('pal-autonomy-submit')!;
    submit.click();
    await settle();
    expect(find('pal-autonomy-form')).not.toBeNull();
    expect(find('pal-autonomy-error')!.textContent).toBe('timeout_minutes must be at most 1440');
    expect(submit.disabled).toBe(false);
    expect(find<HTMLInputElement>('pal-autonomy-timeout')!.value).toBe('5000');
    expect(find('pal-autonomy-switch')!.getAttribute('aria-checked')).toBe('false');
    controls.dispose();
  });

  it('turns off with one click', async () => {
    const api = server(on());
    const model = await attachedModel(api);
    const { controls, find } = controlsFor(model);
    find('pal-autonomy-switch')!.click();
    await settle();
    expect(api.setAutonomy).toHaveBeenCalledWith('s1', { enabled: false });
    expect(find('pal-autonomy-form')).toBeNull();
    expect(find('pal-autonomy-switch')!.getAttribute('aria-checked')).toBe('false');
    expect(find('pal-autonomy-indicator')!.hidden).toBe(true);
    controls.dispose();
  });

  it('says in the chat when turning off failed', async () => {
    const api = server(on());
    api.setAutonomy.mockRejectedValueOnce(new Error('Internal Server Error'));
    const model = await attachedModel(api);
    const { controls, find, errors } = controlsFor(model);
    find('pal-autonomy-switch')!.click();
    await settle();
    expect(errors).toEqual(['Could not turn autonomous mode off: Internal Server Error']);
    expect(find('pal-autonomy-switch')!.getAttribute('aria-checked')).toBe('true');
    controls.dispose();
  });

  it('follows `autonomy` events: the run’s counts, then off when the server ends the run', async () => {
    const model = await attachedModel(server(on()));
    const { controls, find } = controlsFor(model);
    model.applyEvent({ type: 'autonomy', seq: 4, session_id: 's1', state: on(RUN) });
    const indicator = find('pal-autonomy-indicator')!;
    expect(indicator.textContent).toBe('Autonomous · 3/12 turns · 12k/80k tokens · 1:20/30:00');
    expect(indicator.dataset.run).toBe('running');
    model.applyEvent({
      type: 'autonomy',
      seq: 9,
      session_id: 's1',
      state: { ...OFF, run: { ...RUN, reason: 'stopped' } }
    });
    expect(find('pal-autonomy-switch')!.getAttribute('aria-checked')).toBe('false');
    expect(indicator.hidden).toBe(true);
    controls.dispose();
  });

  it('closes an open form when the mode was turned on elsewhere', async () => {
    const model = await attachedModel();
    const { controls, find } = controlsFor(model);
    find('pal-autonomy-switch')!.click();
    expect(find('pal-autonomy-form')).not.toBeNull();
    model.applyEvent({ type: 'autonomy', seq: 2, session_id: 's1', state: on() });
    expect(find('pal-autonomy-form')).toBeNull();
    controls.dispose();
  });

  it('runs the clock between the server’s reports while the turn runs, and only then', async () => {
    vi.useFakeTimers();
    const model = await attachedModel(server(on(RUN)));
    const { controls, find } = controlsFor(model, true);
    const indicator = find('pal-autonomy-indicator')!;
    expect(indicator.textContent).toContain('1:20/30:00');
    clock += 3_000;
    vi.advanceTimersByTime(3_000);
    expect(indicator.textContent).toContain('1:23/30:00');
    expect(indicator.getAttribute('aria-label')).toContain('1 minute 23 seconds of 30 minutes');
    controls.dispose();

    const stillModel = await attachedModel(server(on(RUN)));
    const idle = controlsFor(stillModel, false);
    clock += 3_000;
    vi.advanceTimersByTime(3_000);
    expect(idle.controls.indicator.textContent).toContain('1:20/30:00');
    idle.controls.dispose();
  });

  it('shows the run’s time since its start after a page reload, and counts on from there', async () => {
    vi.useFakeTimers();
    // The run started 19:09:21; the page reloads at 19:09:31 and the replay brings the
    // report sent when the run started (elapsed 0).
    clock = Date.parse('2026-12-01T19:09:31Z');
    const model = await attachedModel(server(on()));
    const { controls, find } = controlsFor(model, true);
    model.applyEvent({
      type: 'autonomy',
      seq: 3,
      session_id: 's1',
      state: on({ ...RUN, started: '2026-12-01T19:09:21+00:00', turns: 0, elapsed_seconds: 0 })
    });
    const indicator = find('pal-autonomy-indicator')!;
    expect(indicator.textContent).toContain('0:10/30:00');
    clock += 4_000;
    vi.advanceTimersByTime(4_000);
    expect(indicator.textContent).toContain('0:14/30:00');
    controls.dispose();
  });

  it('is disabled, saying why, when the server has no autonomous mode', async () => {
    const api = server();
    api.getAutonomy.mockRejectedValueOnce(new AgentApiError('Not Found', 404));
    const model = new AutonomyModel(api, now);
    await model.attach('s1');
    const { controls, find } = controlsFor(model);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    expect(toggle.disabled).toBe(true);
    expect(toggle.title).toBe('Autonomous mode is not available: Not Found');
    controls.dispose();
  });
});

// ---------------------------------------------------------------- in the chat panel

class AgentWithAutonomy extends StandInAgent {
  readonly stop = vi.fn(async () => undefined);
  readonly send = vi.fn(async () => undefined);
  constructor(readonly autonomy: AutonomyModel) {
    super(sessionInfo('s1', 'analysis.ipynb', { turns: 0 }));
  }
}

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: 's1', ...fields } as unknown as AgentEvent;
}

describe('the chat panel in autonomous mode', () => {
  it('says in the input that the next message starts a run; Stop ends it and the switch follows the event', async () => {
    const model = await attachedModel(server());
    const agent = new AgentWithAutonomy(model);
    agent.transcript.load([], 0);
    const panel = standInChatPanel();
    panel.agent = agent as unknown as NotebookAgent;
    document.body.append(panel.node); // a form submits only in a document
    const find = <T extends HTMLElement = HTMLElement>(testId: string) =>
      panel.node.querySelector<T>(`[data-testid="${testId}"]`);
    const input = find<HTMLTextAreaElement>('pal-chat-input')!;
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    const normalHint = input.placeholder;
    expect(normalHint).not.toBe(AUTONOMOUS_INPUT_HINT);
    expect(find('pal-autonomy-indicator')!.hidden).toBe(true);

    toggle.click();
    find<HTMLButtonElement>('pal-autonomy-submit')!.click();
    await settle();
    expect(toggle.getAttribute('aria-checked')).toBe('true');
    expect(input.placeholder).toBe(AUTONOMOUS_INPUT_HINT);
    expect(find('pal-autonomy-indicator')!.hidden).toBe(false);

    // The run: a turn, a gate line, then Stop.
    agent.transcript.apply(event(1, { type: 'turn_started', turn: 1, text: 'make the tests pass' }));
    model.applyEvent(event(2, { type: 'autonomy', state: on(RUN) }));
    agent.transcript.apply(
      event(3, { type: 'notice', turn: 1, kind: 'gate_failed', text: 'gate `pytest -q` failed (exit 1)', command: 'pytest -q', exit_status: 1, seconds: 1.5, output: 'E   assert 1 == 2' })
    );
    expect(find('pal-autonomy-indicator')!.textContent).toContain('3/12 turns');
    const gate = find('pal-notice')!;
    expect(gate.dataset.kind).toBe('gate_failed');
    expect(gate.querySelector('[data-testid="pal-gate-command"]')?.textContent).toBe('pytest -q');

    const stop = find<HTMLButtonElement>('pal-stop')!;
    expect(stop.disabled).toBe(false);
    expect(stop.title).toMatch(/autonomous run/);
    stop.click();
    expect(agent.stop).toHaveBeenCalledTimes(1);
    model.applyEvent(event(4, { type: 'autonomy', state: { ...OFF, run: { ...RUN, reason: 'stopped' } } }));
    agent.transcript.apply(event(5, { type: 'turn_ended', turn: 1, stop_reason: 'stopped', final_text: '' }));
    expect(toggle.getAttribute('aria-checked')).toBe('false');
    expect(find('pal-autonomy-indicator')!.hidden).toBe(true);
    expect(input.placeholder).toBe(normalHint);
    panel.dispose();
  });

  it('closes the form on Escape from the gates, focus back on the switch; Escape in the chat input leaves it open', async () => {
    const agent = new AgentWithAutonomy(await attachedModel(server()));
    agent.transcript.load([], 0);
    const panel = standInChatPanel();
    panel.agent = agent as unknown as NotebookAgent;
    document.body.append(panel.node);
    const find = <T extends HTMLElement = HTMLElement>(testId: string) =>
      panel.node.querySelector<T>(`[data-testid="${testId}"]`);
    const toggle = find<HTMLButtonElement>('pal-autonomy-switch')!;
    const escape = (target: HTMLElement) =>
      target.dispatchEvent(
        new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true })
      );

    toggle.click();
    const gates = find<HTMLTextAreaElement>('pal-autonomy-gates')!;
    gates.focus();
    escape(gates);
    expect(find('pal-autonomy-form')).toBeNull();
    expect(document.activeElement).toBe(toggle);

    toggle.click();
    const input = find<HTMLTextAreaElement>('pal-chat-input')!;
    input.focus();
    escape(input);
    expect(find('pal-autonomy-form')).not.toBeNull();
    // The panel itself holding the focus is lost focus: Escape closes the form.
    panel.node.tabIndex = -1;
    panel.node.focus();
    escape(panel.node);
    expect(find('pal-autonomy-form')).toBeNull();
    expect(document.activeElement).toBe(toggle);
    panel.dispose();
  });

  it('shows the autonomy of the agent it shows, and none without one', async () => {
    const first = new AgentWithAutonomy(await attachedModel(server(on())));
    const second = new AgentWithAutonomy(await attachedModel(server(OFF)));
    const panel = standInChatPanel();
    const toggle = panel.node.querySelector<HTMLButtonElement>('[data-testid="pal-autonomy-switch"]')!;
    panel.agent = first as unknown as NotebookAgent;
    expect(toggle.getAttribute('aria-checked')).toBe('true');
    panel.agent = second as unknown as NotebookAgent;
    expect(toggle.getAttribute('aria-checked')).toBe('false');
    // The first agent's events no longer reach this panel's switch.
    first.autonomy.applyEvent(event(3, { type: 'autonomy', state: OFF }));
    second.autonomy.applyEvent(event(3, { type: 'autonomy', state: on() }));
    expect(toggle.getAttribute('aria-checked')).toBe('true');
    panel.agent = null;
    expect(toggle.disabled).toBe(true);
    panel.dispose();
  });
});

// ---------------------------------------------------------------- gate and continuation lines

const CONTEXT = entryContext();

function noticeFrom(item: Record<string, unknown>): INoticeEntry {
  const transcript = new TranscriptModel();
  transcript.load([{ type: 'notice', turn: 1, ...item } as unknown as ChatItem], 0);
  return transcript.entries[0] as INoticeEntry;
}

describe('gate lines in the chat', () => {
  it('show the command in monospace, the exit status, the time and the first output line', () => {
    const node = renderEntry(
      noticeFrom({ kind: 'gate_passed', text: 'gate `make test` passed', command: 'make test', exit_status: 0, seconds: 12.4, output: '42 passed in 12.1s\n' }),
      CONTEXT
    );
    expect(node.dataset.testid).toBe('pal-notice');
    expect(node.dataset.tone).toBe('info');
    expect(node.classList.contains('pal-gate-line')).toBe(true);
    expect(node.querySelector('code[data-testid="pal-gate-command"]')?.textContent).toBe('make test');
    expect(node.querySelector('[data-testid="pal-gate-facts"]')?.textContent).toBe('exit 0 · 12 s');
    expect(node.querySelector('[data-testid="pal-gate-output"]')?.textContent).toBe('42 passed in 12.1s');
    expect(node.textContent).toContain('gate passed');
    expect(node.title).toBe('gate `make test` passed');
  });

  it('style a failed gate as a warning, from a transcript item and from a live event', () => {
    const fromItem = noticeFrom({ kind: 'gate_failed', text: 'gate failed', command: 'pytest -q', exit_status: 1, seconds: 0.4 });
    expect(fromItem.tone).toBe('warning');
    const node = renderEntry(fromItem, CONTEXT);
    expect(node.classList.contains('pal-mod-warning')).toBe(true);
    expect(node.getAttribute('role')).toBe('alert');
    expect(node.querySelector('[data-testid="pal-gate-facts"]')?.textContent).toBe('exit 1 · 0.4 s');

    const transcript = new TranscriptModel();
    transcript.load([], 0);
    transcript.apply(event(1, { type: 'notice', turn: 1, kind: 'gate_failed', text: 'gate failed', command: 'py:assert auc > 0.9', exit_status: null }));
    const live = transcript.entries[0] as INoticeEntry;
    expect(live.tone).toBe('warning');
    expect(live.gate).toEqual({ command: 'py:assert auc > 0.9', exitCode: null, seconds: null, outputHead: '' });
    expect(renderEntry(live, CONTEXT).querySelector('[data-testid="pal-gate-facts"]')?.textContent).toBe(
      'no exit status'
    );
  });

  it('show the text alone when the notice has no fields, `quoted` parts in monospace', () => {
    const node = renderEntry(
      noticeFrom({ kind: 'gate_failed', text: 'gate `pytest -q` failed: exit 1 after 2.0 s' }),
      CONTEXT
    );
    expect(node.querySelector('code')?.textContent).toBe('pytest -q');
    expect(node.textContent).toBe('✗ gate pytest -q failed: exit 1 after 2.0 s');
  });

  it('show a command of several lines as its first line and “…”, the whole command in its tooltip', () => {
    const command = 'python - <<EOF\nimport sys\nsys.exit(3)\nEOF';
    const node = renderEntry(
      noticeFrom({ kind: 'gate_failed', text: `gate \`${command}\` failed`, command, exit_status: 3, seconds: 0.2 }),
      CONTEXT
    );
    const code = node.querySelector<HTMLElement>('[data-testid="pal-gate-command"]')!;
    expect(code.textContent).toBe('python - <<EOF …');
    expect(code.title).toBe(command);
    expect(node.title).toBe(`gate \`${command}\` failed`);

    // Leading blank lines are skipped; a one-line command has no tooltip of its own.
    const padded = renderEntry(
      noticeFrom({ kind: 'gate_passed', text: 'gate passed', command: '\n  make test  \n', exit_status: 0 }),
      CONTEXT
    );
    const plain = padded.querySelector<HTMLElement>('[data-testid="pal-gate-command"]')!;
    expect(plain.textContent).toBe('make test');
    expect(plain.title).toBe('');

    // The text alone (a notice without fields): the same for its `quoted` command.
    const fromText = renderEntry(
      noticeFrom({ kind: 'gate_failed', text: `Gate \`${command}\` failed (exit 3)` }),
      CONTEXT
    );
    const quoted = fromText.querySelector<HTMLElement>('code')!;
    expect(quoted.textContent).toBe('python - <<EOF …');
    expect(quoted.title).toBe(command);
    expect(fromText.textContent).toBe('✗ Gate python - <<EOF … failed (exit 3)');
    expect(fromText.title).toBe(`Gate \`${command}\` failed (exit 3)`);
  });

  it('show a continuation as an information line', () => {
    const node = renderEntry(
      noticeFrom({ kind: 'continuation', text: 'continuing: gate `pytest -q` failed (attempt 1 of 3)' }),
      CONTEXT
    );
    expect(node.dataset.kind).toBe('continuation');
    expect(node.dataset.tone).toBe('info');
    expect(node.textContent).toContain('attempt 1 of 3');
  });
});
