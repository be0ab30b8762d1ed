// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import type { NotebookAgent } from '../src/notebookAgent';

import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

function setUp(openNotebook: (path: string) => Promise<void> = async () => undefined) {
  document.body.replaceChildren();
  const panel = standInChatPanel(openNotebook);
  document.body.append(panel.node);
  const input = panel.node.querySelector<HTMLTextAreaElement>('[data-testid="pal-chat-input"]')!;
  const type = (text: string) => {
    input.value = text;
    input.dispatchEvent(new Event('input'));
  };
  const agent = (id: string, path: string) =>
    new StandInAgent(sessionInfo(id, path)) as unknown as NotebookAgent;
  return { panel, input, type, agent };
}

describe('the chat input keeps a draft per notebook', () => {
  it('does not carry notebook X’s draft to notebook Y, and gives it back on return', () => {
    const { panel, input, type, agent } = setUp();
    const x = agent('x', 'x.ipynb');
    const y = agent('y', 'y.ipynb');
    panel.agent = x;
    type('for X only');
    panel.agent = y;
    expect(input.value).toBe('');
    type('for Y');
    panel.agent = x;
    expect(input.value).toBe('for X only');
    panel.agent = y;
    expect(input.value).toBe('for Y');
    panel.agent = null;
    expect(input.value).toBe('');
  });

  it('puts a fork’s message into the draft of the fork’s notebook, not the one shown', async () => {
    let panelRef: { agent: NotebookAgent | null } | null = null;
    const fork = new StandInAgent(sessionInfo('f', 'fork.ipynb')) as unknown as NotebookAgent;
    const { panel, input, agent } = setUp(async () => {
      // JupyterLab activates the new tab a moment after the open resolves.
      setTimeout(() => (panelRef!.agent = fork), 0);
    });
    panelRef = panel;
    const x = agent('x', 'x.ipynb');
    panel.agent = x;
    const openCopy = (panel as unknown as {
      _openCopy(a: NotebookAgent, copy: { notebook_path: string; text?: string }): Promise<void>;
    })._openCopy.bind(panel);
    await openCopy(x, { notebook_path: 'fork.ipynb', text: 'the forked message' });
    await new Promise(resolve => setTimeout(resolve, 1));
    expect(panel.agent).toBe(fork);
    expect(input.value).toBe('the forked message');
    panel.agent = x;
    expect(input.value).toBe('');
  });
});
