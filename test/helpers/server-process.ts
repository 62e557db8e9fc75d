/**
 * Starts `src/server/main.ts` as a real child process on an ephemeral port
 * and follows its logs. The database and tokens around it: e2e-server.ts.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Absolute, so the server also starts from a working directory outside the repository.
const TSX_LOADER = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
const MAIN = join(ROOT, 'src/server/main.ts');

/** Options of {@link startServerProcess}. */
export interface ServerProcessOptions {
  /** How long to wait for the listening log line. Default: 20 s. */
  timeoutMs?: number;
  /** The server's working directory (where `data/local-key.json` is looked up in development). Default: the repository. */
  cwd?: string;
  /** Arguments of `npm start` (`--demo`). Default: none. */
  args?: readonly string[];
  /**
   * The process's limit of open files, set (with `prlimit`) once it listens:
   * for tests of what a socket flood does at that limit. Start-up itself opens
   * many module files at once. Default: inherited.
   */
  maxOpenFiles?: number;
}

/** One structured (pino) log line of the server. */
export type LogLine = Record<string, unknown> & { level?: number; msg?: string };

/** A started server process. */
export interface ServerProcess {
  /** `http://127.0.0.1:PORT` (no path). */
  origin: string;
  child: ChildProcess;
  /** Every JSON log line so far (stdout), in order. */
  logs: LogLine[];
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Settles when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first log line (already seen or future) that `match` accepts. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** SIGKILLs the process if it still runs; safe to call any number of times. */
  kill(): Promise<void>;
}

/**
 * Starts the server with `env` on top of a minimal environment (PATH, HOME),
 * HOST 127.0.0.1 and PORT 0, and resolves once it logs the URL it listens on.
 * The server must log at `info` or lower for that line to appear.
 * Rejects (and kills the child) if it exits first or takes over `timeoutMs`.
 */
export async function startServerProcess(env: Record<string, string>, options: ServerProcessOptions = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, MAIN, ...(options.args ?? [])], {
    cwd: options.cwd ?? ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      // The tests read the logs as JSON lines, whatever NODE_ENV says.
      LOG_FORMAT: 'json',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  const waiters = new Set<{ match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }>();
  let stderr = '';
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    partial += chunk;
    let newline: number;
    while ((newline = partial.indexOf('\n')) >= 0) {
      const text = partial.slice(0, newline);
      partial = partial.slice(newline + 1);
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        line = { msg: text, unparsed: true };
      }
      logs.push(line);
      for (const waiter of waiters) {
        if (waiter.match(line)) {
          waiters.delete(waiter);
          waiter.resolve(line);
        }
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  // Last resort if the test process ends without its afterAll (a crash, a killed worker).
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      process.off('exit', killOnExit);
      resolve({ code, signal });
    });
  });

  const waitForLog = (match: (line: LogLine) => boolean, timeoutMs = 10_000): Promise<LogLine> => {
    const seen = logs.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise<LogLine>((resolve, reject) => {
      const waiter = { match, resolve: (line: LogLine) => (clearTimeout(timer), resolve(line)) };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        const last = logs.slice(-5).map((line) => line.msg ?? JSON.stringify(line)).join(' | ');
        reject(new Error(`no matching log line within ${timeoutMs} ms; last log lines: ${last || '(none)'}; stderr: ${stderr.trim() || '(empty)'}`));
      }, timeoutMs);
      waiters.add(waiter);
      void exited.then(({ code, signal }) => {
        if (!waiters.delete(waiter)) return;
        clearTimeout(timer);
        reject(new Error(`server exited (code ${code}, signal ${signal}) before the log line; stderr: ${stderr.trim() || '(empty)'}`));
      });
    });
  };

  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };

  try {
    const listening = await waitForLog((line) => line.msg === 'connector store listening' && typeof line.url === 'string', options.timeoutMs ?? 20_000);
    const origin = new URL(listening.url as string).origin;
    if (options.maxOpenFiles !== undefined) execFileSync('prlimit', ['--pid', String(child.pid), `--nofile=${options.maxOpenFiles}`]);
    return { origin, child, logs, stderr: () => stderr, exited, waitForLog, kill };
  } catch (error) {
    await kill();
    throw error;
  }
}
