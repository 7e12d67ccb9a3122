// Spans leave the process without error text: what a failure said (caller
// input, target output) never reaches the collector, only that it failed and
// the kind of failure. Real OpenTelemetry SDK parts, an in-memory exporter.
import { SpanStatusCode } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { withoutErrorText } from './tracing.ts';

describe('withoutErrorText', () => {
  it('keeps the status code and the exception type, drops messages and stacks', () => {
    const exported = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      spanProcessors: [withoutErrorText(new SimpleSpanProcessor(exported))],
    });
    const span = provider.getTracer('t').startSpan('RunActivity:runAnalysis', {
      attributes: { 'dossier.tool': 'decompile_function' },
    });
    span.recordException(new TypeError('No function "secret_password_check_for_acme" in this binary'));
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'No function "secret_password_check_for_acme"' });
    span.addEvent('progress', { step: 1 });
    span.end();

    const [out] = exported.getFinishedSpans();
    expect(out!.name).toBe('RunActivity:runAnalysis');
    expect(out!.status).toEqual({ code: SpanStatusCode.ERROR });
    expect(out!.attributes).toEqual({ 'dossier.tool': 'decompile_function' });
    expect(out!.events.map((e) => [e.name, e.attributes])).toEqual([
      ['exception', { 'exception.type': 'TypeError' }],
      ['progress', { step: 1 }],
    ]);
    expect(JSON.stringify(out!.events)).not.toContain('secret');
    expect(out!.spanContext().traceId).toBe(span.spanContext().traceId);
  });
});
