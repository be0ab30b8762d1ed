/**
 * The view of the `/tree` chat command (docs/branching.md): the session's
 * tree of user messages and turn ends, the current branch highlighted, with
 * actions to branch to an entry, fork from a message or clone the current
 * branch. The commands are declared in core/commands.py.
 */
import { button, element } from './dom';
import type { ISessionTree, ITreeNode } from './wire';

/** One line of the tree view: a user message or the end of a turn. */
export interface ITreeRow {
  id: string;
  type: 'user_message' | 'turn_end';
  turn: number | null;
  preview: string;
  /** On the path from the root to the current leaf. */
  onBranch: boolean;
  /** The current position: the last row on the branch. */
  current: boolean;
  /** How many branch-offs above this row (for indentation). */
  depth: number;
}

/**
 * The rows to show, depth first: each entry's children in the order they
 * were written, the branch that holds the leaf first, so the current
 * conversation reads top to bottom and other branches follow, indented.
 */
export function treeRows(tree: ISessionTree): ITreeRow[] {
  const children = new Map<string | null, ITreeNode[]>();
  for (const node of tree.entries) {
    const siblings = children.get(node.parent_id) ?? [];
    siblings.push(node);
    children.set(node.parent_id, siblings);
  }
  for (const siblings of children.values()) {
    siblings.sort((a, b) => Number(b.on_branch) - Number(a.on_branch) || a.ts.localeCompare(b.ts));
  }
  const rows: ITreeRow[] = [];
  // An explicit stack: a long session is a deep chain.
  const stack: { node: ITreeNode; depth: number }[] = (children.get(null) ?? [])
    .map((node, index) => ({ node, depth: index === 0 ? 0 : 1 }))
    .reverse();
  while (stack.length > 0) {
    const { node, depth } = stack.pop()!;
    if (node.type === 'user_message' || node.type === 'turn_end') {
      rows.push({
        id: node.id,
        type: node.type,
        turn: node.turn,
        preview: node.preview,
        onBranch: node.on_branch,
        current: false,
        depth
      });
    }
    const next = children.get(node.id) ?? [];
    for (let index = next.length - 1; index >= 0; index--) {
      stack.push({ node: next[index], depth: index === 0 ? depth : depth + 1 });
    }
  }
  const onBranch = rows.filter(row => row.onBranch);
  if (onBranch.length > 0) {
    onBranch[onBranch.length - 1].current = true;
  }
  return rows;
}

export interface ITreeActions {
  branch: (row: ITreeRow) => void;
  fork: (row: ITreeRow) => void;
  clone: () => void;
  close: () => void;
}

/** The tree view shown above the composer. */
export function renderTreeView(tree: ISessionTree, actions: ITreeActions): HTMLElement {
  const view = element('div', 'pal-tree', 'pal-tree');
  const header = element('div', 'pal-tree-header');
  const title = element('span', 'pal-tree-title');
  title.textContent = 'Session tree';
  const clone = button('Clone branch', 'pal-tree-clone');
  clone.title = 'A new session and notebook with the whole current branch';
  clone.addEventListener('click', actions.clone);
  const close = button('Close', 'pal-tree-close');
  close.addEventListener('click', actions.close);
  header.append(title, clone, close);
  view.append(header);
  if (tree.broken) {
    const broken = element('div', 'pal-tree-broken');
    broken.textContent = `This session is damaged and cannot be branched: ${tree.broken}`;
    view.append(broken);
  }
  const list = element('ol', 'pal-tree-list', 'pal-tree-list');
  const rows = treeRows(tree);
  if (rows.length === 0) {
    const empty = element('li', 'pal-tree-empty');
    empty.textContent = 'Nothing to branch to yet.';
    list.append(empty);
  }
  for (const row of rows) {
    list.append(renderRow(row, actions, !tree.broken));
  }
  view.append(list);
  return view;
}

/** Rows deeper than this are indented no further: a narrow panel keeps room for the label. */
export const MAX_INDENT_DEPTH = 4;

/** What a row says: "turn 3 · you: …" or "turn 3 · end: …". */
export function treeRowLabel(row: ITreeRow): string {
  const turn = row.turn === null ? '' : `turn ${row.turn} · `;
  return row.type === 'user_message' ? `${turn}you: ${row.preview}` : `${turn}end: ${row.preview}`;
}

function renderRow(row: ITreeRow, actions: ITreeActions, enabled: boolean): HTMLElement {
  const item = element('li', 'pal-tree-row', 'pal-tree-row');
  item.dataset.entryId = row.id;
  item.dataset.type = row.type;
  item.dataset.depth = String(row.depth);
  item.classList.toggle('pal-mod-on-branch', row.onBranch);
  item.classList.toggle('pal-mod-current', row.current);
  item.style.paddingLeft = `${Math.min(row.depth, MAX_INDENT_DEPTH) * 12 + 4}px`;
  // The label wraps (a few lines at most, cut with "…"); the tooltip always has all of it.
  const label = element('span', 'pal-tree-label', 'pal-tree-label');
  label.textContent = treeRowLabel(row);
  label.title = label.textContent;
  item.append(label);
  // The marker and buttons stay together: in a narrow panel they move under the label.
  const rowActions = element('span', 'pal-tree-actions');
  if (row.current) {
    const here = element('span', 'pal-tree-here');
    here.textContent = 'you are here';
    rowActions.append(here);
  }
  if (enabled && !row.current) {
    const branch = button(
      row.type === 'user_message' ? 'Edit from here' : 'Continue here',
      'pal-tree-branch'
    );
    branch.title =
      row.type === 'user_message'
        ? 'Branch to just before this message; it goes back into the input'
        : 'Branch to the end of this turn: the next message continues from here';
    branch.addEventListener('click', () => actions.branch(row));
    rowActions.append(branch);
  }
  if (enabled && row.type === 'user_message') {
    const fork = button('Fork', 'pal-tree-fork');
    fork.title = 'A new session and notebook with everything before this message';
    fork.addEventListener('click', () => actions.fork(row));
    rowActions.append(fork);
  }
  if (rowActions.childElementCount > 0) {
    item.append(rowActions);
  }
  return item;
}
