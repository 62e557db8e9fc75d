/** `npm run token`: print a bearer token for the local development key. */
import { resolve } from 'node:path';
import { DEFAULT_AUDIENCE, DEFAULT_MAX_TOKEN_LIFETIME_SECONDS, LOCAL_KEY_PATH, loadOrCreateLocalKey, mintToken } from '../auth/index.js';
import { usageError, wantsHelp, type Command } from './command.js';

export const tokenCommand: Command = {
  summary: 'print a bearer token for the local key',
  usage: `usage: npm run -s token -- [--ttl <seconds>]

Prints a bearer token on stdout for the key in ./${LOCAL_KEY_PATH} (created if
missing), for the audience in AUTH_AUDIENCE (default "${DEFAULT_AUDIENCE}").
The key's DID goes to stderr. --ttl is 1..${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS} seconds (default ${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS}).
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(tokenCommand.usage);
      return 0;
    }
    let ttlSeconds = DEFAULT_MAX_TOKEN_LIFETIME_SECONDS;
    const args = [...io.argv];
    while (args.length > 0) {
      const arg = args.shift()!;
      let value: string | undefined;
      if (arg === '--ttl') value = args.shift();
      else if (arg.startsWith('--ttl=')) value = arg.slice('--ttl='.length);
      else return usageError(io, tokenCommand, `unknown argument ${JSON.stringify(arg)}`);
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
  },
};
