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
  /**
   * The folder the user ran the command from, against which the file names
   * they type (`keygen --out`, `token --key`) resolve. npm runs a package
   * script in the package's folder, so `npm run`'s own INIT_CWD (see
   * {@link callerFolder}); default `cwd`.
   */
  callerCwd?: string;
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

/**
 * Where the user was when they ran this command line: npm's `INIT_CWD` when
 * npm runs it as a package script (`npm run keygen`, `npm --prefix <checkout>
 * run keygen`: npm sets it afresh to the folder npm was started in), else the
 * process's `cwd`. An `INIT_CWD` inherited from another script (a test run
 * under `npm test` that starts the CLI itself) is not this command's, so it
 * counts only when npm's current script is this CLI.
 */
export function callerFolder(env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  const initCwd = env.INIT_CWD?.trim();
  return initCwd !== undefined && initCwd !== '' && env.npm_lifecycle_script?.includes('src/cli/index.ts') === true ? initCwd : cwd;
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
