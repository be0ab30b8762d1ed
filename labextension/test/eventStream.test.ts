// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { EventStream } from '../src/eventStream';

/** A WebSocket stand-in the test opens and closes by hand. */
class FakeSocket {
  static made: FakeSocket[] = [];
  onopen: (() => void) | null = null;
  onclose: (() => void) | null = null;
  onerror: (() => void) | null = null;
  onmessage: ((message: MessageEvent) => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.made.push(this);
  }
  close(): void {
    this.onclose?.();
  }
}

describe('EventStream', () => {
  it('says a connection was refused each time one closes without opening, and retries', () => {
    vi.useFakeTimers();
    FakeSocket.made = [];
    const stream = new EventStream({
      urlFor: since => `ws://server/events?since=${since}`,
      since: 0,
      webSocket: FakeSocket as unknown as typeof WebSocket
    });
    const refused = vi.fn();
    stream.connectFailed.connect(refused);

    FakeSocket.made[0].close(); // refused: a 404 handshake
    expect(refused).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(10_000);
    expect(FakeSocket.made.length).toBe(2); // it tried again

    FakeSocket.made[1].onopen?.();
    FakeSocket.made[1].close(); // a connection that was open and then dropped: not refused
    expect(refused).toHaveBeenCalledTimes(1);
    stream.dispose();
    vi.useRealTimers();
  });
});
