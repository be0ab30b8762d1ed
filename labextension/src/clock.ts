/** Times as the panel shows them (a message's compose time, a refinement's, a snapshot's). */

/**
 * A compose time for the message header: the time of day when it is from
 * today, with the date otherwise; null when the text is not a date.
 */
export function formatComposed(
  iso: string | null,
  now: Date = new Date()
): { short: string; full: string } | null {
  if (!iso) {
    return null;
  }
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return null;
  }
  const time: Intl.DateTimeFormatOptions = { hour: '2-digit', minute: '2-digit' };
  const sameDay = date.toDateString() === now.toDateString();
  return {
    short: sameDay
      ? date.toLocaleTimeString(undefined, time)
      : date.toLocaleString(undefined, { month: 'short', day: 'numeric', ...time }),
    full: date.toLocaleString()
  };
}
