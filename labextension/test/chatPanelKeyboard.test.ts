// @vitest-environment happy-dom
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import { describe, expect, it, vi } from 'vitest';

import { FollowCellsSetting } from '../src/cellFollower';
import { ChatPanel } from '../src/chatPanel';
import type { NotebookAgent } from '../src/notebookAgent';

import { StandInAgent, sessionInfo } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

function setUp() {
  document.body.replaceChildren(); // the panels of earlier cases
  const returnFocus = vi.fn();
  const panel = new ChatPanel({
    followCells: new FollowCellsSetting(),
    activateNotebook: () => undefined,
    openNotebook: async () => undefined,
    returnFocus
  });
  document.body.append(panel.node);
  const input = panel.node.querySelector<HTMLTextAreaElement>('[data-testid="pal-chat-input"]')!;
  const key = (name: string) =>
    input.dispatchEvent(new KeyboardEvent('keydown', { key: name, bubbles: true, cancelable: true }));
  return { panel, input, key, returnFocus };
}

describe('the chat panel from the keyboard', () => {
  it('labels its input with a label element, not only the placeholder', () => {
    const { input } = setUp();
    const label = document.querySelector<HTMLLabelElement>(`label[for="${input.id}"]`);
    expect(input.id).not.toBe('');
    expect(label?.textContent).toMatch(/^Message to the agent/);
  });

  it('gives the keyboard back to the notebook on Escape, keeping the text', () => {
    const { panel, input, key, returnFocus } = setUp();
    const agent = new StandInAgent(sessionInfo('s', 'a.ipynb'));
    panel.agent = agent as unknown as NotebookAgent;
    input.value = 'half a thought';
    expect(key('Escape')).toBe(false); // handled: default prevented
    expect(returnFocus).toHaveBeenCalledWith(agent);
    expect(input.value).toBe('half a thought');
  });

  it('closes the command menu first: Escape with the menu open stays in the input', () => {
    const { panel, input, key, returnFocus } = setUp();
    panel.agent = new StandInAgent(sessionInfo('s', 'a.ipynb')) as unknown as NotebookAgent;
    input.value = '/';
    input.setSelectionRange(1, 1);
    input.dispatchEvent(new Event('input'));
    const menu = panel.node.querySelector<HTMLElement>('[data-testid="pal-command-menu"]')!;
    expect(menu.hidden).toBe(false);
    expect(menu.getAttribute('aria-label')).toBe('Chat commands');
    key('Escape');
    expect(menu.hidden).toBe(true);
    expect(returnFocus).not.toHaveBeenCalled();
    key('Escape');
    expect(returnFocus).toHaveBeenCalledOnce();
  });

  it('focuses the input only when there is a notebook, and the header on request', () => {
    const { panel, input } = setUp();
    expect(panel.focusInput()).toBe(false); // no notebook: the input is disabled
    panel.agent = new StandInAgent(sessionInfo('s', 'a.ipynb')) as unknown as NotebookAgent;
    expect(panel.focusInput()).toBe(true);
    expect(document.activeElement).toBe(input);
    panel.focusHeader();
    const header = panel.node.querySelector('[data-testid="pal-header"]');
    expect(document.activeElement).toBe(header);
    expect(header?.getAttribute('aria-label')).toBe('Prime Agent session');
  });

  it('takes the focus back a frame after activation when something else took it', async () => {
    const { panel, input } = setUp();
    panel.node.remove();
    Widget.attach(panel, document.body);
    panel.agent = new StandInAgent(sessionInfo('s', 'a.ipynb')) as unknown as NotebookAgent;
    const notebook = document.createElement('button'); // what the palette gives the focus to
    document.body.append(notebook);
    panel.activate();
    MessageLoop.flush(); // the activate-request is posted
    expect(document.activeElement).toBe(input);
    notebook.focus();
    await new Promise(resolve => requestAnimationFrame(resolve));
    await new Promise(resolve => requestAnimationFrame(resolve));
    expect(document.activeElement).toBe(input);
  });
});
