// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from 'vitest';

import { Widget } from '@lumino/widgets';

import { AgentApiError } from '../src/api';
import { AgentsModel, NOTICE_MS, READ_MS, type IAgentsApi } from '../src/agentsModel';
import { AgentsView } from '../src/agentsView';
import type { IAgentRow } from '../src/wire';

import { agentRow, family } from './agentsFixtures';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

/** The server as the model sees it: answers chosen per test, calls recorded. */
class StandInApi implements IAgentsApi {
  calls: string[] = [];
  fail: Error | null = null;
  rows: IAgentRow[] = family();

  async listAgents() {
    this.calls.push('list');
    if (this.fail) {
      throw this.fail;
    }
    return { agents: this.rows, generated_at: '' };
  }

  async messageAgent(id: string, text: string) {
    this.calls.push(`message ${id} ${text}`);
    if (this.fail) {
      throw this.fail;
    }
    return { delivered: id === 'root' ? ('chat' as const) : ('mail' as const) };
  }

  async stopAgent(id: string, subtree: boolean) {
    this.calls.push(`stop ${id} ${subtree}`);
    if (this.fail) {
      throw this.fail;
    }
    return { stopped: subtree ? [id, 'a1'] : [id] };
  }

  async deleteAgent(id: string) {
    this.calls.push(`delete ${id}`);
    if (this.fail) {
      throw this.fail;
    }
  }
}

interface ISetup {
  api: StandInApi;
  model: AgentsModel;
  view: AgentsView;
  opened: string[];
  chats: string[];
  confirmations: string[];
}

let current: AgentsView | null = null;

function setup(answer = true): ISetup {
  const api = new StandInApi();
  const model = new AgentsModel(api);
  const opened: string[] = [];
  const chats: string[] = [];
  const confirmations: string[] = [];
  const view = new AgentsView({
    model,
    openNotebook: path => void opened.push(path),
    openChat: path => void chats.push(path),
    confirm: async title => {
      confirmations.push(title);
      return answer;
    },
    now: () => Date.parse('2026-12-02T07:05:00Z')
  });
  document.body.append(view.node);
  current = view;
  model.apply({ agents: family(), generated_at: '' });
  return { api, model, view, opened, chats, confirmations };
}

afterEach(() => {
  current?.node.remove();
  current?.dispose();
  current = null;
});

function shownIds(view: AgentsView): string[] {
  return Array.from(view.node.querySelectorAll<HTMLElement>('.pal-agent-row')).map(
    row => row.dataset.sessionId ?? ''
  );
}

function control(view: AgentsView, id: string, testId: string): HTMLElement {
  return view.rowNode(id)!.querySelector<HTMLElement>(`[data-testid="${testId}"]`)!;
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await Promise.resolve();
  }
}

describe('the Agents View', () => {
  it('shows every agent indented by depth with separate state and outcome badges', () => {
    const { view } = setup();
    expect(shownIds(view)).toEqual(['root', 'a', 'a1', 'b', 'r2']);
    const a1 = view.rowNode('a1')!;
    expect(a1.dataset.depth).toBe('2');
    expect(a1.getAttribute('aria-level')).toBe('3');
    expect(control(view, 'a1', 'pal-agent-state').textContent).toBe('idle');
    expect(control(view, 'a1', 'pal-agent-outcome').textContent).toBe('replied');
    expect(control(view, 'b', 'pal-agent-residency').textContent).toBe('evicted');
    expect(control(view, 'root', 'pal-agent-state').textContent).toBe('waiting for a sub-agent');
    const time = control(view, 'root', 'pal-agent-activity') as HTMLTimeElement;
    expect(time.textContent).toBe('5 min ago');
    expect(time.title).toContain(new Date('2026-12-02T07:00:00Z').toLocaleString());
    expect(a1.getAttribute('aria-label')).toBe('sub-agent a1, idle, outcome replied, resident, 5 min ago');
  });

  it('keeps every row node and the focused message input across a live update', () => {
    const { model, view } = setup();
    control(view, 'a', 'pal-agent-message').click();
    const input = control(view, 'a', 'pal-agent-input') as HTMLInputElement;
    expect(document.activeElement).toBe(input);
    input.value = 'half a thought';
    const before = new Map(shownIds(view).map(id => [id, view.rowNode(id)]));
    const next = family().map(row =>
      row.session_id === 'a' ? { ...row, state: 'idle' as const, outcome: 'replied' as const } : row
    );
    next.splice(2, 0, agentRow('a2', 'a', { depth: 2 }));
    model.apply({ agents: next, generated_at: '' });
    expect(shownIds(view)).toEqual(['root', 'a', 'a2', 'a1', 'b', 'r2']);
    for (const [id, node] of before) {
      expect(view.rowNode(id)).toBe(node);
    }
    expect(document.activeElement).toBe(input);
    expect(input.value).toBe('half a thought');
    expect(control(view, 'a', 'pal-agent-outcome').textContent).toBe('replied');
  });

  it('keeps a collapsed subtree collapsed across updates', () => {
    const { model, view } = setup();
    const toggle = control(view, 'a', 'pal-agent-toggle');
    expect(toggle.getAttribute('aria-expanded')).toBe('true');
    toggle.click();
    expect(shownIds(view)).toEqual(['root', 'a', 'b', 'r2']);
    model.apply({ agents: family(), generated_at: '' });
    expect(shownIds(view)).toEqual(['root', 'a', 'b', 'r2']);
    expect(control(view, 'a', 'pal-agent-toggle').getAttribute('aria-expanded')).toBe('false');
    expect(control(view, 'b', 'pal-agent-toggle').hidden).toBe(true);
  });

  it('keeps a draft of a row the filter hid for when it shows again', () => {
    const { model, view } = setup();
    control(view, 'b', 'pal-agent-message').click();
    const input = control(view, 'b', 'pal-agent-input') as HTMLInputElement;
    input.value = 'for later';
    model.filter = 'running';
    expect(view.rowNode('b')!.isConnected).toBe(false);
    model.filter = 'all';
    expect(control(view, 'b', 'pal-agent-input')).toBe(input);
    expect(input.value).toBe('for later');
    expect(control(view, 'b', 'pal-agent-compose').hidden).toBe(false);
    model.apply({ agents: family().filter(row => row.session_id !== 'b'), generated_at: '' });
    expect(view.rowNode('b')).toBeNull();
  });

  it('filters by state and says how many agents each state has', () => {
    const { view } = setup();
    const running = view.node.querySelector<HTMLButtonElement>('[data-filter="running"]')!;
    expect(running.textContent).toBe('Running (1)');
    running.click();
    expect(running.getAttribute('aria-pressed')).toBe('true');
    expect(shownIds(view)).toEqual(['root', 'a']);
    expect(view.rowNode('root')!.classList.contains('pal-mod-context')).toBe(true);
    view.node.querySelector<HTMLButtonElement>('[data-filter="waiting"]')!.click();
    expect(shownIds(view)).toEqual(['root']);
  });

  it('turns Message off with the reason as its tooltip when the agent cannot be messaged', () => {
    const { view } = setup();
    const message = control(view, 'a1', 'pal-agent-message') as HTMLButtonElement;
    expect(message.disabled).toBe(true);
    expect(message.title).toMatch(/parent/);
    expect((control(view, 'a', 'pal-agent-message') as HTMLButtonElement).disabled).toBe(false);
  });

  it('shows why the server refuses a forged session on its row, with its actions off', () => {
    const { model, view } = setup();
    const problem = 'Refused: its header says depth 5, but its parent \'survey\' is at depth 0';
    model.apply({
      agents: [
        ...family(),
        agentRow('forged', null, { notebook: null, can_message: false, problem })
      ],
      generated_at: ''
    });
    const shown = control(view, 'forged', 'pal-agent-problem');
    expect(shown.hidden).toBe(false);
    expect(shown.textContent).toBe(problem);
    expect(view.rowNode('forged')!.dataset.problem).toBe('yes');
    expect(view.rowNode('forged')!.getAttribute('aria-label')).toContain(problem);
    const message = control(view, 'forged', 'pal-agent-message') as HTMLButtonElement;
    expect(message.disabled).toBe(true);
    expect(message.title).toBe(problem);
    const remove = control(view, 'forged', 'pal-agent-delete') as HTMLButtonElement;
    expect(remove.disabled).toBe(true);
    expect(remove.title).toBe(problem);
    expect((control(view, 'forged', 'pal-agent-open-notebook') as HTMLButtonElement).disabled).toBe(
      true
    );
    expect(control(view, 'a', 'pal-agent-problem').hidden).toBe(true);
  });

  it('sends a message, clears the input and says how it was delivered', async () => {
    const { api, view } = setup();
    control(view, 'a', 'pal-agent-message').click();
    const input = control(view, 'a', 'pal-agent-input') as HTMLInputElement;
    input.value = 'look at column x';
    (control(view, 'a', 'pal-agent-compose') as HTMLFormElement).requestSubmit();
    await settle();
    expect(api.calls).toContain('message a look at column x');
    expect(input.value).toBe('');
    expect(document.activeElement).toBe(control(view, 'a', 'pal-agent-message'));
    expect(control(view, 'a', 'pal-agent-compose').hidden).toBe(true);
    expect(control(view, 'a', 'pal-agent-notice').textContent).toBe(
      'Sent as mail from the root agent.'
    );
  });

  it('shows the server’s refusal on the row and keeps the text', async () => {
    const { api, view } = setup();
    api.fail = new AgentApiError('only its parent part-a can reach it', 403);
    control(view, 'a', 'pal-agent-message').click();
    const input = control(view, 'a', 'pal-agent-input') as HTMLInputElement;
    input.value = 'hello';
    input.focus();
    (control(view, 'a', 'pal-agent-compose') as HTMLFormElement).requestSubmit();
    await settle();
    expect(document.activeElement).toBe(input);
    const error = control(view, 'a', 'pal-agent-error');
    expect(error.hidden).toBe(false);
    expect(error.textContent).toBe('only its parent part-a can reach it');
    expect(error.getAttribute('role')).toBe('alert');
    expect(input.value).toBe('hello');
  });

  it('refuses an empty message without asking the server', async () => {
    const { api, view } = setup();
    control(view, 'a', 'pal-agent-message').click();
    (control(view, 'a', 'pal-agent-compose') as HTMLFormElement).requestSubmit();
    await settle();
    expect(api.calls).toEqual([]);
    expect(control(view, 'a', 'pal-agent-error').textContent).toBe('Write a message first.');
  });

  it('stops one agent or its subtree, and only when something runs', async () => {
    const { api, view } = setup();
    expect((control(view, 'b', 'pal-agent-stop') as HTMLButtonElement).disabled).toBe(true);
    expect(control(view, 'b', 'pal-agent-stop-subtree').hidden).toBe(true);
    control(view, 'a', 'pal-agent-stop').click();
    await settle();
    control(view, 'root', 'pal-agent-stop-subtree').click();
    await settle();
    expect(api.calls).toEqual(['stop a false', 'stop root true']);
    expect(control(view, 'root', 'pal-agent-notice').textContent).toBe('Stopped 2 agents.');
  });

  it('clears an action’s notice when the row’s state next changes, once it could be read', async () => {
    vi.useFakeTimers();
    try {
      const { api, model, view } = setup();
      control(view, 'a', 'pal-agent-stop').click();
      await settle();
      const notice = control(view, 'a', 'pal-agent-notice');
      expect(notice.textContent).toBe('Stopped 1 agent.');
      // A snapshot that leaves the row as it was keeps the notice.
      model.apply({ agents: api.rows, generated_at: '' });
      expect(notice.hidden).toBe(false);
      // The stop shows in the row itself a moment after the answer: the notice still gets
      // its time to be read, then goes.
      const stopped = api.rows.map(row =>
        row.session_id === 'a' ? { ...row, state: 'idle' as const, outcome: 'stopped' as const } : row
      );
      vi.advanceTimersByTime(50);
      model.apply({ agents: stopped, generated_at: '' });
      expect(notice.hidden).toBe(false);
      vi.advanceTimersByTime(READ_MS - 50);
      expect(notice.hidden).toBe(true);
      expect(model.rowNotice('a')).toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });

  it('clears a notice read long enough at once when the row’s state changes', async () => {
    vi.useFakeTimers();
    try {
      const { api, model, view } = setup();
      control(view, 'a', 'pal-agent-stop').click();
      await settle();
      vi.advanceTimersByTime(READ_MS);
      const waiting = api.rows.map(row =>
        row.session_id === 'a' ? { ...row, state: 'waiting' as const, waiting_for: 'mail' as const } : row
      );
      model.apply({ agents: waiting, generated_at: '' });
      expect(control(view, 'a', 'pal-agent-notice').hidden).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('clears a notice after a short time when the row does not change', async () => {
    vi.useFakeTimers();
    try {
      const { view } = setup();
      control(view, 'b', 'pal-agent-message').click();
      (control(view, 'b', 'pal-agent-input') as HTMLInputElement).value = 'hi';
      (control(view, 'b', 'pal-agent-compose') as HTMLFormElement).requestSubmit();
      await settle();
      const notice = control(view, 'b', 'pal-agent-notice');
      expect(notice.textContent).toBe('Sent as mail from the root agent.');
      vi.advanceTimersByTime(NOTICE_MS - 1);
      expect(notice.hidden).toBe(false);
      vi.advanceTimersByTime(1);
      expect(notice.hidden).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('replaces a row’s notice with the next action’s, whose time starts anew', async () => {
    vi.useFakeTimers();
    try {
      const { view } = setup();
      control(view, 'a', 'pal-agent-stop').click();
      await settle();
      vi.advanceTimersByTime(NOTICE_MS - 100);
      control(view, 'a', 'pal-agent-message').click();
      (control(view, 'a', 'pal-agent-input') as HTMLInputElement).value = 'go on';
      (control(view, 'a', 'pal-agent-compose') as HTMLFormElement).requestSubmit();
      await settle();
      const notice = control(view, 'a', 'pal-agent-notice');
      expect(notice.textContent).toBe('Sent as mail from the root agent.');
      vi.advanceTimersByTime(200); // the first notice's time is up, not this one's
      expect(notice.hidden).toBe(false);
      vi.advanceTimersByTime(NOTICE_MS);
      expect(notice.hidden).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('clears a row’s error when the row’s state next changes, and not before', async () => {
    vi.useFakeTimers();
    try {
      const { api, model, view } = setup();
      api.fail = new AgentApiError('only its parent part-a can reach it', 403);
      control(view, 'a', 'pal-agent-stop').click();
      await settle();
      const error = control(view, 'a', 'pal-agent-error');
      expect(error.hidden).toBe(false);
      vi.advanceTimersByTime(10 * NOTICE_MS); // an error waits to be read
      expect(error.hidden).toBe(false);
      const idle = api.rows.map(row =>
        row.session_id === 'a' ? { ...row, state: 'idle' as const, outcome: 'completed' as const } : row
      );
      model.apply({ agents: idle, generated_at: '' });
      expect(error.hidden).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('deletes a sub-agent after the confirmation, and not without it', async () => {
    const declined = setup(false);
    control(declined.view, 'b', 'pal-agent-delete').click();
    await settle();
    expect(declined.confirmations).toEqual(['Delete b?']);
    expect(declined.api.calls).toEqual([]);
    declined.view.node.remove();
    declined.view.dispose();

    const { api, view, confirmations } = setup(true);
    expect((control(view, 'root', 'pal-agent-delete') as HTMLButtonElement).disabled).toBe(true);
    control(view, 'a', 'pal-agent-delete').click();
    await settle();
    expect(confirmations).toEqual(['Delete a?']);
    expect(api.calls).toEqual(['delete a']);
    expect(shownIds(view)).toEqual(['root', 'b', 'r2']);
  });

  it('shows a failed delete on the row', async () => {
    const { api, view } = setup(true);
    api.fail = new AgentApiError('b is running: stop it first', 409);
    control(view, 'b', 'pal-agent-delete').click();
    await settle();
    expect(shownIds(view)).toContain('b');
    expect(control(view, 'b', 'pal-agent-error').textContent).toBe('b is running: stop it first');
  });

  it('opens an agent’s notebook and its chat', () => {
    const { view, opened, chats } = setup();
    control(view, 'a1', 'pal-agent-open-notebook').click();
    control(view, 'b', 'pal-agent-open-chat').click();
    expect(opened).toEqual(['a1.ipynb']);
    expect(chats).toEqual(['b.ipynb']);
  });

  it('shows on the row a notebook that could not be opened', async () => {
    const api = new StandInApi();
    const model = new AgentsModel(api);
    const view = new AgentsView({
      model,
      openNotebook: async () => {
        throw new Error('File not found');
      },
      openChat: () => undefined,
      confirm: async () => true
    });
    current = view;
    document.body.append(view.node);
    model.apply({ agents: family(), generated_at: '' });
    control(view, 'b', 'pal-agent-open-notebook').click();
    await settle();
    expect(control(view, 'b', 'pal-agent-error').textContent).toBe(
      'Could not open b.ipynb: File not found'
    );
  });

  it('shows a failed refresh in the view', async () => {
    const { api, view } = setup();
    api.fail = new Error('HTTP 500');
    view.node.querySelector<HTMLButtonElement>('[data-testid="pal-agents-refresh"]')!.click();
    await settle();
    const error = view.node.querySelector<HTMLElement>('[data-testid="pal-agents-error"]')!;
    expect(error.hidden).toBe(false);
    expect(error.textContent).toBe('Could not read the agents: HTTP 500');
  });

  it('says when there are no agents, and when none is in the filtered state', () => {
    const { model, view } = setup();
    const empty = view.node.querySelector<HTMLElement>('[data-testid="pal-agents-empty"]')!;
    expect(empty.hidden).toBe(true);
    model.filter = 'waiting';
    model.apply({ agents: [agentRow('r', null)], generated_at: '' });
    expect(empty.textContent).toBe('No waiting agents.');
    model.apply({ agents: [], generated_at: '' });
    expect(empty.textContent).toMatch(/No agents yet/);
  });

  it('makes every action a button with a name that says whose it is', () => {
    const { view } = setup();
    const buttons = Array.from(view.rowNode('a')!.querySelectorAll('button'));
    expect(buttons.every(node => node.type === 'button' || node.type === 'submit')).toBe(true);
    expect(control(view, 'a', 'pal-agent-stop').getAttribute('aria-label')).toBe('Stop a');
    expect(control(view, 'a', 'pal-agent-delete').getAttribute('aria-label')).toBe('Delete a');
  });

  it('ends when its tab closes, and later snapshots do not touch it', () => {
    const { model, view } = setup();
    view.node.remove();
    Widget.attach(view, document.body);
    view.close();
    expect(view.isDisposed).toBe(true);
    expect(view.node.isConnected).toBe(false);
    model.apply({ agents: [agentRow('r', null)], generated_at: '' });
    expect(view.rowNode('r')).toBeNull();
  });
});
