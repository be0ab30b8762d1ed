/**
 * The agent family as the chat panel sees it: the parent of a sub-agent's
 * session, who sent a message, and where that agent's notebook is.
 */
import type { IMessageOrigin, TranscriptEntry } from './transcript';
import type { ISessionInfo } from './wire';

/** The agent that spawned the session the panel shows. */
export interface IParentAgent {
  sessionId: string;
  /** Its name (a root is known by its notebook); '' until the server said. */
  name: string;
  /** Its notebook, relative to the server root; null until looked up. */
  notebookPath: string | null;
}

/**
 * Session infos by id, read from GET sessions. A lookup that misses reads
 * the list again (a session started after the last read); concurrent
 * lookups share one request.
 */
export class SessionDirectory {
  constructor(private readonly _list: () => Promise<readonly ISessionInfo[]>) {}

  /**
   * The session, or null when the server does not list it.
   *
   * @param fresh - read the list again even when the id is known (a
   *   notebook may have been renamed since).
   */
  async find(sessionId: string, fresh = false): Promise<ISessionInfo | null> {
    if (fresh || !this._byId.has(sessionId)) {
      await this._refresh();
    }
    return this._byId.get(sessionId) ?? null;
  }

  private _refresh(): Promise<void> {
    if (!this._pending) {
      this._pending = this._list()
        .then(sessions => {
          this._byId = new Map(
            (Array.isArray(sessions) ? sessions : []).map(info => [info.session_id, info])
          );
        })
        .finally(() => {
          this._pending = null;
        });
    }
    return this._pending;
  }

  private _byId = new Map<string, ISessionInfo>();
  private _pending: Promise<void> | null = null;
}

/** The parent as a session listing describes it. */
export function parentFromInfo(sessionId: string, info: ISessionInfo | null): IParentAgent {
  return {
    sessionId,
    name: info?.name || info?.notebook_path || '',
    notebookPath: info?.notebook_path ?? null
  };
}

/**
 * The sender's notebook when the panel already knows it without asking the
 * server: the parent's (looked up when the session was opened) or a child's
 * (from the line of its spawn in this transcript).
 */
export function knownNotebookPath(
  origin: IMessageOrigin,
  parent: IParentAgent | null,
  entries: readonly TranscriptEntry[]
): string | null {
  if (
    origin.relationship === 'parent' &&
    parent?.notebookPath &&
    (origin.sessionId === null || origin.sessionId === parent.sessionId)
  ) {
    return parent.notebookPath;
  }
  if (origin.relationship === 'child' && origin.name) {
    for (let i = entries.length - 1; i >= 0; i--) {
      const entry = entries[i];
      if (entry.kind === 'child' && entry.name === origin.name && entry.notebookPath) {
        return entry.notebookPath;
      }
    }
  }
  return null;
}

/**
 * The sender's notebook: known from the family when possible, otherwise
 * looked up afresh in the server's session list (it may have been renamed).
 */
export async function findSenderNotebook(
  origin: IMessageOrigin,
  parent: IParentAgent | null,
  entries: readonly TranscriptEntry[],
  directory: SessionDirectory
): Promise<string | null> {
  const known = knownNotebookPath(origin, parent, entries);
  if (known || !origin.sessionId) {
    return known;
  }
  return (await directory.find(origin.sessionId, true))?.notebook_path ?? null;
}

/**
 * The words before the sender's name: "task from parent" for the message
 * that started a sub-agent's first turn, "from child" and so on otherwise.
 */
export function senderLabel(origin: IMessageOrigin, isFirstTask: boolean): string {
  if (isFirstTask && origin.relationship === 'parent') {
    return 'task from parent';
  }
  return origin.relationship ? `from ${origin.relationship}` : 'from';
}

