/**
 * Who the console is signed in as, and the bearer token of every request.
 * Three ways in (docs/console.md): the development key (a loopback page of a
 * development server gets a fresh token from POST /console/dev-token, no
 * pasting), a pasted token, or a private key (an Ed25519 JWK, the format of
 * data/local-key.json) from which the page mints its own tokens with
 * client/token.ts and renews them before they expire. Tokens are kept only
 * in sessionStorage (gone with the tab); a key only in memory (gone with a
 * reload, when its last token still serves until it expires).
 */
import { createTokenSource, type TokenKey } from '../../client/token';
import { fetchDevelopmentToken, SESSION_STORAGE_KEY, takeEarlyDevelopmentToken } from './boot';
import { tokenClaims } from './jwt';

const STORAGE_KEY = SESSION_STORAGE_KEY;
/** Renew a development token this long before it expires. */
const RENEW_BEFORE_MS = 60_000;

/** Who the console acts as, from `serverInfo`: what decides which actions it offers (the server decides what they may do). */
export interface Viewer {
  did: string | null;
  isService: boolean;
}

/** How the current token came. */
export type SessionSource = 'development key' | 'pasted token' | 'private key';

/** What sessionStorage keeps. */
interface StoredSession {
  token: string;
  source: SessionSource;
  /** ms epoch, from the token's `exp`. */
  expiresAt: number | null;
}

/** A signed-in console: hands out a valid token for each request. */
export interface Session {
  source: SessionSource;
  /** The token's issuer (the viewer's DID), from its claims. */
  did: string | null;
  /** A token to send now (renewed first when about to expire and renewable). */
  getToken(): Promise<string>;
  /** When the current token expires (ms epoch), if it says. */
  expiresAt(): number | null;
}

export { tokenClaims } from './jwt';

function store(token: string, source: SessionSource): StoredSession {
  const exp = tokenClaims(token)?.exp;
  const stored: StoredSession = { token, source, expiresAt: typeof exp === 'number' ? exp * 1000 : null };
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(stored));
  return stored;
}

/** Forgets the token (sign out, or the server refused it). */
export function clearStoredSession(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

/**
 * The development token: the one boot.ts asked for as the page loaded
 * (once), else a fresh request. A stored session that turned out unusable
 * asks afresh.
 */
export function developmentToken(): Promise<string | null> {
  return takeEarlyDevelopmentToken() ?? fetchDevelopmentToken();
}

function fromStored(stored: StoredSession): Session {
  let current = stored;
  let renewing: Promise<string> | null = null;
  return {
    source: current.source,
    did: tokenClaims(current.token)?.iss ?? null,
    expiresAt: () => current.expiresAt,
    getToken: async () => {
      const due = current.expiresAt !== null && current.expiresAt - Date.now() < RENEW_BEFORE_MS;
      if (!due || current.source !== 'development key') return current.token;
      renewing ??= fetchDevelopmentToken()
        .then((token) => {
          if (token !== null) current = store(token, 'development key');
          return current.token;
        })
        .finally(() => {
          renewing = null;
        });
      return renewing;
    },
  };
}

/** The session this tab already has (sessionStorage), if its token has not expired. */
export function restoreSession(): Session | null {
  const raw = sessionStorage.getItem(STORAGE_KEY);
  if (raw === null) return null;
  try {
    const stored = JSON.parse(raw) as StoredSession;
    if (typeof stored.token !== 'string') return null;
    if (stored.expiresAt !== null && stored.expiresAt <= Date.now() && stored.source !== 'development key') return null;
    return fromStored(stored);
  } catch {
    return null;
  }
}

/** Signs in with a token (pasted, or the development key's). */
export function sessionFromToken(token: string, source: Exclude<SessionSource, 'private key'>): Session {
  return fromStored(store(token.trim().replace(/^Bearer\s+/i, ''), source));
}

/** Signs in with a private key: tokens of `lifetimeSeconds` minted here for `audience`, renewed a minute before they expire. */
export async function sessionFromKey(key: TokenKey, audience: string, lifetimeSeconds = 900): Promise<Session> {
  const tokens = createTokenSource({ key, audience, lifetimeSeconds, renewBeforeSeconds: 60 });
  const first = await tokens.getToken();
  let stored = store(first, 'private key');
  return {
    source: 'private key',
    did: tokenClaims(first)?.iss ?? null,
    expiresAt: () => stored.expiresAt,
    getToken: async () => {
      const token = await tokens.getToken();
      if (token !== stored.token) stored = store(token, 'private key');
      return token;
    },
  };
}
