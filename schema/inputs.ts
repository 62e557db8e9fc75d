/** Field-level input rules shared by every input type (zod, via the validation plugin). */
import { z } from 'zod';

/** Names: connector, model. */
export const nameInput = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');
/** Free text keys and hashes: idempotency keys, targets, tokens, digests. */
export const textInput = z.string().min(1, 'must not be empty').max(2048, 'must be at most 2048 characters');
/** Lease lengths: 1 s to 1 h. */
export const leaseMsInput = z.number().int().min(1_000, 'must be at least 1000 ms').max(3_600_000, 'must be at most 1 hour');
/** Versions and generations: non-negative integers. */
export const versionInput = z.number().int().min(0, 'must not be negative');
/** Local document ids. */
export const documentIDInput = z.string().min(1, 'must not be empty').max(512, 'must be at most 512 characters');

/** Largest JSON input value, serialized. */
export const MAX_JSON_INPUT_BYTES = 256 * 1024;
/** Deepest nesting of a JSON input value (arrays and objects). */
export const MAX_JSON_INPUT_DEPTH = 64;

/**
 * Where a JSON value breaks the bounds: nested deeper than `maxDepth`, or
 * longer than `maxBytes` serialized. Walks iteratively, so hostile nesting
 * cannot overflow the stack here (JSON.stringify later would).
 */
export function jsonBoundsProblem(value: unknown, maxBytes = MAX_JSON_INPUT_BYTES, maxDepth = MAX_JSON_INPUT_DEPTH): string | null {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    if (depth >= maxDepth) return `must be nested at most ${maxDepth} levels deep`;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push([child, depth + 1]);
  }
  return (JSON.stringify(value) ?? '').length > maxBytes ? `must be at most ${maxBytes} bytes as JSON` : null;
}

/** Adds the bounds problem of a JSON value, if any, as the field's issue. */
function withinJSONBounds(value: unknown, context: z.RefinementCtx): void {
  const problem = jsonBoundsProblem(value);
  if (problem !== null) context.addIssue({ code: 'custom', message: problem });
}

/** Any JSON value within {@link MAX_JSON_INPUT_BYTES} and {@link MAX_JSON_INPUT_DEPTH}. */
export const jsonInput = z.unknown().superRefine(withinJSONBounds);

/** A JSON object (field name → value) within the same bounds. */
export const jsonObjectInput = z
  .custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), { message: 'must be a JSON object' })
  .superRefine(withinJSONBounds);

/** Hybrid logical clock stamps and op hashes: opaque, bounded. */
export const hlcInput = z.string().min(1, 'must not be empty').max(128, 'must be at most 128 characters');

/**
 * Where an OAuth provider may send the owner back: `https:`, `http:` only to a
 * loopback host (RFC 8252 §7.3), or a private-use scheme named like a reverse
 * domain (`com.example.app:/callback`, RFC 8252 §7.1). Never `javascript:`,
 * `data:`, `file:` or the like, which a browser would run or open locally.
 */
export const redirectURLInput = z
  .string()
  .max(2048, 'must be at most 2048 characters')
  .refine((value) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return false;
    }
    if (url.protocol === 'https:') return url.hostname !== '';
    if (url.protocol === 'http:') return ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
    return /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/.test(url.protocol);
  }, 'must be an https URL, http to a loopback host, or a reverse-domain app scheme (com.example.app:/callback)');

/** Largest observation payload, decoded. */
export const MAX_PAYLOAD_BYTES = 512 * 1024;

/** Bytes as standard base64 (RFC 4648 §4, padded), at most {@link MAX_PAYLOAD_BYTES} decoded. */
export const base64Input = z
  .string()
  .max(4 * Math.ceil(MAX_PAYLOAD_BYTES / 3), `must be at most ${MAX_PAYLOAD_BYTES} bytes decoded`)
  .regex(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/, 'must be standard padded base64');
