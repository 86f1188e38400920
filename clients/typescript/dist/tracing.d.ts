import type { Job } from "./models.js";
/** A put's trace headers. */
export interface TraceHeaders {
    traceparent?: string;
    tracestate?: string;
}
/** The active span's context as a put's headers; none without the API or a valid active span. */
export declare function callerTraceHeaders(): Promise<TraceHeaders>;
/**
 * Runs `handler` for `job`, in a span continuing the job's trace when the API is there (see the
 * top of this file); the span records a throw and ends when the handler does.
 */
export declare function processJob<T>(job: Job, handler: () => T | Promise<T>): Promise<T>;
