/**
 * `npm run demo`: fill the configured database (default: the embedded SQLite
 * file) with the demo set, owned by the local key's DID so the token
 * `npm start` prints in development sees it.
 */
import { LOCAL_KEY_PATH } from '../auth/index.js';
import { assertDemoAllowed, seedLocalDemo } from '../demo/seed.js';
import { failureLine, usageError, wantsHelp, type Command } from './command.js';
import { withConfiguredDatabase } from './database.js';

export const demoCommand: Command = {
  summary: 'fill the configured database with demo data',
  usage: `usage: npm run demo

Fills the database named by DATABASE_URL (default: the embedded SQLite file
./data/connector-store.sqlite) with demo data owned by the local key in
./${LOCAL_KEY_PATH} (created if missing). Running it again adds nothing.
Then: npm start, and use the token it prints.
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(demoCommand.usage);
      return 0;
    }
    if (io.argv.length > 0) return usageError(io, demoCommand, `unknown argument ${JSON.stringify(io.argv[0])}`);
    try {
      return await withConfiguredDatabase(
        io.env,
        async (database) => {
          const result = await seedLocalDemo(database, io.cwd);
          io.stdout(
            `demo data in ${database.target.display}: ${result.created} items written, ${result.existing} already there\n` +
              `owner: ${result.ownerDID} (the key in ${result.keyPath})\n` +
              'next: npm start, then use the bearer token it prints (or npm run -s token)\n',
          );
          return 0;
        },
        { poolMax: 2, before: (config) => assertDemoAllowed(config.env) },
      );
    } catch (error) {
      io.stderr(failureLine('demo failed', error));
      return 1;
    }
  },
};
