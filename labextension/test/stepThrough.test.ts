// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { SessionListModel, type ISessionListHost } from '../src/sessionList';
import { SessionListView } from '../src/sessionListView';
import {
  codeMarkdown,
  observationLines,
  sessionChoices,
  stepDelta,
  stepHeading,
  StepThroughModel,
  tokenLine,
  type IStepsApi
} from '../src/stepThrough';
import { StepThroughView } from '../src/stepThroughView';
import type { ISessionListItem, ISessionStep, ISessionSteps } from '../src/wire';

const CUT = '[... 400 of 520 characters cut here (cap 120); the rest is in the notebook ...]';

function step(index: number, extra: Partial<ISessionStep> = {}): ISessionStep {
  return {
    index,
    turn: 1,
    entry_id: `e${index}`,
    user_message: 'fan out',
    user_from: null,
    received: [],
    text: '',
    call_index: 0,
    tool_call_id: `c${index}`,
    code: `print(${index})`,
    cell_id: `cell-${index}`,
    status: 'ok',
    execution_count: index + 1,
    observation: `[stdout]\n${index}`,
    cut_lines: [],
    images: 0,
    provider: 'scripted',
    model: 'demo',
    usage: { input_tokens: 1200, output_tokens: 80 },
    answered_at: '2026-01-01T00:00:00.000+00:00',
    finished_at: '2026-01-01T00:00:00.400+00:00',
    model_seconds: 0.25,
    cell_seconds: 0.4,
    children: [],
    ...extra
  };
}

const ROOT: ISessionSteps = {
  session_id: 'root',
  notebook_path: 'analysis.ipynb',
  name: null,
  parent_session_id: null,
  broken: null,
  steps: [
    step(0, {
      text: 'Spawning **alpha**.',
      observation: `[stdout]\nxxxx\n${CUT}\nxx\nend\n`,
      cut_lines: [2],
      children: [
        { session_id: 'child', name: 'alpha', notebook_path: 'analysis.agents/alpha.ipynb', task: 't' }
      ]
    }),
    step(1),
    step(2, { code: null, tool_call_id: null, observation: null, text: 'done' })
  ]
};

const CHILD: ISessionSteps = {
  session_id: 'child',
  notebook_path: 'analysis.agents/alpha.ipynb',
  name: 'alpha',
  parent_session_id: 'root',
  broken: 'session.jsonl: line 9: an array where a record (a JSON object) belongs',
  steps: [
    step(0, {
      user_message: '[task from parent]\n\nalpha words',
      user_from: 'parent',
      children: [
        { session_id: 'grandchild', name: 'a1', notebook_path: 'analysis.agents/alpha.agents/a1.ipynb', task: 'deeper' }
      ]
    }),
    step(1, { code: null, observation: null, text: 'did alpha words' })
  ]
};

const GRANDCHILD: ISessionSteps = {
  session_id: 'grandchild',
  notebook_path: 'analysis.agents/alpha.agents/a1.ipynb',
  name: 'a1',
  parent_session_id: 'child',
  broken: null,
  steps: [step(0, { code: null, observation: null, text: 'did deeper' })]
};

function api(): IStepsApi & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    getSteps: async (id: string) => {
      asked.push(id);
      if (id === 'root') {
        return ROOT;
      }
      if (id === 'child') {
        return CHILD;
      }
      if (id === 'grandchild') {
        return GRANDCHILD;
      }
      throw new Error(`no session '${id}'`);
    }
  };
}

const settled = () => new Promise(resolve => setTimeout(resolve, 0));

describe('step-through model', () => {
  it('moves within the session and stops at its ends', async () => {
    const model = new StepThroughModel(api(), 'root');
    await model.load();
    const root = model.root!;
    expect(root.counter).toBe('Step 1 of 3');
    expect(root.atStart).toBe(true);
    model.move(-1);
    expect(root.index).toBe(0);
    model.move(1);
    model.move(1);
    model.move(1);
    expect(root.counter).toBe('Step 3 of 3');
    expect(root.atEnd).toBe(true);
  });

  it('opens a lane for each sub-agent of the current step, with its own steps and position', async () => {
    const client = api();
    const model = new StepThroughModel(client, 'root');
    await model.load();
    await settled();
    expect(client.asked).toEqual(['root', 'child']);
    const [lane] = model.lanes;
    expect(lane.child.name).toBe('alpha');
    expect(lane.cursor!.counter).toBe('Step 1 of 2');
    model.moveLane('child', 1);
    expect(lane.cursor!.current!.text).toBe('did alpha words');
    expect(model.root!.index).toBe(0);
    model.move(1);
    expect(model.lanes).toEqual([]); // the next step spawned nothing
    model.move(-1);
    expect(model.lanes[0].cursor!.index).toBe(1); // the lane kept its place
    expect(client.asked).toEqual(['root', 'child']); // and was not fetched again
  });

  it('nests the lanes of a sub-agent’s own sub-agents, fetched once shown', async () => {
    const client = api();
    const model = new StepThroughModel(client, 'root');
    const view = new StepThroughView(model, { renderMarkdown: null });
    await model.load();
    await settled();
    await settled();
    expect(client.asked).toEqual(['root', 'child', 'grandchild']);
    const outer = view.node.querySelector<HTMLElement>('.pal-step-lane[data-session-id="child"]')!;
    const inner = outer.querySelector<HTMLElement>('.pal-step-lane[data-session-id="grandchild"]')!;
    expect(inner.textContent).toContain('did deeper');
    inner.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
    expect(model.root!.index).toBe(0); // the key moved the innermost lane only (one step)
    outer.querySelector<HTMLElement>('[data-testid="pal-step-heading"]')!.dispatchEvent(
      new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true })
    );
    expect(model.lanes[0].cursor!.index).toBe(1);
    expect(view.node.querySelector('.pal-step-lane[data-session-id="grandchild"]')).toBeNull();
    view.dispose();
  });

  it('says a damaged log is damaged, over the steps before the damage', async () => {
    const model = new StepThroughModel(api(), 'child');
    const view = new StepThroughView(model, { renderMarkdown: null });
    await model.load();
    const note = view.node.querySelector('[data-testid="pal-step-broken"]')!;
    expect(note.textContent).toContain('line 9: an array where a record');
    expect(view.node.querySelector('[data-testid="pal-step-counter"]')!.textContent).toBe(
      'Step 1 of 2'
    );
    view.dispose();
  });

  it('says why when the steps cannot be read', async () => {
    const model = new StepThroughModel(api(), 'gone');
    await model.load();
    expect(model.root).toBeNull();
    expect(model.error).toContain("no session 'gone'");
  });
});

describe('step-through pure parts', () => {
  it('marks the lines where the output was cut', () => {
    const lines = observationLines(ROOT.steps[0]);
    expect(lines.map(l => l.text)).toEqual(['[stdout]', 'xxxx', CUT, 'xx', 'end']);
    expect(lines.filter(l => l.cut).map(l => l.text)).toEqual([CUT]);
    expect(observationLines(ROOT.steps[2])).toEqual([]);
  });

  it('heads a step with its turn, cell, status and time, and its tokens', () => {
    expect(stepHeading(ROOT.steps[0])).toBe('Turn 1 · cell [1] · ok · 0.4 s');
    expect(stepHeading(step(2, { code: null, cell_seconds: null }))).toBe('Turn 1 · answer');
    expect(tokenLine(ROOT.steps[0])).toBe('1,200 in · 80 out · model 0.3 s');
    expect(tokenLine(step(0, { usage: null }))).toBe('');
  });

  it('steps with Left and Right only', () => {
    expect([stepDelta('ArrowRight'), stepDelta('ArrowLeft'), stepDelta('ArrowDown')]).toEqual([
      1, -1, 0
    ]);
  });

  it('fences code longer than any run of backticks in it', () => {
    expect(codeMarkdown('x = 1')).toBe('```python\nx = 1\n```');
    expect(codeMarkdown('s = """```"""')).toBe('````python\ns = """```"""\n````');
  });
});

describe('step-through view', () => {
  it('steps with the buttons and the arrow keys, and shows the lane and the cut', async () => {
    const shown: number[] = [];
    const model = new StepThroughModel(api(), 'root');
    const view = new StepThroughView(model, {
      renderMarkdown: null,
      stepShown: s => shown.push(s.index)
    });
    const find = (id: string) => view.node.querySelector<HTMLElement>(`[data-testid="${id}"]`);
    expect(find('pal-step-status')!.textContent).toBe('Loading the steps…');
    await model.load();
    await settled();
    expect(find('pal-step-counter')!.textContent).toBe('Step 1 of 3');
    expect(find('pal-step-user')!.textContent).toContain('fan out');
    expect(find('pal-step-text')!.textContent).toContain('Spawning **alpha**.');
    expect(find('pal-step-cut')!.textContent).toBe(`${CUT}\n`);
    const lane = find('pal-step-lane')!;
    expect(lane.textContent).toContain('alpha');
    expect(find('pal-step-lane-counter')!.textContent).toBe('Step 1 of 2');
    expect(find('pal-step-broken')).toBeNull(); // the root's log is whole
    find('pal-step-lane-next')!.click();
    expect(find('pal-step-lane')!.textContent).toContain('did alpha words');
    expect((find('pal-step-previous') as HTMLButtonElement).disabled).toBe(true);

    find('pal-step-next')!.click();
    expect(find('pal-step-counter')!.textContent).toBe('Step 2 of 3');
    expect(find('pal-step-lanes')!.hidden).toBe(true);
    view.node.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
    expect(find('pal-step-counter')!.textContent).toBe('Step 3 of 3');
    expect(find('pal-step-code')).toBeNull();
    view.node.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowLeft', bubbles: true }));
    view.node.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowLeft', bubbles: true }));
    expect(find('pal-step-counter')!.textContent).toBe('Step 1 of 3');
    expect(shown).toEqual([0, 1, 2, 1, 0]);
    view.dispose();
  });

  it('keeps the focus on the button pressed across the render it causes', async () => {
    const model = new StepThroughModel(api(), 'root');
    const view = new StepThroughView(model, { renderMarkdown: null });
    document.body.append(view.node);
    await model.load();
    await settled();
    const next = () => view.node.querySelector<HTMLButtonElement>('[data-testid="pal-step-next"]')!;
    next().focus();
    next().click();
    expect(document.activeElement).toBe(next());
    next().click(); // the last step: Next is off, the view keeps the keys
    expect(document.activeElement).toBe(view.node);
    const previous = () =>
      view.node.querySelector<HTMLButtonElement>('[data-testid="pal-step-previous"]')!;
    previous().focus();
    previous().click();
    expect(document.activeElement).toBe(previous());
    view.node.remove();
    view.dispose();
  });

  it('renders the text and the cell through the chat’s Markdown renderer', async () => {
    const rendered: string[] = [];
    const renderMarkdown = vi.fn(async (host: HTMLElement, source: string) => {
      rendered.push(source);
      host.innerHTML = '<p>rendered</p>';
    });
    const model = new StepThroughModel(api(), 'root');
    const view = new StepThroughView(model, { renderMarkdown });
    await model.load();
    expect(rendered).toContain('Spawning **alpha**.');
    expect(rendered).toContain('```python\nprint(0)\n```');
    view.dispose();
  });
});

function listItem(id: string, extra: Partial<ISessionListItem> = {}): ISessionListItem {
  return {
    session_id: id,
    notebook_path: 'analysis.ipynb',
    title: 'fan out',
    created: '2026-01-01T10:00:00.000+00:00',
    updated: '2026-01-01T11:00:00.000+00:00',
    provider: 'scripted',
    model: 'demo',
    status: 'inactive',
    turns: 1,
    cost: 0,
    cost_total: 0,
    last_user_entry_id: `u-${id}`,
    ...extra
  };
}

describe('opening a step-through', () => {
  it('offers each readable session of the notebook once, newest first, by a unique label', () => {
    const now = Date.parse('2026-01-01T11:05:00.000+00:00');
    const choices = sessionChoices(
      [listItem('b', { turns: 2 }), listItem('a'), listItem('c', { status: 'broken' })],
      now
    );
    expect([...choices]).toEqual([
      ['fan out · 5 min ago · 2 turns · b', 'b'],
      ['fan out · 5 min ago · 1 turn · a', 'a']
    ]);
  });

  it('is an action of each session list row when the host can open it', async () => {
    const opened: string[] = [];
    const host: ISessionListHost = {
      api: () => ({
        listNotebookSessions: async () => [listItem('a'), listItem('b', { status: 'broken' })],
        deleteSession: async () => undefined,
        fork: async () => {
          throw new Error('no fork here');
        }
      }),
      notebookPath: () => 'analysis.ipynb',
      currentSessionId: () => null,
      openSession: async () => undefined,
      openCopy: async () => undefined,
      stepThrough: id => opened.push(id)
    };
    const model = new SessionListModel(host);
    const view = new SessionListView(model, { closed: () => undefined });
    await model.show();
    const buttons = view.node.querySelectorAll<HTMLButtonElement>(
      '[data-testid="pal-session-step-through"]'
    );
    expect(buttons).toHaveLength(2);
    expect(buttons[1].disabled).toBe(true); // a damaged log has no steps to trust
    buttons[0].click();
    expect(opened).toEqual(['a']);
    expect(model.isOpen).toBe(true); // the list stays: the step-through opens beside

    const without = new SessionListModel({ ...host, stepThrough: undefined });
    const plain = new SessionListView(without, { closed: () => undefined });
    await without.show();
    expect(plain.node.querySelector('[data-testid="pal-session-step-through"]')).toBeNull();
  });
});
