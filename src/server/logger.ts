/** Structured JSON logs (pino). Secrets are redacted by path as a second line of defence. */
import { pino, type DestinationStream, type Logger } from 'pino';

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

/** Creates the process logger at `level`, writing to `destination` (default stdout; tests capture lines). */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, redact: { paths: REDACT, censor: '[redacted]' } };
  return destination === undefined ? pino(options) : pino(options, destination);
}
