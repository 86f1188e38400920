import type { DelayqError } from "./errors.js";
import type { Backup, DueCounts, FlowSettings, Job, JobList, JobState, Schedule, SchedulePage, Stats, TubeStats, Webhook } from "./models.js";
import type { Duration } from "./times.js";
import type { FetchFunction } from "./transport.js";
import type { JobsOptions, WorkHandler, WorkOptions, WorkStats } from "./worker.js";
/** A job body: text (sent as `body`) or bytes (sent as `body_base64`). */
export declare type Body = string | Uint8Array;
/** One tube, or several. */
export declare type Tubes = string | readonly string[];
export interface ClientOptions {
    /** Where delayqd's HTTP API is. Default "http://127.0.0.1:8080". */
    baseUrl?: string;
    /** A bearer token of the server's --http-token-file. Default none. */
    token?: string;
    /** How long to wait for each answer, in ms; a long-poll reserve adds its own wait. Default 30000. */
    timeoutMs?: number;
    /** More headers for every request (a proxy's). Default none. */
    headers?: Record<string, string>;
    /** The fetch to call. Default the global fetch. */
    fetch?: FetchFunction;
}
/** When a job becomes ready: after `delay`, or at `at` (not both). Default at once. */
export interface WhenOptions {
    delay?: Duration;
    at?: Date;
}
export interface PutOptions extends WhenOptions {
    /** 0 (most urgent) to 4294967295. Default 1024. */
    priority?: number;
    /** Time to run once reserved, rounded up to whole seconds. Default 60 s. */
    ttr?: Duration;
    /** Unique in the tube: if a job holds it, nothing is put and that job is answered (`existed`). */
    key?: string;
    /** Tags the job for listGroup() and cancelGroup(). */
    group?: string;
    /** With `key`: delete the job that holds it and put this one in its place. */
    replace?: boolean;
    /**
     * With `key`, instead of `delay`, `at` and `replace`: if a delayed or ready job holds the key,
     * it takes this put's body and fields and is due `debounce` from now, answered with
     * `debounced` true (same id); a buried holder is replaced; otherwise a new job is due in
     * `debounce`. A reserved holder: ConflictError.
     */
    debounce?: Duration;
    /** With `debounce`: a moved job is never due later than its first put plus this. */
    maxWait?: Duration;
    /** Push delivery: POST this job here instead of to the tube's webhook (the tube needs one). */
    url?: string;
    /** Push delivery: the Content-Type the body is POSTed with. Default application/octet-stream. */
    contentType?: string;
    /**
     * A W3C Trace Context kept with the job: `job.traceparent` wherever the job is read or
     * reserved, and sent with each push delivery attempt. Default, when neither is given: the
     * active span's, if @opentelemetry/api is installed (tracing.ts).
     */
    traceparent?: string;
    tracestate?: string;
}
/** The trace context of putMany()'s jobs, as PutOptions gives put()'s. */
export declare type TraceOptions = Pick<PutOptions, "traceparent" | "tracestate">;
/** One job of putMany(): its tube, its body (default empty) and put()'s options. */
export interface PutJob extends Omit<PutOptions, "traceparent" | "tracestate"> {
    tube: string;
    body?: Body;
}
export interface RescheduleOptions extends WhenOptions {
    /** A new priority. */
    priority?: number;
}
export interface ReserveOptions {
    /** How long to wait for a job. Default 0: answer at once. At most 1 hour. */
    timeout?: Duration;
    /** Ends the wait early; no job is taken then. */
    signal?: AbortSignal;
}
export interface ReleaseOptions {
    /** Ready again after this long. Default 0: at once. */
    delay?: Duration;
    /** A new priority. Default the job's. */
    priority?: number;
}
export interface ListJobsOptions {
    /** Default "ready". */
    state?: JobState;
    /** 1 to 1000. Default 20. */
    limit?: number;
}
/** The settings setFlow() changes; one left out (undefined) stays as it is. */
export interface FlowOptions {
    /** At most this many jobs of one group reserved at once (webhook deliveries count), up to 1000000; null or 0: off. */
    groupConcurrency?: number | null;
    /** true: groups take turns among the ready jobs of the best priority. */
    fair?: boolean;
    /** At most <jobs> reserves of one group per <duration>: "10/s", "600/1m", "1/1500ms"; null: off. */
    groupRate?: string | null;
    /** The reserves a group may take at once after a quiet spell, 1 to 1000000 (the server's default 1). */
    groupBurst?: number;
    /** Under `fair`, turns in proportion to weight: group → 1 to 1000, or null (or 1) for the default 1; only the groups named change. */
    groupWeights?: Record<string, number | null>;
}
export interface DueCountsOptions {
    /** Edges: all durations from now, or all Dates. Default the server's 0s,1m,1h,1d,7d. */
    edges?: readonly Duration[] | readonly Date[];
}
export interface WebhookOptions {
    /** Sent with every request (at most 32). */
    headers?: Record<string, string>;
    /** One attempt's time limit, 100 ms to 30 min. Default 10 s. */
    timeout?: Duration;
    /** The attempt after which a failure buries the job, 1 to 1000. Default 20. */
    maxAttempts?: number;
    /** The wait after failed attempt n is drawn between half and all of min(max, min × factor^(n−1)). */
    backoff?: {
        min?: Duration;
        max?: Duration;
        factor?: number;
    };
    /** Requests started per second at most; 0: no limit (the default). */
    rate?: number;
    /** Requests under way at most, 1 to 1000. Default 8. */
    concurrency?: number;
    /** One or two (while rotating) HMAC keys that sign every request (see verifySignature). */
    secrets?: readonly string[];
}
export interface ScheduleOptions {
    /** A cron expression in `tz`'s local time. Exactly one of `cron` and `every`. */
    cron?: string;
    /** An interval of at least 1 s. */
    every?: Duration;
    /** An IANA time zone. Default "UTC". */
    tz?: string;
    /** Each run's job: as put(). */
    body?: Body;
    priority?: number;
    ttr?: Duration;
    group?: string;
    url?: string;
    contentType?: string;
    /** No run before it. */
    startAt?: Date;
    /** No run after it. */
    endAt?: Date;
    /** No scheduled run once `runs` reaches it. */
    limit?: number;
    /** Each on-time run is due at its instant plus a random 0 to `jitter`. Default 0. */
    jitter?: Duration;
    /** What runs for instants reached late. Default "once". */
    misfire?: "skip" | "once" | "all";
    /** How late an instant may be and still run by `misfire`. Default 1 h. */
    maxLateness?: Duration;
    /** What a run does while the previous run's job exists. Default "allow". */
    overlap?: "allow" | "skip" | "buffer_one";
    /** Set the schedule paused. Default false. */
    paused?: boolean;
}
export interface PreviewOptions extends ScheduleOptions {
    /** How many instants, 1 to 1000. Default 10. */
    count?: number;
    /** Instants strictly after this. Default now. */
    after?: Date;
}
export interface NextRunsOptions {
    /** How many instants, 1 to 1000. Default 10. */
    count?: number;
    /** Instants strictly after this. Default now. */
    after?: Date;
}
export interface ListSchedulesOptions {
    /** Schedules whose names come after this one. Default from the first. */
    after?: string;
    /** 1 to 1000. Default 100. */
    limit?: number;
}
/** A client of delayqd's HTTP/JSON API. Every method returns a promise; errors throw DelayqError's classes. */
export declare class Client {
    /** Where the server is, as given. */
    readonly baseUrl: string;
    private readonly http;
    constructor(options?: ClientOptions);
    /** A client set up as the delayq CLI is: $DELAYQ_SERVER, $DELAYQ_TOKEN, then `options`. */
    static fromEnv(options?: ClientOptions): Client;
    /** Any route, for what this client has no method for: the answer's JSON (null for a 204). */
    request(method: string, path: string, options?: {
        body?: unknown;
        query?: Record<string, string | number | undefined>;
        signal?: AbortSignal;
    }): Promise<unknown>;
    /**
     * Puts a job into `tube` (POST /v1/tubes/{tube}/jobs), durable when the promise resolves.
     * A key already held answers that job, with `existed` true (unless `replace`), or, with
     * `debounce`, moves it (`debounced` true).
     * Throws BadRequestError, ConflictError, TooLargeError, DrainingError, NoSpaceError, LimitError.
     */
    put(tube: string, body?: Body, options?: PutOptions): Promise<Job>;
    /**
     * Puts up to 1000 jobs, into any tubes, in one request (POST /v1/jobs), each as put() would
     * put it, all durable when the promise resolves (they share the server's writes to disk).
     * Resolves to one entry per job, in their order: the Job (`existed` and `debounced` as put()
     * sets them), or the DelayqError that refused that job, not thrown: one refused does not stop
     * the others (a job without a valid tube among them). `options` gives the trace context of
     * every job, as put()'s. Throws BadRequestError if `jobs` is empty or holds more than 1000,
     * TooLargeError if the request is over the server's request body limit (1 MiB by default).
     */
    putMany(jobs: Iterable<PutJob>, options?: TraceOptions): Promise<(Job | DelayqError)[]>;
    /** The job, in any state, with its body. Throws NotFoundError. */
    getJob(id: number): Promise<Job>;
    /**
     * A new due time (`delay` or `at`) and/or priority (PATCH /v1/jobs/{id}). A new due time needs
     * a ready or delayed job (ConflictError otherwise). Throws NotFoundError.
     */
    reschedule(id: number, options: RescheduleOptions): Promise<Job>;
    /** Deletes a job that is ready, delayed, buried or reserved over HTTP; resolves to its id. */
    deleteJob(id: number): Promise<number>;
    /** The job of `tube` holding `key`, with its body. Throws NotFoundError. */
    getKey(tube: string, key: string): Promise<Job>;
    /** reschedule() for the job of `tube` holding `key`. */
    rescheduleKey(tube: string, key: string, options: RescheduleOptions): Promise<Job>;
    /** Deletes the job of `tube` holding `key`, freeing the key; resolves to its id. */
    deleteKey(tube: string, key: string): Promise<number>;
    /** Every job of the group, in any state, by id, without bodies (an unknown group: []). */
    listGroup(tube: string, group: string): Promise<Job[]>;
    /** Deletes every job of the group that is not reserved; resolves to how many. */
    cancelGroup(tube: string, group: string): Promise<number>;
    /**
     * Reserves the most urgent ready job of `tubes` (POST /v1/reserve), waiting up to `timeout`
     * for one; null if none came. The job is then held over HTTP: finish it with deleteJob(),
     * release() or bury(), or ask for more time with touch(), before `reservedUntil`.
     * Throws StoppingError if the server was told to stop during the wait.
     */
    reserve(tubes?: Tubes, options?: ReserveOptions): Promise<Job | null>;
    /**
     * Reserves up to `count` (1 to 100) jobs of `tubes` in one request (POST /v1/reserve with a
     * count): waits up to `timeout` for the first, as reserve() does, then takes the jobs ready at
     * that moment, most urgent first, until `count` or 1 MiB of bodies. An empty array if none
     * came. Each job is held as reserve()'s is: finish each by its id.
     */
    reserveMany(tubes?: Tubes, count?: number, options?: ReserveOptions): Promise<Job[]>;
    /** POST /v1/reserve with `fields`, asked again in chunks until `timeout`: its answer, or null (204). */
    private longPoll;
    /** Gives back a job reserved over HTTP: ready, or delayed for `delay`. Throws ConflictError if not reserved over HTTP. */
    release(id: number, options?: ReleaseOptions): Promise<Job>;
    /** Sets a job reserved over HTTP aside, until a kick or a delete. */
    bury(id: number, options?: {
        priority?: number;
    }): Promise<Job>;
    /** Starts a reserved job's TTR again, in full, from now. */
    touch(id: number): Promise<Job>;
    /** Makes one buried or delayed job ready. Throws ConflictError if it is ready or reserved. */
    kickJob(id: number): Promise<Job>;
    /**
     * The jobs of `tubes`, reserved one at a time as the loop asks for them, until `signal` aborts:
     * `for await (const job of client.jobs("emails", { signal })) { ...; await client.deleteJob(job.id) }`.
     * Each job yielded is reserved: finish it before its TTR lapses.
     */
    jobs(tubes: Tubes, options?: JobsOptions): AsyncGenerator<Job, void, undefined>;
    /**
     * Runs `handler` on the jobs of `tubes`, `concurrency` at a time, until `signal` aborts: deletes
     * a job whose handler resolved, releases one whose handler threw (with an exponential backoff),
     * and touches a job whose handler runs past half its TTR. Resolves once stopped.
     */
    work(tubes: Tubes, handler: WorkHandler, options?: WorkOptions): Promise<WorkStats>;
    /** Every tube that exists, by name, with its counts. */
    listTubes(): Promise<TubeStats[]>;
    /** One tube's counts. Throws NotFoundError (looking does not create it). */
    tubeStats(tube: string): Promise<TubeStats>;
    /** The tube's first jobs in one state, in the order they will be served, without bodies. UnsupportedError in Redis mode. */
    listJobs(tube: string, options?: ListJobsOptions): Promise<JobList>;
    /**
     * How many delayed jobs of `tube` (null: of every tube) come due between edges.
     * UnsupportedError in Redis mode.
     */
    dueCounts(tube?: string | null, options?: DueCountsOptions): Promise<DueCounts>;
    /** Reservations each job of the tube gets before a failed one buries it (0: no limit); resolves to the limit in force. */
    setMaxAttempts(tube: string, maxAttempts: number): Promise<number>;
    /**
     * Sets the tube's flow control over the groups of its jobs (PATCH /v1/tubes/{tube}); durable,
     * and kept while the tube does not exist. Only the settings given change. Resolves to the
     * settings in force. Throws TypeError if none is given, BadRequestError, ConflictError (Redis
     * mode: the first settings of a tube that already has jobs).
     */
    setFlow(tube: string, options: FlowOptions): Promise<FlowSettings>;
    /** Makes up to `bound` jobs of the tube ready: its buried jobs if any, else its delayed ones. Resolves to how many. */
    kick(tube: string, bound?: number): Promise<number>;
    /** Hands out no job of the tube for `delay` (0 ends a pause). Resolves to the pause in force, in ms (whole seconds). */
    pauseTube(tube: string, delay: Duration): Promise<number>;
    /** Sets the tube's webhook, replacing the one it had as a whole (left-out options take their defaults). */
    setWebhook(tube: string, url: string, options?: WebhookOptions): Promise<Webhook>;
    /** The tube's webhook. Throws NotFoundError if it has none. */
    getWebhook(tube: string): Promise<Webhook>;
    /** Removes the tube's webhook; resolves to the webhook removed. Throws NotFoundError if it has none. */
    removeWebhook(tube: string): Promise<Webhook>;
    /** Creates the schedule `name`, or replaces it as a whole: a job into `tube` at each instant of `cron` or `every`. */
    setSchedule(name: string, tube: string, options: ScheduleOptions): Promise<Schedule>;
    /** The schedule, with its next run and counts. Throws NotFoundError. */
    getSchedule(name: string): Promise<Schedule>;
    /** One page of schedules by name. */
    listSchedules(options?: ListSchedulesOptions): Promise<SchedulePage>;
    /** Every schedule, by name, a page at a time. */
    schedules(options?: {
        pageSize?: number;
    }): AsyncGenerator<Schedule, void, undefined>;
    /** Deletes the schedule (and its run put ahead, if still delayed); resolves to it as it was. */
    removeSchedule(name: string): Promise<Schedule>;
    /** Puts no run until resumed. */
    pauseSchedule(name: string): Promise<Schedule>;
    /** Runs again; instants missed meanwhile go by the schedule's `misfire`. */
    resumeSchedule(name: string): Promise<Schedule>;
    /** One run now, paused or not: a job keyed `<name>@<now in Unix ms>`. */
    triggerSchedule(name: string): Promise<Job>;
    /** A run due now for each instant from `from` to `to`, both included (at most 1000); runs still in the tube are answered, not put again. */
    backfillSchedule(name: string, from: Date, to: Date): Promise<Job[]>;
    /** The schedule's next instants after `after` (default now), as start_at and end_at allow. */
    nextRuns(name: string, options?: NextRunsOptions): Promise<Date[]>;
    /** The instants a definition would run at, without setting it (in Redis mode too). */
    previewSchedule(tube: string, options: PreviewOptions): Promise<Date[]>;
    /** Server-wide counts. */
    stats(): Promise<Stats>;
    /** Liveness (GET /healthz): "ok" whenever the process answers. */
    health(): Promise<string>;
    /** Readiness (GET /readyz): "ready", or throws DrainingError, NoSpaceError, UnavailableError or StartingError. */
    ready(): Promise<string>;
    /** The Prometheus text of GET /metrics. */
    metrics(): Promise<string>;
    /** Writes a consistent copy of the data directory into `dir`, a new absolute path on the server's machine. UnsupportedError in Redis mode. */
    backup(dir: string): Promise<Backup>;
}
