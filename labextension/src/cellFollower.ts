/**
 * Keeps the agent's newest cell in view in the notebook, as JupyterLab does
 * for the cell it runs, unless the user turned that off or scrolled away
 * from the agent's cells during this turn.
 */
import type { Notebook } from '@jupyterlab/notebook';
import type { IDisposable } from '@lumino/disposable';

import { findCellIndex } from './cellNavigation';

/** The "follow the agent's cells" switch, remembered in localStorage. */
export class FollowCellsSetting {
  static readonly storageKey = 'prime-agent-lab:follow-agent-cells';

  get enabled(): boolean {
    return this._enabled;
  }

  set enabled(value: boolean) {
    this._enabled = value;
    try {
      window.localStorage.setItem(FollowCellsSetting.storageKey, value ? 'on' : 'off');
    } catch {
      // Storage can be unavailable (private mode); the switch still works for this page.
    }
  }

  private _enabled = readStoredSwitch();
}

function readStoredSwitch(): boolean {
  try {
    return window.localStorage.getItem(FollowCellsSetting.storageKey) !== 'off';
  } catch {
    return true;
  }
}

/** How long after a wheel, touch or key event a scroll counts as the user's. */
const USER_SCROLL_WINDOW_MS = 1000;
/** How long to wait for a cell the event names to reach this tab's document. */
const CELL_ARRIVAL_TIMEOUT_MS = 5000;

export class CellFollower implements IDisposable {
  constructor(
    private readonly _notebook: Notebook,
    private readonly _setting: FollowCellsSetting
  ) {
    const outer = _notebook.outerNode;
    for (const type of ['wheel', 'touchmove', 'keydown', 'mousedown']) {
      outer.addEventListener(type, this._onUserInput, { passive: true });
    }
    outer.addEventListener('scroll', this._onScroll, { passive: true });
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    const outer = this._notebook.outerNode;
    for (const type of ['wheel', 'touchmove', 'keydown', 'mousedown']) {
      outer.removeEventListener(type, this._onUserInput);
    }
    outer.removeEventListener('scroll', this._onScroll);
  }

  /** A new turn: follow again even if the user scrolled away last time. */
  newTurn(): void {
    this._away = false;
  }

  /** The agent wrote or started this cell: bring it into view. */
  async follow(cellId: string): Promise<void> {
    if (this._disposed || !this._setting.enabled || this._away) {
      return;
    }
    this._followed = cellId;
    const index = await this._cellIndex(cellId);
    // Check again: the user may have scrolled while the cell was on its way.
    if (index < 0 || this._disposed || !this._setting.enabled || this._away) {
      return;
    }
    if (this._followed === cellId) {
      await this._notebook.scrollToItem(index, 'smart');
    }
  }

  /** The cell's index once this tab's document has it (the event can come first). */
  private _cellIndex(cellId: string): Promise<number> {
    const index = findCellIndex(this._notebook, cellId);
    const cells = this._notebook.model?.cells;
    if (index >= 0 || !cells) {
      return Promise.resolve(index);
    }
    return new Promise(resolve => {
      const done = (found: number) => {
        window.clearTimeout(timer);
        cells.changed.disconnect(check);
        resolve(found);
      };
      const check = () => {
        const found = findCellIndex(this._notebook, cellId);
        if (found >= 0) {
          done(found);
        }
      };
      const timer = window.setTimeout(() => done(-1), CELL_ARRIVAL_TIMEOUT_MS);
      cells.changed.connect(check);
    });
  }

  private readonly _onUserInput = (): void => {
    this._lastUserInput = Date.now();
  };

  private readonly _onScroll = (): void => {
    if (this._followed === null || Date.now() - this._lastUserInput > USER_SCROLL_WINDOW_MS) {
      return; // our own scrolling, or nothing followed yet
    }
    this._away = !this._isInView(this._followed);
  };

  private _isInView(cellId: string): boolean {
    const index = findCellIndex(this._notebook, cellId);
    const cell = index >= 0 ? this._notebook.widgets[index] : undefined;
    if (!cell || !cell.node.isConnected) {
      return false;
    }
    const viewport = this._notebook.outerNode.getBoundingClientRect();
    const box = cell.node.getBoundingClientRect();
    return box.bottom > viewport.top && box.top < viewport.bottom;
  }

  private _followed: string | null = null;
  private _away = false;
  private _lastUserInput = 0;
  private _disposed = false;
}
