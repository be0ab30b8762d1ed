/**
 * Code blocks in rendered answers (docs/pairing.md section 6): each `pre`
 * sits in a frame with Copy and Insert below. Insert below adds a code cell
 * under the notebook's active cell through the notebook model (the same
 * path as JupyterLab's own "insert below", so its undo applies); it does not
 * run it.
 */
import { button, element } from './dom';

/** What the buttons act on; absent insertBelow: no Insert below button. */
export interface ICodeBlockActions {
  /** Insert `code` as a code cell below the active cell; false when there is no notebook. */
  insertBelow?: (code: string) => boolean;
  /** Writes text to the clipboard; defaults to navigator.clipboard when it exists. */
  writeClipboard?: ((text: string) => Promise<void>) | null;
}

/** How long the "Copied" / "Inserted" confirmation stays (ms). */
export const CONFIRMATION_MS = 2000;

export const COPY_LABEL = 'Copy';
export const INSERT_LABEL = 'Insert below';

/** The code a `pre` shows (without a trailing newline). */
export function codeOf(pre: HTMLElement): string {
  const code = pre.querySelector('code') ?? pre;
  return (code.textContent ?? '').replace(/\n$/, '');
}

/**
 * Frame every `pre` under `host` (once) with a toolbar of Copy and Insert
 * below. Returns how many blocks got a toolbar.
 */
export function addCodeBlockActions(host: HTMLElement, actions: ICodeBlockActions): number {
  let added = 0;
  for (const pre of Array.from(host.querySelectorAll('pre'))) {
    if (pre.closest('.pal-code-block')) {
      continue;
    }
    const frame = element('div', 'pal-code-block', 'pal-code-block');
    pre.replaceWith(frame);
    frame.append(codeBlockToolbar(pre, actions), pre);
    added += 1;
  }
  return added;
}

function codeBlockToolbar(pre: HTMLElement, actions: ICodeBlockActions): HTMLElement {
  const toolbar = element('div', 'pal-code-actions', 'pal-code-actions');
  toolbar.setAttribute('role', 'toolbar');
  toolbar.setAttribute('aria-label', 'Code block');
  const result = element('span', 'pal-code-result', 'pal-code-result', '');
  result.setAttribute('role', 'status');

  const copy = button(COPY_LABEL, 'pal-code-copy');
  copy.setAttribute('aria-label', 'Copy code');
  copy.title = 'Copy this code to the clipboard';
  copy.addEventListener('click', () => {
    void copyCode(codeOf(pre), pre, clipboardOf(actions)).then(outcome =>
      confirm(result, outcome === 'copied' ? 'Copied' : 'Selected: press Ctrl+C (⌘C) to copy')
    );
  });
  toolbar.append(copy);

  if (actions.insertBelow) {
    const insertBelow = actions.insertBelow;
    const insert = button(INSERT_LABEL, 'pal-code-insert');
    insert.setAttribute('aria-label', 'Insert below the active cell');
    insert.title = 'Insert this code as a new cell below the notebook’s active cell (not run)';
    insert.addEventListener('click', () => {
      const inserted = insertBelow(codeOf(pre));
      confirm(result, inserted ? 'Inserted' : 'No notebook to insert into');
    });
    toolbar.append(insert);
  }
  toolbar.append(result);
  return toolbar;
}

function clipboardOf(actions: ICodeBlockActions): ((text: string) => Promise<void>) | null {
  if (actions.writeClipboard !== undefined) {
    return actions.writeClipboard;
  }
  const clipboard = typeof navigator !== 'undefined' ? navigator.clipboard : undefined;
  return clipboard?.writeText ? text => clipboard.writeText(text) : null;
}

const timers = new WeakMap<HTMLElement, number>();

function confirm(result: HTMLElement, text: string): void {
  result.textContent = text;
  const previous = timers.get(result);
  if (previous !== undefined) {
    clearTimeout(previous);
  }
  timers.set(
    result,
    setTimeout(() => {
      result.textContent = '';
    }, CONFIRMATION_MS) as unknown as number
  );
}

/**
 * Copy `code`: the clipboard API when there is one (it is missing on plain
 * http and may refuse), else the code is selected in `pre` and the browser's
 * copy command tried; 'selected' means the user has to press the key.
 */
export async function copyCode(
  code: string,
  pre: HTMLElement,
  writeClipboard: ((text: string) => Promise<void>) | null
): Promise<'copied' | 'selected'> {
  if (writeClipboard) {
    try {
      await writeClipboard(code);
      return 'copied';
    } catch {
      // Refused (no permission, no focus): fall back to a selection.
    }
  }
  const selection = typeof window !== 'undefined' ? window.getSelection() : null;
  if (selection) {
    const range = document.createRange();
    range.selectNodeContents(pre);
    selection.removeAllRanges();
    selection.addRange(range);
    try {
      // Deprecated, but the only way without the clipboard API.
      if (typeof document.execCommand === 'function' && document.execCommand('copy')) {
        return 'copied';
      }
    } catch {
      // Not supported: the selection stays for Ctrl+C.
    }
  }
  return 'selected';
}

/** The part of a Notebook that inserting a cell needs (a Notebook satisfies it). */
export interface INotebookLike {
  activeCellIndex: number;
  readonly model: {
    readonly sharedModel: {
      insertCell(index: number, cell: { cell_type: 'code'; source: string }): unknown;
    };
  } | null;
  deselectAll?(): void;
}

/**
 * Insert `code` as a code cell below the active cell (at the top of an empty
 * notebook) and make it the active cell. False when there is no model.
 */
export function insertCodeBelow(notebook: INotebookLike, code: string): boolean {
  const model = notebook.model;
  if (!model) {
    return false;
  }
  const index = notebook.activeCellIndex < 0 ? 0 : notebook.activeCellIndex + 1;
  model.sharedModel.insertCell(index, { cell_type: 'code', source: code });
  notebook.activeCellIndex = index;
  notebook.deselectAll?.();
  return true;
}
