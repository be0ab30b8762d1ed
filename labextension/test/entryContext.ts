// The context an entry view renders in, for the view tests (no notebook, no family).
import type { IEntryViewContext } from '../src/entryViews';

/** An entry view's context with no notebook and no family; `fields` replace the defaults. */
export function entryContext(fields: Partial<IEntryViewContext> = {}): IEntryViewContext {
  return {
    cellFirstLine: () => null,
    cellExecutionCount: () => null,
    revealCell: () => undefined,
    renderMarkdown: null,
    entryResized: () => undefined,
    parentAgent: () => null,
    senderNotebookPath: () => null,
    openNotebook: () => undefined,
    openSender: () => undefined,
    ...fields
  };
}
