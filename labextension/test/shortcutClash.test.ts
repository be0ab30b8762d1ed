// @vitest-environment happy-dom
/**
 * The panel's default shortcuts (keyboard.ts) against JupyterLab's own
 * (the `jupyter.lab.shortcuts` of every schema of the installed JupyterLab):
 * none may take a key JupyterLab binds where both apply. Where ours is
 * `body`, every JupyterLab binding of the same keys competes; where it is the
 * chat panel, those whose selector matches the panel or anything in it (or
 * the sidebar and body around it) do.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, it, vi } from 'vitest';

import { ChatPanel } from '../src/chatPanel';
import { ANYWHERE, IN_CHAT, schemaShortcuts } from '../src/keyboard';

import { standInChatPanel } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

interface IBinding {
  command: string;
  keys: string[];
  macKeys?: string[];
  winKeys?: string[];
  linuxKeys?: string[];
  selector: string;
  disabled?: boolean;
  source?: string;
}

type Platform = 'mac' | 'win' | 'linux';
const PLATFORMS: Platform[] = ['mac', 'win', 'linux'];

/** The keys of a binding on a platform (`macKeys` ... replace `keys` there); [] for none. */
function keysOn(binding: IBinding, platform: Platform): string[] {
  const own = { mac: binding.macKeys, win: binding.winKeys, linux: binding.linuxKeys }[platform];
  const keys = own ?? binding.keys ?? [];
  return keys.some(key => key.trim() === '') ? [] : keys;
}

/** JupyterLab's schema folder: `jupyter lab path`'s application directory. */
function jupyterLabSchemaDir(): string {
  const out = execFileSync('jupyter', ['lab', 'path'], { encoding: 'utf8' });
  const app = /Application directory:\s*(.+)/.exec(out)?.[1]?.trim();
  const dir = app ? join(app, 'schemas') : '';
  if (!dir || !existsSync(dir)) {
    throw new Error(`no JupyterLab schemas found (jupyter lab path said:\n${out})`);
  }
  return dir;
}

function jsonFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap(entry => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? jsonFiles(path) : entry.name.endsWith('.json') ? [path] : [];
  });
}

let bindings: IBinding[] = [];

function readJupyterLabBindings(): IBinding[] {
  const root = join(jupyterLabSchemaDir(), '@jupyterlab');
  return jsonFiles(root).flatMap(path => {
    const schema = JSON.parse(readFileSync(path, 'utf8'));
    const list = (schema['jupyter.lab.shortcuts'] ?? []) as IBinding[];
    return list
      .filter(binding => !binding.disabled)
      .map(binding => ({ ...binding, source: path.slice(root.length + 1) }));
  });
}

/** One keystroke as Lumino reads it on a platform: modifiers in a fixed order, then the key. */
function normalizeKeystroke(keystroke: string, mac: boolean): string {
  const mods = new Set<string>();
  let key = '';
  for (const part of keystroke.trim().split(/\s+/)) {
    if (part === 'Accel') {
      mods.add(mac ? 'Cmd' : 'Ctrl');
    } else if (['Ctrl', 'Alt', 'Shift', 'Cmd'].includes(part)) {
      mods.add(part);
    } else {
      key = part;
    }
  }
  const order = ['Ctrl', 'Alt', 'Shift', 'Cmd'].filter(mod => mods.has(mod));
  return [...order, key].join(' ');
}

/** Whether two key sequences compete on a platform: one is the other or begins it (a chord waits). */
function sequencesClash(a: readonly string[], b: readonly string[], mac: boolean): boolean {
  if (a.length === 0 || b.length === 0) {
    return false;
  }
  const x = a.map(k => normalizeKeystroke(k, mac));
  const y = b.map(k => normalizeKeystroke(k, mac));
  const n = Math.min(x.length, y.length);
  return x.slice(0, n).every((k, i) => k === y[i]);
}

/** Whether our keys compete with a JupyterLab binding on any platform. */
function keysClash(ours: readonly string[], theirs: IBinding): boolean {
  return PLATFORMS.some(platform =>
    sequencesClash(ours, keysOn(theirs, platform), platform === 'mac')
  );
}

/** The chat panel as JupyterLab shows it: in the right sidebar, under body. */
function panelInShell(): HTMLElement[] {
  document.body.replaceChildren();
  const sidebar = document.createElement('div');
  sidebar.className = 'lm-Widget lm-StackedPanel jp-SidePanel jp-mod-right';
  const panel: ChatPanel = standInChatPanel();
  sidebar.append(panel.node);
  document.body.append(sidebar);
  return [document.body, sidebar, panel.node, ...panel.node.querySelectorAll<HTMLElement>('*')];
}

function appliesInChat(selector: string, elements: HTMLElement[]): boolean {
  return elements.some(element => element.matches(selector));
}

describe('the panel’s shortcuts against JupyterLab’s', () => {
  // `jupyter lab path` starts Python: read once, with time for a loaded machine.
  beforeAll(() => {
    bindings = readJupyterLabBindings();
  }, 120_000);
  const jupyterLabBindings = () => bindings;

  it('reads keystrokes and sequences as Lumino does', () => {
    expect(normalizeKeystroke('Shift Alt Enter', false)).toBe('Alt Shift Enter');
    expect(normalizeKeystroke('Accel Shift A', true)).toBe('Shift Cmd A');
    const binding = (keys: string[], more: Partial<IBinding> = {}): IBinding => ({
      command: 'x',
      selector: 'body',
      keys,
      ...more
    });
    expect(keysClash(['Accel Enter'], binding(['Ctrl Enter']))).toBe(true);
    expect(keysClash(['Accel K'], binding(['Accel K', 'Accel C']))).toBe(true);
    expect(keysClash(['Alt Enter'], binding(['Alt Shift Enter']))).toBe(false);
    expect(keysClash(['Accel Y'], binding(['Accel Z'], { linuxKeys: ['Ctrl Y'] }))).toBe(true);
    expect(keysClash(['Accel Y'], binding([''], {}))).toBe(false); // a binding taken away
  });

  it('finds JupyterLab’s bindings, and sees a clash where one is', () => {
    const theirs = jupyterLabBindings();
    expect(theirs.length).toBeGreaterThan(50);
    // The check itself: notebook's Shift Enter is under a notebook, not in the chat.
    const elements = panelInShell();
    const runCell = theirs.find(b => b.command === 'notebook:run-cell-and-select-next')!;
    expect(runCell.keys).toEqual(['Shift Enter']);
    expect(appliesInChat(runCell.selector, elements)).toBe(false);
    const palette = theirs.find(b => b.command === 'apputils:activate-command-palette')!;
    expect(appliesInChat(palette.selector, elements)).toBe(true);
  });

  it('takes no key JupyterLab binds where both apply', () => {
    const theirs = jupyterLabBindings();
    const elements = panelInShell();
    const clashes = schemaShortcuts().flatMap(ours =>
      theirs
        .filter(their => keysClash(ours.keys, their))
        .filter(their =>
          ours.selector === ANYWHERE
            ? true
            : ours.selector === IN_CHAT && appliesInChat(their.selector, elements)
        )
        .map(
          their =>
            `${ours.command} ${ours.keys.join(', ')} (${ours.selector}) vs ` +
            `${their.command} ${their.keys.join(', ')} (${their.selector}) in ${their.source}`
        )
    );
    expect(clashes).toEqual([]);
    // Every selector of ours is one of the two the check knows.
    for (const ours of schemaShortcuts()) {
      expect([ANYWHERE, IN_CHAT]).toContain(ours.selector);
    }
  });
});
