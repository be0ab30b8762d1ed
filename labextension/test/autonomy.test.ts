import { describe, expect, it, vi } from 'vitest';

import {
  AutonomyModel,
  firstLine,
  formatClock,
  formatTokens,
  formValues,
  gateRunOf,
  gatesSentence,
  indicatorLabel,
  indicatorText,
  parseAutonomyForm,
  readAutonomyState,
  runElapsed,
  type AutonomyRequest,
  type AutonomyState,
  type IAutonomyFormValues
} from '../src/autonomy';

const DEFAULTS: AutonomyState = {
  enabled: false,
  budgets: { max_turns: 12, max_tokens: 80_000, timeout_minutes: 30, continuations: 3 },
  gates: [],
  run: null
};

function state(fields: Partial<AutonomyState> = {}): AutonomyState {
  return { ...DEFAULTS, ...fields };
}

function running(fields: Partial<NonNullable<AutonomyState['run']>> = {}): AutonomyState {
  return state({
    enabled: true,
    gates: ['pytest -q'],
    run: {
      started: '2026-12-01T18:00:00+00:00',
      turns: 3,
      tokens: 12_000,
      elapsed_seconds: 80,
      continuations: 1,
      reason: null,
      ...fields
    }
  });
}

function values(fields: Partial<IAutonomyFormValues> = {}): IAutonomyFormValues {
  return { ...formValues(DEFAULTS), ...fields };
}

function errorsOf(fields: Partial<IAutonomyFormValues>): Record<string, string> {
  const result = parseAutonomyForm(values(fields));
  if (result.ok) {
    throw new Error(`accepted ${JSON.stringify(fields)}`);
  }
  return result.errors as Record<string, string>;
}

describe('the autonomy form', () => {
  it('is prefilled from the server’s budgets and gates, and reads back to the same request', () => {
    const server = state({ gates: ['pytest -q', 'py:assert auc > 0.9'] });
    const filled = formValues(server);
    expect(filled).toEqual({
      maxTurns: '12',
      maxTokens: '80000',
      timeoutMinutes: '30',
      continuations: '3',
      gates: 'pytest -q\npy:assert auc > 0.9'
    });
    expect(parseAutonomyForm(filled)).toEqual({
      ok: true,
      request: { enabled: true, budgets: server.budgets, gates: server.gates }
    });
  });

  it('reads token counts with separators or a k, and minutes with a fraction', () => {
    for (const typed of ['80000', '80,000', '80_000', '80 000', '80k', ' 80K ']) {
      const result = parseAutonomyForm(values({ maxTokens: typed }));
      expect(result.ok && result.request.budgets?.max_tokens).toBe(80_000);
    }
    const result = parseAutonomyForm(values({ timeoutMinutes: '0.5', continuations: '0' }));
    expect(result.ok && result.request.budgets).toMatchObject({
      timeout_minutes: 0.5,
      continuations: 0
    });
  });

  it('names every field that is wrong, and only those', () => {
    expect(Object.keys(errorsOf({ maxTurns: '0' }))).toEqual(['maxTurns']);
    for (const bad of ['', '1.5', 'abc', '-2', '12k', '3,']) {
      expect(errorsOf({ maxTurns: bad }).maxTurns).toMatch(/Max turns/);
    }
    expect(errorsOf({ maxTokens: '0' }).maxTokens).toMatch(/Max tokens/);
    expect(errorsOf({ maxTokens: '80kk' }).maxTokens).toMatch(/Max tokens/);
    for (const bad of ['0', '', 'soon', '-1', '1e3']) {
      expect(errorsOf({ timeoutMinutes: bad }).timeoutMinutes).toMatch(/minutes/);
    }
    expect(errorsOf({ continuations: '-1' }).continuations).toMatch(/Continuations/);
    expect(Object.keys(errorsOf({ maxTurns: 'x', continuations: 'y' }))).toEqual([
      'maxTurns',
      'continuations'
    ]);
  });

  it('takes one gate per line, trimmed, without blank lines; `py:` needs an expression', () => {
    const result = parseAutonomyForm(
      values({ gates: '  pytest -q  \n\n   \npy:assert abs(auc - 0.91) < 0.01\n' })
    );
    expect(result.ok && result.request.gates).toEqual([
      'pytest -q',
      'py:assert abs(auc - 0.91) < 0.01'
    ]);
    expect(errorsOf({ gates: 'pytest -q\npy:   ' }).gates).toBe(
      'Line 2: "py:" needs a Python expression after it.'
    );
    const none = parseAutonomyForm(values({ gates: '' }));
    expect(none.ok && none.request.gates).toEqual([]);
  });
});

describe('the indicator', () => {
  it('shows turns, tokens and time against their budgets', () => {
    expect(indicatorText(running(), 80)).toBe(
      'Autonomous · 3/12 turns · 12k/80k tokens · 1:20/30:00'
    );
  });

  it('shows the budgets before the first run, and how the last run ended', () => {
    expect(indicatorText(state({ enabled: true }), 0)).toBe(
      'Autonomous · next message starts a run · 12 turns · 80k tokens · 30:00'
    );
    expect(indicatorText(running({ reason: 'gates_passed' }), 80)).toBe(
      'Autonomous · 3/12 turns · 12k/80k tokens · 1:20/30:00 · ended: gates_passed'
    );
  });

  it('says the same as a sentence for screen readers', () => {
    const label = indicatorLabel(running(), 80);
    expect(label).toContain('3 of 12 turns');
    expect(label).toContain('12,000 of 80,000 tokens');
    expect(label).toContain('1 minute 20 seconds of 30 minutes');
    expect(label).toContain('Gate: pytest -q.');
  });

  it('numbers several gates, each by its first line, so a `;` in one cannot split it', () => {
    expect(gatesSentence(['cd src; pytest -q', 'py:assert ok', 'make a\nmake b'])).toBe(
      'Gates: (1) cd src; pytest -q (2) py:assert ok (3) make a ….'
    );
    expect(gatesSentence([])).toBe('No gates: the run continues with the default prompt.');
  });

  it('formats token counts and clocks compactly', () => {
    expect([0, 950, 1000, 1200, 9_950, 12_345, 80_000, 1_500_000, 12_000_000].map(formatTokens)).toEqual(
      ['0', '950', '1k', '1.2k', '9.9k', '12k', '80k', '1.5M', '12M']
    );
    expect([0, 59, 80, 1800, 3723].map(formatClock)).toEqual([
      '0:00',
      '0:59',
      '1:20',
      '30:00',
      '1:02:03'
    ]);
  });

  it('counts from the run’s start after a reload, not from the reload or the last report', () => {
    // Started 19:09:21; the page reloaded at 19:09:31 and got a report from the run's start.
    const started = Date.parse('2026-12-01T19:09:21Z');
    const reload = Date.parse('2026-12-01T19:09:31Z');
    const stale = running({ started: '2026-12-01T19:09:21+00:00', elapsed_seconds: 0 });
    expect(runElapsed(stale, reload, reload, true)).toBe(10);
    expect(runElapsed(stale, reload, reload + 4_000, true)).toBe(14);
    // A fresh report says the same.
    const fresh = running({ started: '2026-12-01T19:09:21+00:00', elapsed_seconds: 10.2 });
    expect(runElapsed(fresh, reload, started + 14_000, true)).toBe(14);
    expect(indicatorText(stale, runElapsed(stale, reload, reload + 4_000, true))).toContain(
      '0:14/30:00'
    );
  });

  it('uses the report and the time since it when the browser’s clock disagrees with the server’s', () => {
    const started = Date.parse('2026-12-01T19:09:21Z');
    const run = running({ started: '2026-12-01T19:09:21+00:00', elapsed_seconds: 30 });
    // The browser's clock is 20 s behind: `started` looks only 10 s old (or in the future).
    const behind = started + 10_000;
    expect(runElapsed(run, behind, behind + 5_000, true)).toBe(35);
    const farBehind = started - 60_000;
    expect(runElapsed(run, farBehind, farBehind + 5_000, true)).toBe(35);
    // Two hours ahead: the run is not believed to be two hours old.
    const ahead = started + 30_000 + 2 * 3600_000;
    expect(runElapsed(run, ahead, ahead + 5_000, true)).toBe(35);
    // A `started` that is not a time.
    expect(runElapsed(running({ started: '', elapsed_seconds: 30 }), 7_000, 12_000, true)).toBe(35);
    expect(runElapsed(running({ started: 'soon', elapsed_seconds: 30 }), 7_000, 12_000, true)).toBe(
      35
    );
    // A second's difference (`started` is cut to whole seconds) is no disagreement.
    const close = started + 29_400;
    expect(runElapsed(run, close, close + 5_000, true)).toBeCloseTo(34.4);
  });

  it('shows the report as it is once the run’s clock stopped', () => {
    const run = running({ started: '2026-12-01T19:09:21+00:00', elapsed_seconds: 30 });
    const later = Date.parse('2026-12-01T20:00:00Z');
    expect(runElapsed(run, later, later + 5_000, false)).toBe(30);
  });

  it('counts the time since the server’s report while the run’s clock goes', () => {
    const now = 1_000_000;
    expect(runElapsed(running(), now - 5_000, now, true)).toBe(85);
    expect(runElapsed(running(), now - 5_000, now, false)).toBe(80);
    expect(runElapsed(state({ enabled: true }), now - 5_000, now, false)).toBe(0);
  });
});

describe('one line of a text of several', () => {
  it('is the first line that is not blank, with “…” when more follows', () => {
    expect(firstLine('pytest -q')).toEqual({ text: 'pytest -q', cut: false });
    expect(firstLine('  pytest -q \n')).toEqual({ text: 'pytest -q', cut: false });
    expect(firstLine('\n\ncd src &&\r\n  pytest -q')).toEqual({ text: 'cd src && …', cut: true });
    expect(firstLine('')).toEqual({ text: '', cut: false });
  });
});

describe('reading the server’s state', () => {
  it('rejects what is not a state instead of throwing', () => {
    expect(readAutonomyState(null)).toBeNull();
    expect(readAutonomyState('on')).toBeNull();
    expect(readAutonomyState({ enabled: 'yes', budgets: DEFAULTS.budgets })).toBeNull();
    expect(readAutonomyState({ enabled: true })).toBeNull();
    expect(
      readAutonomyState({ enabled: true, budgets: { ...DEFAULTS.budgets, max_turns: '12' } })
    ).toBeNull();
  });

  it('fills what a run leaves out and drops gates that are not text', () => {
    expect(
      readAutonomyState({ ...DEFAULTS, enabled: true, gates: ['a', 3, null], run: { turns: 2 } })
    ).toEqual({
      ...DEFAULTS,
      enabled: true,
      gates: ['a'],
      run: { started: '', turns: 2, tokens: 0, elapsed_seconds: 0, continuations: 0, reason: null }
    });
  });

  it('reads a gate run from a notice’s fields', () => {
    expect(
      gateRunOf({
        kind: 'gate_failed',
        text: '…',
        command: 'pytest -q',
        exit_status: 1,
        seconds: 2.34,
        output: '\n\nE   assert 1 == 2\nmore'
      })
    ).toEqual({ command: 'pytest -q', exitCode: 1, seconds: 2.34, outputHead: 'E   assert 1 == 2' });
    expect(gateRunOf({ kind: 'gate_passed', text: 'gate passed' })).toBeNull();
    expect(gateRunOf({ command: 'py:ok', exit_status: null })).toEqual({
      command: 'py:ok',
      exitCode: null,
      seconds: null,
      outputHead: ''
    });
  });
});

/** A promise with its resolve and reject, for answers that arrive when a test says. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

function autonomyEvent(seq: number, sessionId: string, value: AutonomyState) {
  return { type: 'autonomy', seq, session_id: sessionId, state: value };
}

describe('AutonomyModel', () => {
  function modelWith(get: () => Promise<unknown>) {
    const put = vi.fn(async (_: string, request: AutonomyRequest) => ({
      ...DEFAULTS,
      enabled: request.enabled
    }));
    const api = { getAutonomy: vi.fn(get), setAutonomy: put };
    let clock = 5_000;
    const model = new AutonomyModel(api, () => clock);
    return { api, model, tick: (ms: number) => (clock += ms) };
  }

  it('reads the state when it attaches to a session', async () => {
    const { api, model } = modelWith(async () => state({ enabled: true }));
    const changed = vi.fn();
    model.changed.connect(changed);
    await model.attach('s1');
    expect(api.getAutonomy).toHaveBeenCalledWith('s1');
    expect(model.state?.enabled).toBe(true);
    expect(model.receivedAt).toBe(5_000);
    expect(changed).toHaveBeenCalled();
  });

  it('follows `autonomy` events of its session and ignores others', async () => {
    const { model, tick } = modelWith(async () => DEFAULTS);
    await model.attach('s1');
    tick(1_000);
    expect(model.applyEvent(autonomyEvent(7, 's1', running()))).toBe(true);
    expect(model.state?.run?.turns).toBe(3);
    expect(model.receivedAt).toBe(6_000);
    expect(model.applyEvent(autonomyEvent(8, 's2', DEFAULTS))).toBe(false);
    expect(model.applyEvent({ type: 'notice', seq: 9, session_id: 's1', kind: 'x', text: 'y' })).toBe(false);
    expect(model.applyEvent({ type: 'autonomy', seq: 10, session_id: 's1', state: { enabled: 1 } })).toBe(false);
    expect(model.applyEvent(null)).toBe(false);
    expect(model.state?.enabled).toBe(true);
  });

  it('keeps an event that arrived while its GET was under way (the answer is older)', async () => {
    const answer = deferred<unknown>();
    const { model } = modelWith(() => answer.promise);
    const attaching = model.attach('s1');
    model.applyEvent(autonomyEvent(3, 's1', running()));
    answer.resolve(DEFAULTS);
    await attaching;
    expect(model.state?.enabled).toBe(true);
  });

  it('keeps its GET’s answer over the replay of older `autonomy` events after a reload', async () => {
    const answer = deferred<unknown>();
    const { model } = modelWith(() => answer.promise);
    // The session was loaded at event 20; the stream replays its buffer from 0.
    const attaching = model.attach('s1', 20);
    model.applyEvent(autonomyEvent(5, 's1', running({ elapsed_seconds: 0, turns: 1 })));
    expect(model.state?.run?.turns).toBe(1); // shown until the answer comes
    answer.resolve(running({ elapsed_seconds: 10, turns: 2 }));
    await attaching;
    expect(model.state?.run).toMatchObject({ elapsed_seconds: 10, turns: 2 });
    expect(model.applyEvent(autonomyEvent(12, 's1', running({ elapsed_seconds: 0, turns: 1 })))).toBe(
      true
    );
    expect(model.state?.run).toMatchObject({ elapsed_seconds: 10, turns: 2 });
    // A newer event wins, and the replay cannot take it back.
    model.applyEvent(autonomyEvent(21, 's1', running({ elapsed_seconds: 15, turns: 3 })));
    expect(model.state?.run?.turns).toBe(3);
    model.applyEvent(autonomyEvent(19, 's1', running({ turns: 1 })));
    expect(model.state?.run?.turns).toBe(3);
  });

  it('keeps a replayed event when its GET failed', async () => {
    const { model, api } = modelWith(async () => DEFAULTS);
    api.getAutonomy.mockRejectedValueOnce(new Error('Bad Gateway'));
    await model.attach('s1', 20);
    expect(model.state).toBeNull();
    model.applyEvent(autonomyEvent(5, 's1', running()));
    expect(model.state?.enabled).toBe(true);
  });

  it('forgets the state of the session it left, and says why a state could not be read', async () => {
    const { model, api } = modelWith(async () => state({ enabled: true }));
    await model.attach('s1');
    api.getAutonomy.mockRejectedValueOnce(new Error('Not Found'));
    await model.attach('s2');
    expect(model.state).toBeNull();
    expect(model.error).toBe('Not Found');
    expect(model.applyEvent(autonomyEvent(2, 's1', running()))).toBe(false);
  });

  it('sends PUT and takes its answer as the state; a refusal leaves the state alone', async () => {
    const { model, api } = modelWith(async () => DEFAULTS);
    await model.attach('s1');
    const request: AutonomyRequest = { enabled: true, budgets: DEFAULTS.budgets, gates: ['make test'] };
    await model.update(request);
    expect(api.setAutonomy).toHaveBeenCalledWith('s1', request);
    expect(model.state?.enabled).toBe(true);

    api.setAutonomy.mockRejectedValueOnce(new Error('max_turns must be at least 1'));
    await expect(model.update({ enabled: false })).rejects.toThrow('max_turns must be at least 1');
    expect(model.state?.enabled).toBe(true);
  });

  it('refuses to PUT before it has a session', async () => {
    const { model, api } = modelWith(async () => DEFAULTS);
    await expect(model.update({ enabled: false })).rejects.toThrow(/No agent session/);
    expect(api.setAutonomy).not.toHaveBeenCalled();
  });
});
