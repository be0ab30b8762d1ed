/**
 * The views of a session's model and cost (docs/pairing.md, section 2): the
 * model picker and the context use beside the input, the session's cost in
 * the header, and an answer's footer (the status-bar item is statusItem.ts).
 * Their state is ModelCostModel's (modelCost.ts).
 */
import {
  contextText,
  footerText,
  formatTokens,
  pickerOptions,
  sessionCostText,
  type IAnswerFooter,
  type ModelCostModel
} from './modelCost';

/** The footer under an answer: model, tokens in and out, cost. */
export function renderAnswerFooter(footer: IAnswerFooter): HTMLElement {
  const node = document.createElement('div');
  node.className = 'pal-answer-footer';
  node.dataset.testid = 'pal-answer-footer';
  node.textContent = footerText(footer);
  node.title =
    `${footer.provider}/${footer.model}: ${footer.input} tokens in (cache included), ` +
    `${footer.output} out` +
    (footer.cost === null ? '; the provider declares no price for this model' : ' (list price)');
  return node;
}

/** The picker and context use (beside the input) and the cost (in the header). */
export class ModelCostControls {
  constructor() {
    this.composerNode.className = 'pal-model-row';
    this._select.className = 'pal-model-picker';
    this._select.dataset.testid = 'pal-model-picker';
    this._select.setAttribute('aria-label', 'Model');
    this._select.title = 'The model of the next model call (a running call finishes on its own)';
    this._select.addEventListener('change', () => void this._model?.choose(this._select.value));
    this._context.className = 'pal-context-use';
    this._context.dataset.testid = 'pal-context-use';
    this._error.className = 'pal-model-error';
    this._error.dataset.testid = 'pal-model-error';
    this._error.setAttribute('role', 'status');
    this.composerNode.append(this._select, this._context, this._error);
    this.headerNode.className = 'pal-session-cost';
    this.headerNode.dataset.testid = 'pal-session-cost';
    this._render();
  }

  /** Beside the input: the picker and the context use. */
  readonly composerNode = document.createElement('div');
  /** In the header: the session's cost with its sub-agents. */
  readonly headerNode = document.createElement('span');

  set model(model: ModelCostModel | null) {
    if (model === this._model) {
      return;
    }
    this._model?.changed.disconnect(this._render, this);
    this._model = model;
    model?.changed.connect(this._render, this);
    this._render();
  }

  dispose(): void {
    this.model = null;
  }

  private _render(): void {
    const model = this._model;
    this.composerNode.hidden = model === null;
    const options = model ? pickerOptions(model.models, model.current) : [];
    const shown = JSON.stringify(options);
    if (shown !== this._shownOptions) {
      // Rebuilt only when they change: an open list is not closed by every event.
      this._shownOptions = shown;
      this._select.replaceChildren(
        ...options.map(option => {
          const node = document.createElement('option');
          node.value = option.value;
          node.textContent = option.label;
          return node;
        })
      );
    }
    this._select.value = model?.current ?? '';
    this._select.disabled = options.length < 2;
    const window = model?.window ?? 0;
    this._context.textContent = model ? contextText(model.contextPercent, window) : '';
    this._context.title = model
      ? `The last model call read ${model.lastInput} tokens of this model's ` +
        `${window ? formatTokens(window) : 'unknown'} token window`
      : '';
    this._error.textContent = model?.error ?? '';
    this._error.hidden = !model?.error;
    const usage = model?.usage ?? null;
    this.headerNode.textContent = usage ? `Cost ${sessionCostText(usage)}` : '';
    this.headerNode.hidden = usage === null;
    this.headerNode.title = usage
      ? `This session and its sub-agents at list prices (${formatTokens(
          (usage.usage_total.input_tokens ?? 0) + (usage.usage_total.output_tokens ?? 0)
        )} tokens in and out); /usage shows each agent`
      : '';
  }

  private _model: ModelCostModel | null = null;
  private _shownOptions = '';
  private readonly _select = document.createElement('select');
  private readonly _context = document.createElement('span');
  private readonly _error = document.createElement('span');
}
