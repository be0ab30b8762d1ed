// @vitest-environment happy-dom
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Contents } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { AgentApiClient, AgentApiError } from '../src/api';
import { FollowCellsSetting } from '../src/cellFollower';
import { ChatPanel, UNLOADED_TEXT } from '../src/chatPanel';
import { SessionDirectory } from '../src/family';
import { NotebookAgent } from '../src/notebookAgent';
import { AgentStatusItem } from '../src/statusItem';
import {
  NOT_SENT_TEXT,
  OLDER_SESSION_STATUS,
  SessionTakenOverError,
  TAKEN_OVER_TEXT
} from '../src/takeover';
import type { TranscriptEntry } from '../src/transcript';
import type { ChatItem, ISessionInfo } from '../src/wire';

// JupyterLab's icon registry needs its web components, which load only in a
// browser; the panel's icon plays no part in these tests.
vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const PATH = 'shared.ipynb';

function info(id: string, seq: number): ISessionInfo {
  return {
    session_id: id,
    notebook_path: PATH,
    kernel_id: 'k1',
    provider: 'scripted',
    model: 'demo',
    status: 'idle',
    turns: 1,
    created: null,
    updated: null,
    seq
  };
}

const TRANSCRIPTS: Record<string, ChatItem[]> = {
  s1: [
    { type: 'user', turn: 1, text: 'My analysis so far.' },
    { type: 'assistant', turn: 1, text: 'Here it is.' }
  ],
  s2: []
};

/** The sockets the agent opened, newest last: a test pushes events through them. */
const sockets: FakeSocket[] = [];

class FakeSocket {
  constructor(readonly url: string) {
    sockets.push(this);
    setTimeout(() => this.onopen?.(), 0);
  }
  onopen: (() => void) | null = null;
  onmessage: ((message: MessageEvent) => void) | null = null;
  onclose: (() => void) | null = null;
  onerror: (() => void) | null = null;
  close(): void {
    this.onmessage = null;
  }
  push(event: Record<string, unknown>): void {
    this.onmessage?.({ data: JSON.stringify(event) } as MessageEvent);
  }
}

function notebookTab(): NotebookPanel {
  return {
    node: document.createElement('div'),
    content: { outerNode: document.createElement('div'), widgets: [] },
    sessionContext: { kernelChanged: new Signal({}), session: { kernel: { id: 'k1' } } },
    context: {
      path: PATH,
      ready: Promise.resolve(),
      pathChanged: new Signal({}),
      model: { sharedModel: { changed: new Signal({}), getState: () => undefined } }
    }
  } as unknown as NotebookPanel;
}

/**
 * The server: the notebook's attached session is `current`; a plain attach
 * answers it, `newSession` makes s2 current; a message to a session that is
 * not current is answered 404, as the server does.
 */
function server() {
  const state = { current: 's1' as string | null };
  const api = {
    serverSettings: { WebSocket: FakeSocket },
    postBinding: async () => undefined,
    attachSession: vi.fn(async (options: { newSession?: boolean; sessionId?: string }) => {
      if (options.newSession) {
        state.current = 's2';
      } else if (options.sessionId) {
        state.current = options.sessionId; // loaded (again) as the notebook's session
      }
      return info(state.current ?? 's1', 10);
    }),
    /** The notebook's sessions: the current one is loaded, the others are on disk. */
    listNotebookSessions: vi.fn(async () =>
      Object.keys(TRANSCRIPTS).map(id => ({
        ...info(id, 10),
        status: id === state.current ? 'idle' : 'inactive'
      }))
    ),
    getSession: async (id: string) => ({ ...info(id, 10), transcript: TRANSCRIPTS[id] }),
    eventsUrl: (id: string) => `ws://server/${id}/events`,
    sendMessage: vi.fn(async (id: string) => {
      if (id !== state.current) {
        throw new AgentApiError('Not Found: no attached session', 404);
      }
      return { turn: 2 };
    }),
    state
  };
  return api;
}

function agentOn(api: ReturnType<typeof server>): NotebookAgent {
  const contents = { localPath: (path: string) => path } as unknown as Contents.IManager;
  return new NotebookAgent(
    notebookTab(),
    api as unknown as AgentApiClient,
    contents,
    new FollowCellsSetting(),
    new SessionDirectory(async () => [])
  );
}

async function connected(api: ReturnType<typeof server>): Promise<NotebookAgent> {
  const agent = agentOn(api);
  await vi.waitFor(() => expect(agent.connection).toBe('connected'));
  return agent;
}

/** Another user's New session on this notebook: the server detaches s1, naming s2. */
function anotherUsersNewSession(api: ReturnType<typeof server>): void {
  api.state.current = 's2';
  sockets[sockets.length - 1].push({
    seq: 11,
    session_id: 's1',
    type: 'status',
    status: 'inactive',
    taken_over_by: 's2'
  });
}

/** The server unloads s1 and nobody replaces it (an idle sub-agent evicted, ...). */
function unloaded(api: ReturnType<typeof server>): void {
  api.state.current = null;
  sockets[sockets.length - 1].push({ seq: 11, session_id: 's1', type: 'status', status: 'inactive' });
}

function lines(entries: readonly TranscriptEntry[]): string[] {
  return entries.map(entry => {
    switch (entry.kind) {
      case 'user':
      case 'assistant':
        return `${entry.kind}:${entry.text}`;
      case 'notice':
        return `notice(${entry.noticeKind ?? '-'}):${entry.text}`;
      case 'error':
        return `error:${entry.message}`;
      default:
        return entry.kind;
    }
  });
}

const S1_CHAT = ['user:My analysis so far.', 'assistant:Here it is.'];
const TAKEOVER_LINE = `notice(taken_over):${TAKEN_OVER_TEXT}`;

afterEach(() => {
  sockets.length = 0;
});

describe('another session takes over the notebook', () => {
  it('keeps this tab on its session and adds a line with the switch', async () => {
    const api = server();
    const agent = await connected(api);
    expect(agent.session?.session_id).toBe('s1');

    anotherUsersNewSession(api);

    expect(agent.session?.session_id).toBe('s1');
    expect(agent.takenOver).toBe('s1');
    expect(lines(agent.transcript.entries)).toEqual([...S1_CHAT, TAKEOVER_LINE]);
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(api.attachSession).toHaveBeenCalledTimes(1); // not followed by itself
    expect(lines(agent.transcript.entries)).toEqual([...S1_CHAT, TAKEOVER_LINE]);
    agent.dispose();
  });

  it('says it once when the inactive status comes again', async () => {
    const api = server();
    const agent = await connected(api);
    anotherUsersNewSession(api);
    sockets[sockets.length - 1].push({ seq: 12, session_id: 's1', type: 'status', status: 'inactive' });
    expect(lines(agent.transcript.entries)).toEqual([...S1_CHAT, TAKEOVER_LINE]);
    agent.dispose();
  });

  it('keeps the line when the taken-over session’s transcript is loaded again', async () => {
    const api = server();
    const agent = await connected(api);
    anotherUsersNewSession(api);
    const socketsBefore = sockets.length;
    sockets[sockets.length - 1].push({
      seq: 12,
      session_id: 's1',
      type: 'branch_moved',
      leaf_id: 'e1',
      marked_cells: 0
    });
    await vi.waitFor(() => expect(sockets.length).toBe(socketsBefore + 1));
    expect(agent.session?.session_id).toBe('s1');
    expect(agent.takenOver).toBe('s1');
    expect(lines(agent.transcript.entries)).toEqual([...S1_CHAT, TAKEOVER_LINE]);
    agent.dispose();
  });

  it('follows the notebook’s current session when asked to switch', async () => {
    const api = server();
    const agent = await connected(api);
    anotherUsersNewSession(api);

    await agent.followCurrentSession();

    expect(api.attachSession).toHaveBeenLastCalledWith({ notebookPath: PATH, kernelId: 'k1' });
    expect(agent.session?.session_id).toBe('s2');
    expect(agent.takenOver).toBeNull();
    expect(lines(agent.transcript.entries)).toEqual([]);
    await vi.waitFor(() => expect(agent.connection).toBe('connected'));
    expect(sockets[sockets.length - 1].url).toContain('/s2/');
    agent.dispose();
  });

  it('refuses a message from the taken-over session, says so and offers the switch', async () => {
    const api = server();
    const agent = await connected(api);
    anotherUsersNewSession(api);

    await expect(agent.send('Is it still there?')).rejects.toBeInstanceOf(SessionTakenOverError);

    expect(api.sendMessage).not.toHaveBeenCalled();
    expect(agent.session?.session_id).toBe('s1');
    expect(lines(agent.transcript.entries)).toEqual([
      ...S1_CHAT,
      `error:${NOT_SENT_TEXT}`,
      TAKEOVER_LINE
    ]);
    agent.dispose();
  });

  it('says so on a 404 when it missed the inactive status, without moving', async () => {
    const api = server();
    const agent = await connected(api);
    api.state.current = 's2'; // taken over; this tab's stream dropped the event

    await expect(agent.send('Sent after the switch.')).rejects.toBeInstanceOf(
      SessionTakenOverError
    );

    expect(api.sendMessage).toHaveBeenCalledTimes(1);
    expect(api.attachSession).toHaveBeenCalledTimes(1);
    expect(agent.session?.session_id).toBe('s1');
    expect(agent.takenOver).toBe('s1');
    expect(lines(agent.transcript.entries)).toEqual([
      ...S1_CHAT,
      `error:${NOT_SENT_TEXT}`,
      TAKEOVER_LINE
    ]);
    agent.dispose();
  });

  it('follows this tab’s own New session, with no takeover line', async () => {
    const api = server();
    const agent = await connected(api);
    const leaving = sockets[sockets.length - 1];
    const started = agent.startNewSession();
    // The old session's inactive status may come before the switch.
    leaving.push({ seq: 11, session_id: 's1', type: 'status', status: 'inactive' });
    await started;
    expect(agent.session?.session_id).toBe('s2');
    expect(agent.takenOver).toBeNull();
    expect(lines(agent.transcript.entries)).toEqual([]);
    agent.dispose();
  });
});

describe('a session that only unloads (nobody took the notebook over)', () => {
  it('adds no takeover line; the status line says the next message opens it again', async () => {
    const api = server();
    const agent = await connected(api);
    const panel = new ChatPanel({
      followCells: new FollowCellsSetting(),
      activateNotebook: () => undefined,
      openNotebook: async () => undefined
    });
    panel.agent = agent;
    unloaded(api);
    expect(agent.takenOver).toBeNull();
    expect(lines(agent.transcript.entries)).toEqual(S1_CHAT);
    expect(agent.session?.session_id).toBe('s1');
    const status = panel.node.querySelector('[data-testid="pal-status"]')!;
    expect(status.textContent).toContain(UNLOADED_TEXT);
    expect(panel.node.querySelector('[data-testid="pal-takeover-switch"]')).toBeNull();
    agent.dispose();
  });

  it('is opened again by the next message, which is sent', async () => {
    const api = server();
    const agent = await connected(api);
    unloaded(api);

    await agent.send('Still there?');

    expect(api.attachSession).toHaveBeenLastCalledWith({
      notebookPath: PATH,
      kernelId: 'k1',
      sessionId: 's1'
    });
    expect(api.sendMessage).toHaveBeenCalledTimes(2); // the 404, then the message
    expect(agent.session?.session_id).toBe('s1');
    expect(agent.takenOver).toBeNull();
    const kinds = agent.transcript.entries.map(entry => entry.kind);
    expect(kinds).not.toContain('error');
    expect(lines(agent.transcript.entries)).not.toContain(TAKEOVER_LINE);
    agent.dispose();
  });
});

describe('the chat panel of a taken-over session', () => {
  it('keeps the typed message in the input, and its Switch button follows', async () => {
    const api = server();
    const agent = await connected(api);
    const panel = new ChatPanel({
      followCells: new FollowCellsSetting(),
      activateNotebook: () => undefined,
      openNotebook: async () => undefined
    });
    panel.agent = agent;
    anotherUsersNewSession(api);

    const input = panel.node.querySelector<HTMLTextAreaElement>('[data-testid="pal-chat-input"]')!;
    input.value = 'A long question I typed.';
    input.dispatchEvent(new Event('input'));
    panel.node.querySelector<HTMLButtonElement>('[data-testid="pal-send"]')!.click();
    await vi.waitFor(() =>
      expect(panel.node.querySelectorAll('[data-testid="pal-error"]')).toHaveLength(1)
    );
    expect(input.value).toBe('A long question I typed.');
    const switches = panel.node.querySelectorAll<HTMLButtonElement>(
      '[data-testid="pal-takeover-switch"]'
    );
    expect(switches).toHaveLength(1);
    expect(switches[0].textContent).toBe('Switch to it');

    switches[0].click();
    await vi.waitFor(() => expect(agent.session?.session_id).toBe('s2'));
    expect(panel.node.querySelector('[data-testid="pal-takeover-switch"]')).toBeNull();
    expect(input.value).toBe('A long question I typed.');
    agent.dispose();
  });
});

describe('the status of a tab whose session was taken over', () => {
  it('says the tab shows an older session, not that a switch is under way', async () => {
    const api = server();
    const agent = await connected(api);
    const panel = new ChatPanel({
      followCells: new FollowCellsSetting(),
      activateNotebook: () => undefined,
      openNotebook: async () => undefined
    });
    panel.agent = agent;
    anotherUsersNewSession(api);
    await new Promise(resolve => setTimeout(resolve, 20));
    const status = panel.node.querySelector('[data-testid="pal-status"]')!;
    expect(status.textContent).not.toContain('Switching');
    expect(status.textContent?.toLowerCase()).toContain(OLDER_SESSION_STATUS);
    agent.dispose();
  });

  it('makes the status bar say so too, and describe the current session after the switch', async () => {
    const api = server();
    const agent = await connected(api);
    const item = new AgentStatusItem();
    item.agent = agent;
    anotherUsersNewSession(api);
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(item.node.textContent).toBe(`Prime Agent: ${OLDER_SESSION_STATUS}`);
    await agent.followCurrentSession();
    await vi.waitFor(() => expect(agent.session?.session_id).toBe('s2'));
    expect(item.node.textContent).not.toContain(OLDER_SESSION_STATUS);
    expect(item.node.textContent).toMatch(/^Prime Agent: idle/);
    item.dispose();
    agent.dispose();
  });
});

describe('opening a session from the session list', () => {
  /** The server attaches a session by id (it becomes the notebook's), refusing while `busy`. */
  function listServer() {
    const api = server();
    const busy = { reason: null as string | null };
    api.attachSession.mockImplementation(async (options: { newSession?: boolean; sessionId?: string }) => {
      if (options.sessionId && options.sessionId !== api.state.current && busy.reason) {
        throw new AgentApiError(busy.reason, 409);
      }
      if (options.sessionId) {
        api.state.current = options.sessionId;
      }
      return info(api.state.current ?? 's1', 10);
    });
    return { api, busy };
  }

  it('shows the opened session, and its own detaching of the old one adds no takeover line', async () => {
    const { api } = listServer();
    api.state.current = 's2';
    const agent = await connected(api);
    const leaving = sockets[sockets.length - 1];
    const opened = agent.openSession('s1');
    leaving.push({ seq: 11, session_id: 's2', type: 'status', status: 'inactive' });
    await opened;
    expect(api.attachSession).toHaveBeenLastCalledWith({
      notebookPath: PATH,
      kernelId: 'k1',
      sessionId: 's1'
    });
    expect(agent.session?.session_id).toBe('s1');
    expect(agent.takenOver).toBeNull();
    expect(lines(agent.transcript.entries)).toEqual(S1_CHAT);
    agent.dispose();
  });

  it('rejects with the server’s reason and stays where it was, without retrying', async () => {
    const { api, busy } = listServer();
    const agent = await connected(api);
    busy.reason = 'session s1 is running a turn on this notebook’s kernel; stop it first';
    await expect(agent.openSession('s2')).rejects.toThrow(/running a turn/);
    expect(agent.session?.session_id).toBe('s1');
    expect(agent.connection).toBe('connected');
    const calls = api.attachSession.mock.calls.length;
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(api.attachSession).toHaveBeenCalledTimes(calls);
    agent.dispose();
  });

  it('opening the session shown does nothing, unless it was taken over: then it takes it back', async () => {
    const { api } = listServer();
    const agent = await connected(api);
    await agent.openSession('s1');
    expect(api.attachSession).toHaveBeenCalledTimes(1);
    anotherUsersNewSession(api);
    await agent.openSession('s1');
    expect(api.attachSession).toHaveBeenLastCalledWith({
      notebookPath: PATH,
      kernelId: 'k1',
      sessionId: 's1'
    });
    expect(agent.takenOver).toBeNull();
    expect(lines(agent.transcript.entries)).toEqual(S1_CHAT);
    // Taken over again later: the line comes back (its own earlier leaving does not hide it).
    anotherUsersNewSession(api);
    expect(agent.takenOver).toBe('s1');
    agent.dispose();
  });
});
