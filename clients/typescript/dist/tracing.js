// tracing.ts — OpenTelemetry, when the application has @opentelemetry/api: put() sends the
// caller's trace context, and work() runs each handler in a span that continues the job's.
// The API is imported on first need (a dynamic import, remembered, never a dependency of this
// package): without it, puts send no trace context and handlers run exactly as before.
//
//   put() without traceparent/tracestate, a valid span active ─▶ that span's context is sent
//   work(), the job's 1st reservation ─▶ span "delayq process <tube>", child of job.traceparent
//   work(), a later reservation       ─▶ the same span in a trace of its own, linked to it
//
// A retry starts a trace of its own because it belongs to no request of the producer's: retries
// minutes or hours apart would otherwise stretch the producer's trace to their last one.
// Only W3C Trace Context is written and read, whatever propagator the application registered:
// it is what the server keeps, so span contexts are turned into traceparents here, not by
// propagation.inject (whose default propagator writes nothing). jobs() starts no span: its loop
// body is the caller's, who has job.traceparent.
// In a variable, so that TypeScript does not look for the module's types at build time.
const kApiModule = "@opentelemetry/api";
const kMaxTracestateBytes = 512; // the server's limit (docs/http-api.md, the put's headers)
const kTraceparent = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;
let loading;
/** @opentelemetry/api, or undefined when it cannot be imported; asked once per process. */
function otel() {
    loading ??= import(kApiModule).then((api) => api, () => undefined);
    return loading;
}
/** The active span's context as a put's headers; none without the API or a valid active span. */
export async function callerTraceHeaders() {
    const api = await otel();
    const span = api?.trace.getSpanContext(api.context.active());
    if (api === undefined || span === undefined || !api.isSpanContextValid(span))
        return {};
    const flags = (span.traceFlags & 0xff).toString(16).padStart(2, "0");
    const headers = { traceparent: `00-${span.traceId}-${span.spanId}-${flags}`.toLowerCase() };
    // A tracestate the server would refuse is left out rather than failing the put.
    const state = span.traceState?.serialize();
    if (state && state.length <= kMaxTracestateBytes && /^[\x20-\x7e]*$/.test(state))
        headers.tracestate = state;
    return headers;
}
/**
 * Runs `handler` for `job`, in a span continuing the job's trace when the API is there (see the
 * top of this file); the span records a throw and ends when the handler does.
 */
export async function processJob(job, handler) {
    const api = await otel();
    if (api === undefined)
        return handler();
    const stored = storedSpanContext(api, job);
    const child = stored !== undefined && job.counters.reserves <= 1;
    const parent = child ? api.trace.setSpanContext(api.ROOT_CONTEXT, stored) : api.ROOT_CONTEXT;
    const options = {
        kind: api.SpanKind.CONSUMER,
        attributes: {
            "messaging.system": "delayq",
            "messaging.operation.type": "process",
            "messaging.destination.name": job.tube,
            "messaging.message.id": String(job.id),
        },
        links: stored !== undefined && !child ? [{ context: stored }] : [],
        root: !child,
    };
    return api.trace.getTracer("delayq").startActiveSpan(`delayq process ${job.tube}`, options, parent, async (span) => {
        try {
            return await handler();
        }
        catch (error) {
            span.recordException(error instanceof Error ? error : String(error));
            span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
            throw error;
        }
        finally {
            span.end();
        }
    });
}
/** The job's traceparent and tracestate as a remote span context; undefined if it has none. */
function storedSpanContext(api, job) {
    const match = kTraceparent.exec(job.traceparent ?? "");
    if (match === null || match[1] === "ff")
        return undefined;
    const spanContext = {
        traceId: match[2],
        spanId: match[3],
        traceFlags: Number.parseInt(match[4], 16),
        isRemote: true,
    };
    if (job.tracestate)
        spanContext.traceState = api.createTraceState(job.tracestate);
    return api.isSpanContextValid(spanContext) ? spanContext : undefined;
}
