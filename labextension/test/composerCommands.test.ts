// @vitest-environment happy-dom
/**
 * The palette's send, steer and queue commands (keyboard.ts) on a real chat
 * panel: when they are on, and which delivery each sends the input with.
 * They take the input's one send path, as its keys and buttons do.
 */
import { describe, expect, it, vi } from 'vitest';

import type { ChatPanel } from '../src/chatPanel';
import { CommandIds, composerCommand, DELIVERY, PANEL_COMMANDS } from '../src/keyboard';
import type { NotebookAgent } from '../src/notebookAgent';

import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

/** A stand-in agent that records what the panel sends; a send can be held open. */
class SendingAgent extends StandInAgent {
  release: () => void = () => undefined;
  hold = false;
  readonly send = vi.fn(
    (_text: string, _mode?: string) =>
      new Promise<void>(resolve => {
        this.release = resolve;
        if (!this.hold) {
          resolve();
        }
      })
  );

  constructor() {
    super(sessionInfo('root', 'analysis.ipynb'));
  }
}

function setUp(agent: SendingAgent | null = new SendingAgent()) {
  const panel: ChatPanel = standInChatPanel();
  panel.agent = agent as unknown as NotebookAgent;
  agent?.transcript.load([], 0);
  const input = panel.node.querySelector<HTMLTextAreaElement>('[data-testid="pal-chat-input"]')!;
  const type = (text: string) => {
    input.value = text;
    input.dispatchEvent(new Event('input'));
  };
  const steer = composerCommand(panel, CommandIds.steer);
  const queue = composerCommand(panel, CommandIds.queue);
  const send = composerCommand(panel, CommandIds.send);
  return { panel, input, type, steer, queue, send };
}

describe('the send, steer and queue commands', () => {
  it('are declared with shortcuts, and deliver as auto, steer and follow_up', () => {
    const shortcuts = Object.fromEntries(PANEL_COMMANDS.map(c => [c.id, c.shortcut]));
    expect(shortcuts[CommandIds.steer]?.keys).toEqual(['Alt Shift Enter']);
    expect(shortcuts[CommandIds.queue]?.keys).toEqual(['Alt Enter']);
    expect(shortcuts[CommandIds.sessionList]?.keys).toEqual(['Accel Shift O']);
    expect(DELIVERY).toEqual({
      [CommandIds.send]: 'auto',
      [CommandIds.steer]: 'steer',
      [CommandIds.queue]: 'follow_up'
    });
  });

  it('are off with nothing to send: an empty input or no notebook', async () => {
    expect(setUp(null).steer.isEnabled()).toBe(false); // no notebook
    const agent = new SendingAgent();
    const { type, steer, queue, send } = setUp(agent);
    agent.transcript.status = 'running';
    for (const command of [steer, queue, send]) {
      expect(command.isEnabled()).toBe(false); // empty input
    }
    type('   ');
    expect(queue.isEnabled()).toBe(false); // blanks only
    type('use the median');
    for (const command of [steer, queue, send]) {
      expect(command.isEnabled()).toBe(true);
    }
  });

  it('take a message typed while the one before is on its way, and send it after that one', async () => {
    const agent = new SendingAgent();
    const { input, type, steer, queue } = setUp(agent);
    agent.transcript.status = 'running';
    agent.hold = true;
    type('use the median');
    const steering = steer.execute();
    type('and then plot it');
    expect(queue.isEnabled()).toBe(true); // a quick Alt+Enter is not lost
    const queueing = queue.execute();
    expect(input.value).toBe(''); // taken at once
    await Promise.resolve();
    expect(agent.send.mock.calls).toEqual([['use the median', 'steer']]); // still on its way
    agent.release();
    await steering;
    await vi.waitFor(() => expect(agent.send).toHaveBeenCalledTimes(2));
    expect(agent.send.mock.calls[1]).toEqual(['and then plot it', 'follow_up']);
    agent.release();
    await queueing;
  });

  it('steer the running turn and queue a follow-up through the input’s send path', async () => {
    const agent = new SendingAgent();
    const { input, type, steer, queue } = setUp(agent);
    agent.transcript.status = 'running';
    type('use the median');
    await steer.execute();
    expect(agent.send).toHaveBeenLastCalledWith('use the median', 'steer');
    expect(input.value).toBe(''); // sent: the input empties as with Enter
    type('then plot it');
    await queue.execute();
    expect(agent.send).toHaveBeenLastCalledWith('then plot it', 'follow_up');
    expect(agent.send).toHaveBeenCalledTimes(2);
  });

  it('send when no turn runs (the server starts a turn with the text, whatever the mode)', async () => {
    const agent = new SendingAgent();
    const { type, steer, queue } = setUp(agent);
    type('look at x');
    expect(steer.isEnabled()).toBe(true); // the Steer button is off, the command is not
    await steer.execute();
    type('and y');
    await queue.execute();
    expect(agent.send.mock.calls).toEqual([
      ['look at x', 'steer'],
      ['and y', 'follow_up']
    ]);
  });

  it('do nothing when off: nothing sent, the text stays', async () => {
    const agent = new SendingAgent();
    const { input, steer, queue } = setUp(agent);
    await steer.execute();
    await queue.execute();
    expect(agent.send).not.toHaveBeenCalled();
    expect(input.value).toBe('');
  });

  it('take the completion of a half-typed command, as Enter does, instead of sending it', async () => {
    const agent = new SendingAgent();
    const { panel, input, queue } = setUp(agent);
    agent.transcript.status = 'running';
    input.value = '/mod';
    input.setSelectionRange(4, 4);
    input.dispatchEvent(new Event('input'));
    const menu = panel.node.querySelector<HTMLElement>('[data-testid="pal-command-menu"]')!;
    expect(menu.hidden).toBe(false);
    await queue.execute();
    expect(agent.send).not.toHaveBeenCalled();
    expect(input.value).toMatch(/^\/model\b/);
  });

  it('match the input’s keys: Alt+Enter queues, Shift+Alt+Enter steers', async () => {
    const agent = new SendingAgent();
    const { input, type } = setUp(agent);
    agent.transcript.status = 'running';
    const press = (init: KeyboardEventInit) =>
      input.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', cancelable: true, ...init }));
    type('then plot it');
    press({ altKey: true });
    await Promise.resolve();
    type('use the median');
    press({ altKey: true, shiftKey: true });
    await Promise.resolve();
    type('and log it');
    press({});
    await vi.waitFor(() => expect(agent.send).toHaveBeenCalledTimes(3));
    expect(agent.send.mock.calls).toEqual([
      ['then plot it', 'follow_up'],
      ['use the median', 'steer'],
      ['and log it', 'auto']
    ]);
  });
});
