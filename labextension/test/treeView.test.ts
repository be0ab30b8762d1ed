// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { badgeText } from '../src/agentCellMarker';
import {
  MAX_INDENT_DEPTH,
  renderTreeView,
  treeRowLabel,
  treeRows
} from '../src/treeView';
import type { ISessionTree, ITreeNode, SessionEntryType } from '../src/wire';

function node(
  id: string,
  parent: string | null,
  type: SessionEntryType,
  preview: string,
  onBranch: boolean,
  turn: number | null = null
): ITreeNode {
  return {
    id,
    parent_id: parent,
    type,
    turn,
    ts: `2026-01-01T00:00:${id}`,
    preview,
    on_branch: onBranch,
    branch_point: type === 'user_message' || type === 'turn_end'
  };
}

/** Turn 1, then turn 2 (abandoned), then a branch back to the end of turn 1 with turn 2'. */
function branchedTree(): ISessionTree {
  return {
    session_id: 's',
    leaf_id: '31',
    entries: [
      node('10', null, 'user_message', 'alpha', true, 1),
      node('11', '10', 'assistant_message', 'x = 1', true, 1),
      node('12', '11', 'turn_end', 'done alpha', true, 1),
      node('20', '12', 'user_message', 'beta', false, 2),
      node('21', '20', 'turn_end', 'done beta', false, 2),
      node('30', '12', 'user_message', 'delta', true, 2),
      node('31', '30', 'turn_end', 'done delta', true, 2)
    ]
  };
}

describe('tree rows', () => {
  it('lists user messages and turn ends, the current branch first and the leaf marked', () => {
    const rows = treeRows(branchedTree());
    expect(rows.map(r => [r.id, r.onBranch, r.current, r.depth])).toEqual([
      ['10', true, false, 0],
      ['12', true, false, 0],
      ['30', true, false, 0],
      ['31', true, true, 0],
      ['20', false, false, 1],
      ['21', false, false, 1]
    ]);
  });

  it('handles a chain far deeper than the call stack', () => {
    const entries: ITreeNode[] = [];
    for (let i = 0; i < 50_000; i++) {
      entries.push(
        node(String(i).padStart(6, '0'), i ? String(i - 1).padStart(6, '0') : null, 'user_message', 'm', true)
      );
    }
    expect(treeRows({ session_id: 's', leaf_id: '049999', entries }).length).toBe(50_000);
  });
});

describe('tree view', () => {
  it('offers branch and fork on other entries, not on the current one, and clone', () => {
    const actions = { branch: vi.fn(), fork: vi.fn(), clone: vi.fn(), close: vi.fn() };
    const view = renderTreeView(branchedTree(), actions);
    const row = (id: string) => view.querySelector(`[data-entry-id="${id}"]`)!;

    expect(row('31').querySelector('[data-testid="pal-tree-branch"]')).toBeNull();
    expect(row('31').textContent).toContain('you are here');
    (row('21').querySelector('[data-testid="pal-tree-branch"]') as HTMLElement).click();
    expect(actions.branch).toHaveBeenCalledWith(expect.objectContaining({ id: '21' }));
    (row('20').querySelector('[data-testid="pal-tree-fork"]') as HTMLElement).click();
    expect(actions.fork).toHaveBeenCalledWith(expect.objectContaining({ id: '20' }));
    expect(row('21').querySelector('[data-testid="pal-tree-fork"]')).toBeNull();
    (view.querySelector('[data-testid="pal-tree-clone"]') as HTMLElement).click();
    expect(actions.clone).toHaveBeenCalled();
    expect(row('20').classList.contains('pal-mod-on-branch')).toBe(false);
    expect(row('30').classList.contains('pal-mod-on-branch')).toBe(true);
  });

  it('shows a damaged session without branch actions', () => {
    const tree = { ...branchedTree(), broken: 'line 3: torn' };
    const view = renderTreeView(tree, {
      branch: vi.fn(),
      fork: vi.fn(),
      clone: vi.fn(),
      close: vi.fn()
    });
    expect(view.textContent).toContain('cannot be branched: line 3: torn');
    expect(view.querySelector('[data-testid="pal-tree-branch"]')).toBeNull();
  });
});

describe('the tree in a narrow panel', () => {
  const actions = () => ({ branch: vi.fn(), fork: vi.fn(), clone: vi.fn(), close: vi.fn() });

  it('puts each row’s whole label in its tooltip, not just the preview', () => {
    const view = renderTreeView(branchedTree(), actions());
    const labels = [...view.querySelectorAll<HTMLElement>('[data-testid="pal-tree-label"]')];
    expect(labels.map(label => label.title)).toEqual([
      'turn 1 · you: alpha',
      'turn 1 · end: done alpha',
      'turn 2 · you: delta',
      'turn 2 · end: done delta',
      'turn 2 · you: beta',
      'turn 2 · end: done beta'
    ]);
    expect(labels.every(label => label.title === label.textContent)).toBe(true);
  });

  it('keeps a row’s marker and buttons in one group that can move under the label', () => {
    const view = renderTreeView(branchedTree(), actions());
    for (const row of view.querySelectorAll<HTMLElement>('[data-testid="pal-tree-row"]')) {
      const group = row.querySelector(':scope > .pal-tree-actions')!;
      expect(group, row.dataset.entryId).not.toBeNull();
      expect(row.querySelectorAll(':scope > button')).toHaveLength(0);
      expect(group.querySelectorAll('button, .pal-tree-here').length).toBeGreaterThan(0);
    }
  });

  it('indents deep branches no further than a few steps', () => {
    const entries: ITreeNode[] = [node('a0', null, 'user_message', 'root', true, 1)];
    // Each turn end gets two answers: the second is one branch deeper than the first.
    let parent = 'a0';
    for (let depth = 1; depth <= 8; depth++) {
      entries.push(node(`e${depth}`, parent, 'turn_end', `end ${depth}`, depth === 1, depth));
      entries.push(node(`m${depth}`, `e${depth}`, 'user_message', 'on', false, depth + 1));
      entries.push(node(`n${depth}`, `e${depth}`, 'user_message', `deeper ${depth}`, false, depth + 1));
      parent = `n${depth}`;
    }
    const view = renderTreeView({ session_id: 's', leaf_id: 'e1', entries }, actions());
    const rows = [...view.querySelectorAll<HTMLElement>('[data-testid="pal-tree-row"]')];
    const deepest = Math.max(...rows.map(row => Number(row.dataset.depth)));
    expect(deepest).toBeGreaterThan(MAX_INDENT_DEPTH);
    const indents = rows.map(row => parseInt(row.style.paddingLeft, 10));
    expect(Math.max(...indents)).toBe(MAX_INDENT_DEPTH * 12 + 4);
    expect(treeRowLabel({ ...treeRows({ session_id: 's', leaf_id: 'e1', entries })[0] })).toBe(
      'turn 1 · you: root'
    );
  });
});

describe('cells of other branches', () => {
  it('are badged "other branch"', () => {
    expect(badgeText({ turn: 2, branch: 'other' })).toBe('agent · turn 2 · other branch');
    expect(badgeText({ turn: 2 })).toBe('agent · turn 2');
  });
});
