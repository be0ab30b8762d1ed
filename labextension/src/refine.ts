/**
 * Refinements in the chat (README "Refine"): the transcript line of a
 * `refinement` event and the form `/refine history` shows, with a Rollback
 * button each. The `/refine` command itself is declared in core/commands.py.
 */
import { button, element } from './dom';
import { formatComposed } from './clock';
import { expandable, shortenId, shortenText } from './shorten';

/** What the chat shows of one refinement record (the `refinement` event). */
export interface IRefinementSummary {
  id: string;
  summary: string;
  scope: string;
  trigger: string;
  applied: number;
  rejected: number;
  error: string;
  rollbackOf: string;
  /** A rollback's words for the refinement it undid (the record's `rolled_back`), or ''. */
  rolledBackSummary: string;
  rolledBackAt: string;
  createdAt: string;
  /** The rejected edits' reasons, "update memory x: why". */
  rejections: string[];
  /** What the applied edits changed, "create memory “Flaky tests”" (the id when untitled). */
  changes: string[];
}

type Loose = Record<string, unknown>;

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/**
 * The record in a `refinement` event (flat, or under `refinement`/`record`)
 * or in GET refinements; anything malformed gives empty fields, never a throw.
 */
export function refinementSummary(raw: unknown): IRefinementSummary {
  let record: Loose = raw && typeof raw === 'object' ? (raw as Loose) : {};
  for (const key of ['refinement', 'record']) {
    const inner = record[key];
    if (inner && typeof inner === 'object') {
      record = inner as Loose;
    }
  }
  const edits = Array.isArray(record.edits) ? (record.edits as unknown[]) : [];
  let applied = 0;
  const rejections: string[] = [];
  const changes: string[] = [];
  for (const edit of edits) {
    const e = edit && typeof edit === 'object' ? (edit as Loose) : {};
    const what = [str(e.action), str(e.kind), str(e.id)].filter(Boolean).join(' ');
    if (e.applied) {
      applied += 1;
      const title = entryTitle(e.after) || entryTitle(e.before);
      const changed = title ? `${str(e.action)} ${str(e.kind)} “${title}”`.trim() : what;
      changes.push(changed || 'an edit');
    } else {
      rejections.push(`${what || 'an edit'}: ${str(e.error) || 'rejected'}`);
    }
  }
  const rolledBack: Loose =
    record.rolled_back && typeof record.rolled_back === 'object' ? (record.rolled_back as Loose) : {};
  return {
    id: str(record.id),
    summary: str(record.summary),
    scope: str(record.scope) || 'local',
    trigger: str(record.trigger),
    applied,
    rejected: edits.length - applied,
    error: str(record.error),
    rollbackOf: str(record.rollback_of),
    rolledBackSummary: str(rolledBack.summary),
    rolledBackAt: str(rolledBack.created_at),
    createdAt: str(record.created_at),
    rejections,
    changes
  };
}

/** The title of a harness entry as an edit recorded it (`before`, `after`), or ''. */
function entryTitle(entry: unknown): string {
  return entry && typeof entry === 'object' ? str((entry as Loose).title) : '';
}

/** The one-line text of a refinement in the transcript. */
export function refinementLineText(record: IRefinementSummary): string {
  return lineText(record, text => text, text => text);
}

/** The same line with long ids and a long summary or error shortened. */
export function refinementShortText(record: IRefinementSummary): string {
  return lineText(record, shortenId, text => shortenText(text));
}

function lineText(
  record: IRefinementSummary,
  id: (text: string) => string,
  prose: (text: string) => string
): string {
  const counts = `${record.applied} applied, ${record.rejected} rejected`;
  const error = record.error ? ` · error: ${prose(record.error)}` : '';
  const scope = record.scope === 'global' ? ' (global)' : '';
  if (record.rollbackOf) {
    // Told apart by what it undid, in words, as in /refine history; the ids are in the tooltip.
    const changed = record.changes.length ? prose(record.changes.join(', ')) : 'nothing changed';
    return `${prose(refinementHeadline(record))}${scope} · ${changed} · ${counts}${error}`;
  }
  const what = prose(record.summary || 'no summary');
  return `refinement ${id(record.id)}${scope}: ${what} · ${counts}${error}`;
}

/** The ids of a refinement (and of the one a rollback undid), for a tooltip. */
function refinementIds(record: IRefinementSummary): string {
  return [
    `id ${record.id || '(none)'}`,
    record.rollbackOf && `rolls back ${record.rollbackOf}`
  ]
    .filter(Boolean)
    .join('\n');
}

/** The line's text: shortened, the whole of it on expand. */
function lineLabel(record: IRefinementSummary, className: string): HTMLElement {
  const label = element('span', className);
  label.append(expandable(refinementShortText(record), refinementLineText(record)));
  return label;
}

/** The transcript line of a `refinement` event, with a way to the rollback form. */
export function renderRefinementLine(
  record: IRefinementSummary,
  showRefinements: (() => void) | null
): HTMLElement {
  const node = element('div', 'pal-refinement', 'pal-refinement');
  node.dataset.refinementId = record.id;
  node.dataset.applied = String(record.applied);
  node.dataset.rejected = String(record.rejected);
  node.classList.toggle('pal-mod-error', record.error !== '');
  const label = lineLabel(record, 'pal-refinement-text');
  label.title = [
    record.rejections.length
      ? `Rejected:\n${record.rejections.join('\n')}`
      : refinementLineText(record),
    record.rollbackOf ? refinementIds(record) : ''
  ]
    .filter(Boolean)
    .join('\n');
  node.append(label);
  if (showRefinements) {
    const open = button('Rollback…', 'pal-refinement-open');
    open.title = 'Show the recent refinements, each with a Rollback button';
    open.addEventListener('click', showRefinements);
    node.append(open);
  }
  return node;
}

export interface IRefineFormActions {
  rollback: (record: IRefinementSummary) => void;
  close: () => void;
}

/** How many refinements the form lists (newest first). */
export const FORM_LIMIT = 12;

/** The rollback form above the composer: recent refinements, newest first. */
export function renderRefineForm(
  records: readonly unknown[],
  actions: IRefineFormActions
): HTMLElement {
  const view = element('div', 'pal-tree pal-refine-form', 'pal-refine-form');
  const header = element('div', 'pal-tree-header');
  const title = element('span', 'pal-tree-title');
  title.textContent = 'Refinements';
  const close = button('Close', 'pal-refine-close');
  close.addEventListener('click', actions.close);
  header.append(title, close);
  const list = element('ol', 'pal-tree-list', 'pal-refine-list');
  const all = records.map(refinementSummary);
  const recent = [...all].reverse().slice(0, FORM_LIMIT);
  if (recent.length === 0) {
    const empty = element('li', 'pal-tree-empty');
    empty.textContent = 'No refinements yet: /refine [instructions] plans one.';
    list.append(empty);
  }
  const byId = new Map(all.map(record => [record.id, record]));
  for (const record of recent) {
    const row = element('li', 'pal-tree-row pal-refine-row', 'pal-refine-row');
    row.dataset.refinementId = record.id;
    row.append(refineRowLabel(record, byId));
    const rollback = button('Rollback', 'pal-refine-rollback');
    rollback.disabled = record.applied === 0 || record.id === '';
    rollback.title = rollback.disabled
      ? 'Nothing was applied: nothing to roll back'
      : 'Revert this refinement’s edits (recorded as a new refinement)';
    rollback.setAttribute('aria-label', `Roll back: ${refinementHeadline(record, byId)}`);
    rollback.addEventListener('click', () => {
      rollback.disabled = true;
      actions.rollback(record);
    });
    row.append(rollback);
    list.append(row);
  }
  view.append(header, list);
  return view;
}

/**
 * What a refinement did, for telling rows and chat lines apart: its summary,
 * or for a rollback the summary and time of the refinement it undid (from
 * `byId`, else the rollback's own `rolled_back`; its id only when neither
 * says, an old record of one not listed).
 */
export function refinementHeadline(
  record: IRefinementSummary,
  byId: ReadonlyMap<string, IRefinementSummary> = new Map(),
  now: Date = new Date()
): string {
  if (record.rollbackOf) {
    const target = byId.get(record.rollbackOf);
    const summary = target?.summary || record.rolledBackSummary;
    const when = formatComposed(target?.createdAt || record.rolledBackAt || null, now)?.short;
    const from = when ? ` from ${when}` : '';
    if (summary) {
      return `Rollback of “${summary}”${from}`;
    }
    return from ? `Rollback of the refinement${from}` : `Rollback of ${shortenId(record.rollbackOf)}`;
  }
  return record.summary || 'No summary';
}

/** The second line of a row: when, what it changed, how many edits applied and were rejected. */
export function refinementDetails(record: IRefinementSummary, now: Date = new Date()): string {
  const when = formatComposed(record.createdAt || null, now)?.short ?? '';
  const changed = record.changes.length
    ? shortenText(record.changes.join(', '), 60)
    : 'nothing changed';
  const counts = `${record.applied} applied, ${record.rejected} rejected`;
  const scope = record.scope === 'global' ? 'global' : '';
  const error = record.error ? `error: ${shortenText(record.error, 60)}` : '';
  return [when, scope, changed, counts, error].filter(Boolean).join(' · ');
}

/**
 * A row's label in the rollback form: the headline (wrapping, long ones
 * expandable), the details under it; the id and everything else in the
 * tooltip.
 */
function refineRowLabel(
  record: IRefinementSummary,
  byId: ReadonlyMap<string, IRefinementSummary>
): HTMLElement {
  const label = element('span', 'pal-tree-label pal-refine-label', 'pal-refine-label');
  const headline = refinementHeadline(record, byId);
  const what = element('span', 'pal-refine-what', 'pal-refine-what');
  what.append(expandable(shortenText(headline), headline));
  const details = element('span', 'pal-refine-details', 'pal-refine-details');
  details.textContent = refinementDetails(record);
  label.append(what, details);
  label.title = [
    headline,
    refinementDetails(record),
    refinementIds(record),
    record.createdAt && `created ${record.createdAt}`,
    record.trigger && `trigger ${record.trigger}`,
    record.changes.length ? `changed: ${record.changes.join(', ')}` : '',
    ...record.rejections.map(reason => `rejected: ${reason}`)
  ]
    .filter(Boolean)
    .join('\n');
  return label;
}
