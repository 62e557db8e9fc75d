/**
 * The command-line entry point: `tsx src/cli/index.ts <command> [args]`, as
 * the package scripts run it (`npm run token`, `demo`, `migrate`,
 * `retention`, `ops`). Every command has the shape of `command.ts`.
 */
import { type Command, type CommandIO } from './command.js';
import { consoleBuildCommand } from './console-build.js';
import { demoCommand } from './demo.js';
import { migrateCommand } from './migrate.js';
import { opsCommand } from './ops.js';
import { retentionCommand } from './retention.js';
import { tokenCommand } from './token.js';

/** Every command, by the name the package script passes. */
const COMMANDS: Readonly<Record<string, Command>> = {
  token: tokenCommand,
  demo: demoCommand,
  migrate: migrateCommand,
  retention: retentionCommand,
  ops: opsCommand,
  'console-build': consoleBuildCommand,
};

/** Runs the command named by the first argument with the rest; returns the exit code. */
async function runCommandLine(io: CommandIO): Promise<number> {
  const [name, ...argv] = io.argv;
  const command = name === undefined ? undefined : COMMANDS[name];
  if (command === undefined) {
    io.stderr(`usage: tsx src/cli/index.ts <${Object.keys(COMMANDS).join('|')}> [args]\n`);
    return 2;
  }
  return command.run({ ...io, argv });
}

process.exitCode = await runCommandLine({
  argv: process.argv.slice(2),
  env: process.env,
  cwd: process.cwd(),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
