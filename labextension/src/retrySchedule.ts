/**
 * When to try a failed step again: after each delay in turn, then no more
 * until someone resets the schedule (a success, or the user's Retry); or,
 * with `keepLast`, after the last delay for ever (a socket that reconnects).
 */

/** Milliseconds before each attempt of a failed attach: about a minute in all. */
export const ATTACH_RETRY_DELAYS_MS: readonly number[] = [
  1000, 2000, 4000, 8000, 15000, 30000
];

export interface IRetryScheduleOptions {
  /** Once every delay was used, keep waiting the last one instead of giving up. */
  keepLast?: boolean;
  /** Add up to this share of each delay at random (0.3: up to 30 % more). */
  jitter?: number;
}

export class RetrySchedule {
  constructor(
    private readonly _delaysMs: readonly number[] = ATTACH_RETRY_DELAYS_MS,
    options: IRetryScheduleOptions = {}
  ) {
    this._keepLast = options.keepLast ?? false;
    this._jitter = options.jitter ?? 0;
  }

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
    const last = this._delaysMs.length - 1;
    if (last < 0 || (this._attempt > last && !this._keepLast)) {
      return null;
    }
    const base = this._delaysMs[Math.min(this._attempt, last)];
    const delay = base + Math.random() * this._jitter * base;
    this._attempt = Math.min(this._attempt + 1, this._delaysMs.length);
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

  private readonly _keepLast: boolean;
  private readonly _jitter: number;
  private _attempt = 0;
  private _pendingDelayMs = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
}
