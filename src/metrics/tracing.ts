// OpenTelemetry traces of this process, off unless DOSSIER_OTLP_TRACES_ENDPOINT
// names an OTLP/HTTP collector. A trace runs from the MCP tool call on the
// gateway (its span made here) through the workflow start, the workflow and
// its activities (the Temporal SDK's OpenTelemetry interceptors, which carry
// the context in Temporal headers). Spans name tools and launches, never
// arguments or results; the collector is the operator's, like /metrics.
//
// Only the API is loaded up front (its tracer is a no-op until a provider is
// registered); the SDK, the exporter and the interceptors load when tracing is on.
import { SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
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
  const spanProcessor = new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }), {
    // A second's worth of spans per request to the collector; at most 2,048 kept when it is away.
    scheduledDelayMillis: 1_000,
    maxQueueSize: 2_048,
  });
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
 * Runs `fn` inside a server span for one MCP request (a no-op span when
 * tracing is off), ended with the outcome `fn` reports.
 */
export async function inRequestSpan<T>(
  name: string,
  attributes: Record<string, string>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const tracer = installed?.tracer ?? trace.getTracer('dossier');
  return tracer.startActiveSpan(name, { kind: SpanKind.SERVER, attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  });
}
