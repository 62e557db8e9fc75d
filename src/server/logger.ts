/** Structured JSON logs (pino). Secrets are redacted by path as a second line of defence. */
import { pino, type DestinationStream, type Logger } from 'pino';
import { prettyDestination } from './log-format.js';

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
 * (default stdout; tests capture lines), or, with `pretty`, one readable line
 * per entry (log-format.ts) to `destination` or stdout, in this thread, so
 * nothing is lost at exit; `onEntry` then hears of each entry written.
 */
export function createLogger(
  level: string,
  destination?: DestinationStream,
  format: 'json' | 'pretty' = 'json',
  onEntry?: (entry: Record<string, unknown>) => void,
): Logger {
  const options = { level, redact: { paths: REDACT, censor: '[redacted]' } };
  if (format === 'pretty') {
    return pino(
      options,
      prettyDestination({
        ...(destination !== undefined && { write: (text: string) => void destination.write(text), colours: false }),
        ...(onEntry !== undefined && { onEntry }),
      }),
    );
  }
  return destination === undefined ? pino(options) : pino(options, destination);
}
