// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { renderEntry } from '../src/entryViews';
import { isCommand, renderInlineCode, splitInlineCode } from '../src/inlineCommands';
import type { INoticeEntry } from '../src/transcript';

import { entryContext } from './entryContext';

const RESTORE_CALL =
  "import prime_agent_kernel; prime_agent_kernel.restore_snapshot('/srv/.prime-agent/sessions/s1')";
/** The line core/snapshots.py writes after a restart someone chose (`_restart_hint`). */
const RESTORE_LINE =
  'A kernel snapshot from before the restart exists; it is not restored over a restart ' +
  `someone chose. To bring it back, run \`${RESTORE_CALL}\` (after the next snapshot, add ` +
  '`previous=True`).';

function notice(text: string): INoticeEntry {
  return { kind: 'notice', id: 1, turn: 1, text, tone: 'info', noticeKind: 'kernel_state_not_restored' } as INoticeEntry;
}

function byTestId(root: ParentNode, id: string): HTMLElement[] {
  return Array.from(root.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`));
}

describe('commands the chat offers', () => {
  it('tells a command to run from a name or a value', () => {
    for (const command of [
      RESTORE_CALL,
      'prime-agent-lab run --trust',
      'jupyter kernelspec list',
      '/refine history',
      '/model',
      'prime_agent_kernel.restore_snapshot("/x", previous=True)'
    ]) {
      expect(isCommand(command), command).toBe(true);
    }
    for (const value of ['previous=True', 'memory', 'flaky_test', 'prime-agent-lab', 'a/b', 'x.y']) {
      expect(isCommand(value), value).toBe(false);
    }
  });

  it('splits backticked spans out and leaves an unclosed backtick as text', () => {
    expect(splitInlineCode('run `a b` now `open')).toEqual([
      { text: 'run ', code: false },
      { text: 'a b', code: true },
      { text: ' now `open', code: false }
    ]);
    expect(splitInlineCode('plain')).toEqual([{ text: 'plain', code: false }]);
  });

  it('shows the restore line’s command as code with a Copy button that copies exactly it', async () => {
    const writeClipboard = vi.fn(async (_text: string) => undefined);
    const node = renderEntry(notice(RESTORE_LINE), entryContext({ writeClipboard }));

    const [command] = byTestId(node, 'pal-inline-command-code');
    expect(command.tagName).toBe('CODE');
    expect(command.textContent).toBe(RESTORE_CALL);
    expect(node.textContent).not.toContain('`');
    const copies = byTestId(node, 'pal-command-copy');
    expect(copies).toHaveLength(1); // `previous=True` is code, not a command
    expect(node.querySelectorAll('code')).toHaveLength(2);
    copies[0].click();
    await vi.waitFor(() => expect(copies[0].textContent).toBe('Copied'));
    expect(writeClipboard).toHaveBeenCalledWith(RESTORE_CALL);
  });

  it('selects the command for Ctrl+C when there is no clipboard', async () => {
    const node = renderEntry(notice('Trust it: `prime-agent-lab run --trust`.'), entryContext({ writeClipboard: null }));
    document.body.append(node);
    const [copy] = byTestId(node, 'pal-command-copy');
    copy.click();
    await vi.waitFor(() => expect(copy.dataset.copied).toBeDefined());
    expect(window.getSelection()?.toString()).toBe('prime-agent-lab run --trust');
    node.remove();
  });

  it('gives an error line the same Copy button and keeps a text without backticks as it is', () => {
    const error = renderEntry(
      { kind: 'error', message: "no kernel spec 'py9' (see `jupyter kernelspec list`)" } as never,
      entryContext({ writeClipboard: null })
    );
    expect(byTestId(error, 'pal-inline-command-code')[0].textContent).toBe('jupyter kernelspec list');
    const plain = renderInlineCode('Kernel restarted.', null);
    const host = document.createElement('div');
    host.append(plain);
    expect(host.innerHTML).toBe('Kernel restarted.');
  });
});
