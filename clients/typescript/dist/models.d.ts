/** A job's state. */
export declare type JobState = "ready" | "delayed" | "reserved" | "buried";
/** How often each thing has happened to a job. */
export interface JobCounters {
    reserves: number;
    /** TTR lapses. */
    timeouts: number;
    releases: number;
    buries: number;
    kicks: number;
    extra: Record<string, unknown>;
}
/** The schedule run a job is, read from its key `<name>@<instant in Unix ms>`. */
export interface ScheduleRun {
    name: string;
    instant: Date;
    extra: Record<string, unknown>;
}
/** A job as the server shows it. */
export interface Job {
    id: number;
    tube: string;
    state: JobState;
    /** 0 is the most urgent; default 1024. */
    priority: number;
    /** A delayed job: when it becomes ready. Any other state: when it last became ready. */
    due: Date;
    /** The delay it was last put, released or rescheduled with. */
    delayMs: number;
    /** Time to run once reserved (whole seconds). */
    ttrMs: number;
    created: Date;
    /** Reserved jobs only: when the TTR lapses. */
    reservedUntil?: Date;
    key?: string;
    group?: string;
    /** Only for a schedule's run. */
    schedule?: ScheduleRun;
    counters: JobCounters;
    /** Push delivery: the job's own URL and Content-Type (answers that carry the body). */
    url?: string;
    contentType?: string;
    /** Push delivery: the last failed attempt (answers that carry the body). */
    lastAttempt?: Date;
    /** HTTP status of the last failed attempt; 0 when no answer came. */
    lastStatus?: number;
    lastError?: string;
    /** The W3C Trace Context the job was put with, if any. */
    traceparent?: string;
    tracestate?: string;
    /** The body as text, when its bytes are UTF-8 (only answers that carry the body: get, reserve). */
    body?: string;
    /** The body's bytes, UTF-8 or not (only answers that carry the body). */
    bytes?: Uint8Array;
    /** True when a put found its key held and created nothing: this is the job that holds it. */
    existed: boolean;
    /**
     * True when a put with a debounce found its key held by a pending job and moved it: the same
     * id and `created` (its first put), with the put's body and fields and a new due time.
     */
    debounced: boolean;
    /** Fields this client does not know, as sent. */
    extra: Record<string, unknown>;
}
/** A page of a tube's jobs in one state; `complete` is false when the server's search cap cut it short. */
export interface JobList {
    jobs: Job[];
    complete: boolean;
    extra: Record<string, unknown>;
}
/** A tube's counts. */
export interface TubeStats {
    name: string;
    ready: number;
    delayed: number;
    reserved: number;
    buried: number;
    /** Ready jobs with a priority below 1024. */
    urgent: number;
    totalJobs: number;
    deletes: number;
    waiting: number;
    watching: number;
    using: number;
    /** The pause in force (whole seconds); 0 if none. */
    pauseMs: number;
    pauseLeftMs: number;
    /** Reservations before a failed one buries the job; 0 if no limit. */
    maxAttempts: number;
    /** Flow control (setFlow): at most this many jobs of one group reserved at once; 0 if off. */
    groupConcurrency: number;
    /** Flow control: groups take turns among the ready jobs of the best priority. */
    fair: boolean;
    /** Flow control: at most so many reserves of one group per duration ("10/1s"); null if off. */
    groupRate: string | null;
    /** Flow control: the reserves a group may take at once after a quiet spell. */
    groupBurst: number;
    /** Flow control: under `fair`, weight 3 gets three turns for weight 1's one; groups of weight 1 unnamed ({} if none). */
    groupWeights: Record<string, number>;
    /** Groups whose ready jobs are held back by concurrency or rate. */
    groupsHeld: number;
    /** Groups with a job that may be taken now. */
    groupsReady: number;
    oldestReadyAgeMs: number;
    /** listTubes() only, for a tube with a webhook. */
    webhookUrl?: string;
    /** listTubes() only: deliveries on this node by outcome (delivered, released, buried). */
    webhookDeliveries?: Record<string, number>;
    extra: Record<string, unknown>;
}
/** A tube's flow control, as setFlow() answers it; the fields as TubeStats' of the same names. */
export interface FlowSettings {
    tube: string;
    /** 0 if off. */
    groupConcurrency: number;
    fair: boolean;
    /** As the server writes it ("10/1s"); null if off. */
    groupRate: string | null;
    groupBurst: number;
    /** Only groups not of weight 1; {} if none. */
    groupWeights: Record<string, number>;
    extra: Record<string, unknown>;
}
/** Delayed jobs due from `from` (null: since ever) up to `to` (null: for ever). */
export interface DueBucket {
    from: Date | null;
    to: Date | null;
    jobs: number;
    extra: Record<string, unknown>;
}
/** How many delayed jobs come due between edges rounded down to `resolutionMs`. */
export interface DueCounts {
    /** The tube counted; undefined for every tube. */
    tube?: string;
    asOf: Date;
    resolutionMs: number;
    delayed: number;
    buckets: DueBucket[];
    extra: Record<string, unknown>;
}
/** A webhook's backoff between failed attempts. */
export interface WebhookBackoff {
    minMs: number;
    maxMs: number;
    factor: number;
    extra: Record<string, unknown>;
}
/** A tube's webhook, every field filled in; the secrets show only as how many there are. */
export interface Webhook {
    url: string;
    headers: Record<string, string>;
    timeoutMs: number;
    maxAttempts: number;
    backoff: WebhookBackoff;
    /** Requests started per second at most; 0: no limit. */
    rate: number;
    concurrency: number;
    /** How many secrets sign the requests: 0, 1 or 2. */
    secrets: number;
    extra: Record<string, unknown>;
}
/** A recurring schedule, every field filled in, and where it has got to. */
export interface Schedule {
    name: string;
    tube: string;
    /** A cron schedule's expression. */
    cron?: string;
    /** An interval schedule's interval. */
    everyMs?: number;
    tz: string;
    body?: string;
    bytes?: Uint8Array;
    priority: number;
    ttrMs: number;
    group?: string;
    url?: string;
    contentType?: string;
    startAt: Date | null;
    endAt: Date | null;
    limit: number | null;
    jitterMs: number;
    misfire: "skip" | "once" | "all";
    maxLatenessMs: number;
    overlap: "allow" | "skip" | "buffer_one";
    paused: boolean;
    /** The next instant that will run (before jitter); null when none will. */
    next: Date | null;
    lastRun: Date | null;
    waitingRun: Date | null;
    runs: number;
    misfires: number;
    overlapsSkipped: number;
    extra: Record<string, unknown>;
}
/** One page of schedules; `more` says to ask again with `after` = the last name. */
export interface SchedulePage {
    schedules: Schedule[];
    more: boolean;
    extra: Record<string, unknown>;
}
/** From due time to ready, as the fire-lateness histogram counts it. */
export interface FireLateness {
    p50Ms: number | null;
    p90Ms: number | null;
    p99Ms: number | null;
    /** Not cumulative; the last has `leMs` null. */
    buckets: Array<{
        leMs: number | null;
        jobs: number;
    }>;
    extra: Record<string, unknown>;
}
/** Server-wide counts (GET /v1/stats). */
export interface Stats {
    version: string;
    /** "local" (the embedded store) or "redis"; "local" from a server too old to say. */
    mode: string;
    uptimeSeconds: number;
    draining: boolean;
    ready: number;
    delayed: number;
    reserved: number;
    buried: number;
    urgent: number;
    totalJobs: number;
    jobTimeouts: number;
    tubes: number;
    nextId: number;
    waiting: number;
    deletes: number;
    buries: number;
    fired: number;
    fireLateness: FireLateness;
    /** Connections open now, by protocol (beanstalk, http). */
    connections: Record<string, number>;
    health: {
        status: string;
        message?: string;
    };
    extra: Record<string, unknown>;
}
/** What a backup wrote. */
export interface Backup {
    dir: string;
    /** Jobs the server held when the request came. */
    jobs: number;
    bytes: number;
    tookMs: number;
    extra: Record<string, unknown>;
}
export declare function readCounters(data: unknown): JobCounters;
export declare function readJob(data: unknown, existed?: boolean): Job;
export declare function readJobList(data: unknown): JobList;
export declare function readTubeStats(data: unknown): TubeStats;
export declare function readTubeList(data: unknown): TubeStats[];
export declare function readFlowSettings(data: unknown): FlowSettings;
export declare function readDueCounts(data: unknown): DueCounts;
export declare function readWebhook(data: unknown): Webhook;
export declare function readSchedule(data: unknown): Schedule;
export declare function readSchedulePage(data: unknown): SchedulePage;
/** The instants of `next` and of a preview. */
export declare function readRuns(data: unknown): Date[];
export declare function readStats(data: unknown): Stats;
export declare function readBackup(data: unknown): Backup;
/** One number field of a small answer ({"deleted": 3}, {"kicked": 1}, ...). */
export declare function readNumber(data: unknown, name: string, what: string): number;
/** One string field of a small answer ({"status": "ok"}). */
export declare function readString(data: unknown, name: string, what: string): string;
/** A list of jobs under `name` ({"jobs": [...]}). */
export declare function readJobs(data: unknown, name: string, what: string): Job[];
