/**
 * JSON columns are text. Drivers (or a result plugin) may hand them back
 * already parsed, so decoding accepts both forms.
 */

/** JSON value as stored in a text column; `null`/`undefined` stay SQL NULL. */
export function encodeJSONColumn(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

/** Reads a JSON text column whether the driver returned a string or a parsed value. */
export function decodeJSONColumn<T = unknown>(value: unknown): T | null {
  if (value === null || value === undefined) return null;
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}
