/**
 * The one shape of every command-line tool: a function of its I/O that
 * returns the exit code. Tests call it directly with captured I/O;
 * `src/cli/index.ts` runs it as the process.
 */

/** Where a command reads and writes; the real process in `npm run <command>`. */
export interface CommandIO {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** The clock, in ms since the epoch. Default: `Date.now()`. */
  now?: number;
}

/** A command-line tool: 0 on success, 1 when its work failed, 2 on a usage error. */
export interface Command {
  /** What it does, in one line (the command list of `tsx src/cli/index.ts --help`). */
  summary: string;
  /** Printed for `-h` / `--help` and after a usage error. */
  usage: string;
  run(io: CommandIO): Promise<number>;
}

/** Exit code of a usage error. */
export const USAGE_ERROR = 2;

/** Whether the arguments ask for help. */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.some((arg) => arg === '-h' || arg === '--help');
}

/** Reports a usage error on stderr (the message, then the usage) and returns its exit code. */
export function usageError(io: CommandIO, command: Command, message: string): number {
  io.stderr(`${message}\n${command.usage}`);
  return USAGE_ERROR;
}

/** One line for a failure: the message of an Error, never a stack trace. */
export function failureLine(name: string, error: unknown): string {
  return `${name}: ${error instanceof Error ? error.message : String(error)}\n`;
}
