/** `npm run token`: print a bearer token for the local development key. */
import { resolve } from 'node:path';
import { DEFAULT_MAX_TOKEN_LIFETIME_SECONDS } from './bearer-token.js';
import { loadOrCreateLocalKey } from './local-key.js';
import { mintToken } from './mint-token.js';

/** Where the local key lives, relative to the working directory. */
export const LOCAL_KEY_PATH = 'data/local-key.json';
/** Audience used when `AUTH_AUDIENCE` is unset; the server's default too. */
export const DEFAULT_AUDIENCE = 'connector-store';

const USAGE = `usage: npm run -s token -- [--ttl <seconds>]

Prints a bearer token on stdout for the key in ./${LOCAL_KEY_PATH} (created if
missing), for the audience in AUTH_AUDIENCE (default "${DEFAULT_AUDIENCE}").
The key's DID goes to stderr. --ttl is 1..${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS} seconds (default ${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS}).
`;

/** Where the command reads and writes; the real process by default. */
export interface TokenCommandIO {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  now?: number;
}

/** Runs the token command and returns the process exit code. */
export async function runTokenCommand(io: TokenCommandIO): Promise<number> {
  let ttlSeconds = DEFAULT_MAX_TOKEN_LIFETIME_SECONDS;
  const args = [...io.argv];
  while (args.length > 0) {
    const arg = args.shift()!;
    if (arg === '-h' || arg === '--help') {
      io.stdout(USAGE);
      return 0;
    }
    let value: string | undefined;
    if (arg === '--ttl') value = args.shift();
    else if (arg.startsWith('--ttl=')) value = arg.slice('--ttl='.length);
    else {
      io.stderr(`unknown argument ${JSON.stringify(arg)}\n${USAGE}`);
      return 2;
    }
    const parsed = value === undefined || !/^\d+$/.test(value) ? Number.NaN : Number(value);
    if (!(parsed >= 1 && parsed <= DEFAULT_MAX_TOKEN_LIFETIME_SECONDS)) {
      io.stderr(`--ttl must be a whole number of seconds from 1 to ${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS} (the server refuses longer tokens)\n`);
      return 2;
    }
    ttlSeconds = parsed;
  }

  const audience = io.env.AUTH_AUDIENCE?.trim() || DEFAULT_AUDIENCE;
  const keyPath = resolve(io.cwd, LOCAL_KEY_PATH);
  const key = await loadOrCreateLocalKey(keyPath);
  const now = io.now ?? Date.now();
  const token = await mintToken({ privateKey: key.privateKey, did: key.did, audience, ttlSeconds, now });

  if (key.created) io.stderr(`created a new local key in ${keyPath}\n`);
  io.stderr(
    `did: ${key.did}\naudience: ${audience}\nexpires: ${new Date(Math.floor(now / 1_000) * 1_000 + ttlSeconds * 1_000).toISOString()}\n` +
      'send it as: Authorization: Bearer <token>\n',
  );
  io.stdout(`${token}\n`);
  return 0;
}
