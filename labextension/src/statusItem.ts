/**
 * The JupyterLab status-bar item of the current notebook's agent: its state
 * and its session's cost with sub-agents (docs/pairing.md, section 2).
 */
import { Widget } from '@lumino/widgets';

import { sessionCostText, type ModelCostModel } from './modelCost';

/** The status-bar text: "Prime Agent: idle · $0.0123". */
export function statusItemText(model: ModelCostModel | null): string {
  if (!model) {
    return '';
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

  set model(model: ModelCostModel | null) {
    if (model === this._model) {
      return;
    }
    this._model?.changed.disconnect(this._render, this);
    this._model = model;
    model?.changed.connect(this._render, this);
    this._render();
  }

  override dispose(): void {
    this.model = null;
    super.dispose();
  }

  private _render(): void {
    this.node.textContent = statusItemText(this._model);
    this.node.dataset.status = this._model?.status ?? '';
  }

  private _model: ModelCostModel | null = null;
}
