/**
 * Refuses a GraphQL document nested deeper than `maxNesting` brackets before
 * it reaches the parser: graphql-js parses value literals recursively, so a
 * literal like `[[[[…]]]]` a few thousand deep overflows the stack inside the
 * parser (a masked "Unexpected error." at best). One linear scan that skips
 * strings and comments; selection depth is graphql-armor's concern, after it.
 */
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/** The deepest bracket nesting (`{` `[` `(`) of a GraphQL source, outside strings and comments. */
export function sourceNesting(source: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '#') {
      while (i < source.length && source[i] !== '\n' && source[i] !== '\r') i++;
    } else if (c === '"') {
      if (source.startsWith('"""', i)) {
        const end = source.indexOf('"""', i + 3);
        i = end < 0 ? source.length : end + 2;
      } else {
        for (i++; i < source.length && source[i] !== '"' && source[i] !== '\n'; i++) if (source[i] === '\\') i++;
      }
    } else if (c === '{' || c === '[' || c === '(') {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === '}' || c === ']' || c === ')') {
      depth--;
    }
  }
  return deepest;
}

/** The yoga plugin: a document nested deeper than `maxNesting` is a BAD_USER_INPUT error, never parsed. */
export function useNestingLimit(maxNesting: number): Plugin {
  return {
    onParse: ({ params }) => {
      const source = typeof params.source === 'string' ? params.source : params.source.body;
      if (sourceNesting(source) > maxNesting) {
        throw new GraphQLError(`the document is nested more than ${maxNesting} levels deep`, {
          extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } },
        });
      }
    },
  };
}
