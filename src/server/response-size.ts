/**
 * Bounds the size of an answer: the cost budget bounds how many fields a
 * request may select, but one field can be large (a JSON result entity), so
 * an execution result over `maxBytes` is replaced. A query's answer becomes a
 * `RESPONSE_TOO_LARGE` refusal (400) asking for a narrower selection or a
 * smaller page: it wrote nothing, so asking again is safe. A mutation's
 * writes have committed by then, so its answer is never a bare refusal
 * (issue 19): it is `RESPONSE_TOO_LARGE` with `committed: true`, `data: null`
 * and, in `extensions.done`, each root field's scalar results (`__typename`,
 * `changed`, `more`, `created`…), the large parts named in `omitted`.
 * The size is measured by a walk that stops as soon as the bound is passed.
 */
import { getOperationAST, GraphQLError, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/** Roughly the JSON length of `value`, or `Infinity` once it passes `limit` (never walks further). */
export function approximateJSONSize(value: unknown, limit: number): number {
  let size = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') size += item.length + 2;
    else if (typeof item === 'number' || typeof item === 'boolean' || item === null || item === undefined) size += 5;
    else if (Array.isArray(item)) {
      size += 2 + item.length;
      for (const child of item) stack.push(child);
    } else if (typeof item === 'object') {
      // for…in, not Object.entries: no array per object (this walk runs on every answer). Answers are
      // plain data objects, whose enumerable keys are all their own.
      for (const key in item) {
        size += key.length + 4;
        stack.push((item as Record<string, unknown>)[key]);
      }
    }
    if (size > limit) return Number.POSITIVE_INFINITY;
  }
  return size;
}

/** Longest string a committed mutation's summary repeats. */
const SUMMARY_STRING_CHARS = 200;

const isScalar = (value: unknown): value is string | number | boolean | null => value === null || ['string', 'number', 'boolean'].includes(typeof value);
const cut = (value: string | number | boolean | null) => (typeof value === 'string' && value.length > SUMMARY_STRING_CHARS ? `${value.slice(0, SUMMARY_STRING_CHARS)}…` : value);

/**
 * What a mutation did, small enough to send whatever its answer was: per
 * root field (response key), its scalar value, or the scalar fields of its
 * payload; lists and nested objects are named in `omitted`. When even that
 * passes half of `maxBytes` (thousands of aliases of long strings), only the
 * response keys remain.
 */
export function committedSummary(data: Record<string, unknown>, maxBytes: number): { done: Record<string, unknown>; omitted: string[] } {
  const done: Record<string, unknown> = {};
  const omitted: string[] = [];
  for (const [key, value] of Object.entries(data)) {
    if (isScalar(value)) done[key] = cut(value);
    else if (Array.isArray(value)) omitted.push(key);
    else if (typeof value === 'object') {
      const fields: Record<string, unknown> = {};
      for (const [field, child] of Object.entries(value as Record<string, unknown>)) {
        if (isScalar(child)) fields[field] = cut(child);
        else omitted.push(`${key}.${field}`);
      }
      done[key] = fields;
    }
  }
  if (approximateJSONSize({ done, omitted }, maxBytes / 2) !== Number.POSITIVE_INFINITY) return { done, omitted };
  return { done: Object.fromEntries(Object.keys(data).map((key) => [key, {}])), omitted: Object.keys(data) };
}

/** The yoga plugin. Subscriptions' events are bounded per event by the same walk. */
export function useResponseSizeLimit(maxBytes: number): Plugin {
  const tooLarge = (): ExecutionResult => ({
    errors: [
      new GraphQLError(`the answer would exceed ${maxBytes} bytes: select fewer fields or ask for a smaller page`, {
        extensions: { code: 'RESPONSE_TOO_LARGE', http: { status: 400 } },
      }),
    ],
  });
  const committedButTooLarge = (result: ExecutionResult): ExecutionResult => {
    const { done, omitted } = committedSummary(result.data as Record<string, unknown>, maxBytes);
    const error = new GraphQLError(
      `the mutation ran and its writes committed, but its answer would exceed ${maxBytes} bytes, so it is left out: extensions.done has what each field did; read the rest back with a query, and select fewer fields next time (do not resend it to see the answer)`,
      { extensions: { code: 'RESPONSE_TOO_LARGE', committed: true, done, omitted, http: { status: 200 } } },
    );
    // The errors the mutation met on the way (a masked failure of one alias) stay: they are small and say what did not happen.
    return { data: null, errors: [error, ...(result.errors ?? [])] };
  };
  return {
    onExecute: ({ args }) => {
      const mutation = getOperationAST(args.document, args.operationName ?? undefined)?.operation === 'mutation';
      return {
        onExecuteDone: ({ result, setResult }) => {
          if (Symbol.asyncIterator in result) return;
          if (approximateJSONSize(result.data, maxBytes) !== Number.POSITIVE_INFINITY) return;
          setResult(mutation && result.data != null ? committedButTooLarge(result) : tooLarge());
        },
      };
    },
  };
}
