/**
 * The panel's JupyterLab commands (palette entries) and their default
 * shortcuts: declared once here; index.ts registers them and the settings
 * schema (schema/plugin.json) lists the same shortcuts, which
 * test/keyboard.test.ts keeps equal. (Chat slash-commands are another thing:
 * commands.ts, generated from core/commands.py.)
 */

import type { DeliveryMode } from './wire';

/** Where a shortcut applies: anywhere in JupyterLab, or in the chat panel only. */
export const ANYWHERE = 'body';
export const IN_CHAT = '.pal-ChatPanel';

export interface IShortcut {
  keys: string[];
  selector: string;
}

export interface IPanelCommand {
  id: string;
  label: string;
  caption: string;
  /** Default shortcut, or null for a palette entry only. */
  shortcut: IShortcut | null;
}

export const PANEL_COMMANDS = [
  {
    id: 'prime-agent-lab:open-panel',
    label: 'Open Prime Agent',
    caption: 'Show the Prime Agent chat and put the cursor in its input',
    shortcut: null
  },
  {
    id: 'prime-agent-lab:focus-chat',
    label: 'Focus the Prime Agent chat input',
    caption: 'Show the Prime Agent chat and put the cursor in its input',
    shortcut: { keys: ['Accel Shift A'], selector: ANYWHERE }
  },
  {
    id: 'prime-agent-lab:send',
    label: 'Send the Prime Agent chat message',
    caption: 'Send what the chat input holds (Enter in the input does the same)',
    shortcut: { keys: ['Accel Enter'], selector: IN_CHAT }
  },
  {
    id: 'prime-agent-lab:steer',
    label: 'Steer the running Prime Agent turn',
    caption:
      'Send the chat input into the running turn: the agent reads it at its next step ' +
      '(with no turn running, it is sent as a normal message)',
    shortcut: { keys: ['Alt Shift Enter'], selector: IN_CHAT }
  },
  {
    id: 'prime-agent-lab:queue',
    label: 'Queue the Prime Agent chat message as a follow-up',
    caption:
      'Queue the chat input as a follow-up that starts when the running turn ends ' +
      '(with no turn running, it is sent at once)',
    shortcut: { keys: ['Alt Enter'], selector: IN_CHAT }
  },
  {
    id: 'prime-agent-lab:stop',
    label: 'Stop the Prime Agent turn',
    caption: 'Stop the running turn of the current notebook’s agent and interrupt its cell',
    shortcut: { keys: ['Accel Alt .'], selector: ANYWHERE }
  },
  {
    id: 'prime-agent-lab:session-list',
    label: 'Show the Prime Agent sessions of this notebook',
    caption: 'Open the session list of the current notebook (open, fork or delete a session)',
    shortcut: { keys: ['Accel Shift O'], selector: ANYWHERE }
  },
  {
    id: 'prime-agent-lab:next-agent-cell',
    label: 'Select the next agent cell to review',
    caption: 'Select the next cell the agent wrote after the active cell (from the top after the last)',
    shortcut: { keys: ['Accel Alt N'], selector: ANYWHERE }
  },
  {
    id: 'prime-agent-lab:step-through',
    label: 'Step through a Prime Agent session…',
    caption:
      'Pick a session of the current notebook and show its steps one by one beside it, ' +
      'as the model saw them (docs/teaching.md)',
    shortcut: null
  },
  {
    id: 'prime-agent-lab:open-agents-view',
    label: 'Open Agents View',
    caption: 'Every agent and sub-agent on this server as a tree, live, with their actions',
    shortcut: null
  }
] as const satisfies readonly IPanelCommand[];

export type PanelCommandId = (typeof PANEL_COMMANDS)[number]['id'];

/** The ids by a short name, for code that runs one command. */
export const CommandIds = {
  openPanel: 'prime-agent-lab:open-panel',
  focusChat: 'prime-agent-lab:focus-chat',
  send: 'prime-agent-lab:send',
  steer: 'prime-agent-lab:steer',
  queue: 'prime-agent-lab:queue',
  stop: 'prime-agent-lab:stop',
  sessionList: 'prime-agent-lab:session-list',
  nextAgentCell: 'prime-agent-lab:next-agent-cell',
  stepThrough: 'prime-agent-lab:step-through',
  openAgentsView: 'prime-agent-lab:open-agents-view'
} as const satisfies Record<string, PanelCommandId>;

/**
 * How the commands that send the chat input deliver it (`POST .../messages`
 * `mode`): all three take the input's one send path (ChatPanel.sendMessage),
 * as Enter, Shift+Alt+Enter and the Send and Steer buttons do. The server
 * starts a turn with the text when none runs, whatever the mode.
 */
export const DELIVERY = {
  [CommandIds.send]: 'auto',
  [CommandIds.steer]: 'steer',
  [CommandIds.queue]: 'follow_up'
} as const satisfies Partial<Record<PanelCommandId, DeliveryMode>>;

/** The commands that send the chat input. */
export type ComposerCommandId = keyof typeof DELIVERY;

/** What the send, steer and queue commands use of the chat panel. */
export interface IComposer {
  /** The input holds something to send, and the panel can send now. */
  readonly canSend: boolean;
  sendMessage(mode: DeliveryMode): Promise<void>;
}

/** The send, steer or queue command: the input's send path, off with nothing to send. */
export function composerCommand(
  composer: IComposer,
  id: ComposerCommandId
): { execute: () => Promise<void>; isEnabled: () => boolean } {
  return {
    execute: () => composer.sendMessage(DELIVERY[id]),
    isEnabled: () => composer.canSend
  };
}

/** The settings-schema form of the default shortcuts ("jupyter.lab.shortcuts"). */
export function schemaShortcuts(
  commands: readonly IPanelCommand[] = PANEL_COMMANDS
): { command: string; keys: string[]; selector: string }[] {
  return commands.flatMap(command =>
    command.shortcut
      ? [{ command: command.id, keys: [...command.shortcut.keys], selector: command.shortcut.selector }]
      : []
  );
}

/**
 * The index of the next agent cell after `active` (wrapping to the first),
 * or -1 when no cell is the agent's. `isAgent[i]` says whether cell i is.
 */
export function nextAgentCellIndex(isAgent: readonly boolean[], active: number): number {
  const count = isAgent.length;
  for (let step = 1; step <= count; step++) {
    const index = (Math.max(active, -1) + step) % count;
    if (isAgent[index]) {
      return index;
    }
  }
  return -1;
}

/** How a shortcut reads in the docs and titles: "Ctrl+Shift+A" (⌘ on a Mac). */
export function shortcutLabel(keys: string, mac = false): string {
  return keys
    .split(/\s+/)
    .map(key => (key === 'Accel' ? (mac ? '⌘' : 'Ctrl') : key))
    .join('+');
}
