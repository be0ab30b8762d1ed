/**
 * Long texts in the chat (refinement summaries, ids) shown shortened, with
 * the whole text one click away (docs/pairing.md section 6).
 */
import { element } from './dom';

/** Characters a summary keeps before it is cut. */
export const SUMMARY_LIMIT = 80;
/** Ids longer than this show their prefix and their last characters. */
export const ID_LIMIT = 14;
const ID_TAIL = 6;

/** `text` cut at a word boundary to at most `limit` characters, with "…". */
export function shortenText(text: string, limit = SUMMARY_LIMIT): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= limit) {
    return flat;
  }
  const cut = flat.slice(0, limit - 1);
  const space = cut.lastIndexOf(' ');
  const head = space > limit * 0.6 ? cut.slice(0, space) : cut;
  return `${head.replace(/[\s.,;:·-]+$/, '')}…`;
}

/**
 * A long id as "prefix_…tail" (refine_20261130110000123 → refine_…000123):
 * the prefix says what it is, the tail tells ids of one session apart.
 */
export function shortenId(id: string): string {
  if (id.length <= ID_LIMIT) {
    return id;
  }
  const underscore = id.indexOf('_');
  const prefix = underscore > 0 && underscore < ID_LIMIT - ID_TAIL ? id.slice(0, underscore + 1) : '';
  return `${prefix}…${id.slice(-ID_TAIL)}`;
}

/**
 * `full` as a disclosure when `short` differs: a `<details>` whose summary
 * shows the short text and whose body the whole (keyboard and screen
 * readers get expand/collapse from the element itself). Equal texts give a
 * plain span.
 */
export function expandable(short: string, full: string, className = ''): HTMLElement {
  if (short === full) {
    return element('span', `pal-expandable-text ${className}`.trim(), undefined, full);
  }
  const details = element('details', `pal-expandable ${className}`.trim(), 'pal-expandable');
  const summary = element('summary', 'pal-expandable-summary');
  summary.title = 'Show the whole text';
  summary.append(element('span', 'pal-expandable-short', undefined, short));
  const body = element('span', 'pal-expandable-full', 'pal-expandable-full', full);
  details.append(summary, body);
  return details;
}
