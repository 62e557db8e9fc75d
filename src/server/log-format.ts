/**
 * Logs a person reads in a terminal (`LOG_FORMAT=pretty`, the default in
 * development; issue 39 item 4): one line per log entry, so one line per
 * request — `12:04:05.123 INFO  POST Dash 200 3.2 ms` — where pino-pretty
 * printed each field on a line of its own (about 9 per request). Other
 * entries are their message, then their fields as `key=value`; an error's
 * stack follows on its own lines. Production's JSON lines are unchanged
 * (logger.ts); this formats them after pino wrote them, redaction done.
 */
import type { DestinationStream } from 'pino';

/** pino's numeric levels, as printed. */
const LEVELS: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** ANSI colours of the levels worth noticing. */
const COLOURS: Readonly<Record<number, string>> = { 40: '\x1b[33m', 50: '\x1b[31m', 60: '\x1b[31m' };
const DIM = '\x1b[2m';
const RESET = '\x1b[0m';

/** Fields every entry has, or that the line already shows. */
const SHOWN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'component', 'err']);
/** A field's value is cut to this many characters (a whole document or payload would take the screen). */
const MAX_VALUE_CHARS = 200;

const two = (n: number) => String(n).padStart(2, '0');

/** `HH:MM:ss.mmm` in local time. */
function clock(ms: number): string {
  const at = new Date(ms);
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
}

function shownValue(value: unknown): string {
  const text = typeof value === 'string' ? (/^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)) : JSON.stringify(value);
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS)}…` : text;
}

/** The request log's entry (request-log.ts) in words: method, operation (or path), status, milliseconds. */
function requestText(entry: Record<string, unknown>): string {
  const what = typeof entry.operationName === 'string' ? entry.operationName : String(entry.path ?? '');
  const slow = entry.msg === 'slow request' ? ' (slow)' : '';
  const viewer = entry.viewer === 'anonymous' || entry.viewer === 'none' ? ` ${entry.viewer}` : '';
  return `${String(entry.method)} ${what} ${String(entry.status)} ${String(entry.durationMs)} ms${slow}${viewer}`;
}

/** One entry (a parsed pino JSON line) as the text a terminal shows, without its trailing newline. */
export function formatLogEntry(entry: Record<string, unknown>, options: { colours?: boolean } = {}): string {
  const level = typeof entry.level === 'number' ? entry.level : 30;
  const name = (LEVELS[level] ?? String(level)).padEnd(5);
  const colour = options.colours === true ? (COLOURS[level] ?? '') : '';
  const time = typeof entry.time === 'number' ? clock(entry.time) : '';
  const head = options.colours === true ? `${DIM}${time}${RESET} ${colour}${name}${colour === '' ? '' : RESET}` : `${time} ${name}`;
  if (entry.component === 'http' && 'method' in entry && 'status' in entry) return `${head} ${requestText(entry)}`;
  const component = typeof entry.component === 'string' ? `[${entry.component}] ` : '';
  const fields = Object.entries(entry)
    .filter(([key, value]) => !SHOWN.has(key) && value !== undefined)
    .map(([key, value]) => `${key}=${shownValue(value)}`);
  const err = entry.err as { message?: unknown; stack?: unknown } | undefined;
  const error = err === undefined ? '' : `: ${String(err.message ?? '')}`;
  const stack = typeof err?.stack === 'string' ? `\n${err.stack.split('\n').slice(1).join('\n')}` : '';
  return `${head} ${component}${String(entry.msg ?? '')}${error}${fields.length > 0 ? ` ${fields.join(' ')}` : ''}${stack}`;
}

/** What {@link prettyDestination} needs. */
export interface PrettyDestinationOptions {
  /** Where the text goes. Default: standard output, written at once (nothing is lost at exit). */
  write?: (text: string) => void;
  /** ANSI colours for warnings and errors. Default: whether standard output is a terminal. */
  colours?: boolean;
  /** Told of each entry after it was written (the banner reminder counts requests; dev-banner.ts). */
  onEntry?: (entry: Record<string, unknown>) => void;
}

/** A pino destination writing each JSON line as {@link formatLogEntry}'s one line. */
export function prettyDestination(options: PrettyDestinationOptions = {}): DestinationStream {
  const write = options.write ?? ((text: string) => void process.stdout.write(text));
  const colours = options.colours ?? process.stdout.isTTY === true;
  return {
    write(line: string) {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        write(line);
        return;
      }
      write(`${formatLogEntry(entry, { colours })}\n`);
      options.onEntry?.(entry);
    },
  };
}
