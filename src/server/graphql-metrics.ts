/**
 * The GraphQL series of `GET /metrics`, recorded with prom-client, on every
 * path that runs a document (/graphql, its SSE, graphql-sse, graphql-ws:
 * the envelop hooks each of them runs) and, for HTTP, the time to answer:
 *
 * - `graphql_envelop_request{operationName, operationType}`: operations
 *   whose execution (or subscription) ended;
 * - `graphql_envelop_request_duration{…}`: seconds from execute (or
 *   subscribe) to its end;
 * - `graphql_envelop_error_result{…, phase, code}`: each error of a result
 *   (phase `execute`, or `subscribe` for an event of a subscription), each
 *   document that did not parse (`parse`, code `GRAPHQL_PARSE_FAILED` unless
 *   the error names another) or validate (`validate`, code
 *   `GRAPHQL_VALIDATION_FAILED` unless the first error names another), each
 *   failure to build the context (`context`), each subscription that failed
 *   (`subscribe`); `code` is the error's `extensions.code`, else `UNKNOWN`;
 * - `graphql_yoga_http_duration{method, statusCode, operationName,
 *   operationType}`: seconds from the request to its response, for HTTP
 *   requests whose document parsed.
 *
 * The names and labels are those of `@graphql-yoga/plugin-prometheus`, which
 * recorded them before (issue 21): its generic hooks (label functions,
 * per-phase handler lists filtered per request, the server context copied
 * per response, process-wide WeakMaps keyed per request) cost about 0.3 ms
 * of CPU per write-back sequence of four requests, some 8 % of the
 * server's, for four series (measured on 2026-12-03 under the throughput
 * benchmark's sequence load, a build of the app with them against one
 * without; docs/benchmarks.md, "What Postgres parsed"). Here the operation's labels are one object per
 * operation name and type, made once, noted on the request's context and
 * request under symbols (docs/architecture.md, "Per-request objects must
 * die young").
 */
import { getOperationAST, type DocumentNode, type GraphQLError } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import { Counter, Histogram, type Registry } from 'prom-client';

/** The labels every GraphQL series carries. */
interface OperationLabels {
  readonly operationName: string;
  readonly operationType: string;
}

/** Where the operation's labels are noted: on its GraphQL context, and on its HTTP request. */
const LABELS = Symbol('graphql-metrics.labels');
/** When an HTTP request arrived (ms), noted on the request. */
const STARTED = Symbol('graphql-metrics.started');

type Noted = { [LABELS]?: OperationLabels; [STARTED]?: number };

const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface GraphQLMetricsOptions {
  registry: Registry;
  /** The path that serves the registry (GET; access is checked before this plugin). */
  endpoint: string;
  /** The label value of a client-chosen operation name (bounded: a client must not grow the series without limit). */
  operationName: (name: string | undefined) => string;
}

/** The plugin that records the series above and serves `endpoint`. */
export function useGraphQLMetrics({ registry, endpoint, operationName }: GraphQLMetricsOptions): Plugin {
  const operationLabelNames = ['operationName', 'operationType'] as const;
  const requests = new Counter({
    name: 'graphql_envelop_request',
    help: 'GraphQL operations executed, by operation name and type.',
    labelNames: operationLabelNames,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'graphql_envelop_request_duration',
    help: 'Execution time of GraphQL operations in seconds, by operation name and type.',
    labelNames: operationLabelNames,
    buckets: SECONDS_BUCKETS,
    registers: [registry],
  });
  const errors = new Counter({
    name: 'graphql_envelop_error_result',
    help: 'GraphQL errors in responses, by phase and error code (extensions.code; typed results in payload unions are not errors).',
    labelNames: [...operationLabelNames, 'phase', 'code'],
    registers: [registry],
  });
  const http = new Histogram({
    name: 'graphql_yoga_http_duration',
    help: 'Time to answer a GraphQL HTTP request in seconds, by method, status and operation (no URL: it would carry query strings).',
    labelNames: ['method', 'statusCode', ...operationLabelNames],
    buckets: SECONDS_BUCKETS,
    registers: [registry],
  });

  // One labels object per operation name and type: bounded by `operationName` (its names) times four types.
  const known = new Map<string, OperationLabels>();
  const labelsOf = (name: string | undefined, type: string): OperationLabels => {
    const label = operationName(name);
    const key = `${type}\u0000${label}`;
    let labels = known.get(key);
    if (labels === undefined) known.set(key, (labels = Object.freeze({ operationName: label, operationType: type })));
    return labels;
  };
  const UNPARSED = Object.freeze({ operationName: operationName(undefined), operationType: 'unknown' });
  const countError = (labels: OperationLabels, phase: string, code: string) =>
    errors.inc({ operationName: labels.operationName, operationType: labels.operationType, phase, code });
  const countResultErrors = (labels: OperationLabels, phase: string, result: unknown) => {
    const list = (result as { errors?: readonly unknown[] } | null)?.errors;
    if (list !== undefined) for (const error of list) countError(labels, phase, errorCode(error));
  };
  const ended = (labels: OperationLabels, started: number) => {
    requests.inc(labels);
    duration.observe(labels, (performance.now() - started) / 1_000);
  };
  /** The hooks of an execution or a subscription: errors of each result in `phase`, the count and duration at its end. */
  const whenDone = (labels: OperationLabels, phase: 'execute' | 'subscribe', result: unknown, started: number) => {
    if (isAsyncIterable(result)) {
      return {
        onNext: ({ result: event }: { result: unknown }) => countResultErrors(labels, phase, event),
        onEnd: () => ended(labels, started),
      };
    }
    countResultErrors(labels, phase, result);
    ended(labels, started);
    return undefined;
  };

  return {
    onRequest({ url, request, fetchAPI, endResponse }) {
      if (url.pathname === endpoint) {
        return registry.metrics().then((text) => endResponse(new fetchAPI.Response(text, { headers: { 'content-type': registry.contentType } })));
      }
      (request as Request & Noted)[STARTED] = performance.now();
      return undefined;
    },
    onPluginInit({ registerContextErrorHandler }) {
      registerContextErrorHandler(({ context, error }) => countError((context as Noted)[LABELS] ?? UNPARSED, 'context', errorCode(error)));
    },
    onParse({ context }) {
      return ({ result }) => {
        if (result === null || result instanceof Error) {
          countError(UNPARSED, 'parse', errorCode(result, 'GRAPHQL_PARSE_FAILED'));
          return;
        }
        const named = (context as { params?: { operationName?: string | null } }).params?.operationName ?? undefined;
        const operation = getOperationAST(result as DocumentNode, named);
        const labels = labelsOf(operation?.name?.value ?? named, operation?.operation ?? 'unknown');
        (context as Noted)[LABELS] = labels;
        const request = (context as { request?: Request }).request;
        if (request !== undefined) (request as Request & Noted)[LABELS] = labels;
      };
    },
    onValidate({ context }) {
      const labels = (context as Noted)[LABELS];
      if (labels === undefined) return undefined;
      return ({ valid, result }) => {
        if (!valid) countError(labels, 'validate', errorCode(result[0], 'GRAPHQL_VALIDATION_FAILED'));
      };
    },
    onExecute({ args }) {
      const labels = (args.contextValue as Noted)[LABELS];
      if (labels === undefined) return undefined;
      const started = performance.now();
      return { onExecuteDone: ({ result }) => whenDone(labels, 'execute', result, started) };
    },
    onSubscribe({ args }) {
      const labels = (args.contextValue as Noted)[LABELS];
      if (labels === undefined) return undefined;
      const started = performance.now();
      return {
        onSubscribeResult: ({ result }) => whenDone(labels, 'subscribe', result, started),
        onSubscribeError: ({ error }) => countError(labels, 'subscribe', errorCode(error)),
      };
    },
    onResponse({ request, response }) {
      const noted = request as Request & Noted;
      const started = noted[STARTED];
      const labels = noted[LABELS];
      if (started === undefined || labels === undefined) return;
      http.observe(
        { method: request.method, statusCode: response.status, operationName: labels.operationName, operationType: labels.operationType },
        (performance.now() - started) / 1_000,
      );
    },
  };
}

/** A well-formed `extensions.code` (SCREAMING_SNAKE, at most 64 characters). */
const CODE = /^[A-Z_]{1,64}$/;

/** The label value of an error's `extensions.code`: the code, or `fallback` for none or a malformed one. */
function errorCode(error: unknown, fallback = 'UNKNOWN'): string {
  const code = (error as GraphQLError | null | undefined)?.extensions?.code;
  return typeof code === 'string' && CODE.test(code) ? code : fallback;
}
