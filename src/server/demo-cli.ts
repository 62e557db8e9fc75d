/** Entry point of `npm run demo` (`tsx src/server/demo-cli.ts`); see demo-command.ts. */
import { runDemoCommand } from './demo-command.js';

process.exitCode = await runDemoCommand({
  argv: process.argv.slice(2),
  env: process.env,
  cwd: process.cwd(),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
