// @vitest-environment happy-dom
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { AgentsModel, type IAgentsApi } from '../src/agentsModel';
import { AgentsStream } from '../src/agentsStream';
import type { IAgentsOverview } from '../src/wire';

import { agentRow, family } from './agentsFixtures';

/** A websocket the test drives: it opens, sends and closes when told. */
class ScriptedSocket {
  static made: ScriptedSocket[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((message: { data: unknown }) => void) | null = null;
  onclose: (() => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;

  constructor(readonly url: string) {
    ScriptedSocket.made.push(this);
  }

  open(): void {
    this.onopen?.();
  }

  send(overview: IAgentsOverview | string): void {
    this.onmessage?.({ data: typeof overview === 'string' ? overview : JSON.stringify(overview) });
  }

  drop(): void {
    this.onclose?.();
  }

  close(): void {
    this.closed = true;
  }
}

const unusedApi = {} as IAgentsApi;

function connect(): { stream: AgentsStream; model: AgentsModel } {
  const model = new AgentsModel(unusedApi);
  const stream = new AgentsStream({
    url: () => 'ws://lab/prime-agent/api/agents/events',
    webSocket: ScriptedSocket as unknown as typeof WebSocket
  });
  stream.snapshot.connect((_, overview) => model.apply(overview));
  stream.stateChanged.connect((_, state) => (model.connection = state));
  return { stream, model };
}

beforeEach(() => {
  vi.useFakeTimers();
  ScriptedSocket.made = [];
});

afterEach(() => {
  vi.useRealTimers();
});

describe('the agents websocket', () => {
  it('takes each overview the server sends as the whole state', () => {
    const { stream, model } = connect();
    const socket = ScriptedSocket.made[0];
    socket.open();
    expect(model.connection).toBe('open');
    socket.send({ agents: family(), generated_at: '' });
    expect(model.rows.map(row => row.session_id)).toEqual(['root', 'a', 'a1', 'b', 'r2']);
    socket.send({ agents: [agentRow('root', null)], generated_at: '' });
    expect(model.rows.map(row => row.session_id)).toEqual(['root']);
    stream.dispose();
  });

  it('ignores a malformed message and keeps what it had', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const { stream, model } = connect();
    const socket = ScriptedSocket.made[0];
    socket.open();
    socket.send({ agents: family(), generated_at: '' });
    socket.send('{oops');
    expect(model.rows).toHaveLength(5);
    expect(warn).toHaveBeenCalled();
    warn.mockRestore();
    stream.dispose();
  });

  it('reconnects after a drop, with growing delays, and takes the fresh snapshot', () => {
    const { stream, model } = connect();
    const first = ScriptedSocket.made[0];
    first.open();
    first.send({ agents: family(), generated_at: '' });
    first.drop();
    expect(model.connection).toBe('closed');
    vi.advanceTimersByTime(700); // 500 ms and up to 30 % jitter
    expect(ScriptedSocket.made).toHaveLength(2);
    ScriptedSocket.made[1].drop();
    vi.advanceTimersByTime(700);
    expect(ScriptedSocket.made).toHaveLength(2); // the second wait is about a second
    vi.advanceTimersByTime(700);
    expect(ScriptedSocket.made).toHaveLength(3);
    const third = ScriptedSocket.made[2];
    third.open();
    // What changed while away (b finished and was deleted) is in the first message.
    third.send({ agents: family().filter(row => row.session_id !== 'b'), generated_at: '' });
    expect(model.connection).toBe('open');
    expect(model.rows.map(row => row.session_id)).toEqual(['root', 'a', 'a1', 'r2']);
    stream.dispose();
  });

  it('stops reconnecting once disposed', () => {
    const { stream } = connect();
    const socket = ScriptedSocket.made[0];
    stream.dispose();
    expect(socket.closed).toBe(true);
    vi.advanceTimersByTime(20_000);
    expect(ScriptedSocket.made).toHaveLength(1);
  });
});
