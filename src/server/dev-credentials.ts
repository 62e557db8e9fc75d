/**
 * The local development key (./data/local-key.json) and the bearer tokens it
 * mints for the development conveniences: the banner prints one, and GraphiQL
 * pages carry a fresh one in their request headers. Loaded only when
 * NODE_ENV=development; nothing here is used in production.
 */
import { resolve } from 'node:path';
import { DEFAULT_MAX_TOKEN_LIFETIME_SECONDS, LOCAL_KEY_PATH, loadOrCreateLocalKey, mintToken } from '../auth/index.js';
import type { ServerConfig } from './config.js';

/** The local key, ready to mint tokens for this server's audience. */
export interface DevelopmentCredentials {
  /** The key's did:key: the viewer its tokens authenticate as. */
  did: string;
  /** Absolute path of the key file. */
  keyPath: string;
  /** Whether loading created the key file. */
  created: boolean;
  /** Lifetime of every minted token, in seconds (the longest the server accepts). */
  ttlSeconds: number;
  /** Mints a bearer token for the server's audience, issued at `now` (ms epoch, default `Date.now()`). */
  mintToken(now?: number): Promise<string>;
}

/** Whether the server offers development credentials at all: NODE_ENV=development only. */
export function developmentCredentialsAllowed(config: Pick<ServerConfig, 'env'>): boolean {
  return config.env === 'development';
}

/** Loads the key at `cwd`/data/local-key.json, creating it if missing. */
export async function loadDevelopmentCredentials(config: Pick<ServerConfig, 'auth'>, cwd: string): Promise<DevelopmentCredentials> {
  const keyPath = resolve(cwd, LOCAL_KEY_PATH);
  const key = await loadOrCreateLocalKey(keyPath);
  const ttlSeconds = DEFAULT_MAX_TOKEN_LIFETIME_SECONDS;
  return {
    did: key.did,
    keyPath,
    created: key.created,
    ttlSeconds,
    mintToken: (now = Date.now()) => mintToken({ privateKey: key.privateKey, did: key.did, audience: config.auth.audience, ttlSeconds, now }),
  };
}

/**
 * Whether a request may be handed a development token (GraphiQL's page, the
 * console's sign-in): it came over a loopback connection (node's HTTP server
 * puts `req` in yoga's server context) and names a loopback host, so neither
 * another machine (HOST=0.0.0.0) nor a page whose DNS name was rebound to
 * 127.0.0.1 gets the local key's identity. NODE_ENV is checked apart
 * ({@link developmentCredentialsAllowed}).
 */
export function developmentTokenAllowedFor(request: Request, serverContext: Record<string, unknown> | undefined): boolean {
  const address = (serverContext?.req as { socket?: { remoteAddress?: string } } | undefined)?.socket?.remoteAddress;
  if (address === undefined || !(address === '::1' || /^(::ffff:)?127\./i.test(address))) return false;
  const host = new URL(request.url).hostname;
  return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
