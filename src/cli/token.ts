/** `npm run token`: print a bearer token for the local development key or a key file. */
import { resolve } from 'node:path';
import { DEFAULT_AUDIENCE, DEFAULT_MAX_TOKEN_LIFETIME_SECONDS, LOCAL_KEY_PATH, loadKeyFile, loadOrCreateLocalKey, mintToken, type LocalKey } from '../auth/index.js';
import { failureLine, usageError, wantsHelp, type Command } from './command.js';

export const tokenCommand: Command = {
  summary: 'print a bearer token for the local key or a key file',
  usage: `usage: npm run -s token -- [--key <file>] [--audience <aud>] [--ttl <seconds>]

Prints a bearer token on stdout, signed by the key in <file> (an Ed25519
private JWK, as \`npm run keygen -- --out <file>\` writes it) or, without --key,
by the key in ./${LOCAL_KEY_PATH} of this checkout (created if missing). A
relative <file> is taken from the folder you ran npm in. The key's DID goes to
stderr. --audience is the server's AUTH_AUDIENCE (default: AUTH_AUDIENCE here,
else "${DEFAULT_AUDIENCE}"). --ttl is 1..${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS} seconds (default ${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS}).
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(tokenCommand.usage);
      return 0;
    }
    let ttlSeconds = DEFAULT_MAX_TOKEN_LIFETIME_SECONDS;
    let keyFile: string | undefined;
    let audience = io.env.AUTH_AUDIENCE?.trim() || DEFAULT_AUDIENCE;
    const args = [...io.argv];
    while (args.length > 0) {
      const arg = args.shift()!;
      const option = /^(--ttl|--key|--audience)(?:=(.*))?$/s.exec(arg);
      if (option === null) return usageError(io, tokenCommand, `unknown argument ${JSON.stringify(arg)}`);
      const [, name, inline] = option;
      const value = inline ?? args.shift();
      if (name === '--ttl') {
        const parsed = value === undefined || !/^\d+$/.test(value) ? Number.NaN : Number(value);
        if (!(parsed >= 1 && parsed <= DEFAULT_MAX_TOKEN_LIFETIME_SECONDS)) {
          io.stderr(`--ttl must be a whole number of seconds from 1 to ${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS} (the server refuses longer tokens)\n`);
          return 2;
        }
        ttlSeconds = parsed;
      } else if (value === undefined || value.trim() === '' || (inline === undefined && value.startsWith('-'))) {
        return usageError(io, tokenCommand, `${name} takes a ${name === '--key' ? 'file name' : 'value'}`);
      } else if (name === '--key') keyFile = value;
      else audience = value.trim();
    }

    let key: LocalKey & { created?: boolean };
    let keyPath: string;
    try {
      keyPath = keyFile === undefined ? resolve(io.cwd, LOCAL_KEY_PATH) : resolve(io.callerCwd ?? io.cwd, keyFile);
      key = keyFile === undefined ? await loadOrCreateLocalKey(keyPath) : await loadKeyFile(keyPath);
    } catch (error) {
      io.stderr(failureLine('token', error));
      return 1;
    }
    const now = io.now ?? Date.now();
    const token = await mintToken({ privateKey: key.privateKey, did: key.did, audience, ttlSeconds, now });

    if (key.created === true) io.stderr(`created a new local key in ${keyPath}\n`);
    io.stderr(
      `did: ${key.did}\naudience: ${audience}\nexpires: ${new Date(Math.floor(now / 1_000) * 1_000 + ttlSeconds * 1_000).toISOString()}\n` +
        'send it as: Authorization: Bearer <token>\n',
    );
    io.stdout(`${token}\n`);
    return 0;
  },
};
