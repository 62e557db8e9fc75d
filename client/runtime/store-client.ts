/**
 * A small GraphQL-over-HTTP client for the connector store, for the worker
 * runtime and for scripts: typed documents in, typed data out, a fresh bearer
 * token on every request, and the server's retryable refusals (503
 * `OVERLOADED` / `DATABASE_*`, 429 with `Retry-After`, a connection that did
 * not answer) retried with backoff, and read-your-writes across the server's
 * read standbys: the latest consistency token of its mutations' answers goes
 * back on every later request. Subscriptions go over graphql-sse.
 * Browser-safe: `fetch`, `AbortSignal` and Web Crypto only.
 */
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print, type DocumentNode, type OperationDefinitionNode } from 'graphql';
import { createClient as createSSEClient, type Client as SSEClient } from 'graphql-sse';
import { CONSISTENCY_TOKEN_HEADER, laterConsistencyToken } from '../consistency-token.js';
import { linkedSignal } from './signals.js';

/** Where bearer tokens come from: a token source (`createTokenSource`, `tokenSourceFromKeyFile`), or one fixed token. */
export type StoreTokens = { getToken(): Promise<string>; invalidate?(): void } | string;

/** Options of {@link createStoreClient}. */
export interface StoreClientOptions {
  /** The server's GraphQL endpoint, e.g. `http://127.0.0.1:4000/graphql`. */
  url: string;
  /** Bearer tokens: a token source is asked before every request (and re-minted after a 401 once). */
  tokens: StoreTokens;
  /** The graphql-sse endpoint for subscriptions. Default: `url` + `/stream`. */
  streamURL?: string;
  /**
   * The fetch to use (requests, unless {@link transport} is given, and the subscription stream). Default: the global `fetch`.
   * `storeClientFromKeyFile` gives the stream `nodeHTTPStreamFetch()` of the `key-file` subpath (`node:http`).
   */
  fetch?: typeof fetch;
  /**
   * How queries and mutations are posted. Default: through {@link fetch}.
   * In Node, `nodeHTTPTransport()` of the `key-file` subpath (what
   * `storeClientFromKeyFile` uses) posts through `node:http` with keep-alive:
   * a third to a quarter of the CPU per request of Node's `fetch` (undici and
   * its web streams), a worker's largest cost.
   */
  transport?: StoreTransport;
  /** Send each document's persisted id (`documentId`) instead of its text, for a server with `PERSISTED_DOCUMENTS=only`. Default: false. */
  persistedDocuments?: boolean;
  /** How many times a retryable failure is retried before {@link StoreRequestError} is thrown. Default: 6. */
  maxRetries?: number;
  /** First backoff step in ms when the server sent no `Retry-After`; doubles per retry up to 10 s, each delay drawn from the upper half of its step. Default: 200. */
  retryBaseDelayMs?: number;
  /** Gives up on one HTTP request after this many ms (then retried like a dropped connection). Default: 30 000. */
  requestTimeoutMs?: number;
  /**
   * Ask for compressed answers (the server's brotli or gzip, above 1 kB).
   * Default: yes, except for a server on loopback (`localhost`, 127.0.0.0/8,
   * `::1`), where compressing and inflating each answer costs both sides CPU
   * and saves no wire: those answers are asked for as `identity`.
   */
  compressedAnswers?: boolean;
  /** Told about every retry (for metrics and logs; carries no variables and no token). */
  onRetry?: (retry: { operationName: string | undefined; code: string; attempt: number; delayMs: number }) => void;
}

/** One POST of a GraphQL request, as {@link StoreClientOptions.transport} sends it. */
export interface StoreTransportRequest {
  headers: Record<string, string>;
  body: string;
  /** Aborts the request: the promise rejects. */
  signal: AbortSignal;
}

/** What the client reads of an answer: its status, a header, its body as text. */
export interface StoreTransportAnswer {
  status: number;
  /** A header's value (name in lower case), null when absent. */
  header(name: string): string | null;
  text: string;
}

/** Posts one request to `url`; rejects when no answer came (a reset connection, an abort). */
export type StoreTransport = (url: string, request: StoreTransportRequest) => Promise<StoreTransportAnswer>;

/** The default transport: `fetch`. */
export function fetchTransport(fetchImpl: typeof fetch = globalThis.fetch.bind(globalThis)): StoreTransport {
  return async (url, { headers, body, signal }) => {
    const response = await fetchImpl(url, { method: 'POST', headers, body, signal });
    const text = await response.text();
    return { status: response.status, header: (name) => response.headers.get(name), text };
  };
}

/** Per-request options of {@link StoreClient.request}. */
export interface StoreRequestOptions {
  /** Aborts the request (and its retries): the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Override of {@link StoreClientOptions.maxRetries} for this request (0: no retry). */
  maxRetries?: number;
  /**
   * Retry a 5xx answer too (500 included), for a request the server
   * recognises when resent (a write-back step with its `requestKey`): a
   * server that failed after committing answers the resent request with what
   * it committed. Default false.
   */
  retryServerErrors?: boolean;
}

/** What a subscription delivers: each result's data, then an end. */
export interface StoreSubscriptionSink<Result> {
  next(data: Result): void;
  /** The stream ended with an error (`TOKEN_EXPIRED`, `SUBSCRIBER_TOO_SLOW`, a lost connection…): subscribe again to go on. */
  error(error: StoreRequestError): void;
  complete(): void;
}

/** A client of one server. */
export interface StoreClient {
  /** The GraphQL endpoint. */
  readonly url: string;
  /**
   * Runs a query or mutation and resolves with its `data`. A request the
   * server refused (a GraphQL error, a non-2xx status) or that never got an
   * answer rejects with a {@link StoreRequestError}, after retrying the
   * retryable ones. Every write of the write-back protocol is fenced or keyed,
   * so sending one again after a lost answer is safe.
   */
  request<Result, Variables extends Record<string, unknown>>(
    document: TypedDocumentNode<Result, Variables>,
    variables: Variables,
    options?: StoreRequestOptions,
  ): Promise<Result>;
  /** Subscribes over graphql-sse; returns the function that stops it. */
  subscribe<Result, Variables extends Record<string, unknown>>(
    document: TypedDocumentNode<Result, Variables>,
    variables: Variables,
    sink: StoreSubscriptionSink<Result>,
  ): () => void;
  /** Closes the subscription transport. */
  dispose(): void;
}

/**
 * A request the server refused or that got no usable answer. `code` is the
 * server's `extensions.code` (`OVERLOADED`, `TOKEN_EXPIRED`, `GRAPHQL_VALIDATION_FAILED`, …)
 * or one of the client's: `NETWORK_ERROR` (no answer), `TIMEOUT`, `BAD_RESPONSE`
 * (not GraphQL JSON). The message never holds variables or tokens.
 */
export class StoreRequestError extends Error {
  override readonly name = 'StoreRequestError';
  /** The server's or the client's code. */
  readonly code: string;
  /** The HTTP status, when an answer came. */
  readonly status: number | undefined;
  /** Whether the same request may simply be sent again later. */
  readonly retryable: boolean;
  /** The server's `Retry-After`, in ms, when it sent one. */
  readonly retryAfterMs: number | undefined;
  /** The operation's name. */
  readonly operationName: string | undefined;

  constructor(init: { code: string; message: string; status?: number; retryable: boolean; retryAfterMs?: number; operationName?: string; cause?: unknown }) {
    super(`${init.operationName ?? 'request'}: ${init.code}: ${init.message}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.retryable = init.retryable;
    this.retryAfterMs = init.retryAfterMs;
    this.operationName = init.operationName;
  }
}

const MAX_RETRY_DELAY_MS = 10_000;

interface GraphQLErrorJSON {
  message?: unknown;
  extensions?: { code?: unknown; retryable?: unknown };
}

interface PreparedDocument {
  body: { query: string } | { documentId: string };
  operationName: string | undefined;
}

/** Creates a {@link StoreClient} for the server at `options.url`. */
export function createStoreClient(options: StoreClientOptions): StoreClient {
  const fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  const transport = options.transport ?? fetchTransport(fetchImpl);
  // fetch asks for gzip and brotli by itself; `identity` asks for the answer as it is.
  const encoding = (options.compressedAnswers ?? !isLoopbackURL(options.url)) ? undefined : { 'accept-encoding': 'identity' };
  const maxRetries = options.maxRetries ?? 6;
  const baseDelay = options.retryBaseDelayMs ?? 200;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const prepared = new WeakMap<DocumentNode, PreparedDocument>();
  let sse: SSEClient | undefined;
  // Per client, in memory: its own writes are what its reads must see (subscriptions read the primary).
  let consistencyToken: string | null = null;

  const getToken = () => (typeof options.tokens === 'string' ? Promise.resolve(options.tokens) : options.tokens.getToken());
  const invalidateToken = () => {
    if (typeof options.tokens !== 'string') options.tokens.invalidate?.();
  };

  function prepare(document: DocumentNode): PreparedDocument {
    let entry = prepared.get(document);
    if (entry === undefined) {
      const operation = document.definitions.find((definition): definition is OperationDefinitionNode => definition.kind === 'OperationDefinition');
      const hash = (document as { __meta__?: { hash?: unknown } }).__meta__?.hash;
      if (options.persistedDocuments === true && typeof hash !== 'string') throw new TypeError('persistedDocuments: this document has no persisted id (use the package’s generated documents)');
      entry = {
        body: options.persistedDocuments === true ? { documentId: hash as string } : { query: print(document) },
        operationName: operation?.name?.value,
      };
      prepared.set(document, entry);
    }
    return entry;
  }

  async function attempt(document: PreparedDocument, variables: Record<string, unknown>, signal: AbortSignal | undefined, reauthorized: boolean, retryServerErrors = false): Promise<unknown> {
    const operationName = document.operationName;
    const guard = linkedSignal([signal], requestTimeoutMs);
    let response: StoreTransportAnswer;
    try {
      response = await transport(options.url, {
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json, application/json',
          ...encoding,
          authorization: `Bearer ${await getToken()}`,
          ...(consistencyToken !== null && { [CONSISTENCY_TOKEN_HEADER]: consistencyToken }),
        },
        body: JSON.stringify({ ...document.body, variables, ...(operationName !== undefined && { operationName }) }),
        signal: guard.signal,
      });
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      const timedOut = guard.timedOut();
      throw new StoreRequestError({
        code: timedOut ? 'TIMEOUT' : 'NETWORK_ERROR',
        message: timedOut ? `no answer within ${requestTimeoutMs} ms` : 'the server did not answer',
        retryable: true,
        ...(operationName !== undefined && { operationName }),
        cause: error,
      });
    } finally {
      guard.dispose();
    }
    const text = response.text;
    const ok = response.status >= 200 && response.status < 300;
    const retryAfterMs = parseRetryAfter(response.header('retry-after'));
    let body: { data?: unknown; errors?: GraphQLErrorJSON[]; extensions?: unknown } | undefined;
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      body = undefined;
    }
    // Before any refusal is thrown: a mutation answered with an error may still have committed.
    consistencyToken = laterConsistencyToken(consistencyToken, body?.extensions);
    const firstError = body?.errors?.[0];
    if (ok && body !== undefined && body.data != null && firstError === undefined) return body.data;
    const code = typeof firstError?.extensions?.code === 'string' ? firstError.extensions.code : body === undefined ? 'BAD_RESPONSE' : `HTTP_${response.status}`;
    if (response.status === 401 && !reauthorized && typeof options.tokens !== 'string') {
      // A token the server no longer takes (a clock jump, a key just listed): mint once more.
      invalidateToken();
      return attempt(document, variables, signal, true, retryServerErrors);
    }
    const retryable =
      firstError?.extensions?.retryable === true ||
      response.status === 503 ||
      (response.status === 429 && retryAfterMs !== undefined) ||
      response.status === 502 ||
      response.status === 504 ||
      (retryServerErrors && response.status >= 500);
    throw new StoreRequestError({
      code,
      message: typeof firstError?.message === 'string' ? firstError.message : `HTTP ${response.status}`,
      status: response.status,
      retryable,
      ...(retryAfterMs !== undefined && { retryAfterMs }),
      ...(operationName !== undefined && { operationName }),
    });
  }

  return {
    url: options.url,
    async request(document, variables, requestOptions = {}) {
      const entry = prepare(document);
      const retries = requestOptions.maxRetries ?? maxRetries;
      for (let retry = 0; ; retry++) {
        try {
          return (await attempt(entry, variables, requestOptions.signal, false, requestOptions.retryServerErrors === true)) as never;
        } catch (error) {
          if (!(error instanceof StoreRequestError) || !error.retryable || retry >= retries) throw error;
          const step = Math.min(MAX_RETRY_DELAY_MS, baseDelay * 2 ** retry);
          const delayMs = Math.min(MAX_RETRY_DELAY_MS * 6, Math.max(error.retryAfterMs ?? 0, Math.floor(step / 2 + Math.random() * (step / 2))));
          options.onRetry?.({ operationName: entry.operationName, code: error.code, attempt: retry + 1, delayMs });
          await sleep(delayMs, requestOptions.signal);
        }
      }
    },
    subscribe(document, variables, sink) {
      sse ??= createSSEClient({
        url: options.streamURL ?? `${options.url.replace(/\/$/, '')}/stream`,
        headers: async () => ({ authorization: `Bearer ${await getToken()}` }),
        fetchFn: fetchImpl,
        // Reconnecting is the caller's choice (it must re-read what it missed).
        retryAttempts: 0,
      });
      const entry = prepare(document);
      let ended = false;
      const end = (fn: () => void) => {
        if (ended) return;
        ended = true;
        fn();
      };
      // graphql-sse posts these parameters as they are; a persisted document goes by its id there too.
      const params = { ...entry.body, variables, ...(entry.operationName !== undefined && { operationName: entry.operationName }) } as { query: string; variables: Record<string, unknown> };
      return sse.subscribe<Record<string, unknown>>(
        params,
        {
          next: (result) => {
            const error = (result.errors as GraphQLErrorJSON[] | undefined)?.[0];
            if (error !== undefined) {
              end(() => sink.error(toStreamError(error, entry.operationName)));
              return;
            }
            if (result.data != null) sink.next(result.data as never);
          },
          error: (error) => end(() => sink.error(toStreamError(error, entry.operationName))),
          complete: () => end(() => sink.complete()),
        },
      );
    },
    dispose() {
      sse?.dispose();
      sse = undefined;
    },
  };
}

function toStreamError(error: unknown, operationName: string | undefined): StoreRequestError {
  if (error instanceof StoreRequestError) return error;
  const graphQLError = (Array.isArray(error) ? error[0] : error) as GraphQLErrorJSON | Error | undefined;
  const extensions = graphQLError !== undefined && 'extensions' in graphQLError ? graphQLError.extensions : undefined;
  const code = typeof extensions?.code === 'string' ? extensions.code : 'STREAM_ERROR';
  const message = graphQLError !== undefined && typeof graphQLError.message === 'string' ? graphQLError.message : 'the stream failed';
  return new StoreRequestError({ code, message, retryable: true, ...(operationName !== undefined && { operationName }), cause: error });
}

/** `Retry-After` in seconds (or an HTTP date) → ms; undefined when absent or unreadable. */
function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Whether `url` names this machine: `localhost`, 127.0.0.0/8 or `::1`. */
export function isLoopbackURL(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
