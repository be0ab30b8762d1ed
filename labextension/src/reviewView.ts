/**
 * The review of a turn in the chat (docs/ui.md "Review and revert"): under
 * each finished turn that wrote cells, "Review cells (N)" opens the list of
 * its cells (Jump, Keep, Remove each) and "Revert turn" (which asks first).
 * The state is ReviewModel's (review.ts); ChatPanel says where each turn's
 * last line is (`place`).
 */
import { button, element } from './dom';
import {
  BUSY_TITLE,
  CHANGED_BY_YOU,
  NOT_THIS_AGENTS,
  REMOVE_CHANGED_TEXT,
  REVERTED_TITLE,
  cellLabel,
  kernelLine,
  toggleLabel,
  type ReviewModel
} from './review';
import type { ITurnCell } from './reviewWire';

export interface IReviewViewOptions {
  /** Bring the notebook to the front and select the cell (false: it is gone). */
  revealCell(cellId: string): void;
}

/** Which control of which turn had the focus before a render. */
interface IFocusPlace {
  testId: string;
  cellId: string | null;
}

const STATUS_WORDS: Record<string, string> = {
  ok: 'ok',
  error: 'error',
  timeout: 'timed out',
  died: 'kernel died',
  interrupted: 'interrupted',
  aborted: 'not run',
  skipped: 'skipped'
};

export class ReviewView {
  constructor(private readonly _options: IReviewViewOptions) {}

  get model(): ReviewModel | null {
    return this._model;
  }

  set model(model: ReviewModel | null) {
    if (model === this._model) {
      return;
    }
    this._model?.changed.disconnect(this._onChanged, this);
    this._model = model;
    model?.changed.connect(this._onChanged, this);
    this._nodes.forEach(node => node.remove());
    this._nodes.clear();
  }

  /**
   * Put each reviewable turn's control right after its last line in the
   * chat (`lineOf` finds a line's node by entry id); drop the others.
   */
  place(lineOf: (entryId: number) => HTMLElement | undefined): void {
    const model = this._model;
    const turns = model?.turns ?? [];
    const wanted = new Set(turns.map(turn => turn.turn));
    for (const [turn, node] of this._nodes) {
      if (!wanted.has(turn)) {
        node.remove();
        this._nodes.delete(turn);
      }
    }
    for (const turn of turns) {
      const anchor = lineOf(turn.anchorId);
      let node = this._nodes.get(turn.turn);
      if (!node) {
        node = element('div', 'pal-review', 'pal-review');
        node.setAttribute('role', 'group'); // not a landmark: one per turn
        node.dataset.turn = String(turn.turn);
        node.addEventListener('keydown', event => this._onKey(event, turn.turn));
        this._nodes.set(turn.turn, node);
        this._render(turn.turn);
      }
      if (!anchor) {
        node.remove();
      } else if (anchor.nextElementSibling !== node) {
        anchor.after(node);
      }
    }
  }

  /** The control of a turn (for tests and the panel's focus). */
  nodeOf(turn: number): HTMLElement | undefined {
    return this._nodes.get(turn);
  }

  dispose(): void {
    this.model = null;
  }

  private _onChanged(_: ReviewModel, turn: number | null): void {
    if (turn === null) {
      this._nodes.forEach((_node, t) => this._render(t));
    } else if (this._nodes.has(turn)) {
      this._render(turn);
    }
  }

  private _render(turn: number): void {
    const node = this._nodes.get(turn);
    const model = this._model;
    if (!node || !model) {
      return;
    }
    const focused = focusPlace(node);
    const state = model.state(turn);
    const reviewable = model.turns.find(t => t.turn === turn);
    const review = state.review;
    const count = review ? review.cells.length : (reviewable?.cellIds.length ?? 0);
    const reverted = model.isReverted(turn);
    const bodyId = `pal-review-body-${turn}`;
    node.dataset.reverted = String(reverted);
    node.dataset.open = String(state.open);
    node.setAttribute('aria-label', `Cells of turn ${turn}`);

    const head = element('div', 'pal-review-head');
    const toggle = button(toggleLabel(count), 'pal-review-toggle');
    toggle.setAttribute('aria-expanded', String(state.open));
    toggle.setAttribute('aria-controls', bodyId);
    toggle.setAttribute(
      'aria-label',
      `${state.open ? 'Hide' : 'Review'} the ${count} ${count === 1 ? 'cell' : 'cells'} ` +
        `of turn ${turn}`
    );
    toggle.title = 'The cells this turn wrote: jump to, keep or remove each, or revert the turn';
    toggle.addEventListener('click', () => void model.toggle(turn));
    head.append(toggle);
    if (reverted) {
      const badge = element('span', 'pal-review-state', 'pal-review-state', 'reverted');
      badge.title = `Turn ${turn} was reverted`;
      head.append(badge);
    }
    const children: HTMLElement[] = [head];

    if (state.open) {
      const body = element('div', 'pal-review-body');
      body.id = bodyId;
      if (state.loading && !review) {
        const loading = element('div', 'pal-review-loading', 'pal-review-loading', 'Loading…');
        loading.setAttribute('role', 'status');
        body.append(loading);
      }
      if (review) {
        const list = element('ul', 'pal-review-cells', 'pal-review-cells');
        list.setAttribute('aria-label', `Cells of turn ${turn}`);
        list.append(...review.cells.map(cell => this._cellRow(turn, cell, reverted)));
        body.append(list);
        const kernel = element(
          'div',
          'pal-review-kernel',
          'pal-review-kernel',
          kernelLine(review.kernel)
        );
        kernel.dataset.restorable = String(review.kernel.restorable);
        body.append(kernel, this._actions(turn, reverted));
      }
      if (state.result) {
        const result = element('div', 'pal-review-result', 'pal-review-result', state.result);
        result.setAttribute('role', 'status');
        body.append(result);
      }
      children.push(body);
    }
    if (state.error) {
      const error = element('div', 'pal-review-error', 'pal-review-error', state.error);
      error.setAttribute('role', 'alert');
      children.push(error);
    }
    node.replaceChildren(...children);
    restoreFocus(node, focused);
  }

  private _cellRow(turn: number, cell: ITurnCell, reverted: boolean): HTMLElement {
    const model = this._model!;
    const state = model.state(turn);
    const removed = model.isRemoved(turn, cell);
    const kept = state.kept.has(cell.cell_id);
    const keptWhy = removed ? null : model.keptReason(turn, cell);
    const name = `${cellLabel(cell)} ${cell.first_line}`.trim();
    const row = element('li', 'pal-review-cell', 'pal-review-cell');
    row.dataset.cellId = cell.cell_id;
    row.dataset.status = cell.status;
    row.dataset.kept = String(kept);
    row.dataset.inNotebook = String(!removed);
    row.classList.toggle('pal-mod-removed', removed);
    row.classList.toggle('pal-mod-kept', kept);

    const count = element('span', 'pal-review-count', 'pal-review-count', cellLabel(cell));
    const code = element('code', 'pal-review-code', 'pal-review-code', cell.first_line);
    code.title = cell.first_line;
    const ended = STATUS_WORDS[cell.status] ?? cell.status;
    const status = element(
      'span',
      'pal-review-cell-status',
      'pal-review-cell-status',
      [removed ? 'removed' : ended, kept ? 'kept' : '', keptWhy ?? '']
        .filter(Boolean)
        .join(' · ')
    );
    status.dataset.status = removed ? 'removed' : cell.status;
    if (keptWhy) {
      row.dataset.keptReason = keptWhy;
      status.title =
        keptWhy === CHANGED_BY_YOU
          ? 'Its code is not what the agent wrote: Revert turn keeps it'
          : 'The notebook does not mark it as this agent’s cell of the turn: Revert turn keeps it';
    }

    const jump = button('Jump', 'pal-review-jump');
    jump.setAttribute('aria-label', `Jump to ${name}`);
    jump.title = removed
      ? 'This cell is no longer in the notebook'
      : 'Select this cell in the notebook';
    jump.disabled = removed;
    jump.addEventListener('click', () => this._options.revealCell(cell.cell_id));

    const keep = button(kept ? 'Kept' : 'Keep', 'pal-review-keep');
    keep.setAttribute('aria-label', `Keep ${name}`);
    keep.setAttribute('aria-pressed', String(kept));
    keep.title = 'Mark this cell as reviewed (in this view only)';
    keep.disabled = removed;
    keep.addEventListener('click', () => model.keep(turn, cell.cell_id));

    const remove = button('Remove', 'pal-review-remove');
    remove.setAttribute('aria-label', `Remove ${name}`);
    const foreign = keptWhy === NOT_THIS_AGENTS;
    remove.disabled = removed || reverted || foreign || model.running || state.busy;
    remove.title = removed
      ? 'This cell is no longer in the notebook'
      : reverted
        ? REVERTED_TITLE
        : foreign
          ? `This cell is ${NOT_THIS_AGENTS}: it is not removed from here`
          : model.running
            ? BUSY_TITLE
            : keptWhy === CHANGED_BY_YOU
              ? 'You changed this cell: asks before deleting it (Undo brings it back)'
              : 'Delete this cell from the notebook (Undo brings it back); the kernel keeps what it set';
    remove.addEventListener('click', () => void model.removeCell(turn, cell.cell_id));

    const actions = element('span', 'pal-review-cell-actions');
    actions.append(jump, keep, remove);
    row.append(count, code, status, actions);
    if (state.confirmingRemove === cell.cell_id) {
      const question = element(
        'div',
        'pal-review-remove-question',
        'pal-review-remove-question',
        REMOVE_CHANGED_TEXT
      );
      question.id = `pal-review-remove-question-${cell.cell_id}`;
      question.setAttribute('role', 'alert');
      const yes = button('Remove anyway', 'pal-review-confirm-remove');
      yes.classList.add('pal-mod-warn');
      yes.setAttribute('aria-describedby', question.id);
      yes.disabled = model.running || state.busy;
      yes.addEventListener('click', () => void model.removeCell(turn, cell.cell_id));
      const no = button('Cancel', 'pal-review-cancel-remove');
      no.addEventListener('click', () => model.cancelRemove(turn));
      row.append(question, yes, no);
    }
    return row;
  }

  private _actions(turn: number, reverted: boolean): HTMLElement {
    const model = this._model!;
    const state = model.state(turn);
    const actions = element('div', 'pal-review-actions');
    if (state.confirming) {
      const question = element(
        'div',
        'pal-review-confirm-text',
        'pal-review-confirm-text',
        model.confirmation(turn)
      );
      question.id = `pal-review-question-${turn}`;
      const yes = button('Revert', 'pal-review-confirm-revert');
      yes.classList.add('pal-mod-warn');
      yes.setAttribute('aria-label', `Confirm: revert turn ${turn}`);
      yes.setAttribute('aria-describedby', question.id);
      yes.disabled = model.running;
      yes.addEventListener('click', () => {
        void model.confirmRevert(turn).then(() => this._focus(turn, 'pal-review-toggle'));
      });
      const no = button('Cancel', 'pal-review-cancel-revert');
      no.setAttribute('aria-label', `Keep turn ${turn} (Escape)`);
      no.addEventListener('click', () => {
        model.cancelRevert(turn);
        this._focus(turn, 'pal-review-revert');
      });
      question.setAttribute('role', 'alert');
      actions.append(question, yes, no);
      return actions;
    }
    const revert = button(state.busy ? 'Reverting…' : 'Revert turn', 'pal-review-revert');
    revert.setAttribute('aria-label', `Revert turn ${turn}`);
    revert.disabled = reverted || model.running || state.busy;
    revert.title = reverted
      ? 'This turn was reverted'
      : model.running
        ? BUSY_TITLE
        : 'Remove the turn’s cells from the notebook and restore the kernel (asks first)';
    revert.addEventListener('click', () => {
      void model.askRevert(turn).then(() => this._focus(turn, 'pal-review-cancel-revert'));
    });
    actions.append(revert);
    return actions;
  }

  /** Escape: leave the revert question, else close the review (focus on its toggle). */
  private _onKey(event: KeyboardEvent, turn: number): void {
    const model = this._model;
    if (event.key !== 'Escape' || !model || event.isComposing) {
      return;
    }
    const state = model.state(turn);
    if (!state.open) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    if (state.confirming) {
      model.cancelRevert(turn);
      this._focus(turn, 'pal-review-revert');
      return;
    }
    if (state.confirmingRemove !== null) {
      model.cancelRemove(turn);
      return;
    }
    model.close(turn);
    this._focus(turn, 'pal-review-toggle');
  }

  private _focus(turn: number, testId: string): void {
    const node = this._nodes.get(turn);
    const target = node?.querySelector<HTMLButtonElement>(`[data-testid="${testId}"]`);
    (target && !target.disabled
      ? target
      : node?.querySelector<HTMLElement>('[data-testid="pal-review-toggle"]')
    )?.focus();
  }

  private _model: ReviewModel | null = null;
  private readonly _nodes = new Map<number, HTMLElement>();
}

function focusPlace(node: HTMLElement): IFocusPlace | null {
  const active = document.activeElement;
  if (!(active instanceof HTMLElement) || !node.contains(active) || !active.dataset.testid) {
    return null;
  }
  const row = active.closest<HTMLElement>('.pal-review-cell');
  return { testId: active.dataset.testid, cellId: row?.dataset.cellId ?? null };
}

/** Give the focus back to the same control after a render (else the toggle). */
function restoreFocus(node: HTMLElement, place: IFocusPlace | null): void {
  if (!place) {
    return;
  }
  const scope = place.cellId
    ? Array.from(node.querySelectorAll<HTMLElement>('.pal-review-cell')).find(
        row => row.dataset.cellId === place.cellId
      )
    : node;
  const control = scope?.querySelector<HTMLButtonElement>(`[data-testid="${place.testId}"]`);
  (control && !control.disabled
    ? control
    : node.querySelector<HTMLElement>('[data-testid="pal-review-toggle"]')
  )?.focus();
}
