// @vitest-environment happy-dom
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import {
  RECONNECT_DELAYS_MS,
  RECONNECT_JITTER,
  ReconnectingSocket
} from '../src/reconnectingSocket';
import { RetrySchedule } from '../src/retrySchedule';

/** A websocket the test opens, feeds and drops by hand. */
class HandSocket {
  static made: HandSocket[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((message: { data: unknown }) => void) | null = null;
  onclose: (() => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;

  constructor(readonly url: string) {
    HandSocket.made.push(this);
  }

  open(): void {
    this.onopen?.();
  }

  send(data: unknown): void {
    this.onmessage?.({ data });
  }

  drop(): void {
    this.onclose?.();
  }

  close(): void {
    this.closed = true;
  }
}

function socket(received: unknown[] = []): ReconnectingSocket {
  let attempt = 0;
  return new ReconnectingSocket({
    url: () => `ws://lab/events?attempt=${attempt++}`,
    onMessage: data => received.push(data),
    webSocket: HandSocket as unknown as typeof WebSocket
  });
}

/** Advance until the next socket is made; returns how long that took. */
function waitForNextAttempt(): number {
  const before = HandSocket.made.length;
  let waited = 0;
  while (HandSocket.made.length === before && waited < 60_000) {
    vi.advanceTimersByTime(10);
    waited += 10;
  }
  return waited;
}

beforeEach(() => {
  vi.useFakeTimers();
  HandSocket.made = [];
});

afterEach(() => {
  vi.useRealTimers();
});

describe('ReconnectingSocket', () => {
  it('waits each reconnect delay in turn, with jitter, then the last one for ever', () => {
    const stream = socket();
    const waits: number[] = [];
    for (let i = 0; i < RECONNECT_DELAYS_MS.length + 3; i++) {
      HandSocket.made[HandSocket.made.length - 1].drop();
      waits.push(waitForNextAttempt());
    }
    const last = RECONNECT_DELAYS_MS[RECONNECT_DELAYS_MS.length - 1];
    waits.forEach((waited, i) => {
      const base = RECONNECT_DELAYS_MS[Math.min(i, RECONNECT_DELAYS_MS.length - 1)];
      expect(waited).toBeGreaterThanOrEqual(base);
      expect(waited).toBeLessThanOrEqual(base * (1 + RECONNECT_JITTER) + 10);
    });
    expect(waits.slice(-3).every(waited => waited >= last)).toBe(true);
    stream.dispose();
  });

  it('starts the delays over once a socket opened', () => {
    const stream = socket();
    HandSocket.made[0].drop();
    waitForNextAttempt();
    HandSocket.made[1].drop();
    expect(waitForNextAttempt()).toBeGreaterThanOrEqual(RECONNECT_DELAYS_MS[1]);
    HandSocket.made[2].open();
    HandSocket.made[2].drop();
    expect(waitForNextAttempt()).toBeLessThanOrEqual(RECONNECT_DELAYS_MS[0] * (1 + RECONNECT_JITTER) + 10);
    stream.dispose();
  });

  it('asks for the URL at each attempt', () => {
    const stream = socket();
    HandSocket.made[0].drop();
    waitForNextAttempt();
    expect(HandSocket.made.map(made => made.url)).toEqual([
      'ws://lab/events?attempt=0',
      'ws://lab/events?attempt=1'
    ]);
    stream.dispose();
  });

  it('says when a socket closed without opening (refused, a 404), and not for a drop', () => {
    const stream = socket();
    const refused = vi.fn();
    stream.connectFailed.connect(refused);
    HandSocket.made[0].drop();
    expect(refused).toHaveBeenCalledTimes(1);
    waitForNextAttempt();
    HandSocket.made[1].open();
    HandSocket.made[1].drop();
    expect(refused).toHaveBeenCalledTimes(1);
    stream.dispose();
  });

  it('reports connecting, open and closed, once each change', () => {
    const stream = socket();
    const states: string[] = [];
    stream.stateChanged.connect((_, state) => states.push(state));
    expect(stream.state).toBe('connecting');
    HandSocket.made[0].open();
    HandSocket.made[0].drop();
    waitForNextAttempt();
    expect(states).toEqual(['open', 'closed', 'connecting']);
    stream.dispose();
  });

  it('passes on the open socket’s messages only', () => {
    const received: unknown[] = [];
    const stream = socket(received);
    const first = HandSocket.made[0];
    first.open();
    first.send('one');
    const stale = first.onmessage;
    first.drop();
    stale?.({ data: 'late' }); // a message of the dropped socket is not delivered
    waitForNextAttempt();
    HandSocket.made[1].open();
    HandSocket.made[1].send('two');
    expect(received).toEqual(['one', 'two']);
    stream.dispose();
  });

  it('closes its socket and never reconnects once disposed', () => {
    const stream = socket();
    const refused = vi.fn();
    stream.connectFailed.connect(refused);
    stream.dispose();
    expect(HandSocket.made[0].closed).toBe(true);
    vi.advanceTimersByTime(60_000);
    expect(HandSocket.made).toHaveLength(1);
    expect(refused).not.toHaveBeenCalled();
    expect(stream.isDisposed).toBe(true);
  });
});

describe('RetrySchedule for a socket', () => {
  it('keeps the last delay for ever with keepLast', () => {
    const schedule = new RetrySchedule([10, 20], { keepLast: true });
    expect([1, 2, 3, 4].map(() => schedule.schedule(() => undefined))).toEqual([10, 20, 20, 20]);
    schedule.reset();
    expect(schedule.schedule(() => undefined)).toBe(10);
    schedule.cancel();
  });

  it('adds up to the jitter’s share of each delay', () => {
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const schedule = new RetrySchedule([100], { jitter: 0.3 });
    expect(schedule.schedule(() => undefined)).toBe(115);
    expect(schedule.pendingDelayMs).toBe(115);
    schedule.cancel();
    random.mockRestore();
  });
});

describe('one reconnecting socket', () => {
  it('is the only module that opens a websocket or times a reconnect', () => {
    const src = join(__dirname, '..', 'src');
    const opening = readdirSync(src)
      .filter(name => name.endsWith('.ts'))
      .filter(name => /new [\w.]*WebSocket\(|RETRY_MS|_retryDelay/.test(readFileSync(join(src, name), 'utf8')));
    expect(opening).toEqual(['reconnectingSocket.ts']);
  });
});
