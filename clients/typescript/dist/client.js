// client.ts — Client: one async method per route of delayqd's HTTP/JSON API.
// A method builds the request's fields (times.ts encodes durations and times), sends it
// through the Transport (one bounded HTTP exchange; error answers throw the classes of
// errors.ts), and reads the answer into the objects of models.ts. Nothing is retried here:
// a put with a key is safe to retry, the rest is the caller's to decide. The workers (jobs(),
// work()) are in worker.ts. Routes, fields and answers: docs/http-api.md.
import { errorFor, UnexpectedResponseError } from "./errors.js";
import { readBackup, readDueCounts, readFlowSettings, readJob, readJobList, readJobs, readNumber, readRuns, readSchedule, readSchedulePage, readStats, readString, readTubeList, readTubeStats, readWebhook } from "./models.js";
import { durationMs, encodeDuration, encodeTime } from "./times.js";
import { callerTraceHeaders } from "./tracing.js";
import { Transport } from "./transport.js";
import { jobs, work } from "./worker.js";
// A long-poll is cut into waits of at most this, below undici's 300 s headers timeout, which
// the global fetch cannot change.
const kLongPollChunkMs = 240000;
/** A client of delayqd's HTTP/JSON API. Every method returns a promise; errors throw DelayqError's classes. */
export class Client {
    /** Where the server is, as given. */
    baseUrl;
    http;
    constructor(options = {}) {
        const timeoutMs = options.timeoutMs ?? 30000;
        if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
            throw new RangeError("timeoutMs must be a positive number: every wait is bounded");
        }
        const fetchFn = options.fetch ?? globalThis.fetch;
        if (fetchFn === undefined)
            throw new TypeError("no global fetch: Node.js 18 or later is needed");
        this.baseUrl = options.baseUrl ?? "http://127.0.0.1:8080";
        this.http = new Transport({
            baseUrl: this.baseUrl,
            token: options.token,
            timeoutMs,
            headers: options.headers ?? {},
            fetch: fetchFn,
        });
    }
    /** A client set up as the delayq CLI is: $DELAYQ_SERVER, $DELAYQ_TOKEN, then `options`. */
    static fromEnv(options = {}) {
        const env = globalThis.process?.env ?? {};
        return new Client({
            ...(env["DELAYQ_SERVER"] ? { baseUrl: env["DELAYQ_SERVER"] } : {}),
            ...(env["DELAYQ_TOKEN"] ? { token: env["DELAYQ_TOKEN"] } : {}),
            ...options,
        });
    }
    /** Any route, for what this client has no method for: the answer's JSON (null for a 204). */
    async request(method, path, options = {}) {
        return (await this.http.request(method, path, options)).data;
    }
    // -- jobs ----------------------------------------------------------------------------------
    /**
     * Puts a job into `tube` (POST /v1/tubes/{tube}/jobs), durable when the promise resolves.
     * A key already held answers that job, with `existed` true (unless `replace`), or, with
     * `debounce`, moves it (`debounced` true).
     * Throws BadRequestError, ConflictError, TooLargeError, DrainingError, NoSpaceError, LimitError.
     */
    async put(tube, body = "", options = {}) {
        const answer = await this.http.request("POST", `/v1/tubes/${segment(tube)}/jobs`, {
            body: putFields(body, options),
            headers: await traceHeaders(options),
        });
        return readJob(answer.data, answer.status === 200);
    }
    /**
     * Puts up to 1000 jobs, into any tubes, in one request (POST /v1/jobs), each as put() would
     * put it, all durable when the promise resolves (they share the server's writes to disk).
     * Resolves to one entry per job, in their order: the Job (`existed` and `debounced` as put()
     * sets them), or the DelayqError that refused that job, not thrown: one refused does not stop
     * the others (a job without a valid tube among them). `options` gives the trace context of
     * every job, as put()'s. Throws BadRequestError if `jobs` is empty or holds more than 1000,
     * TooLargeError if the request is over the server's request body limit (1 MiB by default).
     */
    async putMany(jobs, options = {}) {
        const list = [...jobs].map((job) => ({ tube: job.tube, ...putFields(job.body ?? "", job) }));
        const answer = await this.http.request("POST", "/v1/jobs", {
            body: { jobs: list },
            headers: await traceHeaders(options),
        });
        const entries = answer.data?.jobs;
        if (!Array.isArray(entries) || entries.length !== list.length) {
            throw new UnexpectedResponseError(`POST /v1/jobs: not one answer per job: ${JSON.stringify(answer.data)}`);
        }
        return entries.map((entry) => {
            const { status, job, error } = (entry ?? {});
            if (typeof status !== "number") {
                throw new UnexpectedResponseError(`POST /v1/jobs: an answer without a status: ${JSON.stringify(entry)}`);
            }
            if (job !== undefined)
                return readJob(job, status === 200);
            const { code, message } = (error ?? {});
            return errorFor(status, typeof code === "string" ? code : undefined, typeof message === "string" && message !== "" ? message : `HTTP ${status}`);
        });
    }
    /** The job, in any state, with its body. Throws NotFoundError. */
    async getJob(id) {
        return readJob((await this.http.request("GET", `/v1/jobs/${jobId(id)}`)).data);
    }
    /**
     * A new due time (`delay` or `at`) and/or priority (PATCH /v1/jobs/{id}). A new due time needs
     * a ready or delayed job (ConflictError otherwise). Throws NotFoundError.
     */
    async reschedule(id, options) {
        const answer = await this.http.request("PATCH", `/v1/jobs/${jobId(id)}`, { body: rescheduleFields(options) });
        return readJob(answer.data);
    }
    /** Deletes a job that is ready, delayed, buried or reserved over HTTP; resolves to its id. */
    async deleteJob(id) {
        return readNumber((await this.http.request("DELETE", `/v1/jobs/${jobId(id)}`)).data, "deleted", "delete");
    }
    /** The job of `tube` holding `key`, with its body. Throws NotFoundError. */
    async getKey(tube, key) {
        return readJob((await this.http.request("GET", keyPath(tube, key))).data);
    }
    /** reschedule() for the job of `tube` holding `key`. */
    async rescheduleKey(tube, key, options) {
        return readJob((await this.http.request("PATCH", keyPath(tube, key), { body: rescheduleFields(options) })).data);
    }
    /** Deletes the job of `tube` holding `key`, freeing the key; resolves to its id. */
    async deleteKey(tube, key) {
        return readNumber((await this.http.request("DELETE", keyPath(tube, key))).data, "deleted", "delete");
    }
    // -- groups --------------------------------------------------------------------------------
    /** Every job of the group, in any state, by id, without bodies (an unknown group: []). */
    async listGroup(tube, group) {
        return readJobs((await this.http.request("GET", groupPath(tube, group))).data, "jobs", "group");
    }
    /** Deletes every job of the group that is not reserved; resolves to how many. */
    async cancelGroup(tube, group) {
        return readNumber((await this.http.request("DELETE", groupPath(tube, group))).data, "cancelled", "cancel");
    }
    // -- reserving -----------------------------------------------------------------------------
    /**
     * Reserves the most urgent ready job of `tubes` (POST /v1/reserve), waiting up to `timeout`
     * for one; null if none came. The job is then held over HTTP: finish it with deleteJob(),
     * release() or bury(), or ask for more time with touch(), before `reservedUntil`.
     * Throws StoppingError if the server was told to stop during the wait.
     */
    async reserve(tubes = "default", options = {}) {
        const answer = await this.longPoll({ tubes: tubeList(tubes) }, options);
        return answer === null ? null : readJob(answer.data);
    }
    /**
     * Reserves up to `count` (1 to 100) jobs of `tubes` in one request (POST /v1/reserve with a
     * count): waits up to `timeout` for the first, as reserve() does, then takes the jobs ready at
     * that moment, most urgent first, until `count` or 1 MiB of bodies. An empty array if none
     * came. Each job is held as reserve()'s is: finish each by its id.
     */
    async reserveMany(tubes = "default", count = 10, options = {}) {
        const fields = { tubes: tubeList(tubes) };
        integer(fields, "count", count);
        const answer = await this.longPoll(fields, options);
        if (answer === null)
            return [];
        const jobs = answer.data?.jobs;
        if (!Array.isArray(jobs) || jobs.length === 0) {
            throw new UnexpectedResponseError(`POST /v1/reserve: no list of jobs: ${JSON.stringify(answer.data)}`);
        }
        return jobs.map((job) => readJob(job));
    }
    /** POST /v1/reserve with `fields`, asked again in chunks until `timeout`: its answer, or null (204). */
    async longPoll(fields, options) {
        const totalMs = options.timeout === undefined ? 0 : durationMs(options.timeout, "timeout");
        if (totalMs > 3600000)
            throw new RangeError("timeout: at most 1 hour, as the server takes it");
        const deadline = Date.now() + totalMs;
        for (;;) {
            const waitMs = Math.max(0, Math.min(kLongPollChunkMs, deadline - Date.now()));
            const answer = await this.http.request("POST", "/v1/reserve", {
                body: { ...fields, timeout: waitMs },
                signal: options.signal,
                extraTimeoutMs: waitMs,
            });
            if (answer.status !== 204)
                return answer;
            if (Date.now() >= deadline)
                return null;
        }
    }
    /** Gives back a job reserved over HTTP: ready, or delayed for `delay`. Throws ConflictError if not reserved over HTTP. */
    async release(id, options = {}) {
        const fields = {};
        duration(fields, "delay", options.delay);
        integer(fields, "priority", options.priority);
        return readJob((await this.http.request("POST", `/v1/jobs/${jobId(id)}/release`, { body: fields })).data);
    }
    /** Sets a job reserved over HTTP aside, until a kick or a delete. */
    async bury(id, options = {}) {
        const fields = {};
        integer(fields, "priority", options.priority);
        return readJob((await this.http.request("POST", `/v1/jobs/${jobId(id)}/bury`, { body: fields })).data);
    }
    /** Starts a reserved job's TTR again, in full, from now. */
    async touch(id) {
        return readJob((await this.http.request("POST", `/v1/jobs/${jobId(id)}/touch`)).data);
    }
    /** Makes one buried or delayed job ready. Throws ConflictError if it is ready or reserved. */
    async kickJob(id) {
        return readJob((await this.http.request("POST", `/v1/jobs/${jobId(id)}/kick`)).data);
    }
    /**
     * The jobs of `tubes`, reserved one at a time as the loop asks for them, until `signal` aborts:
     * `for await (const job of client.jobs("emails", { signal })) { ...; await client.deleteJob(job.id) }`.
     * Each job yielded is reserved: finish it before its TTR lapses.
     */
    jobs(tubes, options = {}) {
        return jobs(this, tubeList(tubes), options);
    }
    /**
     * Runs `handler` on the jobs of `tubes`, `concurrency` at a time, until `signal` aborts: deletes
     * a job whose handler resolved, releases one whose handler threw (with an exponential backoff),
     * and touches a job whose handler runs past half its TTR. Resolves once stopped.
     */
    work(tubes, handler, options = {}) {
        return work(this, tubeList(tubes), handler, options);
    }
    // -- tubes ---------------------------------------------------------------------------------
    /** Every tube that exists, by name, with its counts. */
    async listTubes() {
        return readTubeList((await this.http.request("GET", "/v1/tubes")).data);
    }
    /** One tube's counts. Throws NotFoundError (looking does not create it). */
    async tubeStats(tube) {
        return readTubeStats((await this.http.request("GET", `/v1/tubes/${segment(tube)}`)).data);
    }
    /** The tube's first jobs in one state, in the order they will be served, without bodies. UnsupportedError in Redis mode. */
    async listJobs(tube, options = {}) {
        const query = { state: options.state ?? "ready", limit: options.limit };
        return readJobList((await this.http.request("GET", `/v1/tubes/${segment(tube)}/jobs`, { query })).data);
    }
    /**
     * How many delayed jobs of `tube` (null: of every tube) come due between edges.
     * UnsupportedError in Redis mode.
     */
    async dueCounts(tube = null, options = {}) {
        const query = {};
        const edges = options.edges ?? [];
        if (edges.length > 0) {
            const dates = edges.filter((edge) => edge instanceof Date);
            if (dates.length === edges.length)
                query["at"] = dates.map((edge) => encodeTime(edge, "edges")).join(",");
            else if (dates.length === 0) {
                query["in"] = edges.map((edge) => String(encodeDuration(edge, "edges"))).join(",");
            }
            else
                throw new TypeError("edges: all durations or all Dates, not both");
        }
        const path = tube === null ? "/v1/due" : `/v1/tubes/${segment(tube)}/due`;
        return readDueCounts((await this.http.request("GET", path, { query })).data);
    }
    /** Reservations each job of the tube gets before a failed one buries it (0: no limit); resolves to the limit in force. */
    async setMaxAttempts(tube, maxAttempts) {
        const fields = {};
        integer(fields, "max_attempts", maxAttempts);
        const data = (await this.http.request("PATCH", `/v1/tubes/${segment(tube)}`, { body: fields })).data;
        return readNumber(data, "max_attempts", "max attempts");
    }
    /**
     * Sets the tube's flow control over the groups of its jobs (PATCH /v1/tubes/{tube}); durable,
     * and kept while the tube does not exist. Only the settings given change. Resolves to the
     * settings in force. Throws TypeError if none is given, BadRequestError, ConflictError (Redis
     * mode: the first settings of a tube that already has jobs).
     */
    async setFlow(tube, options) {
        const fields = {};
        if (options.groupConcurrency === null)
            fields["group_concurrency"] = null;
        else
            integer(fields, "group_concurrency", options.groupConcurrency);
        if (options.fair !== undefined) {
            if (typeof options.fair !== "boolean")
                throw new TypeError("fair: a boolean");
            fields["fair"] = options.fair;
        }
        if (options.groupRate === null)
            fields["group_rate"] = null;
        else
            text(fields, "group_rate", options.groupRate);
        if (options.groupBurst === null)
            throw new TypeError("groupBurst: an integer from 1; it cannot be turned off");
        integer(fields, "group_burst", options.groupBurst);
        if (options.groupWeights !== undefined)
            fields["group_weights"] = weights(options.groupWeights);
        if (Object.keys(fields).length === 0) {
            throw new TypeError("setFlow: give groupConcurrency, fair, groupRate, groupBurst or groupWeights");
        }
        return readFlowSettings((await this.http.request("PATCH", `/v1/tubes/${segment(tube)}`, { body: fields })).data);
    }
    /** Makes up to `bound` jobs of the tube ready: its buried jobs if any, else its delayed ones. Resolves to how many. */
    async kick(tube, bound = 1) {
        const fields = {};
        integer(fields, "bound", bound);
        return readNumber((await this.http.request("POST", `/v1/tubes/${segment(tube)}/kick`, { body: fields })).data, "kicked", "kick");
    }
    /** Hands out no job of the tube for `delay` (0 ends a pause). Resolves to the pause in force, in ms (whole seconds). */
    async pauseTube(tube, delay) {
        const body = { delay: encodeDuration(delay, "delay") };
        const data = (await this.http.request("POST", `/v1/tubes/${segment(tube)}/pause`, { body })).data;
        return readNumber(data, "pause_s", "pause") * 1000;
    }
    // -- webhooks ------------------------------------------------------------------------------
    /** Sets the tube's webhook, replacing the one it had as a whole (left-out options take their defaults). */
    async setWebhook(tube, url, options = {}) {
        const fields = { url };
        if (options.headers !== undefined)
            fields["headers"] = { ...options.headers };
        duration(fields, "timeout", options.timeout);
        integer(fields, "max_attempts", options.maxAttempts);
        if (options.backoff !== undefined) {
            const backoff = {};
            duration(backoff, "min", options.backoff.min);
            duration(backoff, "max", options.backoff.max);
            if (options.backoff.factor !== undefined)
                backoff["factor"] = options.backoff.factor;
            fields["backoff"] = backoff;
        }
        if (options.rate !== undefined)
            fields["rate"] = options.rate;
        integer(fields, "concurrency", options.concurrency);
        if (options.secrets !== undefined) {
            if (typeof options.secrets === "string")
                throw new TypeError("secrets: an array of one or two strings");
            fields["secrets"] = [...options.secrets];
        }
        return readWebhook((await this.http.request("PUT", webhookPath(tube), { body: fields })).data);
    }
    /** The tube's webhook. Throws NotFoundError if it has none. */
    async getWebhook(tube) {
        return readWebhook((await this.http.request("GET", webhookPath(tube))).data);
    }
    /** Removes the tube's webhook; resolves to the webhook removed. Throws NotFoundError if it has none. */
    async removeWebhook(tube) {
        return readWebhook((await this.http.request("DELETE", webhookPath(tube))).data);
    }
    // -- schedules ---------------------------------------------------------------------------------
    /** Creates the schedule `name`, or replaces it as a whole: a job into `tube` at each instant of `cron` or `every`. */
    async setSchedule(name, tube, options) {
        const body = scheduleFields(tube, options);
        return readSchedule((await this.http.request("PUT", schedulePath(name), { body })).data);
    }
    /** The schedule, with its next run and counts. Throws NotFoundError. */
    async getSchedule(name) {
        return readSchedule((await this.http.request("GET", schedulePath(name))).data);
    }
    /** One page of schedules by name. */
    async listSchedules(options = {}) {
        const query = { after: options.after, limit: options.limit };
        return readSchedulePage((await this.http.request("GET", "/v1/schedules", { query })).data);
    }
    /** Every schedule, by name, a page at a time. */
    async *schedules(options = {}) {
        let after;
        for (;;) {
            const page = await this.listSchedules({ ...(after === undefined ? {} : { after }), limit: options.pageSize ?? 100 });
            yield* page.schedules;
            const last = page.schedules[page.schedules.length - 1];
            if (!page.more || last === undefined)
                return;
            after = last.name;
        }
    }
    /** Deletes the schedule (and its run put ahead, if still delayed); resolves to it as it was. */
    async removeSchedule(name) {
        return readSchedule((await this.http.request("DELETE", schedulePath(name))).data);
    }
    /** Puts no run until resumed. */
    async pauseSchedule(name) {
        return readSchedule((await this.http.request("POST", `${schedulePath(name)}/pause`)).data);
    }
    /** Runs again; instants missed meanwhile go by the schedule's `misfire`. */
    async resumeSchedule(name) {
        return readSchedule((await this.http.request("POST", `${schedulePath(name)}/resume`)).data);
    }
    /** One run now, paused or not: a job keyed `<name>@<now in Unix ms>`. */
    async triggerSchedule(name) {
        const answer = await this.http.request("POST", `${schedulePath(name)}/trigger`);
        return readJob(answer.data, answer.status === 200);
    }
    /** A run due now for each instant from `from` to `to`, both included (at most 1000); runs still in the tube are answered, not put again. */
    async backfillSchedule(name, from, to) {
        const body = { from: encodeTime(from, "from"), to: encodeTime(to, "to") };
        return readJobs((await this.http.request("POST", `${schedulePath(name)}/backfill`, { body })).data, "jobs", "backfill");
    }
    /** The schedule's next instants after `after` (default now), as start_at and end_at allow. */
    async nextRuns(name, options = {}) {
        const query = {
            count: options.count,
            after: options.after === undefined ? undefined : encodeTime(options.after, "after"),
        };
        return readRuns((await this.http.request("GET", `${schedulePath(name)}/next`, { query })).data);
    }
    /** The instants a definition would run at, without setting it (in Redis mode too). */
    async previewSchedule(tube, options) {
        const body = scheduleFields(tube, options);
        integer(body, "count", options.count);
        if (options.after !== undefined)
            body["after"] = encodeTime(options.after, "after");
        return readRuns((await this.http.request("POST", "/v1/schedules/preview", { body })).data);
    }
    // -- server --------------------------------------------------------------------------------
    /** Server-wide counts. */
    async stats() {
        return readStats((await this.http.request("GET", "/v1/stats")).data);
    }
    /** Liveness (GET /healthz): "ok" whenever the process answers. */
    async health() {
        return readString((await this.http.request("GET", "/healthz")).data, "status", "health");
    }
    /** Readiness (GET /readyz): "ready", or throws DrainingError, NoSpaceError, UnavailableError or StartingError. */
    async ready() {
        return readString((await this.http.request("GET", "/readyz")).data, "status", "ready");
    }
    /** The Prometheus text of GET /metrics. */
    async metrics() {
        const data = (await this.http.request("GET", "/metrics")).data;
        if (typeof data !== "string")
            throw new TypeError("metrics: the answer is not text");
        return data;
    }
    /** Writes a consistent copy of the data directory into `dir`, a new absolute path on the server's machine. UnsupportedError in Redis mode. */
    async backup(dir) {
        return readBackup((await this.http.request("POST", "/v1/admin/backup", { body: { dir } })).data);
    }
}
// -- request fields ------------------------------------------------------------------------------
function segment(value) {
    if (typeof value !== "string" || value === "")
        throw new TypeError("a tube, key, group or name is a non-empty string");
    try {
        return encodeURIComponent(value);
    }
    catch {
        // A lone surrogate: not text (URIError otherwise).
        throw new TypeError(`a tube, key, group or name that is not Unicode text: ${JSON.stringify(value)}`);
    }
}
function jobId(id) {
    if (!Number.isSafeInteger(id) || id < 1)
        throw new TypeError(`a job id is a positive integer, not ${String(id)}`);
    return String(id);
}
function keyPath(tube, key) {
    return `/v1/tubes/${segment(tube)}/keys/${segment(key)}`;
}
function groupPath(tube, group) {
    return `/v1/tubes/${segment(tube)}/groups/${segment(group)}`;
}
function webhookPath(tube) {
    return `/v1/tubes/${segment(tube)}/webhook`;
}
function schedulePath(name) {
    return `/v1/schedules/${segment(name)}`;
}
function tubeList(tubes) {
    const names = typeof tubes === "string" ? [tubes] : Array.isArray(tubes) ? [...tubes] : [];
    if (names.length === 0 || !names.every((name) => typeof name === "string" && name !== "")) {
        throw new TypeError("tubes: a tube name or a non-empty array of them");
    }
    return names;
}
/** A put's fields (its tube goes in the path, or beside them in a batch). */
function putFields(body, options) {
    const fields = {};
    putBody(fields, body);
    when(fields, options);
    integer(fields, "priority", options.priority);
    duration(fields, "ttr", options.ttr);
    text(fields, "key", options.key);
    text(fields, "group", options.group);
    if (options.replace)
        fields["replace"] = true;
    duration(fields, "debounce", options.debounce);
    duration(fields, "max_wait", options.maxWait);
    text(fields, "url", options.url);
    text(fields, "content_type", options.contentType);
    return fields;
}
/** A put's trace headers: those given, else the active span's (tracing.ts). */
async function traceHeaders(options) {
    const given = options.traceparent !== undefined || options.tracestate !== undefined;
    const trace = given ? options : await callerTraceHeaders();
    return { traceparent: trace.traceparent, tracestate: trace.tracestate };
}
function putBody(fields, body) {
    if (body === undefined)
        return;
    if (typeof body === "string")
        fields["body"] = body;
    else if (body instanceof Uint8Array)
        fields["body_base64"] = Buffer.from(body).toString("base64");
    else
        throw new TypeError("body: a string or a Uint8Array");
}
function when(fields, options) {
    if (options.delay !== undefined && options.at !== undefined)
        throw new TypeError("delay or at, not both");
    duration(fields, "delay", options.delay);
    if (options.at !== undefined)
        fields["at"] = encodeTime(options.at, "at");
}
function rescheduleFields(options) {
    if (typeof options !== "object" || options === null) {
        throw new TypeError("a reschedule's options: an object with delay or at, and/or priority");
    }
    const fields = {};
    when(fields, options);
    integer(fields, "priority", options.priority);
    return fields;
}
function duration(fields, name, value) {
    if (value !== undefined)
        fields[name] = encodeDuration(value, name);
}
function integer(fields, name, value) {
    if (value === undefined)
        return;
    if (!Number.isSafeInteger(value))
        throw new TypeError(`${name}: an integer, not ${String(value)}`);
    fields[name] = value;
}
function weights(value) {
    if (value === null)
        throw new TypeError("groupWeights: null cannot reset every group; give { group: null } for each");
    if (typeof value !== "object" || Array.isArray(value))
        throw new TypeError("groupWeights: an object of group → weight");
    for (const [group, weight] of Object.entries(value)) {
        if (weight !== null && !Number.isSafeInteger(weight)) {
            throw new TypeError(`groupWeights[${JSON.stringify(group)}]: an integer or null, not ${String(weight)}`);
        }
    }
    return { ...value };
}
function text(fields, name, value) {
    if (value === undefined)
        return;
    if (typeof value !== "string")
        throw new TypeError(`${name}: a string`);
    fields[name] = value;
}
function scheduleFields(tube, options) {
    const fields = { tube };
    text(fields, "cron", options.cron);
    duration(fields, "every", options.every);
    text(fields, "tz", options.tz);
    putBody(fields, options.body);
    integer(fields, "priority", options.priority);
    duration(fields, "ttr", options.ttr);
    text(fields, "group", options.group);
    text(fields, "url", options.url);
    text(fields, "content_type", options.contentType);
    if (options.startAt !== undefined)
        fields["start_at"] = encodeTime(options.startAt, "startAt");
    if (options.endAt !== undefined)
        fields["end_at"] = encodeTime(options.endAt, "endAt");
    integer(fields, "limit", options.limit);
    duration(fields, "jitter", options.jitter);
    text(fields, "misfire", options.misfire);
    duration(fields, "max_lateness", options.maxLateness);
    text(fields, "overlap", options.overlap);
    if (options.paused !== undefined)
        fields["paused"] = options.paused;
    return fields;
}
