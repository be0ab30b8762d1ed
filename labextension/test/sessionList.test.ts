// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { AgentApiError } from '../src/api';
import type { NotebookAgent } from '../src/notebookAgent';
import {
  NO_FORK_POINT,
  NO_MESSAGE_TITLE,
  SessionListModel,
  relativeTime,
  rowCost,
  rowModel,
  rowTitle,
  type ISessionListApi,
  type ISessionListHost
} from '../src/sessionList';
import { SessionListView } from '../src/sessionListView';
import type { ISessionCopy, ISessionListItem } from '../src/wire';

import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const NOTEBOOK = 'study/a.ipynb';

function item(id: string, extra: Partial<ISessionListItem> = {}): ISessionListItem {
  return {
    session_id: id,
    notebook_path: NOTEBOOK,
    title: `title of ${id}`,
    created: '2026-01-01T10:00:00.000+00:00',
    updated: '2026-01-01T11:00:00.000+00:00',
    provider: 'anthropic',
    model: 'claude-sonnet-4-5',
    status: 'inactive',
    turns: 1,
    cost: 0.5,
    cost_total: 0.5,
    last_user_entry_id: `u-${id}`,
    ...extra
  };
}

/** A server with a list of sessions; Delete of an attached one is refused like the host's. */
class StandInServer implements ISessionListApi {
  constructor(public sessions: ISessionListItem[]) {}
  attached = new Set<string>();
  listed: string[] = [];
  forks: [string, string][] = [];

  async listNotebookSessions(notebookPath: string): Promise<ISessionListItem[]> {
    this.listed.push(notebookPath);
    return this.sessions.filter(s => s.notebook_path === notebookPath);
  }

  async deleteSession(sessionId: string): Promise<void> {
    if (this.attached.has(sessionId)) {
      throw new AgentApiError(`session ${sessionId} is open in a notebook; open another`, 409);
    }
    this.sessions = this.sessions.filter(s => s.session_id !== sessionId);
  }

  async fork(sessionId: string, entryId: string): Promise<ISessionCopy> {
    this.forks.push([sessionId, entryId]);
    return { session_id: 'forked', notebook_path: 'study/a-fork-1.ipynb', text: 'again' } as ISessionCopy;
  }
}

function setUp(items: ISessionListItem[], current: string | null = null) {
  const server = new StandInServer(items);
  const opened: string[] = [];
  const copies: ISessionCopy[] = [];
  const host: ISessionListHost & { current: string | null; notebook: string | null } = {
    current,
    notebook: NOTEBOOK,
    api: () => (host.notebook === null ? null : server),
    notebookPath: () => host.notebook,
    currentSessionId: () => host.current,
    openSession: async id => {
      opened.push(id);
      host.current = id;
    },
    openCopy: async copy => {
      copies.push(copy);
    }
  };
  const model = new SessionListModel(host);
  return { server, host, model, opened, copies };
}

describe('the session list model', () => {
  it('reads the notebook’s sessions when shown, in the server’s order (newest first)', async () => {
    const { model, server } = setUp([item('new'), item('old'), item('x', { notebook_path: 'b.ipynb' })]);
    expect(model.isOpen).toBe(false);
    await model.show();
    expect(model.isOpen).toBe(true);
    expect(server.listed).toEqual([NOTEBOOK]);
    expect(model.items.map(i => i.session_id)).toEqual(['new', 'old']);
    expect(model.loading).toBe(false);
    expect(model.error).toBeNull();
  });

  it('drops an answer a newer refresh overtook', async () => {
    const { model, server } = setUp([item('a')]);
    let release: (items: ISessionListItem[]) => void = () => undefined;
    const slow = vi
      .spyOn(server, 'listNotebookSessions')
      .mockImplementationOnce(() => new Promise(resolve => (release = resolve)));
    const first = model.show();
    server.sessions = [item('b'), item('a')];
    await model.refresh();
    release([item('stale')]);
    await first;
    expect(slow).toHaveBeenCalledTimes(2);
    expect(model.items.map(i => i.session_id)).toEqual(['b', 'a']);
  });

  it('says why the list could not be read, and that there is no notebook', async () => {
    const { model, server, host } = setUp([item('a')]);
    vi.spyOn(server, 'listNotebookSessions').mockRejectedValueOnce(new Error('HTTP 500'));
    await model.show();
    expect(model.error).toBe('Could not list the sessions: HTTP 500');
    await model.refresh();
    expect(model.error).toBeNull();
    host.notebook = null;
    await model.refresh();
    expect(model.items).toEqual([]);
    expect(model.error).toMatch(/Open a notebook/);
  });

  it('opens a session through the host and closes once it shows', async () => {
    const { model, opened, host } = setUp([item('new'), item('old')], 'new');
    await model.show();
    expect(await model.open('old')).toBe(true);
    expect(opened).toEqual(['old']);
    expect(host.current).toBe('old');
    expect(model.isOpen).toBe(false);
  });

  it('keeps the list open with the server’s reason when Open is refused', async () => {
    const { model, host } = setUp([item('new'), item('old')], 'new');
    host.openSession = async () => {
      throw new AgentApiError('session new is running a turn on this notebook’s kernel', 409);
    };
    await model.show();
    expect(await model.open('old')).toBe(false);
    expect(model.isOpen).toBe(true);
    expect(model.rowError('old')).toMatch(/running a turn/);
    expect(model.busy).toBeNull();
  });

  it('forks from the session’s last user message and opens the copy', async () => {
    const { model, server, copies } = setUp([item('a'), item('empty', { title: null, last_user_entry_id: undefined })]);
    await model.show();
    expect(await model.fork('a')).toBe(true);
    expect(server.forks).toEqual([['a', 'u-a']]);
    expect(copies.map(c => c.notebook_path)).toEqual(['study/a-fork-1.ipynb']);
    expect(await model.fork('empty')).toBe(false);
    expect(model.rowError('empty')).toBe(NO_FORK_POINT);
    expect(server.forks).toHaveLength(1);
  });

  it('deletes only after the confirmation and reads the list again', async () => {
    const { model, server } = setUp([item('a'), item('b')]);
    await model.show();
    expect(await model.confirmDelete('b')).toBe(false); // not asked: nothing happens
    expect(server.sessions).toHaveLength(2);
    model.askDelete('b');
    expect(model.confirming).toBe('b');
    model.cancelDelete();
    expect(model.confirming).toBeNull();
    model.askDelete('b');
    expect(await model.confirmDelete('b')).toBe(true);
    expect(model.items.map(i => i.session_id)).toEqual(['a']);
    expect(server.listed).toHaveLength(2);
  });

  it('shows the server’s 409 reason on the row of a session it refuses to delete', async () => {
    const { model, server } = setUp([item('a'), item('b')], 'a');
    server.attached.add('a');
    await model.show();
    model.askDelete('a');
    expect(await model.confirmDelete('a')).toBe(false);
    expect(model.rowError('a')).toBe('session a is open in a notebook; open another');
    expect(model.items.map(i => i.session_id)).toEqual(['a', 'b']);
    await model.show(); // opening again starts clean
    expect(model.rowError('a')).toBeNull();
  });

  it('reads the list again when the tab shows another session while it is open', async () => {
    const { model, server } = setUp([item('a')], 'a');
    model.sessionShown('a');
    expect(server.listed).toHaveLength(0); // closed: nothing to read
    await model.show();
    model.sessionShown('a');
    expect(server.listed).toHaveLength(1); // the same session: nothing new
    server.sessions = [item('b'), item('a')];
    model.sessionShown('b');
    await vi.waitFor(() => expect(model.items.map(i => i.session_id)).toEqual(['b', 'a']));
  });

  it('runs one action at a time', async () => {
    const { model, host } = setUp([item('a'), item('b')]);
    let finish: () => void = () => undefined;
    host.openSession = () => new Promise<void>(resolve => (finish = resolve));
    await model.show();
    const first = model.open('a');
    expect(model.busy).toBe('a');
    expect(await model.open('b')).toBe(false);
    finish();
    expect(await first).toBe(true);
  });
});

describe('what a row says', () => {
  it('has a title, or says there is no message yet', () => {
    expect(rowTitle(item('a'))).toBe('title of a');
    expect(rowTitle(item('a', { title: null }))).toBe(NO_MESSAGE_TITLE);
  });

  it('tells the time relative to now, and the date for an old one', () => {
    const now = Date.parse('2026-01-10T12:00:00Z');
    expect(relativeTime('2026-01-10T11:59:30Z', now)).toBe('just now');
    expect(relativeTime('2026-01-10T11:55:00Z', now)).toBe('5 min ago');
    expect(relativeTime('2026-01-10T09:00:00Z', now)).toBe('3 h ago');
    expect(relativeTime('2026-01-09T12:00:00Z', now)).toBe('1 day ago');
    expect(relativeTime('2025-12-01T12:00:00Z', now)).toBe('2025-12-01');
    expect(relativeTime(null, now)).toBe('');
    expect(relativeTime('not a time', now)).toBe('');
  });

  it('gives the cost with the sub-agents, and the session’s own part when they spent', () => {
    expect(rowCost(item('a'))).toBe('$0.5000');
    expect(rowCost(item('a', { cost: 0.5, cost_total: 1.25 }))).toBe(
      '$1.25 with sub-agents (own $0.5000)'
    );
    expect(rowCost(item('a', { cost: null, cost_total: null }))).toBe('cost unknown');
  });

  it('names the provider and model', () => {
    expect(rowModel(item('a'))).toBe('anthropic · claude-sonnet-4-5');
    expect(rowModel(item('a', { provider: null, model: null }))).toBe('model unknown');
  });
});

describe('the session list view', () => {
  async function shown(items: ISessionListItem[], current: string | null = null) {
    document.body.replaceChildren();
    const parts = setUp(items, current);
    const closed = vi.fn();
    const view = new SessionListView(parts.model, { closed });
    document.body.append(view.node);
    await parts.model.show();
    const rows = () => Array.from(view.node.querySelectorAll<HTMLElement>('[data-testid="pal-session-row"]'));
    const key = (target: HTMLElement, name: string) =>
      target.dispatchEvent(new KeyboardEvent('keydown', { key: name, bubbles: true, cancelable: true }));
    return { ...parts, view, rows, key, closed };
  }

  it('shows a focusable row per session with title, time, model, status and cost; the current one marked', async () => {
    const { view, rows } = await shown([item('new', { title: null }), item('old')], 'old');
    expect(view.node.hidden).toBe(false);
    expect(view.node.getAttribute('aria-label')).toBe('Sessions of this notebook');
    const [first, second] = rows();
    expect(first.tabIndex).toBe(0);
    expect(first.querySelector('.pal-session-title')?.textContent).toBe(NO_MESSAGE_TITLE);
    const time = first.querySelector<HTMLTimeElement>('time')!;
    expect(time.title).toBe('2026-01-01T11:00:00.000+00:00');
    expect(time.dateTime).toBe('2026-01-01T11:00:00.000+00:00');
    expect(first.querySelector('.pal-session-model')?.textContent).toBe('anthropic · claude-sonnet-4-5');
    expect(first.querySelector('.pal-session-status')?.textContent).toBe('inactive');
    expect(first.querySelector('.pal-session-row-cost')?.textContent).toBe('$0.5000');
    expect(first.dataset.current).toBe('false');
    expect(second.dataset.current).toBe('true');
    expect(second.getAttribute('aria-current')).toBe('true');
    expect(second.querySelector('[data-testid="pal-session-current"]')?.textContent).toBe('current');
  });

  it('names every control after its session', async () => {
    const { view } = await shown([item('a')]);
    const names = Array.from(view.node.querySelectorAll('button')).map(
      b => b.getAttribute('aria-label') ?? b.textContent
    );
    expect(names).toEqual([
      'Refresh',
      'Close the session list',
      'Open session title of a',
      'Fork session title of a',
      'Delete session title of a'
    ]);
  });

  it('opens the focused row on Enter and closes on Escape', async () => {
    const { rows, key, opened, closed, model } = await shown([item('new'), item('old')], 'new');
    const old = rows()[1];
    old.focus();
    key(old, 'Enter');
    await vi.waitFor(() => expect(model.isOpen).toBe(false)); // opened, the list closed
    expect(opened).toEqual(['old']);
    await model.show();
    rows()[0].focus();
    key(rows()[0], 'ArrowDown');
    expect(document.activeElement).toBe(rows()[1]);
    key(rows()[1], 'Escape');
    expect(model.isOpen).toBe(false);
    expect(closed).toHaveBeenCalledOnce();
  });

  it('asks before deleting; Escape cancels the question first; a refusal shows on the row', async () => {
    const { view, rows, key, server, model } = await shown([item('a'), item('b')], 'a');
    server.attached.add('a');
    const row = () => rows().find(r => r.dataset.sessionId === 'a')!;
    row().querySelector<HTMLButtonElement>('[data-testid="pal-session-delete"]')!.click();
    expect(row().querySelector('.pal-session-confirm-text')?.textContent).toMatch(
      /sub-agents’ logs\? Their notebooks stay\. This cannot be undone/
    );
    key(row(), 'Escape');
    expect(model.confirming).toBeNull();
    expect(model.isOpen).toBe(true);
    row().querySelector<HTMLButtonElement>('[data-testid="pal-session-delete"]')!.click();
    row().querySelector<HTMLButtonElement>('[data-testid="pal-session-confirm-delete"]')!.click();
    await vi.waitFor(() =>
      expect(row().querySelector('[role="alert"]')?.textContent).toBe(
        'session a is open in a notebook; open another'
      )
    );
    expect(view.node.querySelectorAll('[data-testid="pal-session-row"]')).toHaveLength(2);
  });

  it('keeps the focus on the list when the focused row is deleted', async () => {
    const { view, rows } = await shown([item('a'), item('b')]);
    rows()[1].querySelector<HTMLButtonElement>('[data-testid="pal-session-delete"]')!.click();
    const button = rows()[1].querySelector<HTMLButtonElement>(
      '[data-testid="pal-session-confirm-delete"]'
    )!; // the row is drawn again with the question
    button.focus();
    button.click();
    await vi.waitFor(() => expect(rows().map(r => r.dataset.sessionId)).toEqual(['a']));
    expect(view.node.contains(document.activeElement)).toBe(true);
  });
});

describe('the panel’s Sessions button', () => {
  it('opens the list of the notebook shown, marks its session, and Open switches the tab', async () => {
    document.body.replaceChildren();
    const panel = standInChatPanel();
    document.body.append(panel.node);
    const server = new StandInServer([item('new'), item('old')]);
    const agent = new StandInAgent(sessionInfo('new', NOTEBOOK)) as StandInAgent & {
      api: ISessionListApi;
      openSession: (id: string) => Promise<void>;
    };
    agent.api = server;
    agent.openSession = vi.fn(async () => undefined);
    panel.agent = agent as unknown as NotebookAgent;
    const sessions = panel.node.querySelector<HTMLButtonElement>('[data-testid="pal-sessions"]')!;
    expect(sessions.textContent).toBe('Sessions');
    expect(sessions.getAttribute('aria-expanded')).toBe('false');
    sessions.click();
    const list = panel.node.querySelector<HTMLElement>('[data-testid="pal-session-list"]')!;
    await vi.waitFor(() =>
      expect(list.querySelectorAll('[data-testid="pal-session-row"]')).toHaveLength(2)
    );
    expect(sessions.getAttribute('aria-expanded')).toBe('true');
    expect(list.querySelector('[data-current="true"]')?.getAttribute('data-session-id')).toBe('new');
    expect(list.contains(document.activeElement)).toBe(true);
    list
      .querySelector<HTMLButtonElement>('[data-session-id="old"] [data-testid="pal-session-open"]')!
      .click();
    await vi.waitFor(() => expect(list.hidden).toBe(true));
    expect(agent.openSession).toHaveBeenCalledWith('old');
    expect(document.activeElement).toBe(panel.node.querySelector('[data-testid="pal-chat-input"]'));
  });
});
