/**
 * The JupyterLab status-bar item of the current notebook's agent: its state
 * and its session's cost with sub-agents (docs/pairing.md, section 2). When
 * another session took over the notebook while the tab shows its old one,
 * it says so instead of the old session's state.
 */
import type { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { sessionCostText, type ModelCostModel } from './modelCost';
import { OLDER_SESSION_STATUS } from './takeover';

/** What the item reads of a notebook's agent (NotebookAgent). */
export interface IStatusSource {
  readonly modelCost: ModelCostModel;
  /** The session the tab shows when another took the notebook over, else null. */
  readonly takenOver: string | null;
  readonly changed: ISignal<unknown, void>;
}

/** The status-bar text: "Prime Agent: idle · $0.0123". */
export function statusItemText(model: ModelCostModel | null, takenOver = false): string {
  if (!model) {
    return '';
  }
  if (takenOver) {
    return `Prime Agent: ${OLDER_SESSION_STATUS}`;
  }
  const state = model.status ?? 'connecting';
  const cost = sessionCostText(model.usage);
  return cost ? `Prime Agent: ${state} · ${cost}` : `Prime Agent: ${state}`;
}

/** The JupyterLab status-bar item of the current notebook's agent. */
export class AgentStatusItem extends Widget {
  constructor() {
    super();
    this.addClass('pal-status-item');
    this.node.dataset.testid = 'pal-status-item';
    this.node.title = 'The agent of the current notebook: its state and its cost with sub-agents';
    this._render();
  }

  set agent(agent: IStatusSource | null) {
    if (agent === this._agent) {
      return;
    }
    this._agent?.modelCost.changed.disconnect(this._render, this);
    this._agent?.changed.disconnect(this._render, this);
    this._agent = agent;
    agent?.modelCost.changed.connect(this._render, this);
    agent?.changed.connect(this._render, this);
    this._render();
  }

  override dispose(): void {
    this.agent = null;
    super.dispose();
  }

  private _render(): void {
    const agent = this._agent;
    const takenOver = agent?.takenOver != null;
    this.node.textContent = statusItemText(agent?.modelCost ?? null, takenOver);
    this.node.dataset.status = takenOver ? 'taken_over' : (agent?.modelCost.status ?? '');
  }

  private _agent: IStatusSource | null = null;
}
