/**
 * The development banner: after `npm start` in development, a human-readable
 * note on stderr with the GraphiQL URL, a ready bearer token for the local
 * key (./data/local-key.json; dev-credentials.ts) and a copy-paste curl
 * example, so a new user can query within a minute. Never printed outside
 * NODE_ENV=development.
 *
 * The local key is an ordinary user, not a service principal (unless its DID
 * is listed in SERVICE_DIDS): it sees the rows it owns or called, which is
 * what the demo data is built around (`npm run demo` makes the local key's
 * DID the owner), so the printed token works without service rights.
 */
import type { ServerConfig } from './config.js';
import { loadDevelopmentCredentials, type DevelopmentCredentials } from './dev-credentials.js';

/** What the banner needs. */
export interface DevelopmentBannerInput {
  config: ServerConfig;
  /** The port the server actually listens on (PORT=0 picks one). */
  port: number;
  /** Where ./data/local-key.json is looked up (and created if missing). */
  cwd: string;
  /** The local key, already loaded (main.ts loads it once for GraphiQL too). Default: loaded from `cwd`. */
  credentials?: DevelopmentCredentials;
  /** Issue time of the token, ms epoch. Default `Date.now()`. */
  now?: number;
}

/** Whether `npm start` prints the banner: in development only. */
export function shouldPrintDevelopmentBanner(config: Pick<ServerConfig, 'env'>): boolean {
  return config.env === 'development';
}

/**
 * A URL a browser on this machine can open: a wildcard bind address (0.0.0.0,
 * ::) is not one, so the loopback address of the same family stands in.
 */
export function browsableBaseURL(host: string, port: number): string {
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' || host === '[::]' ? '::1' : host;
  const bracketed = reachable.includes(':') && !reachable.startsWith('[') ? `[${reachable}]` : reachable;
  return `http://${bracketed}:${port}`;
}

/** The banner text (it carries a bearer token: stderr only, never the JSON log). */
export async function developmentBanner(input: DevelopmentBannerInput): Promise<string> {
  const { config } = input;
  const now = input.now ?? Date.now();
  const key = input.credentials ?? (await loadDevelopmentCredentials(config, input.cwd));
  const { keyPath, ttlSeconds } = key;
  const token = await key.mintToken(now);
  const expires = new Date(Math.floor(now / 1_000) * 1_000 + ttlSeconds * 1_000).toISOString();
  const endpoint = `${browsableBaseURL(config.host, input.port)}/graphql`;
  const isService = config.auth.serviceDIDs.has(key.did);
  const query = JSON.stringify({ query: '{ serverInfo { viewerDID viewerIsService } operationCounts { state count } }' });
  const rule = '─'.repeat(72);

  return [
    rule,
    ' Connector store is running (NODE_ENV=development)',
    '',
    config.graphiql ? ` GraphiQL:   ${endpoint}` : ` GraphQL:    ${endpoint}   (GraphiQL is off: GRAPHIQL=false)`,
    ...(config.console ? [` Console:    ${browsableBaseURL(config.host, input.port)}/console/   (signs in as the local key from this machine)`] : []),
    ` Viewer:     ${key.did}`,
    `             the local key in ${keyPath}${key.created ? ' (just created)' : ''};`,
    isService
      ? '             listed in SERVICE_DIDS: a service principal, sees every owner’s rows'
      : '             not a service principal: sees what it owns or called (add it to SERVICE_DIDS to see all)',
    ` Token:      valid until ${expires} (aud "${config.auth.audience}"); npm run -s token mints a fresh one`,
    '',
    ...(config.graphiql
      ? [
          ' GraphiQL opened from this machine has a fresh token in "Headers" (bottom left)',
          ' and an example query ready; from elsewhere, paste under "Headers":',
          '',
          `   {"Authorization": "Bearer ${token}"}`,
          '',
        ]
      : []),
    ' From a shell:',
    '',
    `   TOKEN=${token}`,
    `   curl -s ${endpoint} \\`,
    "     -H 'content-type: application/json' \\",
    '     -H "authorization: Bearer $TOKEN" \\',
    `     --data '${query}'`,
    '',
    ' No data yet? `npm run demo` (or `npm start -- --demo`) adds a demo set owned by this key.',
    rule,
    '',
  ].join('\n');
}

/**
 * The banner's essential lines (where the console and GraphiQL are, how to
 * get a token), without a token: printed again once the first requests have
 * scrolled the banner away ({@link createBannerReminder}).
 */
export function bannerReminder(config: Pick<ServerConfig, 'host' | 'graphiql' | 'console'>, port: number): string {
  const base = browsableBaseURL(config.host, port);
  const rule = '─'.repeat(72);
  return [
    rule,
    ...(config.console ? [` Console:    ${base}/console/   (signs in as the local key from this machine)`] : []),
    config.graphiql ? ` GraphiQL:   ${base}/graphql` : ` GraphQL:    ${base}/graphql`,
    ' Token:      npm run -s token   (the full banner is above the first request lines)',
    rule,
    '',
  ].join('\n');
}

/** What {@link createBannerReminder} needs. */
export interface BannerReminderOptions {
  /** Writes the reminder (stderr, where the banner went). */
  print: (text: string) => void;
  /** A burst has ended after this long without a request. Default: 2 000 ms. */
  quietMs?: number;
  /** Printed after this many request lines even if they keep coming (a worker polling). Default: 40. */
  maxRequests?: number;
}

/** The reminder's switch: the request log's lines go to `noteRequest`; `arm` gives it the text once the banner is out. */
export interface BannerReminder {
  noteRequest(): void;
  arm(text: string): void;
  stop(): void;
}

/**
 * Prints the banner's reminder once: when the first burst of requests has
 * ended (`quietMs` without one) or after `maxRequests` request lines,
 * whichever comes first; never before `arm`, never twice.
 */
export function createBannerReminder({ print, quietMs = 2_000, maxRequests = 40 }: BannerReminderOptions): BannerReminder {
  let text: string | undefined;
  let requests = 0;
  let done = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const fire = () => {
    if (done || text === undefined || requests === 0) return;
    done = true;
    if (timer !== undefined) clearTimeout(timer);
    print(text);
  };
  return {
    noteRequest: () => {
      if (done) return;
      requests++;
      if (requests >= maxRequests) return fire();
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(fire, quietMs);
      // Never what keeps the process alive.
      timer.unref();
    },
    arm: (armed) => {
      text = armed;
    },
    stop: () => {
      done = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
