/**
 * DOM for transcript entries. Every element carries a stable CSS class and
 * a `data-testid` so tests and themes can rely on them.
 */
import type {
  CellLineStatus,
  IAssistantEntry,
  ICellEntry,
  INoticeEntry,
  TranscriptEntry
} from './transcript';
import { firstLine } from './cellNavigation';

export interface IEntryViewContext {
  /** First line of the cell's source in the notebook, if the cell exists. */
  cellFirstLine(cellId: string): string | null;
  /** The cell's execution count in the notebook, if it has one. */
  cellExecutionCount(cellId: string): number | null;
  /** Jump to the cell in the notebook. */
  revealCell(cellId: string): void;
  /**
   * Render Markdown into `host` (which already shows the plain text), or
   * null to keep plain text.
   */
  renderMarkdown: ((host: HTMLElement, source: string) => Promise<void>) | null;
  /** An entry changed height after it was inserted (Markdown rendered). */
  entryResized(): void;
}

const STATUS_GLYPHS: Record<CellLineStatus, string> = {
  running: '',
  waiting: '⏸',
  ok: '✓',
  error: '✗',
  timeout: '⏱',
  died: '☠',
  interrupted: '■',
  aborted: '⊘',
  skipped: '–'
};

const STATUS_LABELS: Record<CellLineStatus, string> = {
  running: 'running',
  waiting: 'waiting for your cell to finish',
  ok: 'finished',
  error: 'raised an error',
  timeout: 'timed out',
  died: 'kernel died',
  interrupted: 'interrupted',
  aborted: 'not run (aborted after an earlier error)',
  skipped: 'not run (withdrawn by Stop)'
};

export function renderEntry(
  entry: TranscriptEntry,
  context: IEntryViewContext
): HTMLElement {
  switch (entry.kind) {
    case 'user': {
      const node = element('div', 'pal-user', 'pal-user', entry.text);
      node.classList.toggle('pal-mod-pending', entry.pending);
      return node;
    }
    case 'assistant':
      return renderAssistant(entry, context);
    case 'cell':
      return renderCellLine(entry, context);
    case 'retry':
      return element(
        'div',
        'pal-retry',
        'pal-retry',
        `Retry ${entry.attempt} in ${formatSeconds(entry.delay)}: ${entry.message}`
      );
    case 'error':
      return element('div', 'pal-error', 'pal-error', entry.message);
    case 'notice':
      return renderNotice(entry);
    default:
      // Every kind is handled above; a neutral line if a new one slips through.
      return element('div', 'pal-notice', 'pal-notice', '');
  }
}

function renderNotice(entry: INoticeEntry): HTMLElement {
  const node = element('div', 'pal-notice', 'pal-notice', entry.text);
  node.dataset.tone = entry.tone;
  if (entry.noticeKind) {
    node.dataset.kind = entry.noticeKind;
  }
  if (entry.tone === 'warning') {
    node.classList.add('pal-mod-warning');
    node.setAttribute('role', 'alert');
  }
  return node;
}

function renderAssistant(
  entry: IAssistantEntry,
  context: IEntryViewContext
): HTMLElement {
  const node = element('div', 'pal-assistant', 'pal-assistant', entry.text);
  if (entry.streaming) {
    // Plain text while it streams: cheap to redraw on every delta.
    node.classList.add('pal-mod-streaming');
  } else if (context.renderMarkdown) {
    node.classList.add('pal-mod-markdown', 'jp-RenderedHTMLCommon');
    context
      .renderMarkdown(node, entry.text)
      .catch(error => {
        node.textContent = entry.text;
        console.warn('prime-agent: could not render Markdown', error);
      })
      .finally(() => context.entryResized());
  }
  return node;
}

function renderCellLine(
  entry: ICellEntry,
  context: IEntryViewContext
): HTMLElement {
  const line = element('div', 'pal-cell-line', 'pal-cell-line');
  line.dataset.status = entry.status;
  line.dataset.cellId = entry.cellId;
  line.setAttribute('role', 'button');
  line.tabIndex = 0;

  // Transcript items carry no code: read it from the notebook when we can.
  const source =
    entry.code !== null ? entry.code : context.cellFirstLine(entry.cellId);
  const code =
    source === null
      ? '(cell no longer in the notebook)'
      : firstLine(source) || '(empty cell)';
  const label = STATUS_LABELS[entry.status] ?? String(entry.status);
  line.title = [
    `Cell ${entry.status === 'waiting' && entry.waitingText ? entry.waitingText : label}: ` +
      'click to show it in the notebook',
    entry.preview
  ]
    .filter(Boolean)
    .join('\n\n');

  const status = element('span', 'pal-cell-status', undefined, STATUS_GLYPHS[entry.status] ?? '?');
  status.classList.add(`pal-cell-status-${entry.status}`);
  status.setAttribute('aria-label', label);
  // The notebook may know the count when the event did not carry one.
  const executionCount =
    entry.executionCount ?? context.cellExecutionCount(entry.cellId);
  const count = element(
    'span',
    'pal-cell-count',
    undefined,
    executionCount !== null ? `[${executionCount}]` : '[ ]'
  );
  const codeNode = element('code', 'pal-cell-code', undefined, code);
  line.append(status, count, codeNode);
  if (entry.status === 'waiting') {
    line.append(element('span', 'pal-cell-waiting', 'pal-cell-waiting', entry.waitingText));
  }

  const reveal = () => context.revealCell(entry.cellId);
  line.addEventListener('click', reveal);
  line.addEventListener('keydown', event => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      reveal();
    }
  });
  return line;
}

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  testId?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (testId) {
    node.dataset.testid = testId;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function formatSeconds(seconds: number): string {
  return seconds < 10 ? `${seconds.toFixed(1)} s` : `${Math.round(seconds)} s`;
}
