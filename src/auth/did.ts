/** DID syntax (W3C DID Core §3.1), without resolving anything. */

const MAX_DID_LENGTH = 2_048;
// did:<method>:<method-specific-id>, idchar = ALPHA / DIGIT / "." / "-" / "_" / pct-encoded,
// colons allowed inside the id but not at its end. No path, query or fragment.
const DID_SYNTAX = /^did:[a-z0-9]+:(?:(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})*:)*(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})+$/;

/** Whether `value` is a syntactically valid DID (no DID URL parts). */
export function isDID(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_DID_LENGTH && DID_SYNTAX.test(value);
}
