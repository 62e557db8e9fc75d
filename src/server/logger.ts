/** Structured JSON logs (pino). Secrets are redacted by path as a second line of defence. */
import { pino, type Logger } from 'pino';

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

/** Creates the process logger at `level`. */
export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACT, censor: '[redacted]' } });
}
