/**
 * A cell waiting for approval (ask mode, docs/pairing.md section 4) is in
 * the notebook marked running, so JupyterLab's prompt would show `[*]`
 * (running) while the kernel is idle. The waiting cells get the
 * `pal-awaiting-approval` class, whose CSS shows `[?]` instead, and their
 * prompt's tooltip says what they wait for.
 */
export const AWAITING_CLASS = 'pal-awaiting-approval';

export const AWAITING_TITLE =
  'Waiting for approval: Run, Edit or Skip in the Prime Agent panel (not running)';

/** What this reads of a notebook's cell widget. */
export interface IPromptCell {
  readonly model: { readonly id: string } | null;
  readonly node: HTMLElement;
}

/** Mark the cells whose id is in `waiting`, unmark the others. */
export function markAwaitingCells(
  cells: readonly IPromptCell[],
  waiting: ReadonlySet<string>
): void {
  for (const cell of cells) {
    const on = cell.model !== null && waiting.has(cell.model.id);
    if (cell.node.classList.contains(AWAITING_CLASS) === on) {
      continue;
    }
    cell.node.classList.toggle(AWAITING_CLASS, on);
    const prompt = cell.node.querySelector<HTMLElement>('.jp-InputPrompt');
    if (prompt && on) {
      prompt.title = AWAITING_TITLE;
    } else if (prompt?.title === AWAITING_TITLE) {
      prompt.removeAttribute('title');
    }
  }
}
