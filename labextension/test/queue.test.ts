// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import type { NotebookAgent } from '../src/notebookAgent';
import { QueueModel, enterAction, inputHint, queueState } from '../src/queue';
import { HELD_TEXT, QueueView } from '../src/queueView';
import { TranscriptModel, type IUserEntry } from '../src/transcript';
import type { AgentEvent, ChatItem, IQueuedMessage } from '../src/wire';

import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const SESSION = 's1';

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: SESSION, ...fields } as unknown as AgentEvent;
}

function item(
  id: string,
  text: string,
  mode: 'steer' | 'follow_up' = 'follow_up'
): IQueuedMessage {
  return { message_id: id, text, mode, composed: '2026-01-01T00:00:00.000+00:00' };
}

function queueEvent(
  seq: number,
  change: string,
  items: IQueuedMessage[],
  paused = false
): AgentEvent {
  return event(seq, { type: 'queue', change, state: { items, paused } });
}

const texts = (model: QueueModel) => model.items.map(i => `${i.mode}:${i.text}`);

describe('the queue model', () => {
  it('shows the queue GET session carried, in order, and every newer queue event', () => {
    const model = new QueueModel();
    const changed = vi.fn();
    model.changed.connect(changed);
    model.load({ items: [item('a', 'plot it'), item('b', 'save it')], paused: false }, 100);
    expect(texts(model)).toEqual(['follow_up:plot it', 'follow_up:save it']);

    const three = [item('a', 'plot it'), item('b', 'save it'), item('c', 'median', 'steer')];
    model.apply(queueEvent(101, 'queued', three));
    expect(texts(model)).toEqual(['follow_up:plot it', 'follow_up:save it', 'steer:median']);
    model.apply(queueEvent(102, 'started', [item('b', 'save it'), item('c', 'median', 'steer')]));
    expect(texts(model)).toEqual(['follow_up:save it', 'steer:median']);
    expect(changed).toHaveBeenCalledTimes(3);
  });

  it('ignores replayed events the loaded state already covers', () => {
    const model = new QueueModel();
    model.load({ items: [item('b', 'save it')], paused: true }, 200);
    // Replayed from the server's buffer: older than the state GET answered.
    model.apply(queueEvent(150, 'queued', [item('a', 'plot it'), item('b', 'save it')]));
    model.apply(queueEvent(199, 'paused', [item('a', 'plot it'), item('b', 'save it')], true));
    expect(texts(model)).toEqual(['follow_up:save it']);
    expect(model.paused).toBe(true);
    model.apply(queueEvent(201, 'resumed', [item('b', 'save it')]));
    expect(model.paused).toBe(false);
  });

  it('reads a missing or malformed state as an empty queue and skips bad items', () => {
    expect(queueState(undefined)).toEqual({ items: [], paused: false });
    const read = queueState({
      items: [item('a', 'ok'), { message_id: 5, text: 'x', mode: 'steer' }, { text: 'no id' }],
      paused: 'yes'
    });
    expect(read.items.map(i => i.message_id)).toEqual(['a']);
    expect(read.paused).toBe(false);
    const model = new QueueModel();
    model.apply(event(5, { type: 'status', status: 'idle' }));
    expect(model.items).toEqual([]);
  });

  it('says what Enter does: send when idle, queue while a turn runs', () => {
    expect(enterAction(false)).toBe('send');
    expect(enterAction(true)).toBe('queue');
    expect(inputHint(false, 'Ask the agent…')).toBe('Ask the agent…');
    const running = inputHint(true, 'Ask the agent…');
    expect(running).toContain('Enter queues a follow-up');
    expect(running).toContain('Shift+Alt+Enter steers');
  });
});

describe('the queue view', () => {
  it('lists the items with Remove, and Send now while the queue is held', async () => {
    const remove = vi.fn(async () => undefined);
    const sendNow = vi.fn(async () => undefined);
    const view = new QueueView({ remove, sendNow });
    const model = new QueueModel();
    view.render(model);
    expect(view.node.hidden).toBe(true);

    model.load({ items: [item('a', 'plot it'), item('c', 'median', 'steer')], paused: false }, 1);
    view.render(model);
    const lines = [...view.node.querySelectorAll<HTMLElement>('[data-testid="pal-queued"]')];
    expect(lines.map(l => l.textContent)).toEqual([
      'Queued: after this runplot itRemove',
      'Steer: at the next stepmedianRemove'
    ]);
    expect(view.node.querySelector('[data-testid="pal-queued-send-now"]')).toBeNull();
    lines[1].querySelector<HTMLButtonElement>('[data-testid="pal-queued-remove"]')!.click();
    expect(remove).toHaveBeenCalledWith('c');

    model.load({ items: [item('a', 'plot it')], paused: true }, 2);
    view.render(model);
    expect(view.node.querySelector('[data-testid="pal-queue-held"]')?.textContent).toBe(HELD_TEXT);
    const now = view.node.querySelector<HTMLButtonElement>('[data-testid="pal-queued-send-now"]')!;
    expect(now.getAttribute('aria-label')).toBe('Send now: plot it');
    now.click();
    expect(sendNow).toHaveBeenCalledWith('a');
  });
});

describe('the transcript with the user’s steer and queued follow-ups', () => {
  it('shows a steer as the user’s message where it entered, and a follow-up as its turn', () => {
    const model = new TranscriptModel();
    model.load([{ type: 'user', turn: 1, text: 'work' } as ChatItem], 10);
    model.apply(event(11, { type: 'cell_started', turn: 1, cell_id: 'c1', code: 'x' }));
    model.apply(
      event(12, {
        type: 'agent_message',
        turn: 1,
        text: 'use the median',
        message_id: 'user_1',
        composed: 't',
        mode: 'steer',
        from_user: true
      })
    );
    model.apply(event(13, { type: 'turn_ended', turn: 1, stop_reason: 'end_turn', final_text: '' }));
    model.apply(
      event(14, {
        type: 'turn_started',
        turn: 2,
        text: 'then plot it',
        message_id: 'user_2',
        composed: 't',
        mode: 'follow_up',
        from_user: true
      })
    );
    const users = model.entries.filter((e): e is IUserEntry => e.kind === 'user');
    expect(users.map(u => [u.turn, u.text, u.mode ?? null, u.origin])).toEqual([
      [1, 'work', null, null],
      [1, 'use the median', 'steer', null],
      [2, 'then plot it', 'follow_up', null]
    ]);
    expect(model.entries.some(e => e.kind === 'agent_message')).toBe(false);
  });

  it('reads the same from a reloaded transcript', () => {
    const model = new TranscriptModel();
    model.load(
      [
        { type: 'user', turn: 1, text: 'work' },
        { type: 'user', turn: 1, text: 'use the median', mode: 'steer' },
        { type: 'user', turn: 2, text: 'then plot it', mode: 'follow_up' }
      ] as ChatItem[],
      20
    );
    const users = model.entries.filter((e): e is IUserEntry => e.kind === 'user');
    expect(users.map(u => u.mode ?? null)).toEqual([null, 'steer', 'follow_up']);
  });
});

/** A stand-in agent that records what the panel sends and removes. */
class QueueingAgent extends StandInAgent {
  readonly send = vi.fn(async (_text: string, _mode?: string) => undefined);
  readonly removeQueued = vi.fn(async (_id: string) => undefined);
  readonly sendQueuedNow = vi.fn(async (_id: string) => undefined);

  constructor() {
    super(sessionInfo('root', 'analysis.ipynb'));
  }
}

function panelWith(agent: QueueingAgent) {
  const panel = standInChatPanel();
  panel.agent = agent as unknown as NotebookAgent;
  agent.transcript.load([], 0);
  const find = <T extends HTMLElement = HTMLElement>(testId: string) =>
    panel.node.querySelector<T>(`[data-testid="${testId}"]`)!;
  const input = find<HTMLTextAreaElement>('pal-chat-input');
  const type = (text: string) => {
    input.value = text;
    input.dispatchEvent(new Event('input'));
  };
  const press = (init: KeyboardEventInit) =>
    input.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', cancelable: true, ...init }));
  return { panel, find, input, type, press };
}

describe('the chat input while a turn runs', () => {
  it('queues with Enter, steers with Shift+Alt+Enter or Steer, and says so in the input', async () => {
    const agent = new QueueingAgent();
    const { find, input, type, press } = panelWith(agent);
    const steer = find<HTMLButtonElement>('pal-steer');
    const send = find<HTMLButtonElement>('pal-send');
    type('look at x');
    expect(steer.disabled).toBe(true); // idle: Enter sends, nothing to steer
    expect(send.textContent).toBe('Send');
    expect(input.placeholder).not.toContain('queues');

    agent.transcript.status = 'running';
    expect(steer.disabled).toBe(false);
    expect(send.disabled).toBe(false);
    expect(send.textContent).toBe('Queue');
    expect(input.placeholder).toContain('Enter queues a follow-up');

    press({});
    await vi.waitFor(() => expect(agent.send).toHaveBeenLastCalledWith('look at x', 'auto'));
    expect(input.value).toBe('');

    type('use the median');
    press({ shiftKey: true, altKey: true });
    await vi.waitFor(() => expect(agent.send).toHaveBeenLastCalledWith('use the median', 'steer'));

    type('and log it');
    steer.click();
    await vi.waitFor(() => expect(agent.send).toHaveBeenLastCalledWith('and log it', 'steer'));
    press({ shiftKey: true }); // Shift+Enter alone is a new line, never a send
    expect(agent.send).toHaveBeenCalledTimes(3);
  });

  it('shows the queue the agent holds under the transcript, with Remove', () => {
    const agent = new QueueingAgent();
    const { find } = panelWith(agent);
    const queue = find('pal-queue');
    expect(queue.hidden).toBe(true);
    agent.queue.apply(queueEvent(5, 'queued', [item('a', 'plot it')]));
    expect(queue.hidden).toBe(false);
    expect(find('pal-queued-text').textContent).toBe('plot it');
    find<HTMLButtonElement>('pal-queued-remove').click();
    expect(agent.removeQueued).toHaveBeenCalledWith('a');
    agent.queue.apply(queueEvent(6, 'removed', []));
    expect(queue.hidden).toBe(true);
  });
});
