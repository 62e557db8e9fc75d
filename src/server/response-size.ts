/**
 * Bounds the size of an answer: the cost budget bounds how many fields a
 * request may select, but one field can be large (a JSON result entity), so
 * an execution result over `maxBytes` is replaced by a `RESPONSE_TOO_LARGE`
 * error asking for a narrower selection or a smaller page. The size is
 * measured by a walk that stops as soon as the bound is passed.
 */
import { GraphQLError } from 'graphql';
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
      for (const [key, child] of Object.entries(item as Record<string, unknown>)) {
        size += key.length + 4;
        stack.push(child);
      }
    }
    if (size > limit) return Number.POSITIVE_INFINITY;
  }
  return size;
}

/** The yoga plugin. Subscriptions' events are bounded per event by the same walk. */
export function useResponseSizeLimit(maxBytes: number): Plugin {
  const tooLarge = () => ({
    errors: [
      new GraphQLError(`the answer would exceed ${maxBytes} bytes: select fewer fields or ask for a smaller page`, {
        extensions: { code: 'RESPONSE_TOO_LARGE', http: { status: 400 } },
      }),
    ],
  });
  return {
    onExecute: () => ({
      onExecuteDone: ({ result, setResult }) => {
        if (Symbol.asyncIterator in result) return;
        if (approximateJSONSize(result.data, maxBytes) === Number.POSITIVE_INFINITY) setResult(tooLarge());
      },
    }),
  };
}
