/**
 * When to try a failed step again: after each delay in turn, then no more
 * until someone resets the schedule (a success, or the user's Retry).
 */

/** Milliseconds before each attempt of a failed attach: about a minute in all. */
export const ATTACH_RETRY_DELAYS_MS: readonly number[] = [
  1000, 2000, 4000, 8000, 15000, 30000
];

export class RetrySchedule {
  constructor(private readonly _delaysMs: readonly number[] = ATTACH_RETRY_DELAYS_MS) {}

  /** Milliseconds until the pending attempt, or null when none is pending. */
  get pendingDelayMs(): number | null {
    return this._timer === null ? null : this._pendingDelayMs;
  }

  /**
   * Run `action` after the next delay (replacing an attempt already
   * pending); returns that delay, or null once every attempt was used.
   */
  schedule(action: () => void): number | null {
    this.cancel();
    if (this._attempt >= this._delaysMs.length) {
      return null;
    }
    const delay = this._delaysMs[this._attempt];
    this._attempt += 1;
    this._pendingDelayMs = delay;
    this._timer = setTimeout(() => {
      this._timer = null;
      action();
    }, delay);
    return delay;
  }

  /** Forget the failures so far and drop a pending attempt. */
  reset(): void {
    this.cancel();
    this._attempt = 0;
  }

  /** Drop a pending attempt; the failures so far still count. */
  cancel(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private _attempt = 0;
  private _pendingDelayMs = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
}
