import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  CommandIds,
  nextAgentCellIndex,
  PANEL_COMMANDS,
  schemaShortcuts,
  shortcutLabel
} from '../src/keyboard';

const SCHEMA_DIR = join(__dirname, '..', 'schema');

interface ISchemaShortcut {
  command: string;
  keys: string[];
  selector: string;
}

function schemaFileShortcuts(): ISchemaShortcut[] {
  return readdirSync(SCHEMA_DIR)
    .filter(name => name.endsWith('.json'))
    .flatMap(name => {
      const schema = JSON.parse(readFileSync(join(SCHEMA_DIR, name), 'utf8'));
      return (schema['jupyter.lab.shortcuts'] ?? []) as ISchemaShortcut[];
    });
}

describe('the panel’s commands and shortcuts', () => {
  it('lists the same default shortcuts in the settings schema as in keyboard.ts', () => {
    const sort = (list: ISchemaShortcut[]) =>
      [...list].sort((a, b) => a.command.localeCompare(b.command));
    expect(sort(schemaFileShortcuts())).toEqual(sort(schemaShortcuts()));
  });

  it('declares each command once, with the shortcuts docs/pairing.md names', () => {
    const ids = PANEL_COMMANDS.map(command => command.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(Object.values(CommandIds))).toEqual(new Set(ids));
    const keys = Object.fromEntries(
      PANEL_COMMANDS.map(command => [command.id, command.shortcut?.keys ?? null])
    );
    expect(keys[CommandIds.focusChat]).toEqual(['Accel Shift A']);
    expect(keys[CommandIds.stop]).toEqual(['Accel Alt .']);
    const bindings = schemaShortcuts().map(s => `${s.selector} ${s.keys.join(',')}`);
    expect(new Set(bindings).size).toBe(bindings.length);
  });

  it('reads a shortcut for people', () => {
    expect(shortcutLabel('Accel Shift A')).toBe('Ctrl+Shift+A');
    expect(shortcutLabel('Accel Shift .', true)).toBe('⌘+Shift+.');
  });
});

describe('the next agent cell to review', () => {
  const cells = [false, true, false, true, false];

  it('is the next agent cell after the active one, from the top after the last', () => {
    expect(nextAgentCellIndex(cells, 0)).toBe(1);
    expect(nextAgentCellIndex(cells, 1)).toBe(3);
    expect(nextAgentCellIndex(cells, 3)).toBe(1);
    expect(nextAgentCellIndex(cells, 4)).toBe(1);
    expect(nextAgentCellIndex(cells, -1)).toBe(1);
  });

  it('is none without agent cells, and the only one when there is one', () => {
    expect(nextAgentCellIndex([false, false], 0)).toBe(-1);
    expect(nextAgentCellIndex([], -1)).toBe(-1);
    expect(nextAgentCellIndex([true], 0)).toBe(0);
  });
});
