// models.ts — the objects the HTTP API answers, read into typed objects.
// Each reader takes one JSON object: the fields this client knows become camelCase properties
// (times as Date, durations as milliseconds with the unit in the name, bodies as bytes and
// text), and every other field is kept, as the server sent it, in `extra`, so that a newer
// server's additions neither break this client nor get lost. A field the client needs that
// is missing or of the wrong type throws UnexpectedResponseError. The fields' meanings:
// docs/http-api.md "The job and tube objects", "Webhooks", "Schedules", "Server".

import { UnexpectedResponseError } from "./errors.js";
import { parseDuration } from "./times.js";
import { isObject } from "./transport.js";

/** A job's state. */
export type JobState = "ready" | "delayed" | "reserved" | "buried";

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
  buckets: Array<{ leMs: number | null; jobs: number }>;
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
  health: { status: string; message?: string };
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

// Takes the known fields out of one JSON object; what is left is rest().
class Fields {
  private readonly data: Record<string, unknown>;

  constructor(
    data: unknown,
    private readonly what: string,
  ) {
    if (!isObject(data)) throw new UnexpectedResponseError(`${what}: expected a JSON object, got ${show(data)}`);
    this.data = { ...data };
  }

  private take(name: string): unknown {
    const value = this.data[name];
    delete this.data[name];
    return value;
  }

  private wrong(name: string, value: unknown, expected: string): UnexpectedResponseError {
    return new UnexpectedResponseError(
      value === undefined || value === null
        ? `${this.what}: no field ${JSON.stringify(name)}`
        : `${this.what}: field ${JSON.stringify(name)} is ${show(value)}, not ${expected}`,
    );
  }

  number(name: string): number {
    const value = this.take(name);
    if (typeof value !== "number") throw this.wrong(name, value, "a number");
    return value;
  }

  numberOrNull(name: string): number | null {
    const value = this.take(name);
    if (value === undefined || value === null) return null;
    if (typeof value !== "number") throw this.wrong(name, value, "a number");
    return value;
  }

  string(name: string): string {
    const value = this.take(name);
    if (typeof value !== "string") throw this.wrong(name, value, "a string");
    return value;
  }

  stringOrUndefined(name: string): string | undefined {
    const value = this.take(name);
    if (value === undefined || value === null) return undefined;
    if (typeof value !== "string") throw this.wrong(name, value, "a string");
    return value;
  }

  boolean(name: string): boolean {
    const value = this.take(name);
    if (typeof value !== "boolean") throw this.wrong(name, value, "a boolean");
    return value;
  }

  booleanOrUndefined(name: string): boolean | undefined {
    const value = this.take(name);
    if (value === undefined || value === null) return undefined;
    if (typeof value !== "boolean") throw this.wrong(name, value, "a boolean");
    return value;
  }

  object<T>(name: string, read: (data: unknown) => T): T {
    const value = this.take(name);
    if (!isObject(value)) throw this.wrong(name, value, "an object");
    return read(value);
  }

  objectOrUndefined<T>(name: string, read: (data: unknown) => T): T | undefined {
    const value = this.take(name);
    if (value === undefined || value === null) return undefined;
    if (!isObject(value)) throw this.wrong(name, value, "an object");
    return read(value);
  }

  array<T>(name: string, read: (data: unknown) => T): T[] {
    const value = this.take(name);
    if (!Array.isArray(value)) throw this.wrong(name, value, "an array");
    return value.map(read);
  }

  counts(name: string): Record<string, number> | undefined {
    const value = this.take(name);
    if (value === undefined || value === null) return undefined;
    if (!isObject(value) || !Object.values(value).every((v) => typeof v === "number")) {
      throw this.wrong(name, value, "an object of numbers");
    }
    return value as Record<string, number>;
  }

  strings(name: string): Record<string, string> {
    const value = this.take(name);
    if (!isObject(value) || !Object.values(value).every((v) => typeof v === "string")) {
      throw this.wrong(name, value, "an object of strings");
    }
    return { ...(value as Record<string, string>) };
  }

  unixMs(name: string): Date {
    return new Date(this.number(name));
  }

  unixMsOrNull(name: string): Date | null {
    const value = this.numberOrNull(name);
    return value === null ? null : new Date(value);
  }

  time(name: string): Date {
    return this.parsed(name, this.string(name), parseTime);
  }

  timeOrUndefined(name: string): Date | undefined {
    const value = this.stringOrUndefined(name);
    return value === undefined ? undefined : this.parsed(name, value, parseTime);
  }

  duration(name: string): number {
    return this.parsed(name, this.string(name), parseDuration);
  }

  durationOrUndefined(name: string): number | undefined {
    const value = this.stringOrUndefined(name);
    return value === undefined ? undefined : this.parsed(name, value, parseDuration);
  }

  /** body or body_base64, as text (when UTF-8) and bytes. */
  body(): { body?: string; bytes?: Uint8Array } {
    const text = this.stringOrUndefined("body");
    const encoded = this.stringOrUndefined("body_base64");
    if (text !== undefined) return { body: text, bytes: new TextEncoder().encode(text) };
    if (encoded !== undefined) {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded) || encoded.length % 4 !== 0) {
        throw this.wrong("body_base64", encoded, "base64");
      }
      return { bytes: new Uint8Array(Buffer.from(encoded, "base64")) };
    }
    return {};
  }

  drop(...names: string[]): void {
    for (const name of names) delete this.data[name];
  }

  rest(): Record<string, unknown> {
    return this.data;
  }

  private parsed<T>(name: string, value: string, parse: (text: string) => T): T {
    try {
      return parse(value);
    } catch {
      throw this.wrong(name, value, "what this client can read");
    }
  }
}

function show(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function parseTime(text: string): Date {
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) throw new TypeError(`not a time: ${text}`);
  return date;
}

// Drops a property whose value is undefined, so that `"key" in job` says whether it has one.
function defined<T extends object>(value: T): T {
  for (const name of Object.keys(value) as Array<keyof T>) {
    if (value[name] === undefined) delete value[name];
  }
  return value;
}

export function readCounters(data: unknown): JobCounters {
  const f = new Fields(data, "counters");
  return {
    reserves: f.number("reserves"),
    timeouts: f.number("timeouts"),
    releases: f.number("releases"),
    buries: f.number("buries"),
    kicks: f.number("kicks"),
    extra: f.rest(),
  };
}

function readScheduleRun(data: unknown): ScheduleRun {
  const f = new Fields(data, "schedule");
  const name = f.string("name");
  const instant = f.unixMs("instant_unix_ms");
  f.drop("instant");
  return { name, instant, extra: f.rest() };
}

export function readJob(data: unknown, existed = false): Job {
  const f = new Fields(data, "job");
  // A debounced put answers 200 too, but it did take the put's body and fields.
  const debounced = f.booleanOrUndefined("debounced") ?? false;
  const job: Job = {
    id: f.number("id"),
    tube: f.string("tube"),
    state: f.string("state") as JobState,
    priority: f.number("priority"),
    due: f.unixMs("due_unix_ms"),
    delayMs: f.number("delay_ms"),
    ttrMs: f.number("ttr_ms"),
    created: f.time("created"),
    counters: f.object("counters", readCounters),
    existed: existed && !debounced,
    debounced,
    extra: {},
  };
  const reservedUntil = f.numberOrNull("reserved_until_unix_ms");
  if (reservedUntil !== null) job.reservedUntil = new Date(reservedUntil);
  Object.assign(job, {
    key: f.stringOrUndefined("key"),
    group: f.stringOrUndefined("group"),
    schedule: f.objectOrUndefined("schedule", readScheduleRun),
    url: f.stringOrUndefined("url"),
    contentType: f.stringOrUndefined("content_type"),
    lastAttempt: f.timeOrUndefined("last_attempt"),
    lastStatus: f.numberOrNull("last_status") ?? undefined,
    lastError: f.stringOrUndefined("last_error"),
    traceparent: f.stringOrUndefined("traceparent"),
    tracestate: f.stringOrUndefined("tracestate"),
    ...f.body(),
  });
  // The RFC 3339 twins of the *_unix_ms fields say nothing more.
  f.drop("due", "reserved_until");
  job.extra = f.rest();
  return defined(job);
}

export function readJobList(data: unknown): JobList {
  const f = new Fields(data, "job list");
  return { jobs: f.array("jobs", (job) => readJob(job)), complete: f.boolean("complete"), extra: f.rest() };
}

export function readTubeStats(data: unknown): TubeStats {
  const f = new Fields(data, "tube");
  return defined({
    name: f.string("name"),
    ready: f.number("ready"),
    delayed: f.number("delayed"),
    reserved: f.number("reserved"),
    buried: f.number("buried"),
    urgent: f.number("urgent"),
    totalJobs: f.number("total_jobs"),
    deletes: f.number("deletes"),
    waiting: f.number("waiting"),
    watching: f.number("watching"),
    using: f.number("using"),
    pauseMs: f.number("pause_s") * 1000,
    pauseLeftMs: f.number("pause_left_ms"),
    maxAttempts: f.number("max_attempts"),
    groupConcurrency: f.number("group_concurrency"),
    fair: f.boolean("fair"),
    groupRate: f.stringOrUndefined("group_rate") ?? null,
    groupBurst: f.number("group_burst"),
    groupWeights: f.counts("group_weights") ?? {},
    groupsHeld: f.number("groups_held"),
    groupsReady: f.number("groups_ready"),
    oldestReadyAgeMs: f.numberOrNull("oldest_ready_age_ms") ?? 0,
    webhookUrl: f.stringOrUndefined("webhook_url"),
    webhookDeliveries: f.counts("webhook_deliveries"),
    extra: f.rest(),
  });
}

export function readTubeList(data: unknown): TubeStats[] {
  return new Fields(data, "tube list").array("tubes", readTubeStats);
}

export function readFlowSettings(data: unknown): FlowSettings {
  const f = new Fields(data, "flow");
  return {
    tube: f.string("tube"),
    groupConcurrency: f.number("group_concurrency"),
    fair: f.boolean("fair"),
    groupRate: f.stringOrUndefined("group_rate") ?? null,
    groupBurst: f.number("group_burst"),
    groupWeights: f.counts("group_weights") ?? {},
    extra: f.rest(),
  };
}

function readDueBucket(data: unknown): DueBucket {
  const f = new Fields(data, "due bucket");
  return { from: f.unixMsOrNull("from_unix_ms"), to: f.unixMsOrNull("to_unix_ms"), jobs: f.number("jobs"), extra: f.rest() };
}

export function readDueCounts(data: unknown): DueCounts {
  const f = new Fields(data, "due counts");
  return defined({
    tube: f.stringOrUndefined("tube"),
    asOf: f.unixMs("as_of_unix_ms"),
    resolutionMs: f.number("resolution_ms"),
    delayed: f.number("delayed"),
    buckets: f.array("buckets", readDueBucket),
    extra: f.rest(),
  });
}

function readBackoff(data: unknown): WebhookBackoff {
  const f = new Fields(data, "backoff");
  return { minMs: f.duration("min"), maxMs: f.duration("max"), factor: f.number("factor"), extra: f.rest() };
}

export function readWebhook(data: unknown): Webhook {
  const f = new Fields(data, "webhook");
  return {
    url: f.string("url"),
    headers: f.strings("headers"),
    timeoutMs: f.duration("timeout"),
    maxAttempts: f.number("max_attempts"),
    backoff: f.object("backoff", readBackoff),
    rate: f.number("rate"),
    concurrency: f.number("concurrency"),
    secrets: f.number("secrets"),
    extra: f.rest(),
  };
}

// A schedule's time: {"at": RFC 3339 with the zone's offset, "unix_ms": ...}, or null.
function readScheduleTime(data: unknown): Date {
  const f = new Fields(data, "schedule time");
  return f.unixMs("unix_ms");
}

function scheduleTime(f: Fields, name: string): Date | null {
  return f.objectOrUndefined(name, readScheduleTime) ?? null;
}

export function readSchedule(data: unknown): Schedule {
  const f = new Fields(data, "schedule");
  return defined({
    name: f.string("name"),
    tube: f.string("tube"),
    cron: f.stringOrUndefined("cron"),
    everyMs: f.durationOrUndefined("every"),
    tz: f.string("tz"),
    ...f.body(),
    priority: f.number("priority"),
    ttrMs: f.duration("ttr"),
    group: f.stringOrUndefined("group"),
    url: f.stringOrUndefined("url"),
    contentType: f.stringOrUndefined("content_type"),
    startAt: scheduleTime(f, "start_at"),
    endAt: scheduleTime(f, "end_at"),
    limit: f.numberOrNull("limit"),
    jitterMs: f.duration("jitter"),
    misfire: f.string("misfire") as Schedule["misfire"],
    maxLatenessMs: f.duration("max_lateness"),
    overlap: f.string("overlap") as Schedule["overlap"],
    paused: f.boolean("paused"),
    next: scheduleTime(f, "next"),
    lastRun: scheduleTime(f, "last_run"),
    waitingRun: scheduleTime(f, "waiting_run"),
    runs: f.number("runs"),
    misfires: f.number("misfires"),
    overlapsSkipped: f.number("overlaps_skipped"),
    extra: f.rest(),
  });
}

export function readSchedulePage(data: unknown): SchedulePage {
  const f = new Fields(data, "schedule page");
  return { schedules: f.array("schedules", readSchedule), more: f.boolean("more"), extra: f.rest() };
}

/** The instants of `next` and of a preview. */
export function readRuns(data: unknown): Date[] {
  const f = new Fields(data, "runs");
  return f.array("runs", readScheduleTime);
}

function readFireLateness(data: unknown): FireLateness {
  const f = new Fields(data, "fire_lateness");
  return {
    p50Ms: f.numberOrNull("p50_ms"),
    p90Ms: f.numberOrNull("p90_ms"),
    p99Ms: f.numberOrNull("p99_ms"),
    buckets: f.array("buckets", (bucket) => {
      const b = new Fields(bucket, "fire_lateness bucket");
      return { leMs: b.numberOrNull("le_ms"), jobs: b.number("jobs") };
    }),
    extra: f.rest(),
  };
}

function readHealth(data: unknown): Stats["health"] {
  const f = new Fields(data, "health");
  return defined({ status: f.string("status"), message: f.stringOrUndefined("message") });
}

export function readStats(data: unknown): Stats {
  const f = new Fields(data, "stats");
  return {
    version: f.string("version"),
    mode: f.stringOrUndefined("mode") ?? "local",
    uptimeSeconds: f.number("uptime_s"),
    draining: f.boolean("draining"),
    ready: f.number("ready"),
    delayed: f.number("delayed"),
    reserved: f.number("reserved"),
    buried: f.number("buried"),
    urgent: f.number("urgent"),
    totalJobs: f.number("total_jobs"),
    jobTimeouts: f.number("job_timeouts"),
    tubes: f.number("tubes"),
    nextId: f.number("next_id"),
    waiting: f.number("waiting"),
    deletes: f.number("deletes"),
    buries: f.number("buries"),
    fired: f.number("fired"),
    fireLateness: f.object("fire_lateness", readFireLateness),
    connections: f.counts("connections") ?? {},
    health: f.object("health", readHealth),
    extra: f.rest(),
  };
}

export function readBackup(data: unknown): Backup {
  const f = new Fields(data, "backup");
  return { dir: f.string("dir"), jobs: f.number("jobs"), bytes: f.number("bytes"), tookMs: f.number("took_ms"), extra: f.rest() };
}

/** One number field of a small answer ({"deleted": 3}, {"kicked": 1}, ...). */
export function readNumber(data: unknown, name: string, what: string): number {
  return new Fields(data, what).number(name);
}

/** One string field of a small answer ({"status": "ok"}). */
export function readString(data: unknown, name: string, what: string): string {
  return new Fields(data, what).string(name);
}

/** A list of jobs under `name` ({"jobs": [...]}). */
export function readJobs(data: unknown, name: string, what: string): Job[] {
  return new Fields(data, what).array(name, (job) => readJob(job));
}
