export { Client } from "./client.js";
export type { Body, ClientOptions, DueCountsOptions, FlowOptions, ListJobsOptions, ListSchedulesOptions, NextRunsOptions, PreviewOptions, PutJob, PutOptions, ReleaseOptions, RescheduleOptions, ReserveOptions, ScheduleOptions, TraceOptions, Tubes, WebhookOptions, WhenOptions, } from "./client.js";
export { BadRequestError, ConflictError, DelayqError, DrainingError, ForbiddenError, HeadersTooLargeError, InternalError, LimitError, MethodNotAllowedError, NoRouteError, NoSpaceError, NotFoundError, ServiceUnavailableError, StartingError, StoppingError, TooLargeError, TransportError, UnauthorizedError, UnavailableError, UnexpectedResponseError, UnsupportedError, WebhookSignatureError, errorFor, kErrorsByCode, } from "./errors.js";
export type { DelayqErrorOptions } from "./errors.js";
export type { Backup, DueBucket, DueCounts, FireLateness, FlowSettings, Job, JobCounters, JobList, JobState, Schedule, SchedulePage, ScheduleRun, Stats, TubeStats, Webhook, WebhookBackoff, } from "./models.js";
export { parseDuration } from "./times.js";
export type { Duration } from "./times.js";
export type { FetchFunction } from "./transport.js";
export { signPayload, signatureProblem, verifyNodeRequest, verifyRequest, verifySignature, webhookListener, webhookMiddleware, } from "./webhooks.js";
export type { HeadersLike, NodeRequestLike, NodeResponseLike, ReceiverOptions, Secret, VerifyOptions, WebhookDelivery, } from "./webhooks.js";
export { retryDelayMs } from "./worker.js";
export type { Backoff, JobsOptions, WorkContext, WorkHandler, WorkOptions, WorkStats } from "./worker.js";
/** This client's version, which is the server's it was written for. */
export declare const version = "0.1.0";
