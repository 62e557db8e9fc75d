/** A JWT's claims, read in the page and in the stream hub alike (no verifying: the server does that). */

/** The claims of a JWT, unverified (the server verifies; the console only shows and schedules). */
export function tokenClaims(token: string): { iss?: string; exp?: number; aud?: string | string[] } | null {
  const part = token.split('.')[1];
  if (part === undefined) return null;
  try {
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(part.length / 4) * 4, '='));
    const claims = JSON.parse(json) as unknown;
    return typeof claims === 'object' && claims !== null ? (claims as { iss?: string; exp?: number }) : null;
  } catch {
    return null;
  }
}
