/**
 * Finding agent cells in an open notebook by their cell id.
 */
import type { ICodeCellModel } from '@jupyterlab/cells';
import type { Notebook, NotebookPanel } from '@jupyterlab/notebook';

/** Index of the cell whose model id is `cellId`, or -1. */
export function findCellIndex(notebook: Notebook, cellId: string): number {
  const cells = notebook.model?.cells;
  if (!cells) {
    return -1;
  }
  for (let index = 0; index < cells.length; index++) {
    if (cells.get(index).id === cellId) {
      return index;
    }
  }
  return -1;
}

/** First non-empty line of a cell's source, or null when the cell is gone. */
export function cellFirstLine(notebook: Notebook, cellId: string): string | null {
  const index = findCellIndex(notebook, cellId);
  if (index < 0) {
    return null;
  }
  const source = notebook.model!.cells.get(index).sharedModel.getSource();
  return firstLine(source);
}

/** The execution count the notebook shows for the cell, or null. */
export function cellExecutionCount(notebook: Notebook, cellId: string): number | null {
  const index = findCellIndex(notebook, cellId);
  if (index < 0) {
    return null;
  }
  const model = notebook.model!.cells.get(index);
  const count = model.type === 'code' ? (model as ICodeCellModel).executionCount : null;
  return typeof count === 'number' ? count : null;
}

export function firstLine(text: string): string {
  const line = text.split('\n').find(candidate => candidate.trim() !== '');
  return (line ?? '').trimEnd();
}

/**
 * Activate the cell with `cellId` in `panel` and scroll it into view.
 * Returns false when the notebook has no such cell (deleted by the user).
 */
export async function revealCell(
  panel: NotebookPanel,
  cellId: string
): Promise<boolean> {
  const notebook = panel.content;
  const index = findCellIndex(notebook, cellId);
  if (index < 0) {
    return false;
  }
  notebook.mode = 'command';
  notebook.activeCellIndex = index;
  await notebook.scrollToItem(index, 'smart');
  const cell = notebook.widgets[index];
  cell?.node.classList.add('pal-mod-flash');
  window.setTimeout(() => cell?.node.classList.remove('pal-mod-flash'), 1200);
  return true;
}

/**
 * Delete the cells with these ids in one transaction of the notebook model,
 * as JupyterLab's own Delete does, so one Undo (Z) brings them all back.
 * Answers the ids it deleted (a cell already gone is skipped). A notebook
 * left empty gets an empty code cell in the same step, as JupyterLab does.
 */
/**
 * The cell's source and `metadata.prime_agent` (what a revert checks before
 * it deletes a cell), or null when the notebook has no such cell.
 */
export function cellContentById(
  notebook: Notebook,
  cellId: string
): { source: string; mark: unknown } | null {
  const index = findCellIndex(notebook, cellId);
  const cell = index >= 0 ? notebook.model?.sharedModel.cells[index] : undefined;
  if (!cell) {
    return null;
  }
  return { source: cell.getSource(), mark: cell.getMetadata('prime_agent') ?? null };
}

export function deleteCellsById(notebook: Notebook, cellIds: readonly string[]): string[] {
  const model = notebook.model;
  if (!model) {
    return [];
  }
  const found = cellIds
    .map(id => ({ id, index: findCellIndex(notebook, id) }))
    .filter(cell => cell.index >= 0)
    .sort((a, b) => b.index - a.index);
  if (found.length === 0) {
    return [];
  }
  const sharedModel = model.sharedModel;
  const before = sharedModel.cells.length; // `cells` follows the document after the transaction
  sharedModel.transact(() => {
    for (const cell of found) {
      sharedModel.deleteCell(cell.index);
    }
    if (before === found.length) {
      sharedModel.insertCell(0, { cell_type: 'code', metadata: { trusted: true } });
    }
  });
  return found.map(cell => cell.id).reverse();
}
