/**
 * The command-line entry point: `tsx src/cli/index.ts <command> [args]`, as
 * the package scripts run it (`npm run token`, `keygen`, `demo`, `migrate`,
 * `retention`, `ops`, `schema:check`). Every command has the shape of `command.ts`.
 */
import { callerFolder, USAGE_ERROR, wantsHelp, type Command, type CommandIO } from './command.js';
import { consoleBuildCommand } from './console-build.js';
import { demoCommand } from './demo.js';
import { keygenCommand } from './keygen.js';
import { migrateCommand } from './migrate.js';
import { opsCommand } from './ops.js';
import { retentionCommand } from './retention.js';
import { schemaCheckCommand } from './schema-check.js';
import { tokenCommand } from './token.js';

/** Every command, by the name the package script passes. */
const COMMANDS: Readonly<Record<string, Command>> = {
  token: tokenCommand,
  keygen: keygenCommand,
  demo: demoCommand,
  migrate: migrateCommand,
  retention: retentionCommand,
  ops: opsCommand,
  'console-build': consoleBuildCommand,
  'schema-check': schemaCheckCommand,
};

const USAGE = `usage: tsx src/cli/index.ts <${Object.keys(COMMANDS).join('|')}> [args]   (npm run <command> -- [args])

${Object.entries(COMMANDS)
  .map(([name, command]) => `  ${name.padEnd(15)}${command.summary}`)
  .join('\n')}

Each command answers --help.
`;

/** Runs the command named by the first argument with the rest; returns the exit code. */
async function runCommandLine(io: CommandIO): Promise<number> {
  const [name, ...argv] = io.argv;
  if (name !== undefined && wantsHelp([name])) {
    io.stdout(USAGE);
    return 0;
  }
  const command = name === undefined ? undefined : COMMANDS[name];
  if (command === undefined) {
    io.stderr(`${name === undefined ? '' : `unknown command ${JSON.stringify(name)}\n`}${USAGE}`);
    return USAGE_ERROR;
  }
  return command.run({ ...io, argv });
}

process.exitCode = await runCommandLine({
  argv: process.argv.slice(2),
  env: process.env,
  cwd: process.cwd(),
  callerCwd: callerFolder(process.env, process.cwd()),
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
