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
// Takes the known fields out of one JSON object; what is left is rest().
class Fields {
    what;
    data;
    constructor(data, what) {
        this.what = what;
        if (!isObject(data))
            throw new UnexpectedResponseError(`${what}: expected a JSON object, got ${show(data)}`);
        this.data = { ...data };
    }
    take(name) {
        const value = this.data[name];
        delete this.data[name];
        return value;
    }
    wrong(name, value, expected) {
        return new UnexpectedResponseError(value === undefined || value === null
            ? `${this.what}: no field ${JSON.stringify(name)}`
            : `${this.what}: field ${JSON.stringify(name)} is ${show(value)}, not ${expected}`);
    }
    number(name) {
        const value = this.take(name);
        if (typeof value !== "number")
            throw this.wrong(name, value, "a number");
        return value;
    }
    numberOrNull(name) {
        const value = this.take(name);
        if (value === undefined || value === null)
            return null;
        if (typeof value !== "number")
            throw this.wrong(name, value, "a number");
        return value;
    }
    string(name) {
        const value = this.take(name);
        if (typeof value !== "string")
            throw this.wrong(name, value, "a string");
        return value;
    }
    stringOrUndefined(name) {
        const value = this.take(name);
        if (value === undefined || value === null)
            return undefined;
        if (typeof value !== "string")
            throw this.wrong(name, value, "a string");
        return value;
    }
    boolean(name) {
        const value = this.take(name);
        if (typeof value !== "boolean")
            throw this.wrong(name, value, "a boolean");
        return value;
    }
    booleanOrUndefined(name) {
        const value = this.take(name);
        if (value === undefined || value === null)
            return undefined;
        if (typeof value !== "boolean")
            throw this.wrong(name, value, "a boolean");
        return value;
    }
    object(name, read) {
        const value = this.take(name);
        if (!isObject(value))
            throw this.wrong(name, value, "an object");
        return read(value);
    }
    objectOrUndefined(name, read) {
        const value = this.take(name);
        if (value === undefined || value === null)
            return undefined;
        if (!isObject(value))
            throw this.wrong(name, value, "an object");
        return read(value);
    }
    array(name, read) {
        const value = this.take(name);
        if (!Array.isArray(value))
            throw this.wrong(name, value, "an array");
        return value.map(read);
    }
    counts(name) {
        const value = this.take(name);
        if (value === undefined || value === null)
            return undefined;
        if (!isObject(value) || !Object.values(value).every((v) => typeof v === "number")) {
            throw this.wrong(name, value, "an object of numbers");
        }
        return value;
    }
    strings(name) {
        const value = this.take(name);
        if (!isObject(value) || !Object.values(value).every((v) => typeof v === "string")) {
            throw this.wrong(name, value, "an object of strings");
        }
        return { ...value };
    }
    unixMs(name) {
        return new Date(this.number(name));
    }
    unixMsOrNull(name) {
        const value = this.numberOrNull(name);
        return value === null ? null : new Date(value);
    }
    time(name) {
        return this.parsed(name, this.string(name), parseTime);
    }
    timeOrUndefined(name) {
        const value = this.stringOrUndefined(name);
        return value === undefined ? undefined : this.parsed(name, value, parseTime);
    }
    duration(name) {
        return this.parsed(name, this.string(name), parseDuration);
    }
    durationOrUndefined(name) {
        const value = this.stringOrUndefined(name);
        return value === undefined ? undefined : this.parsed(name, value, parseDuration);
    }
    /** body or body_base64, as text (when UTF-8) and bytes. */
    body() {
        const text = this.stringOrUndefined("body");
        const encoded = this.stringOrUndefined("body_base64");
        if (text !== undefined)
            return { body: text, bytes: new TextEncoder().encode(text) };
        if (encoded !== undefined) {
            if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded) || encoded.length % 4 !== 0) {
                throw this.wrong("body_base64", encoded, "base64");
            }
            return { bytes: new Uint8Array(Buffer.from(encoded, "base64")) };
        }
        return {};
    }
    drop(...names) {
        for (const name of names)
            delete this.data[name];
    }
    rest() {
        return this.data;
    }
    parsed(name, value, parse) {
        try {
            return parse(value);
        }
        catch {
            throw this.wrong(name, value, "what this client can read");
        }
    }
}
function show(value) {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
function parseTime(text) {
    const date = new Date(text);
    if (Number.isNaN(date.getTime()))
        throw new TypeError(`not a time: ${text}`);
    return date;
}
// Drops a property whose value is undefined, so that `"key" in job` says whether it has one.
function defined(value) {
    for (const name of Object.keys(value)) {
        if (value[name] === undefined)
            delete value[name];
    }
    return value;
}
export function readCounters(data) {
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
function readScheduleRun(data) {
    const f = new Fields(data, "schedule");
    const name = f.string("name");
    const instant = f.unixMs("instant_unix_ms");
    f.drop("instant");
    return { name, instant, extra: f.rest() };
}
export function readJob(data, existed = false) {
    const f = new Fields(data, "job");
    // A debounced put answers 200 too, but it did take the put's body and fields.
    const debounced = f.booleanOrUndefined("debounced") ?? false;
    const job = {
        id: f.number("id"),
        tube: f.string("tube"),
        state: f.string("state"),
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
    if (reservedUntil !== null)
        job.reservedUntil = new Date(reservedUntil);
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
export function readJobList(data) {
    const f = new Fields(data, "job list");
    return { jobs: f.array("jobs", (job) => readJob(job)), complete: f.boolean("complete"), extra: f.rest() };
}
export function readTubeStats(data) {
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
export function readTubeList(data) {
    return new Fields(data, "tube list").array("tubes", readTubeStats);
}
export function readFlowSettings(data) {
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
function readDueBucket(data) {
    const f = new Fields(data, "due bucket");
    return { from: f.unixMsOrNull("from_unix_ms"), to: f.unixMsOrNull("to_unix_ms"), jobs: f.number("jobs"), extra: f.rest() };
}
export function readDueCounts(data) {
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
function readBackoff(data) {
    const f = new Fields(data, "backoff");
    return { minMs: f.duration("min"), maxMs: f.duration("max"), factor: f.number("factor"), extra: f.rest() };
}
export function readWebhook(data) {
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
function readScheduleTime(data) {
    const f = new Fields(data, "schedule time");
    return f.unixMs("unix_ms");
}
function scheduleTime(f, name) {
    return f.objectOrUndefined(name, readScheduleTime) ?? null;
}
export function readSchedule(data) {
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
        misfire: f.string("misfire"),
        maxLatenessMs: f.duration("max_lateness"),
        overlap: f.string("overlap"),
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
export function readSchedulePage(data) {
    const f = new Fields(data, "schedule page");
    return { schedules: f.array("schedules", readSchedule), more: f.boolean("more"), extra: f.rest() };
}
/** The instants of `next` and of a preview. */
export function readRuns(data) {
    const f = new Fields(data, "runs");
    return f.array("runs", readScheduleTime);
}
function readFireLateness(data) {
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
function readHealth(data) {
    const f = new Fields(data, "health");
    return defined({ status: f.string("status"), message: f.stringOrUndefined("message") });
}
export function readStats(data) {
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
export function readBackup(data) {
    const f = new Fields(data, "backup");
    return { dir: f.string("dir"), jobs: f.number("jobs"), bytes: f.number("bytes"), tookMs: f.number("took_ms"), extra: f.rest() };
}
/** One number field of a small answer ({"deleted": 3}, {"kicked": 1}, ...). */
export function readNumber(data, name, what) {
    return new Fields(data, what).number(name);
}
/** One string field of a small answer ({"status": "ok"}). */
export function readString(data, name, what) {
    return new Fields(data, what).string(name);
}
/** A list of jobs under `name` ({"jobs": [...]}). */
export function readJobs(data, name, what) {
    return new Fields(data, what).array(name, (job) => readJob(job));
}
