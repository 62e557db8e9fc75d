/**
 * The request-level rules of `/graphql` for a transport that reads its own
 * requests (graphql-sse on `/graphql/stream`, issue 19 item 1). Yoga applies
 * them on `/graphql` in its request pipeline (`onRequestParse`, `onParams`:
 * the body limit, persisted documents, the request log's operation name),
 * which graphql-sse's handler never enters; so the stream endpoint reads each
 * operation request here first, applies the same owners' rules
 * (body-limit.ts, persisted-documents.ts) and hands the handler a request
 * that names the document to run. Everything after the params (parse with
 * the token limit, validation with the depth, alias and cost rules, context
 * with credentials and rate limits, execution, masking) is the yoga app's
 * own, through `getEnveloped`. graphql-ws applies the same document rule in
 * websocket.ts; `test/server/document-endpoints.test.ts` runs one refusal
 * table against every endpoint that executes documents.
 */
import { GraphQLError, getOperationAST, type DocumentNode, type ExecutionArgs, type GraphQLSchema, type OperationTypeNode } from 'graphql';
import { readBodyWithin } from './body-limit.js';
import type { PersistedDocuments } from './persisted-documents.js';

/** Every endpoint that executes documents; a new one must be added here and to the refusal table test. */
export const DOCUMENT_ENDPOINTS = ['POST /graphql', 'GET /graphql', 'SSE /graphql', 'graphql-sse /graphql/stream (distinct)', 'graphql-sse /graphql/stream (single connection)', 'graphql-ws /graphql'] as const;

/** What {@link admitOperationRequest} applies. */
export interface OperationAdmission {
  /** MAX_BODY_BYTES. */
  maxBodyBytes: number;
  /** The persisted-documents rule, when PERSISTED_DOCUMENTS is not `off`. */
  persistedDocuments: PersistedDocuments | undefined;
  /** Told the operation name of each admitted request (the request log's field). */
  noteOperation(request: Request, operationName: string): void;
  /** Told the request the handler runs in place of `original` (the same request id and log line). */
  noteDerived(original: Request, derived: Request): void;
}

/** GraphQL-over-HTTP request parameters as a client sends them. */
interface OperationParams {
  query?: unknown;
  documentId?: unknown;
  operationName?: unknown;
  variables?: unknown;
  extensions?: unknown;
}

/** Whether a request to the stream endpoint carries an operation (as against reserving, opening or stopping a stream). */
export function carriesOperation(request: Request): boolean {
  if (request.method === 'POST') return true;
  if (request.method !== 'GET') return false;
  const search = new URL(request.url).searchParams;
  return search.has('query') || search.has('documentId') || search.has('extensions');
}

/**
 * Reads an operation request and answers either the request the handler
 * should run (its body, or its query string, naming the document to run) or
 * the refusal `/graphql` would give: 413 / 400 for the body, the persisted
 * documents' codes, 400 for unreadable parameters.
 */
export async function admitOperationRequest(request: Request, admission: OperationAdmission): Promise<{ request: Request } | { refusal: Response }> {
  let params: OperationParams;
  try {
    params = request.method === 'GET' ? paramsOfSearch(new URL(request.url).searchParams) : paramsOfBody(await readBodyWithin(request, admission.maxBodyBytes));
    const query = documentOf(params, admission.persistedDocuments);
    if (typeof params.operationName === 'string' && params.operationName.length <= 200) admission.noteOperation(request, params.operationName);
    const normalized = { query, operationName: params.operationName, variables: params.variables, extensions: params.extensions };
    const headers = new Headers(request.headers);
    headers.delete('content-length');
    if (request.method === 'GET') {
      const url = new URL(request.url);
      url.searchParams.delete('documentId');
      if (typeof query === 'string') url.searchParams.set('query', query);
      return { request: new Request(url, { method: 'GET', headers, signal: request.signal }) };
    }
    return { request: new Request(request.url, { method: 'POST', headers, body: JSON.stringify(normalized), signal: request.signal }) };
  } catch (error) {
    if (!(error instanceof GraphQLError)) throw error;
    const status = (error.extensions.http as { status?: number } | undefined)?.status ?? 400;
    return {
      refusal: new Response(refusalBody([error]), {
        status,
        headers: { 'content-type': 'application/json; charset=utf-8', ...(status === 413 && { connection: 'close' }) },
      }),
    };
  }
}

/** The document text to run, by the persisted-documents rule (or the request's own when it is off). */
function documentOf(params: OperationParams, persisted: PersistedDocuments | undefined): unknown {
  if (persisted === undefined) {
    // As on /graphql with persisted documents off: an id is an unexpected parameter, not silently ignored.
    if (params.documentId !== undefined) throw badRequest('Unexpected parameter "documentId"');
    return params.query;
  }
  return persisted.resolve({ query: typeof params.query === 'string' ? params.query : null, documentId: params.documentId, extensions: params.extensions });
}

function paramsOfBody(text: string): OperationParams {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest('POST body sent invalid JSON.');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw badRequest('POST body is expected to be an object.');
  return parsed as OperationParams;
}

function paramsOfSearch(search: URLSearchParams): OperationParams {
  const json = (name: string): unknown => {
    const value = search.get(name);
    if (value === null) return undefined;
    try {
      return JSON.parse(value);
    } catch {
      throw badRequest(`The "${name}" parameter is not JSON.`);
    }
  };
  return {
    query: search.get('query') ?? undefined,
    documentId: search.get('documentId') ?? undefined,
    operationName: search.get('operationName') ?? undefined,
    variables: json('variables'),
    extensions: json('extensions'),
  };
}

function badRequest(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } });
}

/** The yoga app's own parse, validate, context, execute and subscribe for one operation. */
export interface EnvelopedOperation {
  schema: GraphQLSchema;
  parse(source: string): DocumentNode;
  validate(schema: GraphQLSchema, document: DocumentNode): readonly GraphQLError[];
  contextFactory(): unknown;
}

/** An operation ready to execute, or its refusal with the HTTP status `/graphql` would answer. */
export type PreparedOperation =
  | { args: ExecutionArgs; operation: OperationTypeNode }
  | { errors: readonly GraphQLError[]; status: number; headers: Record<string, string> };

/**
 * Parses (with the token limit), validates (depth, aliases, introspection),
 * refuses a mutation sent by GET, and builds the context (credentials, rate
 * limits) of one operation through the yoga app's enveloped functions, as
 * yoga does on `/graphql`, for the transports that call them themselves
 * (graphql-sse, graphql-ws). Refusals carry the codes of `/graphql`
 * (`GRAPHQL_PARSE_FAILED`, `GRAPHQL_VALIDATION_FAILED`, the context's own such
 * as `RATE_LIMITED`); an unexpected error is thrown, for the caller's mask.
 */
export async function prepareOperation(
  enveloped: EnvelopedOperation,
  params: { query: string; variables?: Record<string, unknown> | null | undefined; operationName?: string | null | undefined },
  method: string,
): Promise<PreparedOperation> {
  let document: DocumentNode;
  try {
    document = enveloped.parse(params.query);
  } catch (error) {
    if (error instanceof GraphQLError) return refused(400, [withCode(error, 'GRAPHQL_PARSE_FAILED')]);
    throw error;
  }
  const errors = enveloped.validate(enveloped.schema, document);
  if (errors.length > 0) return refused(400, errors.map((error) => withCode(error, 'GRAPHQL_VALIDATION_FAILED')));
  const operation = getOperationAST(document, params.operationName ?? undefined);
  if (operation == null) return refused(400, [new GraphQLError('Could not determine what operation to execute (name it in operationName).', { extensions: { code: 'BAD_REQUEST' } })]);
  // As on /graphql: a GET never runs a mutation (a page elsewhere can make a browser send one).
  if (method === 'GET' && operation.operation === 'mutation') {
    return { ...refused(405, [new GraphQLError('Can only perform a mutation operation from a POST request.', { extensions: { code: 'METHOD_NOT_ALLOWED' } })]), headers: { allow: 'POST' } };
  }
  let contextValue: unknown;
  try {
    contextValue = await enveloped.contextFactory();
  } catch (error) {
    const http = error instanceof GraphQLError ? (error.extensions.http as { status?: number; headers?: Record<string, string> } | undefined) : undefined;
    if (http?.status === undefined) throw error;
    return { errors: [error as GraphQLError], status: http.status, headers: http.headers ?? {} };
  }
  return {
    operation: operation.operation,
    args: { schema: enveloped.schema, document, contextValue, variableValues: params.variables ?? null, operationName: params.operationName ?? null },
  };
}

/** A refusal's errors as a client sees them: message, locations and code (never the `http` hints). */
export function refusalBody(errors: readonly GraphQLError[]): string {
  return JSON.stringify({
    errors: errors.map((error) => {
      const { http: _http, ...extensions } = error.extensions as Record<string, unknown>;
      return { message: error.message, ...(error.locations !== undefined && { locations: error.locations }), extensions };
    }),
  });
}

function refused(status: number, errors: readonly GraphQLError[]): { errors: readonly GraphQLError[]; status: number; headers: Record<string, string> } {
  return { errors, status, headers: {} };
}

function withCode(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions.code !== undefined) return error;
  return new GraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, extensions: { ...error.extensions, code } });
}
