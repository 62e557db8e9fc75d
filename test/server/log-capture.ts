/**
 * A pino destination that keeps every line in memory, so tests can read what
 * the real logger (with its redaction) wrote.
 */
import { createLogger, type Logger } from '../../src/server/logger.js';

/** Captured log output and a logger writing into it. */
export interface CapturedLogs {
  logger: Logger;
  /** Every raw line written so far (JSON text). */
  readonly text: string;
  /** Every line parsed. */
  entries(): Record<string, any>[];
}

/** A logger at `level` whose output stays in memory. */
export function captureLogs(level = 'debug'): CapturedLogs {
  const lines: string[] = [];
  const logger = createLogger(level, { write: (line: string) => void lines.push(line) });
  return {
    logger,
    get text() {
      return lines.join('');
    },
    entries: () => lines.join('').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, any>),
  };
}
