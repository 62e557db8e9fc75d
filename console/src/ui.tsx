/**
 * Shared pieces of the views: times (relative and absolute), state badges,
 * the loading / empty / error states, typed mutation errors in words, field
 * lists and pagers.
 */
import { useEffect, useLayoutEffect, useRef, useState, type ReactNode, type RefObject } from 'react';
import type { CombinedError } from 'urql';

/** Whether `value` is one of the values of a generated enum object (its keys are PascalCase, its values the schema's names). */
export function isValueOf<E extends Record<string, string>>(enumObject: E, value: string): value is E[keyof E] {
  return (Object.values(enumObject) as string[]).includes(value);
}

/** Re-renders every `ms` (relative times stay true). */
export function useNow(ms = 15_000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['year', 365 * 86_400_000],
  ['month', 30 * 86_400_000],
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1_000],
];
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const absolute = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
/** In a table's cell: no year, no seconds (the tooltip has the exact instant), so a row of times fits 1 200 px. */
const compactAbsolute = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

/** "3 min ago" / "in 2 hr" for `iso` as seen at `now`. */
export function relativeTime(iso: string, now: number): string {
  const delta = new Date(iso).getTime() - now;
  if (Math.abs(delta) < 5_000) return 'now';
  for (const [unit, size] of UNITS) {
    if (Math.abs(delta) >= size || unit === 'second') return relative.format(Math.round(delta / size), unit);
  }
  return iso;
}

/** A time: relative, with the absolute time beside it (and in full in the tooltip). */
export function Time({ value, empty = '—', compact = false }: { value: string | null | undefined; empty?: string; compact?: boolean }) {
  const now = useNow();
  if (value === null || value === undefined) return <span className="muted">{empty}</span>;
  const date = new Date(value);
  return (
    <time dateTime={value} title={date.toISOString()} className="time">
      <span className="rel">{relativeTime(value, now)}</span>
      <span className="abs">{(compact ? compactAbsolute : absolute).format(date)}</span>
    </time>
  );
}

/** A state or status as a coloured badge. */
export function Badge({ value }: { value: string | null | undefined }) {
  if (value === null || value === undefined) return <span className="muted">—</span>;
  return <span className={`badge badge-${value.toLowerCase().replace(/_/g, '-')}`}>{value.replace(/_/g, ' ').toLowerCase()}</span>;
}

/** A DID, shortened in the middle (the whole one in the tooltip, selectable). */
export function DID({ value }: { value: string | null | undefined }) {
  if (value === null || value === undefined) return <span className="muted">—</span>;
  const short = value.length > 24 ? `${value.slice(0, 14)}…${value.slice(-5)}` : value;
  return (
    <code className="did" title={value}>
      {short}
    </code>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <div className="state state-loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" /> Loading {what}…
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="state state-empty">{children}</div>;
}

/** A failed query, in words (network trouble, a refused request, a masked server error with its request id). */
export function ErrorState({ error, retry }: { error: CombinedError; retry?: () => void }) {
  const first = error.graphQLErrors[0];
  const code = first?.extensions?.code as string | undefined;
  let words: string;
  if (error.networkError !== undefined) words = `Could not reach the server (${error.networkError.message}). It may be restarting.`;
  else if (code === 'RATE_LIMITED') words = 'Too many requests for now: the server asks to slow down. Try again in a minute.';
  else if (code === 'QUERY_COMPLEXITY') words = 'The server refused this view as too costly: narrow the filter or show fewer rows.';
  else if (first?.extensions?.retryable === true) words = `The server is busy (${first.message}). Try again.`;
  else words = first?.message ?? error.message;
  return (
    <div className="state state-error" role="alert">
      <strong>Something went wrong.</strong> {words}
      {code !== undefined && <span className="muted"> ({code})</span>}
      {retry !== undefined && (
        <button type="button" className="link" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** A typed mutation error (`__typename`, `message`), in words an operator can act on. */
export function mutationErrorWords(error: { __typename?: string; message?: string; issues?: { path: string[]; message: string }[] }): string {
  switch (error.__typename) {
    case 'StaleVersionError':
      return 'Someone (a worker or another operator) changed it since this page loaded it. The page now shows its current state: look again, then retry if it still applies.';
    case 'InvalidStateError':
      return `That action does not apply in its current state. ${error.message ?? ''}`;
    case 'ForbiddenError':
      return 'You may see this, but not act on it: only a service principal or its owner may.';
    case 'NotFoundError':
      return 'It no longer exists, or you may not see it.';
    case 'InputValidationError':
      return `Check the input: ${(error.issues ?? []).map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ') || error.message}`;
    case 'InvalidInputError':
      return `Check the input: ${error.message ?? ''}`;
    default:
      return error.message ?? 'The server refused the action.';
  }
}

/** A definition list of label → value. */
export function Fields({ rows }: { rows: [string, ReactNode][] }) {
  return (
    <dl className="fields">
      {rows.map(([label, value]) => (
        <div key={label} className="field">
          <dt>{label}</dt>
          <dd>{value === null || value === undefined || value === '' ? <span className="muted">—</span> : value}</dd>
        </div>
      ))}
    </dl>
  );
}

/** JSON as readable, bounded text. */
export function JSONValue({ value }: { value: unknown }) {
  if (value === null || value === undefined) return <span className="muted">—</span>;
  return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
}

/** "12 operations" / "10 000+ operations" for a connection's total. */
export function total(count: number | undefined, capped: boolean | undefined, noun: string, plural = `${noun}s`): string {
  if (count === undefined) return '';
  return `${count.toLocaleString()}${capped ? '+' : ''} ${count === 1 ? noun : plural}`;
}

/**
 * For a `fold-narrow` table (styles.css: on a phone each row is a block of
 * labelled cells): labels every body cell with its column's heading after
 * each render, so a view's cells need no label of their own. A cell that
 * spans columns or has a label already is left as it is.
 */
export function useFoldLabels(): RefObject<HTMLTableElement | null> {
  const ref = useRef<HTMLTableElement | null>(null);
  useLayoutEffect(() => {
    const table = ref.current;
    if (table === null) return;
    const headings = [...table.querySelectorAll('thead th')].map((th) => (th.textContent ?? '').trim().toLowerCase());
    // The first labelled column is the block's title: on a line of its own, unlabelled.
    const title = headings.findIndex((heading) => heading !== '');
    for (const row of table.querySelectorAll('tbody tr')) {
      [...row.children].forEach((cell, i) => {
        if ((cell as HTMLTableCellElement).colSpan !== 1 || cell.hasAttribute('data-label') || cell.hasAttribute('data-fold-title')) return;
        if (i === title) cell.setAttribute('data-fold-title', '');
        else if (headings[i]) cell.setAttribute('data-label', headings[i]!);
      });
    }
  });
  return ref;
}
