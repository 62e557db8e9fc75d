/**
 * A small History-API router: the console's paths live under /console/ (the
 * server answers index.html for each), its filters and page cursors in the
 * query string, so a view can be bookmarked, reloaded and shared.
 */
import { useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from 'react';

/** Where the console is mounted. */
export const BASE = '/console';

const listeners = new Set<() => void>();
const notify = () => {
  for (const listener of listeners) listener();
};
window.addEventListener('popstate', notify);

function subscribe(listener: () => void) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
const snapshot = () => location.pathname + location.search;

/** The current route: path under the base (`/operations/abc`), and the query parameters. */
export interface Route {
  path: string;
  params: URLSearchParams;
}

/** The current route; re-renders on every navigation. */
export function useRoute(): Route {
  const href = useSyncExternalStore(subscribe, snapshot);
  const url = new URL(href, location.origin);
  const path = url.pathname.startsWith(BASE) ? url.pathname.slice(BASE.length) || '/' : '/';
  return { path, params: url.searchParams };
}

/** Goes to `to` (a path under the base, with its query), adding a history entry unless `replace`. */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const href = BASE + to;
  if (href === snapshot()) return;
  if (options.replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  window.scrollTo(0, 0);
  notify();
}

/** `to` with the query parameters `params` (empty and undefined values left out). */
export function withParams(path: string, params: Record<string, string | readonly string[] | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    for (const one of typeof value === 'string' ? [value] : value) if (one !== '') search.append(name, one);
  }
  const query = search.toString();
  return query === '' ? path : `${path}?${query}`;
}

/** The query parameters of `params` but `drop`, by name, as {@link withParams} takes them. */
export function keepParams(params: URLSearchParams, ...drop: string[]): Record<string, string[]> {
  const kept: Record<string, string[]> = {};
  for (const [name, value] of params) if (!drop.includes(name)) (kept[name] ??= []).push(value);
  return kept;
}

/** A link inside the console: a real `<a href>` (open in a new tab works), navigated in place on a plain click. */
export function Link({ to, ...rest }: { to: string } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    rest.onClick?.(event);
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return <a {...rest} href={BASE + to} onClick={onClick} />;
}
