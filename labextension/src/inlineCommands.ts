/**
 * Backticked text in the chat's notices and errors (the server's texts put
 * a command the user may run in backticks: the restore line after a kernel
 * restart, `prime-agent-lab run --trust`, `jupyter kernelspec list`):
 * each span shows as code, and a command gets a Copy button (the clipboard
 * path of codeBlocks.ts).
 */
import { button, element } from './dom';
import { CONFIRMATION_MS, copyCode } from './codeBlocks';

/** Writes text to the clipboard; null: none (the command is selected instead). */
export type WriteClipboard = ((text: string) => Promise<void>) | null;

/** Words a shell command the chat offers starts with. */
const SHELL_COMMANDS = ['prime-agent-lab', 'jupyter', 'pip', 'python', 'uv', 'git'];

/**
 * Whether a backticked span is a command to run rather than a name or a
 * value: a shell command the chat offers (`prime-agent-lab run --trust`),
 * a Python statement (`import x; x.f(...)`) or call (`x.f('a')`), or a
 * chat command (`/refine history`). `previous=True` or `memory` is not.
 */
export function isCommand(code: string): boolean {
  const text = code.trim();
  const first = text.split(/\s+/)[0];
  if (SHELL_COMMANDS.includes(first) && text.includes(' ')) {
    return true;
  }
  if (/^(import|from)\s+[A-Za-z_]/.test(text)) {
    return true;
  }
  if (/^\/[a-z][a-z-]*(\s|$)/.test(text)) {
    return true;
  }
  return /^[A-Za-z_][\w.]*\(.*\)$/.test(text);
}

/** The parts of `text`: plain runs and backticked spans (an unclosed backtick stays text). */
export function splitInlineCode(text: string): { text: string; code: boolean }[] {
  const parts: { text: string; code: boolean }[] = [];
  const pattern = /`([^`\n]+)`/g;
  let at = 0;
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    if (match.index > at) {
      parts.push({ text: text.slice(at, match.index), code: false });
    }
    parts.push({ text: match[1], code: true });
    at = match.index + match[0].length;
  }
  if (at < text.length) {
    parts.push({ text: text.slice(at), code: false });
  }
  return parts;
}

/** `text` with its backticked spans as code, a command's with a Copy button. */
export function renderInlineCode(text: string, writeClipboard: WriteClipboard): DocumentFragment {
  const fragment = document.createDocumentFragment();
  for (const part of splitInlineCode(text)) {
    if (!part.code) {
      fragment.append(part.text);
    } else if (isCommand(part.text)) {
      fragment.append(commandWithCopy(part.text, writeClipboard));
    } else {
      fragment.append(element('code', 'pal-inline-code', undefined, part.text));
    }
  }
  return fragment;
}

export const COPY_COMMAND_LABEL = 'Copy';

function commandWithCopy(command: string, writeClipboard: WriteClipboard): HTMLElement {
  const wrap = element('span', 'pal-inline-command', 'pal-inline-command');
  const code = element('code', 'pal-inline-code', 'pal-inline-command-code', command);
  const copy = button(COPY_COMMAND_LABEL, 'pal-command-copy');
  copy.setAttribute('aria-label', 'Copy the command');
  copy.title = `Copy to the clipboard: ${command}`;
  copy.addEventListener('click', () => {
    void copyCode(command, code, writeClipboard).then(outcome => {
      copy.textContent = outcome === 'copied' ? 'Copied' : 'Press Ctrl+C';
      copy.dataset.copied = outcome;
      setTimeout(() => {
        copy.textContent = COPY_COMMAND_LABEL;
        delete copy.dataset.copied;
      }, CONFIRMATION_MS);
    });
  });
  wrap.append(code, copy);
  return wrap;
}

/** The page's clipboard, when there is one (plain http has none). */
export function pageClipboard(): WriteClipboard {
  const clipboard = typeof navigator !== 'undefined' ? navigator.clipboard : undefined;
  return clipboard?.writeText ? text => clipboard.writeText(text) : null;
}
