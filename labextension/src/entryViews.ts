/**
 * DOM for transcript entries. Every element carries a stable CSS class and
 * a `data-testid` so tests and themes can rely on them.
 */
import type {
  CellLineStatus,
  IAgentMessageEntry,
  IAssistantEntry,
  ICellEntry,
  IChildEntry,
  IMessageOrigin,
  INoticeEntry,
  IUserEntry,
  TranscriptEntry
} from './transcript';
import { button, element } from './dom';
import { firstLine } from './cellNavigation';
import { formatComposed } from './clock';
import { senderLabel, type IParentAgent } from './family';
import { renderRefinementLine } from './refine';
import { GATE_NOTICES, GATE_PASSED } from './autonomy';
import { renderGateLine, renderGateText } from './autonomyView';
import { switchButton, TAKEN_OVER } from './takeover';
import { renderAnswerFooter } from './modelCostView';
import { pageClipboard, renderInlineCode, type WriteClipboard } from './inlineCommands';
import type { CellDecision, ChildStatus } from './wire';

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
  /** The agent that spawned this session, when it is a sub-agent's. */
  parentAgent(): IParentAgent | null;
  /** The sender's notebook when it is known without asking the server. */
  senderNotebookPath(origin: IMessageOrigin): string | null;
  /** Open a notebook (path relative to the server root) in a tab. */
  openNotebook(path: string): void;
  /** Open the notebook of the agent that sent a message. */
  openSender(origin: IMessageOrigin): void;
  /** Show the rollback form (recent refinements); absent: no way to it from a line. */
  showRefinements?: () => void;
  /**
   * Trust what the session holds that this user did not sign and load it;
   * resolves to the line to show. Absent: no button.
   */
  trustSession?: () => Promise<string>;
  /** Run `/context` (its table has a Trust button per untrusted project file). */
  showContext?: () => void;
  /** Show the notebook's current session (the takeover line's button). */
  followCurrentSession?: () => void;
  /** The Copy buttons' clipboard (a command in a notice); absent: the page's. */
  writeClipboard?: WriteClipboard;
}

const CHILD_STATUS_LABELS: Record<ChildStatus, string> = {
  running: 'working on its task',
  idle: 'idle',
  inactive: 'inactive (on disk, not loaded)',
  replied: 'replied to this agent',
  completed: 'finished without replying',
  error: 'ended with an error',
  stopped: 'stopped before it finished'
};

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

/** A `skipped` cell's words when a user's answer in ask mode kept it from running. */
const DECISION_LABELS: Record<CellDecision, string> = {
  skip: 'not run (skipped with Skip)',
  edit: 'not run (edited: the edited code runs in the next cell)'
};

function cellLabel(entry: ICellEntry): string {
  if (entry.status === 'skipped' && entry.decision) {
    return DECISION_LABELS[entry.decision] ?? STATUS_LABELS.skipped;
  }
  return STATUS_LABELS[entry.status] ?? String(entry.status);
}

export function renderEntry(
  entry: TranscriptEntry,
  context: IEntryViewContext
): HTMLElement {
  switch (entry.kind) {
    case 'user':
      return renderUser(entry, context);
    case 'agent_message':
      return renderAgentMessage(entry, entry.origin, context);
    case 'child':
      return renderChild(entry, context);
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
      return withInlineCode(element('div', 'pal-error', 'pal-error'), entry.message, context);
    case 'notice':
      return renderNotice(entry, context);
    case 'refinement':
      return renderRefinementLine(entry.record, context.showRefinements ?? null);
    default:
      // Every kind is handled above; a neutral line if a new one slips through.
      return element('div', 'pal-notice', 'pal-notice', '');
  }
}

function renderUser(entry: IUserEntry, context: IEntryViewContext): HTMLElement {
  const origin = entry.origin ?? taskFromParent(entry, context.parentAgent());
  if (origin) {
    return renderAgentMessage(entry, origin, context);
  }
  const node = isolated(element('div', 'pal-user', 'pal-user', entry.text));
  node.classList.toggle('pal-mod-pending', entry.pending);
  if (entry.mode) {
    node.dataset.mode = entry.mode; // sent while a turn ran: a steer, or a queued follow-up
  }
  return node;
}

/**
 * A sub-agent's first turn is its parent's task, also when the server did
 * not name the sender on it.
 */
function taskFromParent(
  entry: IUserEntry,
  parent: IParentAgent | null
): IMessageOrigin | null {
  if (!parent || entry.pending || entry.turn !== 1) {
    return null;
  }
  return {
    sessionId: parent.sessionId,
    name: parent.name,
    relationship: 'parent',
    composed: null
  };
}

/**
 * Another agent's message: a bubble of its own with a header that names
 * the sender (a link to its notebook) and when it was written.
 */
function renderAgentMessage(
  entry: IUserEntry | IAgentMessageEntry,
  origin: IMessageOrigin,
  context: IEntryViewContext
): HTMLElement {
  const node = element('div', 'pal-agent-message', 'pal-agent-message');
  node.dataset.relationship = origin.relationship ?? '';
  node.dataset.startsTurn = String(entry.kind === 'user');
  const isFirstTask = entry.kind === 'user' && entry.turn === 1;

  const header = element('div', 'pal-message-sender', 'pal-message-sender');
  header.append(
    element('span', 'pal-message-label', undefined, `${senderLabel(origin, isFirstTask)} `),
    senderName(origin, context)
  );
  const composed = formatComposed(origin.composed);
  if (composed) {
    const time = element('time', 'pal-message-time', 'pal-message-time', composed.short);
    time.dateTime = origin.composed ?? '';
    time.title = `Written ${composed.full}`;
    header.append(time);
  }
  node.append(
    header,
    isolated(element('div', 'pal-message-text', undefined, messageBody(entry.text)))
  );
  return node;
}

/**
 * The text without the header line written for the model (`[message from …]`,
 * `[task from parent]`): the bubble's own header already names the sender and
 * the time.
 */
export function messageBody(text: string): string {
  const lines = text.split('\n');
  if (/^\[(message from |task from parent\])/.test(lines[0] ?? '')) {
    lines.shift();
    while (lines.length > 0 && lines[0].trim() === '') {
      lines.shift();
    }
  }
  return lines.join('\n');
}

/** The sender's name: a link to its notebook when it can be found. */
function senderName(origin: IMessageOrigin, context: IEntryViewContext): HTMLElement {
  const name = origin.name || origin.sessionId || 'another agent';
  const path = context.senderNotebookPath(origin);
  if (!path && !origin.sessionId) {
    return isolated(element('span', 'pal-sender-name', 'pal-sender-name', name));
  }
  const link = isolated(linkButton('pal-sender-link', 'pal-sender-link', name));
  link.title = path ? `Open ${path}` : 'Open this agent’s notebook';
  if (path) {
    link.dataset.path = path;
  }
  link.addEventListener('click', () => context.openSender(origin));
  return link;
}

/** "spawned sub-agent part-a: <task>" with a link to its notebook and a live status badge. */
function renderChild(entry: IChildEntry, context: IEntryViewContext): HTMLElement {
  const line = element('div', 'pal-child', 'pal-child');
  line.dataset.status = entry.status ?? 'unknown';
  line.dataset.childId = entry.childId;
  line.dataset.path = entry.notebookPath;
  line.title = [entry.notebookPath, entry.task, entry.preview].filter(Boolean).join('\n\n');

  const name = entry.name || entry.childId;
  const link = linkButton('pal-child-link', 'pal-child-link', name);
  link.title = `Open ${entry.notebookPath}`;
  link.disabled = !entry.notebookPath;
  link.addEventListener('click', () => context.openNotebook(entry.notebookPath));

  const text = element('span', 'pal-child-text');
  text.append(document.createTextNode(entry.task ? 'spawned sub-agent ' : 'sub-agent '), link);
  if (entry.task) {
    text.append(document.createTextNode(`: ${entry.task}`));
  }
  line.append(text);
  if (entry.status) {
    const badge = element('span', 'pal-child-status', 'pal-child-status', entry.status);
    badge.dataset.status = entry.status;
    badge.title = `${name}: ${CHILD_STATUS_LABELS[entry.status] ?? entry.status}`;
    line.append(badge);
  }
  return line;
}

/** `text` into `node`, a backticked command as code with a Copy button (inlineCommands.ts). */
function withInlineCode(node: HTMLElement, text: string, context: IEntryViewContext): HTMLElement {
  const clipboard = context.writeClipboard !== undefined ? context.writeClipboard : pageClipboard();
  node.append(renderInlineCode(text, clipboard));
  return node;
}

function renderNotice(entry: INoticeEntry, context: IEntryViewContext): HTMLElement {
  const node = withInlineCode(element('div', 'pal-notice', 'pal-notice'), entry.text, context);
  node.dataset.tone = entry.tone;
  if (entry.noticeKind) {
    node.dataset.kind = entry.noticeKind;
  }
  if (entry.tone === 'warning') {
    node.classList.add('pal-mod-warning');
    node.setAttribute('role', 'alert');
  }
  if (entry.noticeKind === 'session_untrusted' && context.trustSession) {
    node.append(trustButton(context.trustSession));
  }
  if (entry.noticeKind === 'plan_not_run' && entry.code) {
    node.append(codeDetails(entry.code));
  }
  if (entry.noticeKind === TAKEN_OVER && context.followCurrentSession) {
    node.append(' ', switchButton(context.followCurrentSession));
  }
  if (entry.noticeKind === 'project_untrusted' && context.showContext) {
    const review = button('Review and trust…', 'pal-project-review');
    review.title =
      'Show /context: how each project file stands now, its whole content and a Trust button';
    review.addEventListener('click', context.showContext);
    const row = element('div', 'pal-trust', 'pal-project-trust', '');
    row.append(review);
    node.append(row);
  }
  if (entry.noticeKind !== null && GATE_NOTICES.has(entry.noticeKind)) {
    const passed = entry.noticeKind === GATE_PASSED;
    node.title = entry.text;
    if (entry.gate) {
      renderGateLine(node, entry.gate, passed);
    } else {
      renderGateText(node, entry.text, passed);
    }
  }
  return node;
}

/** The code a plan-mode line did not run, closed until asked for. */
function codeDetails(code: string): HTMLElement {
  const details = element('details', 'pal-plan-code', 'pal-plan-code');
  const summary = element('summary', 'pal-plan-code-summary', undefined, 'Show the code');
  const pre = isolated(element('pre', 'pal-plan-code-text', undefined, code), 'ltr');
  details.append(summary, pre);
  return details;
}

/**
 * "Trust and restore": one click signs what the notice lists and loads it;
 * the button says what happened (or why not, and can be pressed again).
 */
function trustButton(trust: () => Promise<string>): HTMLElement {
  const row = element('div', 'pal-trust', 'pal-trust', '');
  const trustNow = button('Trust and restore', 'pal-trust-button');
  const result = element('span', 'pal-trust-result', 'pal-trust-result', '');
  result.setAttribute('role', 'status');
  trustNow.title =
    'Sign these files with your secret and load them: the snapshot is unpickled (runs code), ' +
    'the notes enter the prompt, skill modules become importable, queued mail is delivered.';
  trustNow.addEventListener('click', () => {
    trustNow.disabled = true;
    result.textContent = 'Trusting…';
    trust().then(
      text => {
        result.textContent = text;
        trustNow.textContent = 'Trusted';
      },
      (error: unknown) => {
        result.textContent = `Could not trust: ${error instanceof Error ? error.message : String(error)}`;
        trustNow.disabled = false;
      }
    );
  });
  row.append(trustNow, result);
  return row;
}

function renderAssistant(
  entry: IAssistantEntry,
  context: IEntryViewContext
): HTMLElement {
  const node = renderAnswerText(entry, context);
  if (!entry.footer) {
    return node;
  }
  // The footer sits beside the answer's text, not in it (Markdown replaces the text node's content).
  const answer = element('div', 'pal-answer', 'pal-answer');
  answer.append(node, renderAnswerFooter(entry.footer));
  return answer;
}

function renderAnswerText(
  entry: IAssistantEntry,
  context: IEntryViewContext
): HTMLElement {
  const node = isolated(element('div', 'pal-assistant', 'pal-assistant', entry.text));
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
  const label = cellLabel(entry);
  if (entry.decision) {
    line.dataset.decision = entry.decision;
  }
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
  const codeNode = isolated(element('code', 'pal-cell-code', undefined, code), 'ltr');
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


/**
 * Text from a user or a model in its own bidirectional context: a
 * right-to-left override (U+202E) in it cannot reorder what follows it
 * outside its element, and its direction comes from its own first strong
 * character (code reads left to right).
 */
function isolated<T extends HTMLElement>(node: T, dir: 'auto' | 'ltr' = 'auto'): T {
  node.dir = dir;
  node.classList.add('pal-bidi-isolate');
  return node;
}

/** A button that looks like a link (it opens a notebook, it does not navigate). */
export function linkButton(className: string, testId: string, label: string): HTMLButtonElement {
  const button = element('button', `pal-link ${className}`, testId, label);
  button.type = 'button';
  return button;
}

function formatSeconds(seconds: number): string {
  return seconds < 10 ? `${seconds.toFixed(1)} s` : `${Math.round(seconds)} s`;
}
