// @vitest-environment happy-dom
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Contents } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { AgentApiClient, AgentApiError } from '../src/api';
import { FollowCellsSetting } from '../src/cellFollower';
import { ChatPanel } from '../src/chatPanel';
import { SessionDirectory } from '../src/family';
import { NotebookAgent } from '../src/notebookAgent';
import { QueueModel } from '../src/queue';
import { ATTACH_RETRY_DELAYS_MS, RetrySchedule } from '../src/retrySchedule';
import { TranscriptModel } from '../src/transcript';
import type { ISessionInfo } from '../src/wire';

// JupyterLab's icon registry needs its web components, which load only in a
// browser; the panel's icon plays no part in these tests.
vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const PATH = 'analysis.agents/part-a.ipynb';
const HALF_WRITTEN = new AgentApiError(
  `cannot open '${PATH}' as a notebook: Unreadable Notebook: NotJSONError("Notebook does not appear to be JSON: ''")`,
  400
);

const SESSION: ISessionInfo = {
  session_id: 's1',
  notebook_path: PATH,
  kernel_id: 'k1',
  provider: 'scripted',
  model: 'demo',
  status: 'idle',
  turns: 0,
  created: null,
  updated: null,
  seq: 0
};

/** A websocket that opens as soon as the page's tasks run. */
class OpeningWebSocket {
  constructor(readonly url: string) {
    setTimeout(() => this.onopen?.(), 0);
  }
  onopen: (() => void) | null = null;
  onmessage: ((message: MessageEvent) => void) | null = null;
  onclose: (() => void) | null = null;
  onerror: (() => void) | null = null;
  close(): void {
    return;
  }
}

/** What a NotebookAgent reads of its notebook tab, without JupyterLab. */
function notebookTab(): NotebookPanel {
  return {
    node: document.createElement('div'),
    content: { outerNode: document.createElement('div') },
    sessionContext: { kernelChanged: new Signal({}), session: { kernel: { id: 'k1' } } },
    context: {
      path: PATH,
      ready: Promise.resolve(),
      pathChanged: new Signal({}),
      model: { sharedModel: { changed: new Signal({}), getState: () => undefined } }
    }
  } as unknown as NotebookPanel;
}

/** The server's REST side: `attach` answers each attach in turn. */
function server(attach: () => Promise<ISessionInfo>) {
  const api = {
    serverSettings: { WebSocket: OpeningWebSocket },
    postBinding: async () => undefined,
    attachSession: vi.fn(attach),
    getSession: async () => ({ ...SESSION, transcript: [] }),
    eventsUrl: () => 'ws://server/events'
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

describe('a failed attach', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('says why, tries again by itself with backoff, and connects once the server answers', async () => {
    const answers = [HALF_WRITTEN, HALF_WRITTEN];
    const api = server(async () => {
      const failure = answers.shift();
      if (failure) {
        throw failure;
      }
      return SESSION;
    });
    const agent = agentOn(api);

    await vi.advanceTimersByTimeAsync(0);
    expect(agent.connection).toBe('failed');
    expect(agent.lastError).toContain('Unreadable Notebook');
    expect(agent.retryInMs).toBe(ATTACH_RETRY_DELAYS_MS[0]);

    await vi.advanceTimersByTimeAsync(ATTACH_RETRY_DELAYS_MS[0]);
    expect(api.attachSession).toHaveBeenCalledTimes(2);
    expect(agent.connection).toBe('failed');
    expect(agent.retryInMs).toBe(ATTACH_RETRY_DELAYS_MS[1]);

    await vi.advanceTimersByTimeAsync(ATTACH_RETRY_DELAYS_MS[1]);
    expect(api.attachSession).toHaveBeenCalledTimes(3);
    // Connected once the event stream's websocket opens.
    await vi.waitFor(() => expect(agent.connection).toBe('connected'));
    expect(agent.session?.session_id).toBe('s1');
    expect(agent.panel.node.dataset.palSession).toBe('s1');
    expect(agent.lastError).toBeNull();
    expect(agent.retryInMs).toBeNull();
    agent.dispose();
  });

  it('stops trying by itself after the last delay, and the Retry button starts over', async () => {
    let failing = true;
    const api = server(async () => {
      if (failing) {
        throw new AgentApiError('Internal Server Error', 500);
      }
      return SESSION;
    });
    const agent = agentOn(api);
    const total = ATTACH_RETRY_DELAYS_MS.reduce((sum, delay) => sum + delay, 0);

    await vi.advanceTimersByTimeAsync(total + 60_000);
    expect(api.attachSession).toHaveBeenCalledTimes(1 + ATTACH_RETRY_DELAYS_MS.length);
    expect(agent.connection).toBe('failed');
    expect(agent.retryInMs).toBeNull();

    failing = false;
    agent.retry();
    await vi.waitFor(() => expect(agent.connection).toBe('connected'));
    agent.dispose();
  });

  it('is not tried again after the notebook tab closed', async () => {
    const api = server(async () => {
      throw HALF_WRITTEN;
    });
    const agent = agentOn(api);
    await vi.advanceTimersByTimeAsync(0);
    agent.dispose();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(api.attachSession).toHaveBeenCalledTimes(1);
  });
});

describe('the chat panel of a failed attach', () => {
  it('shows the error, when the panel tries again, and a Retry button that retries', () => {
    const retry = vi.fn();
    const agent = {
      changed: new Signal({}),
      familyChanged: new Signal({}),
      transcript: new TranscriptModel(),
      queue: new QueueModel(),
      notebookPath: PATH,
      session: null,
      parent: null,
      connection: 'failed',
      lastError: HALF_WRITTEN.message,
      retryInMs: 4000,
      retry
    };
    const panel = new ChatPanel({
      followCells: new FollowCellsSetting(),
      activateNotebook: () => undefined,
      openNotebook: async () => undefined
    });
    panel.agent = agent as unknown as NotebookAgent;
    const status = panel.node.querySelector<HTMLElement>('[data-testid="pal-status"]');
    expect(status?.dataset.connection).toBe('failed');
    expect(status?.textContent).toContain(`Error: ${HALF_WRITTEN.message} Trying again in 4 s.`);
    panel.node.querySelector<HTMLButtonElement>('[data-testid="pal-retry-connect"]')?.click();
    expect(retry).toHaveBeenCalledTimes(1);
  });
});

describe('RetrySchedule', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('waits each delay in turn, then no more until it is reset', () => {
    const schedule = new RetrySchedule([10, 20]);
    const runs: number[] = [];
    expect(schedule.schedule(() => runs.push(1))).toBe(10);
    vi.advanceTimersByTime(10);
    expect(schedule.schedule(() => runs.push(2))).toBe(20);
    expect(schedule.pendingDelayMs).toBe(20);
    vi.advanceTimersByTime(20);
    expect(schedule.schedule(() => runs.push(3))).toBeNull();
    expect(runs).toEqual([1, 2]);
    schedule.reset();
    expect(schedule.schedule(() => runs.push(4))).toBe(10);
    schedule.cancel();
    vi.advanceTimersByTime(100);
    expect(runs).toEqual([1, 2]);
    expect(schedule.pendingDelayMs).toBeNull();
  });
});
