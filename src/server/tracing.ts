/**
 * OpenTelemetry traces, off by default and turned on by the standard
 * `OTEL_*` variables: the SDK (`@opentelemetry/sdk-node`) reads the exporter,
 * endpoint, headers, protocol, sampler and resource from them. Each GraphQL
 * operation is one span (`@envelop/opentelemetry`); each SQL statement it
 * runs is a child span made from Kysely's query log, on both dialects.
 * Neither carries a value a client sent: no variables, no SQL parameters, and
 * the document only when it has no inline arguments (an inline lease token
 * would otherwise be exported).
 */
import { useOpenTelemetry } from '@envelop/opentelemetry';
import { context, SpanKind, SpanStatusCode, trace, type TracerProvider } from '@opentelemetry/api';
import type { Plugin } from 'graphql-yoga';
import type { LogEvent } from 'kysely';
import type { DialectName } from '../db/connect.js';
import type { Logger } from './logger.js';

const TRACER = 'connector-store';

/**
 * Whether the environment asks for traces: an `OTEL_TRACES_EXPORTER` other than
 * `none`, or an OTLP endpoint; `OTEL_SDK_DISABLED=true` wins over both.
 */
export function tracingRequested(env: Record<string, string | undefined> = process.env): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (exporters.length > 0) return !exporters.every((s) => s === 'none');
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** A running SDK: its provider, and the shutdown that flushes what is buffered. */
export interface Tracing {
  provider: TracerProvider;
  shutdown(): Promise<void>;
}

/**
 * Starts the SDK when {@link tracingRequested}; otherwise returns undefined and
 * loads nothing. Only traces: the SDK's metrics and logs stay off (metrics are
 * `/metrics`, logs are pino's).
 */
export async function startTracing(logger: Logger, env: Record<string, string | undefined> = process.env): Promise<Tracing | undefined> {
  if (!tracingRequested(env)) return undefined;
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME ?? 'connector-store',
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
  });
  sdk.start();
  logger.info({ exporter: env.OTEL_TRACES_EXPORTER ?? 'otlp', endpoint: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT }, 'tracing on');
  return { provider: trace.getTracerProvider(), shutdown: () => sdk.shutdown() };
}

/** One span per GraphQL operation (query, mutation, subscription), never with variables or results. */
export function useTracing(provider: TracerProvider): Plugin {
  return useOpenTelemetry(
    { resolvers: false, variables: false, result: false, document: true },
    provider,
    SpanKind.SERVER,
    {},
    TRACER,
  ) as Plugin;
}

/**
 * A Kysely `log` function that records every statement as a span under the
 * active one (the GraphQL operation's): its SQL text with placeholders, never
 * its parameters. Errors mark the span failed, by error class only.
 */
export function sqlSpans(provider: TracerProvider, dialect: DialectName): (event: LogEvent) => void {
  const tracer = provider.getTracer(TRACER);
  const system = dialect === 'postgres' ? 'postgresql' : 'sqlite';
  return (event) => {
    const parent = context.active();
    // Statements outside any operation (jobs, start-up) are not traced.
    if (trace.getSpan(parent) === undefined) return;
    const end = Date.now();
    const text = event.query.sql;
    const verb = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? 'SQL';
    const span = tracer.startSpan(
      verb,
      {
        kind: SpanKind.CLIENT,
        startTime: end - event.queryDurationMillis,
        attributes: { 'db.system.name': system, 'db.system': system, 'db.operation.name': verb, 'db.query.text': text },
      },
      parent,
    );
    if (event.level === 'error') {
      const error = event.error as { code?: unknown; name?: unknown } | undefined;
      span.setStatus({ code: SpanStatusCode.ERROR, message: typeof error?.code === 'string' ? error.code : String(error?.name ?? 'error') });
    }
    span.end(end);
  };
}
