// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from 'vitest';

import {
  addCodeBlockActions,
  CONFIRMATION_MS,
  copyCode,
  insertCodeBelow,
  type INotebookLike
} from '../src/codeBlocks';

function answer(html: string): HTMLElement {
  const host = document.createElement('div');
  host.innerHTML = html;
  return host;
}

const TWO_BLOCKS =
  '<p>Try this:</p><pre><code class="language-python">import pandas as pd\ndf = pd.read_csv("x.csv")\n</code></pre>' +
  '<p>or</p><pre><code>print(1)</code></pre>';

function byTestId(root: HTMLElement, id: string): HTMLElement[] {
  return Array.from(root.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`));
}

afterEach(() => {
  vi.useRealTimers();
});

describe('code blocks in an answer', () => {
  it('frames every block with Copy and Insert below, each with an accessible name', () => {
    const host = answer(TWO_BLOCKS);
    expect(addCodeBlockActions(host, { insertBelow: () => true })).toBe(2);
    const frames = byTestId(host, 'pal-code-block');
    expect(frames).toHaveLength(2);
    for (const frame of frames) {
      expect(frame.querySelector(':scope > pre')).not.toBeNull();
      const copy = frame.querySelector<HTMLButtonElement>('[data-testid="pal-code-copy"]')!;
      const insert = frame.querySelector<HTMLButtonElement>('[data-testid="pal-code-insert"]')!;
      expect(copy.textContent).toBe('Copy');
      expect(copy.getAttribute('aria-label')).toContain(copy.textContent);
      expect(insert.textContent).toBe('Insert below');
      expect(insert.getAttribute('aria-label')).toContain(insert.textContent);
      expect(frame.querySelector('[role="status"]')).not.toBeNull();
    }
  });

  it('does not frame a block twice when the answer is decorated again', () => {
    const host = answer(TWO_BLOCKS);
    addCodeBlockActions(host, {});
    expect(addCodeBlockActions(host, {})).toBe(0);
    expect(byTestId(host, 'pal-code-copy')).toHaveLength(2);
  });

  it('has no Insert below without a notebook action', () => {
    const host = answer(TWO_BLOCKS);
    addCodeBlockActions(host, {});
    expect(byTestId(host, 'pal-code-insert')).toHaveLength(0);
  });

  it('copies the block’s code and says Copied, then clears the confirmation', async () => {
    vi.useFakeTimers();
    const written: string[] = [];
    const host = answer(TWO_BLOCKS);
    addCodeBlockActions(host, { writeClipboard: async text => void written.push(text) });
    byTestId(host, 'pal-code-copy')[0].click();
    await vi.waitFor(() =>
      expect(byTestId(host, 'pal-code-result')[0].textContent).toBe('Copied')
    );
    expect(written).toEqual(['import pandas as pd\ndf = pd.read_csv("x.csv")']);
    vi.advanceTimersByTime(CONFIRMATION_MS + 1);
    expect(byTestId(host, 'pal-code-result')[0].textContent).toBe('');
  });

  it('falls back to selecting the code when there is no clipboard or it refuses', async () => {
    const pre = answer('<pre><code>x = 1</code></pre>').querySelector('pre')!;
    document.body.append(pre);
    const refuse = async () => {
      throw new Error('NotAllowedError');
    };
    for (const clipboard of [null, refuse]) {
      const outcome = await copyCode('x = 1', pre, clipboard);
      expect(['copied', 'selected']).toContain(outcome);
      expect(window.getSelection()?.toString()).toBe('x = 1');
    }
    pre.remove();
  });

  it('inserts the code below the active cell, makes it active, and reports it', () => {
    const inserted: [number, unknown][] = [];
    const notebook: INotebookLike = {
      activeCellIndex: 2,
      model: { sharedModel: { insertCell: (index, cell) => inserted.push([index, cell]) } },
      deselectAll: vi.fn()
    };
    const host = answer(TWO_BLOCKS);
    addCodeBlockActions(host, { insertBelow: code => insertCodeBelow(notebook, code) });
    byTestId(host, 'pal-code-insert')[1].click();
    expect(inserted).toEqual([[3, { cell_type: 'code', source: 'print(1)' }]]);
    expect(notebook.activeCellIndex).toBe(3);
    expect(byTestId(host, 'pal-code-result')[1].textContent).toBe('Inserted');
  });

  it('inserts at the top of an empty notebook and refuses without a model', () => {
    const inserted: number[] = [];
    const empty: INotebookLike = {
      activeCellIndex: -1,
      model: { sharedModel: { insertCell: index => inserted.push(index) } }
    };
    expect(insertCodeBelow(empty, 'x')).toBe(true);
    expect(inserted).toEqual([0]);
    expect(insertCodeBelow({ activeCellIndex: 0, model: null }, 'x')).toBe(false);
    const host = answer('<pre><code>x</code></pre>');
    addCodeBlockActions(host, { insertBelow: () => false });
    byTestId(host, 'pal-code-insert')[0].click();
    expect(byTestId(host, 'pal-code-result')[0].textContent).toBe('No notebook to insert into');
  });
});
