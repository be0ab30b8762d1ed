// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { badgeText } from '../src/agentCellMarker';
import {
  renderTreeView,
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

describe('cells of other branches', () => {
  it('are badged "other branch"', () => {
    expect(badgeText({ turn: 2, branch: 'other' })).toBe('agent · turn 2 · other branch');
    expect(badgeText({ turn: 2 })).toBe('agent · turn 2');
  });
});
