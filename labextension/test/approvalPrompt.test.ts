// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import type { NotebookPanel } from '@jupyterlab/notebook';
import { Signal } from '@lumino/signaling';
import type { Contents } from '@jupyterlab/services';

import { AgentApiClient } from '../src/api';
import { AWAITING_CLASS, AWAITING_TITLE } from '../src/approvalPrompt';
import { FollowCellsSetting } from '../src/cellFollower';
import { SessionDirectory } from '../src/family';
import { NotebookAgent } from '../src/notebookAgent';
import type { AgentEvent } from '../src/wire';

function cellWidget(id: string) {
  const node = document.createElement('div');
  node.className = 'jp-Cell';
  const prompt = document.createElement('div');
  prompt.className = 'jp-InputPrompt';
  prompt.textContent = '[*]:';
  node.append(prompt);
  return { model: { id }, node };
}

function notebookTab(widgets: ReturnType<typeof cellWidget>[]): NotebookPanel {
  return {
    node: document.createElement('div'),
    content: { outerNode: document.createElement('div'), widgets, model: { cells: { changed: new Signal({}) } } },
    sessionContext: { kernelChanged: new Signal({}), session: null },
    context: {
      path: 'a.ipynb',
      ready: new Promise(() => undefined),
      pathChanged: new Signal({}),
      model: { sharedModel: { changed: new Signal({}), getState: () => undefined } }
    }
  } as unknown as NotebookPanel;
}

function event(fields: Record<string, unknown>): AgentEvent {
  return { seq: 1, session_id: 's', turn: 1, ...fields } as unknown as AgentEvent;
}

describe('the prompt of a cell waiting for approval', () => {
  it('is marked while the cell waits (not JupyterLab’s running [*]) and unmarked once answered', () => {
    const waiting = cellWidget('c1');
    const other = cellWidget('c0');
    const agent = new NotebookAgent(
      notebookTab([other, waiting]),
      {} as unknown as AgentApiClient,
      { localPath: (path: string) => path } as unknown as Contents.IManager,
      new FollowCellsSetting(),
      new SessionDirectory(async () => [])
    );
    agent.permission.applyEvent(
      event({ type: 'cell_awaiting_approval', cell_id: 'c1', tool_call_id: 't1', code: 'x' })
    );
    expect(waiting.node.classList.contains(AWAITING_CLASS)).toBe(true);
    expect(waiting.node.querySelector<HTMLElement>('.jp-InputPrompt')!.title).toBe(AWAITING_TITLE);
    expect(other.node.classList.contains(AWAITING_CLASS)).toBe(false);

    agent.permission.applyEvent(event({ type: 'cell_approved', cell_id: 'c1', tool_call_id: 't1', edited: false }));
    expect(waiting.node.classList.contains(AWAITING_CLASS)).toBe(false);
    expect(waiting.node.querySelector<HTMLElement>('.jp-InputPrompt')!.title).toBe('');
    agent.dispose();
  });
});
