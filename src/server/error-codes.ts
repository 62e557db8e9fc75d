/**
 * Every refusal carries an `extensions.code` (issue 23), on every transport:
 *
 * - an argument of a query refused by its input rules (the validation
 *   plugin's InputValidationError; mutations answer it in their result
 *   union instead) becomes `BAD_USER_INPUT` with the rules' `issues`, each
 *   naming its argument path, as mutations' `InputValidationError.issues` do;
 * - variables refused while coercing them (a required one missing, a value
 *   of the wrong type: graphql-js answers errors and no `data`, before
 *   anything runs) become `BAD_USER_INPUT`, as the same mistake written
 *   inline is a `GRAPHQL_VALIDATION_FAILED` (operation-admission.ts).
 *
 * Codes already set (authentication, limits, masking) are kept.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { GraphQLError, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/** A query argument refused by its input rules, as the client sees it. */
export function refusedArgument(error: GraphQLError, refusal: InputValidationError): GraphQLError {
  const issues = refusal.issues.map((issue) => ({
    path: (issue.path ?? []).map((segment) => (typeof segment === 'object' && segment !== null ? String(segment.key) : String(segment))),
    message: issue.message,
  }));
  return new GraphQLError(error.message, { nodes: error.nodes, path: error.path, extensions: { code: 'BAD_USER_INPUT', issues } });
}

function withCode(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions.code !== undefined) return error;
  return new GraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, originalError: error.originalError, extensions: { ...error.extensions, code } });
}

/** The yoga plugin: variables refused before execution get `BAD_USER_INPUT`. */
export function useRequestErrorCodes(): Plugin {
  return {
    onExecute() {
      return {
        onExecuteDone({ result, setResult }) {
          if (Symbol.asyncIterator in Object(result)) return;
          const single = result as ExecutionResult;
          // Errors and no data: nothing ran (graphql-js coerces variables first).
          if ('data' in single && single.data !== undefined) return;
          if (single.errors === undefined || single.errors.every((error) => error.extensions.code !== undefined)) return;
          setResult({ ...single, errors: single.errors.map((error) => withCode(error, 'BAD_USER_INPUT')) });
        },
      };
    },
  };
}
