/**
 * The first module the console evaluates (main.tsx imports it before React
 * and the app): on a page with no stored session it asks this server for a
 * development token at once, so that round trip overlaps the evaluation of
 * everything else instead of following it (the cold first table waited on
 * it). It imports nothing, so nothing runs before it.
 */

/** Where session.ts keeps the signed-in session (sessionStorage, this tab only). */
export const SESSION_STORAGE_KEY = 'connector-store-console.session';

/** Asks this server for a token of its development key: null unless it offers one to this page. */
export async function fetchDevelopmentToken(): Promise<string | null> {
  try {
    const response = await fetch('/console/dev-token', { method: 'POST', credentials: 'omit', cache: 'no-store' });
    if (!response.ok) return null;
    const body = (await response.json()) as { available?: boolean; token?: string };
    return body.available === true && typeof body.token === 'string' ? body.token : null;
  } catch {
    return null;
  }
}

/** The token asked for as the page loaded, until the first `takeEarlyDevelopmentToken()` takes it. */
let early: Promise<string | null> | null = sessionStorage.getItem(SESSION_STORAGE_KEY) === null ? fetchDevelopmentToken() : null;

/** The development token asked for at load, once (null when none was asked for, or already taken). */
export function takeEarlyDevelopmentToken(): Promise<string | null> | null {
  const pending = early;
  early = null;
  return pending;
}
