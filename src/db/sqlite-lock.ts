/**
 * One server per SQLite file. SQLite's own locks keep the data safe with two
 * processes, but the change feed of an embedded database stays in its process,
 * so a second server on the same file would serve subscribers that silently
 * miss the first one's changes. A server therefore holds a lock file beside
 * the database (`<file>.server.lock`, its pid inside) and a second one refuses
 * to start, naming the first. A lock whose process is gone is taken over.
 * Command-line tools (migrate, demo, retention) do not take it.
 */
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Thrown when another live process serves the SQLite file. */
export class DatabaseInUseError extends Error {
  readonly code = 'DATABASE_IN_USE';
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseInUseError';
  }
}

/** A held lock; `release` removes the lock file (idempotent). */
export interface ServerLock {
  release(): void;
}

/** Whether process `pid` still runs (on this machine). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the server lock of the SQLite file at `path`, or throws {@link DatabaseInUseError}. */
export function acquireSQLiteServerLock(path: string): ServerLock {
  const lockPath = `${path}.server.lock`;
  // On a fresh machine the data directory does not exist yet (the database is created after this).
  mkdirSync(dirname(resolve(path)), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lockPath, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      let released = false;
      return {
        release: () => {
          if (released) return;
          released = true;
          try {
            unlinkSync(lockPath);
          } catch {
            // Already gone: nothing to release.
          }
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number.parseInt(readFileSync(lockPath, 'utf8'), 10);
      if (Number.isSafeInteger(holder) && holder !== process.pid && processAlive(holder)) {
        throw new DatabaseInUseError(
          `another server (pid ${holder}) is already serving ${path}: an embedded SQLite database serves one process; use PostgreSQL (DATABASE_URL=postgres://…) for several replicas`,
        );
      }
      // A crashed server's lock: take it over.
      unlinkSync(lockPath);
    }
  }
  throw new DatabaseInUseError(`could not take the server lock of ${path}`);
}
