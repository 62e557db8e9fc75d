/** Structured JSON logs (pino). Secrets are redacted by path as a second line of defence. */
import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** Paths that could carry a secret if a caller ever logged a whole object. */
const REDACT = [
  'leaseToken',
  '*.leaseToken',
  'sendMarker',
  '*.sendMarker',
  'codeVerifier',
  '*.codeVerifier',
  'authorization',
  '*.authorization',
  'req.headers.authorization',
];

/**
 * Creates the process logger at `level`, writing JSON lines to `destination`
 * (default stdout; tests capture lines), or `pretty` lines for a terminal
 * (pino-pretty, in this thread, so nothing is lost at exit).
 */
export function createLogger(level: string, destination?: DestinationStream, format: 'json' | 'pretty' = 'json'): Logger {
  const options = { level, redact: { paths: REDACT, censor: '[redacted]' } };
  if (format === 'pretty') return pino(options, pretty({ sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', destination: destination ?? 1 }));
  return destination === undefined ? pino(options) : pino(options, destination);
}
