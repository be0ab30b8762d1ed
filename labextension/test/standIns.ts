// What the panel tests put where JupyterLab, a notebook or the server would be.
import { Signal } from '@lumino/signaling';

import { FollowCellsSetting } from '../src/cellFollower';
import { ChatPanel } from '../src/chatPanel';
import type { IParentAgent } from '../src/family';
import { QueueModel } from '../src/queue';
import { TranscriptModel } from '../src/transcript';
import type { ISessionInfo } from '../src/wire';

/** A session as the server lists it; `extra` fields replace the defaults. */
export function sessionInfo(
  id: string,
  path: string,
  extra: Partial<ISessionInfo> = {}
): ISessionInfo {
  return {
    session_id: id,
    notebook_path: path,
    kernel_id: 'k',
    provider: 'scripted',
    model: 'demo',
    status: 'idle',
    turns: 1,
    created: null,
    updated: null,
    ...extra
  };
}

/**
 * What the chat panel reads of a notebook's agent, without a notebook: the
 * panel is the unit here, the agent's REST side is tested in the browser. A
 * test module adds what its cases use (`send`, `api`, `autonomy`).
 */
export class StandInAgent {
  readonly changed = new Signal<this, void>(this);
  readonly familyChanged = new Signal<this, void>(this);
  readonly transcript = new TranscriptModel();
  readonly queue = new QueueModel();
  readonly connection = 'connected';
  readonly lastError = null;
  parent: IParentAgent | null = null;
  readonly notebookPath: string;

  constructor(readonly session: ISessionInfo) {
    this.notebookPath = session.notebook_path ?? '';
  }
}

/** A chat panel that follows no cells and opens notebooks with `openNotebook`. */
export function standInChatPanel(
  openNotebook: (path: string) => Promise<void> = async () => undefined
): ChatPanel {
  return new ChatPanel({
    followCells: new FollowCellsSetting(),
    activateNotebook: () => undefined,
    openNotebook
  });
}
