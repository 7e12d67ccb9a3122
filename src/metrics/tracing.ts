// OpenTelemetry traces of this process, off unless DOSSIER_OTLP_TRACES_ENDPOINT
// names an OTLP/HTTP collector. A trace runs from the MCP tool call on the
// gateway (its span made here) through the workflow start, the workflow and
// its activities (the Temporal SDK's OpenTelemetry interceptors, which carry
// the context in Temporal headers). Spans name tools and launches, never
// arguments or results; the collector is the operator's, like /metrics.
//
// Only the API is loaded up front (its tracer is a no-op until a provider is
// registered); the SDK, the exporter and the interceptors load when tracing is on.
import {
  INVALID_SPAN_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import { createRequire } from 'node:module';
import os from 'node:os';

export interface Tracing {
  tracer: Tracer;
  /** Sends every span ended so far (tests, and before a process exits). */
  flush(): Promise<void>;
  /** For every Temporal client: the start request carries the caller's trace context. */
  clientInterceptors: WorkflowClientInterceptor[];
  /** For every worker: activity spans, and the sink through which workflow spans leave the sandbox. */
  activityInterceptors: ActivityInterceptorsFactory[];
  sinks: InjectedSinks<never>;
  /** The workflow interceptors' module, bundled with the workflow code when tracing is on. */
  workflowModule: string;
}

let installed: Tracing | undefined;

/** The process's tracing, once `startTracing` has installed it. */
export function tracing(): Tracing | undefined {
  return installed;
}

/** Installs the process's tracing on first call with an endpoint; undefined when off. */
export async function startTracing(endpoint: string | undefined): Promise<Tracing | undefined> {
  if (!endpoint || installed) return installed;
  const [
    { OTLPTraceExporter },
    { Resource },
    { BatchSpanProcessor },
    { NodeTracerProvider },
    temporal,
    worker,
  ] = await Promise.all([
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/sdk-trace-node'),
    import('@temporalio/interceptors-opentelemetry'),
    import('@temporalio/interceptors-opentelemetry/lib/worker/index.js'),
  ]);
  const resource = new Resource({
    'service.name': 'dossier',
    'service.instance.id': `${os.hostname()}:${process.pid}`,
  });
  const batches = new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }), {
    // A second's worth of spans per request to the collector; at most 2,048 kept when it is away.
    scheduledDelayMillis: 1_000,
    maxQueueSize: 2_048,
  });
  const spanProcessor = withoutErrorText(batches);
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  // The context manager (AsyncLocalStorage) and the W3C propagator the Temporal interceptors use.
  provider.register();
  installed = {
    tracer: trace.getTracer('dossier'),
    flush: () => provider.forceFlush(),
    clientInterceptors: [new temporal.OpenTelemetryWorkflowClientInterceptor()],
    activityInterceptors: [
      (ctx) => ({
        inbound: new worker.OpenTelemetryActivityInboundInterceptor(ctx),
        outbound: new worker.OpenTelemetryActivityOutboundInterceptor(ctx),
      }),
    ],
    sinks: { exporter: worker.makeWorkflowExporter(spanProcessor, resource) } as InjectedSinks<never>,
    workflowModule: createRequire(import.meta.url).resolve(
      '@temporalio/interceptors-opentelemetry/lib/workflow-interceptors',
    ),
  };
  return installed;
}

/**
 * Spans leave without error text: the Temporal interceptors put a failure's
 * message in the span's status and record it as an exception event, and
 * dossier's failures carry caller input and target output (a function name
 * asked for, a program's last stderr line). Temporal seals those with the
 * team's key; the collector must not get them in the clear. What stays: the
 * status code, and the exception's type.
 */
export function withoutErrorText(inner: SpanProcessor): SpanProcessor {
  return {
    onStart: (span, context) => inner.onStart(span, context),
    onEnd(span) {
      const events = span.events.map((e) =>
        e.name === 'exception'
          ? { ...e, attributes: { 'exception.type': e.attributes?.['exception.type'] ?? 'Error' } }
          : e,
      );
      inner.onEnd(
        Object.create(span, {
          status: { value: { code: span.status.code } },
          events: { value: events },
        }) as ReadableSpan,
      );
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
  };
}

/** The span a request has when tracing is off: records nothing, and no trace is made of it. */
const NOT_RECORDED = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * Runs `fn` inside a server span for one MCP request (a no-op span when
 * tracing is off), ended with the outcome `fn` reports.
 */
export async function inRequestSpan<T>(
  name: string,
  attributes: Record<string, string>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  // Tracing off: no span, no context to carry (what the no-op tracer would do, without its cost).
  if (!installed) return fn(NOT_RECORDED);
  const { tracer } = installed;
  return tracer.startActiveSpan(name, { kind: SpanKind.SERVER, attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      // The kind of failure only: messages carry caller input and target output.
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute('error.type', (err as Error)?.name ?? 'Error');
      throw err;
    } finally {
      span.end();
    }
  });
}
