/** Entry point of `npm run token` (`tsx src/auth/token-cli.ts`); see token-command.ts. */
import { runTokenCommand } from './token-command.js';

process.exitCode = await runTokenCommand({
  argv: process.argv.slice(2),
  env: process.env,
  cwd: process.cwd(),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
