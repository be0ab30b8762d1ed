/**
 * Marks agent-written cells in a notebook: any cell whose metadata has a
 * `prime_agent` object gets the `pal-agent-cell` class and an
 * "agent · turn N" badge (drawn by CSS from `data-pal-badge`).
 */
import type { ICellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { IObservableList } from '@jupyterlab/observables';
import type { IDisposable } from '@lumino/disposable';

export const AGENT_CELL_CLASS = 'pal-agent-cell';
export const AGENT_METADATA_KEY = 'prime_agent';

export interface IAgentCellMetadata {
  session_id?: string;
  turn?: number;
  role?: string;
  /** A narration cell (`narrate_cells`, docs/teaching.md): what it narrates. */
  narrates?: string;
  /** `"other"`: written on a branch that is not the session's current one. */
  branch?: string;
}

export const OTHER_BRANCH_CLASS = 'pal-other-branch';

/** The cell belongs to a branch the session moved away from (docs/branching.md). */
export function isOtherBranch(metadata: IAgentCellMetadata): boolean {
  return metadata.branch === 'other';
}

/** The cell's `prime_agent` metadata, or null for a cell the user wrote. */
export function agentMetadata(model: ICellModel): IAgentCellMetadata | null {
  const value: unknown = model.getMetadata(AGENT_METADATA_KEY);
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    return value as IAgentCellMetadata;
  }
  return null;
}

/** The badge's first word: a narration cell is the turn's message or answer, not agent code. */
function badgeKind(metadata: IAgentCellMetadata): string {
  if (metadata.role === 'narration') {
    return metadata.narrates === 'answer' ? 'answer' : 'message';
  }
  return 'agent';
}

export function badgeText(metadata: IAgentCellMetadata): string {
  const kind = badgeKind(metadata);
  const base = typeof metadata.turn === 'number' ? `${kind} · turn ${metadata.turn}` : kind;
  return isOtherBranch(metadata) ? `${base} · other branch` : base;
}

export class AgentCellMarker implements IDisposable {
  constructor(private readonly _panel: NotebookPanel) {
    const cells = _panel.content.model?.cells;
    if (cells) {
      for (let index = 0; index < cells.length; index++) {
        this._watch(cells.get(index));
      }
      cells.changed.connect(this._onCellsChanged, this);
    }
    _panel.disposed.connect(() => this.dispose());
    this._scheduleRefresh();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    cancelAnimationFrame(this._frame);
    this._panel.content.model?.cells.changed.disconnect(this._onCellsChanged, this);
    for (const model of this._watched) {
      model.metadataChanged.disconnect(this._scheduleRefresh, this);
    }
    this._watched.clear();
  }

  private _onCellsChanged(
    _: unknown,
    change: IObservableList.IChangedArgs<ICellModel>
  ): void {
    for (const model of change.oldValues) {
      this._unwatch(model);
    }
    for (const model of change.newValues) {
      this._watch(model);
    }
    this._scheduleRefresh();
  }

  private _watch(model: ICellModel): void {
    if (!this._watched.has(model)) {
      this._watched.add(model);
      model.metadataChanged.connect(this._scheduleRefresh, this);
    }
  }

  private _unwatch(model: ICellModel): void {
    if (this._watched.delete(model) && !model.isDisposed) {
      model.metadataChanged.disconnect(this._scheduleRefresh, this);
    }
  }

  /** Coalesce bursts (a live cell arrives with many changes) into one pass. */
  private _scheduleRefresh(): void {
    if (this._disposed || this._frame) {
      return;
    }
    this._frame = requestAnimationFrame(() => {
      this._frame = 0;
      this._refresh();
    });
  }

  private _refresh(): void {
    if (this._disposed) {
      return;
    }
    for (const cell of this._panel.content.widgets) {
      const metadata = cell.model ? agentMetadata(cell.model) : null;
      const node = cell.node;
      if (metadata) {
        node.classList.add(AGENT_CELL_CLASS);
        node.dataset.palBadge = badgeText(metadata);
        node.classList.toggle(OTHER_BRANCH_CLASS, isOtherBranch(metadata));
        if (metadata.session_id) {
          node.dataset.palSession = metadata.session_id;
        }
      } else if (node.classList.contains(AGENT_CELL_CLASS)) {
        node.classList.remove(AGENT_CELL_CLASS, OTHER_BRANCH_CLASS);
        delete node.dataset.palBadge;
        delete node.dataset.palSession;
      }
    }
  }

  private _frame = 0;
  private _disposed = false;
  private readonly _watched = new Set<ICellModel>();
}
