/**
 * Another session took over this notebook (docs/ui.md "Another session took
 * over"): a notebook has one attached session, and another user's (or tab's)
 * New session detaches the one this tab reads. The tab does not follow by
 * itself, so nobody's chat empties under them: the transcript gets a line
 * with a "Switch to it" button, and a message sent meanwhile is refused here
 * (kept in the input) with the same offer.
 */
import type { INoticeEntry, TranscriptModel } from './transcript';

/** The notice kind of the takeover line (the panel's own; the server never sends it). */
export const TAKEN_OVER = 'taken_over';

export const TAKEN_OVER_TEXT = 'Another session took over this notebook.';

/**
 * The status line and the status bar while the tab shows the taken-over
 * session: nothing switches until "Switch to it" (then "Connecting…").
 */
export const OLDER_SESSION_STATUS =
  'this tab shows an older session; another session took over this notebook';

export const NOT_SENT_TEXT =
  'Not sent: this chat’s session is no longer attached to the notebook. ' +
  'Your message is still in the input; switch to the current session to send it there.';

/** Thrown by a send from a session that is no longer attached; the message was not sent. */
export class SessionTakenOverError extends Error {
  constructor(readonly sessionId: string) {
    super(NOT_SENT_TEXT);
    this.name = 'SessionTakenOverError';
  }
}

/**
 * Whether the session this tab reads was taken over, and its line in the
 * transcript. One per notebook tab.
 */
export class Takeover {
  /** The session that was taken over while this tab showed it, or null. */
  get staleSessionId(): string | null {
    return this._staleSessionId;
  }

  /**
   * The session `sessionId` is no longer attached: say so once, with the
   * switch. False when it was already known.
   */
  mark(transcript: TranscriptModel, sessionId: string): boolean {
    const shown = this._line !== null && transcript.entries.includes(this._line);
    if (this._staleSessionId === sessionId && shown) {
      return false;
    }
    this._staleSessionId = sessionId;
    this._line = transcript.addPanelNotice(TAKEN_OVER, TAKEN_OVER_TEXT, 'warning');
    return true;
  }

  /** A send was refused: say why and put the switch right under it. */
  refuseSend(transcript: TranscriptModel, sessionId: string): SessionTakenOverError {
    transcript.addError(NOT_SENT_TEXT);
    if (this._line && transcript.entries.includes(this._line)) {
      transcript.removeEntry(this._line);
    }
    this._line = null;
    this.mark(transcript, sessionId);
    return new SessionTakenOverError(sessionId);
  }

  /**
   * The transcript of `sessionId` was (re)loaded: keep the line when it is
   * still the taken-over session, else forget it (a New session, the switch).
   */
  reloaded(transcript: TranscriptModel, sessionId: string): void {
    if (this._staleSessionId === sessionId) {
      this.mark(transcript, sessionId);
    } else {
      this.clear();
    }
  }

  /** The session is attached again (the server said so), or this tab shows another one. */
  clear(): void {
    this._staleSessionId = null;
    this._line = null;
  }

  private _staleSessionId: string | null = null;
  private _line: INoticeEntry | null = null;
}

/** The "Switch to it" button of the takeover line. */
export function switchButton(follow: () => void): HTMLButtonElement {
  const switchTo = document.createElement('button');
  switchTo.type = 'button';
  switchTo.className = 'pal-link pal-takeover-switch';
  switchTo.dataset.testid = 'pal-takeover-switch';
  switchTo.textContent = 'Switch to it';
  switchTo.title = 'Show the notebook’s current session in this chat';
  switchTo.addEventListener('click', () => {
    switchTo.disabled = true;
    follow();
  });
  return switchTo;
}
