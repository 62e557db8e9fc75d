/** `npm run keygen`: make an Ed25519 key for a client (a worker, a service) and print its DID. */
import { resolve } from 'node:path';
import { generateLocalKey, writeKeyFile } from '../auth/index.js';
import { failureLine, usageError, wantsHelp, type Command } from './command.js';

export const keygenCommand: Command = {
  summary: 'make an Ed25519 key file for a client and print its DID',
  usage: `usage: npm run -s keygen -- --out <file> [--force]

Generates an Ed25519 key and writes its private JWK to <file> (mode 0600; the
directory is made if missing). A relative <file> is taken from the folder you
ran npm in, also with \`npm --prefix <checkout> run -s keygen -- --out <file>\`
from another folder. Prints the key's DID on stdout: the viewer the
server sees for tokens of this key. For a connector worker or another service,
add the DID to the server's SERVICE_DIDS (comma-separated). Sign tokens with
\`npm run -s token -- --key <file>\` or the client package's
tokenSourceFromKeyFile(<file>). Keep the file secret.

An existing <file> is refused (exit 1) unless --force replaces it.
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(keygenCommand.usage);
      return 0;
    }
    let out: string | undefined;
    let force = false;
    const args = [...io.argv];
    while (args.length > 0) {
      const arg = args.shift()!;
      if (arg === '--force') force = true;
      else if (arg === '--out' || arg.startsWith('--out=')) {
        const value = arg === '--out' ? args.shift() : arg.slice('--out='.length);
        if (value === undefined || value === '' || value.startsWith('-')) return usageError(io, keygenCommand, '--out takes a file name');
        out = value;
      } else return usageError(io, keygenCommand, `unknown argument ${JSON.stringify(arg)}`);
    }
    if (out === undefined) return usageError(io, keygenCommand, '--out <file> is required (where to write the private key)');

    const path = resolve(io.callerCwd ?? io.cwd, out);
    const key = generateLocalKey();
    try {
      await writeKeyFile(path, key, { overwrite: force });
    } catch (error) {
      // A KeyFileError (the file exists) or the file system's own (EACCES, ENOTDIR, …), which names the path.
      io.stderr(failureLine('keygen', error));
      return 1;
    }
    io.stderr(`wrote a new Ed25519 private key to ${path} (mode 0600: keep it secret)\nfor a worker, add its DID to the server's SERVICE_DIDS\n`);
    io.stdout(`${key.did}\n`);
    return 0;
  },
};
