// worker.ts — jobs(): reserved jobs as an async iterator; work(): a handler run on each.
//
//   loop (x concurrency)                          per job while its handler runs
//   ────────────────────                          ──────────────────────────────
//   reserve(tubes, timeout=waitMs) ── none ─┐     a timer touches the job each half TTR
//     │ job                                 │     (from the reserve, then from each touch).
//     ▼                                     │     A touch that finds the job gone or not
//   handler(job, {signal, touch}) ◀─────────┘     reserved, or reserved again by someone else
//     ├─ resolved ─▶ deleteJob                    (its `reserves` grew), marks it lost: the
//     └─ threw ────▶ release(delay=backoff)       handler's signal aborts and the job is left.
//
// Backoff: after the handler threw on the job's n-th reservation (n = counters.reserves), the
// job is released with a delay drawn between half and all of min(maxMs, minMs × factor^(n−1)),
// the rule webhooks follow, so that jobs failing together do not all come back at once. A
// tube's max_attempts (setMaxAttempts) turns the release of a job's last attempt into a bury.
//
// Tracing: with @opentelemetry/api installed, each handler runs in a span continuing the job's
// trace (tracing.ts); jobs() starts none.
//
// Stopping: when `signal` aborts, the reserves waiting are cut off (the server then takes no
// job for them) and no new job is taken (a job whose answer was already under way is released
// at once, for another worker); work() waits at most drainTimeoutMs for the handlers
// still running, then resolves. Errors reaching the server are reported to onError and the
// reserve is tried again after a pause growing from 0.5 s to 30 s; an error that retrying
// cannot cure (a bad tube name, a wrong token) stops the loops and rejects work().
import { ConflictError, DelayqError, InternalError, NotFoundError, ServiceUnavailableError, TransportError, } from "./errors.js";
import { processJob } from "./tracing.js";
const kDefaultWaitMs = 20000;
// The least time between two reserves that find no job.
const kLeastEmptyRoundMs = 100;
const kMaxWaitMs = 3600000;
export async function* jobs(client, tubes, options = {}) {
    const waitMs = checkWait(options.waitMs);
    const { signal } = options;
    const onError = options.onError ?? warn;
    let failures = 0;
    while (!signal?.aborted) {
        let job;
        const began = Date.now();
        const cut = cutSoonAfter(signal);
        try {
            job = await client.reserve(tubes, { timeout: waitMs, signal: cut.signal });
        }
        catch (error) {
            if (signal?.aborted)
                return;
            if (!retryable(error))
                throw error;
            failures += 1;
            onError(error);
            await sleep(Math.min(30000, 250 * 2 ** Math.min(failures, 7)), signal);
            continue;
        }
        finally {
            cut.clear();
        }
        failures = 0;
        if (job !== null && signal?.aborted) {
            // Its answer was under way when the signal came: given back, not taken.
            await client.release(job.id, {}).catch(() => undefined);
            return;
        }
        if (job !== null)
            yield job;
        // A short wait (waitMs 0) finds nothing at once: a pause, so that the loop does not spin.
        else if (Date.now() - began < kLeastEmptyRoundMs)
            await sleep(kLeastEmptyRoundMs - (Date.now() - began), signal);
    }
}
// A reserve's own signal: it aborts kCutGraceMs after `signal` does, so that an answer already
// on its way (a job the server has handed out) is read rather than cut off and left reserved
// until its TTR; a wait still under way is cut then, and the server takes no job for it.
const kCutGraceMs = 50;
function cutSoonAfter(signal) {
    const controller = new AbortController();
    let timer;
    const onAbort = () => {
        timer = setTimeout(() => controller.abort(signal?.reason), kCutGraceMs);
    };
    if (signal?.aborted)
        controller.abort(signal.reason);
    else
        signal?.addEventListener("abort", onAbort, { once: true });
    return {
        signal: controller.signal,
        clear: () => {
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
        },
    };
}
/** Errors a later try may not meet: no answer, a 500, a 503 (stopping, starting, ...), a proxy's 502 or 504, a 429. */
function retryable(error) {
    return (error instanceof TransportError ||
        error instanceof ServiceUnavailableError ||
        error instanceof InternalError ||
        (error instanceof DelayqError && [429, 502, 503, 504].includes(error.status)));
}
export async function work(client, tubes, handler, options = {}) {
    const concurrency = options.concurrency ?? 1;
    if (!Number.isSafeInteger(concurrency) || concurrency < 1)
        throw new RangeError("concurrency: an integer >= 1");
    const waitMs = checkWait(options.waitMs);
    const backoff = checkBackoff(options.backoff ?? {});
    const drainTimeoutMs = options.drainTimeoutMs ?? 30000;
    if (!Number.isFinite(drainTimeoutMs) || drainTimeoutMs < 0)
        throw new RangeError("drainTimeoutMs: a number >= 0");
    if (typeof handler !== "function")
        throw new TypeError("handler: a function");
    const onError = options.onError ?? warn;
    const stats = { handled: 0, failed: 0, touched: 0, lost: 0 };
    // `stop` ends the loops: the caller's signal, or an error no retry cures.
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    if (options.signal?.aborted)
        stop.abort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    let fatal;
    const loop = async () => {
        try {
            for await (const job of jobs(client, tubes, { signal: stop.signal, waitMs, onError: (e) => onError(e) })) {
                await runJob(client, job, handler, backoff, stats, onError);
            }
        }
        catch (error) {
            fatal ??= { error };
            stop.abort();
        }
    };
    const loops = Promise.all(Array.from({ length: concurrency }, loop));
    let drainTimer;
    const drained = new Promise((resolve) => {
        const startDrain = () => {
            drainTimer = setTimeout(resolve, drainTimeoutMs);
        };
        if (stop.signal.aborted)
            startDrain();
        else
            stop.signal.addEventListener("abort", startDrain, { once: true });
    });
    try {
        await Promise.race([loops, drained]);
    }
    finally {
        clearTimeout(drainTimer);
        options.signal?.removeEventListener("abort", onAbort);
    }
    if (fatal !== undefined)
        throw fatal.error;
    return { ...stats };
}
async function runJob(client, job, handler, backoff, stats, onError) {
    const lease = new Lease(client, job, stats, onError);
    let succeeded = false;
    try {
        await processJob(job, () => handler(job, { signal: lease.signal, touch: () => lease.touch() }));
        succeeded = true;
        stats.handled += 1;
    }
    catch (error) {
        stats.failed += 1;
        onError(error, job);
    }
    finally {
        lease.end();
    }
    if (lease.lost) {
        stats.lost += 1;
        return;
    }
    try {
        if (succeeded)
            await client.deleteJob(job.id);
        else
            await client.release(job.id, { delay: retryDelayMs(job.counters.reserves, backoff) });
    }
    catch (error) {
        // NotFound or Conflict: the handler finished the job itself (deleted, buried, released it).
        if (!(error instanceof NotFoundError || error instanceof ConflictError))
            onError(error, job);
    }
}
// Keeps one job's reservation alive while its handler runs: a touch each half TTR.
class Lease {
    client;
    job;
    stats;
    onError;
    lost = false;
    controller = new AbortController();
    timer;
    ended = false;
    halfTtrMs;
    constructor(client, job, stats, onError) {
        this.client = client;
        this.job = job;
        this.stats = stats;
        this.onError = onError;
        this.halfTtrMs = Math.max(250, job.ttrMs / 2);
        this.schedule(this.halfTtrMs);
    }
    get signal() {
        return this.controller.signal;
    }
    end() {
        this.ended = true;
        clearTimeout(this.timer);
    }
    async touch() {
        if (this.ended || this.lost)
            return;
        clearTimeout(this.timer);
        try {
            const touched = await this.client.touch(this.job.id);
            if (this.ended)
                return;
            if (touched.counters.reserves !== this.job.counters.reserves) {
                // Its TTR lapsed before this touch, and another client has reserved it since.
                this.lose(new ConflictError(`job ${this.job.id} was reserved again by another client`));
                return;
            }
            this.stats.touched += 1;
            this.schedule(this.halfTtrMs);
        }
        catch (error) {
            if (this.ended)
                return;
            if (error instanceof NotFoundError || error instanceof ConflictError) {
                this.lose(error);
                return;
            }
            this.onError(error, this.job);
            this.schedule(Math.min(1000, this.halfTtrMs / 2));
        }
    }
    schedule(afterMs) {
        if (this.ended)
            return;
        this.timer = setTimeout(() => void this.touch(), afterMs);
    }
    lose(error) {
        this.lost = true;
        this.onError(error, this.job);
        this.controller.abort(error);
    }
}
/** The release delay after the handler failed on a job's `attempt`-th reservation. */
export function retryDelayMs(attempt, backoff, random = Math.random) {
    let nominal = backoff.minMs;
    for (let n = 1; n < attempt && nominal < backoff.maxMs; n += 1)
        nominal *= backoff.factor;
    nominal = Math.min(nominal, backoff.maxMs);
    return Math.ceil(nominal / 2 + random() * (nominal / 2));
}
function checkWait(waitMs) {
    const value = waitMs ?? kDefaultWaitMs;
    if (!Number.isSafeInteger(value) || value < 0 || value > kMaxWaitMs) {
        throw new RangeError("waitMs: whole milliseconds, 0 to 3600000 (1 hour)");
    }
    return value;
}
function checkBackoff(backoff) {
    const checked = { minMs: backoff.minMs ?? 1000, maxMs: backoff.maxMs ?? 600000, factor: backoff.factor ?? 2 };
    if (!(checked.minMs >= 0 && checked.maxMs >= checked.minMs && checked.factor >= 1)) {
        throw new RangeError("backoff: 0 <= minMs <= maxMs, factor >= 1");
    }
    return checked;
}
function sleep(ms, signal) {
    return new Promise((resolve) => {
        if (signal?.aborted)
            return resolve();
        const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener("abort", done);
            resolve();
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener("abort", done, { once: true });
    });
}
function warn(error, job) {
    const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    console.warn(job === undefined ? `delayq worker: ${what}` : `delayq worker: job ${job.id} (${job.tube}): ${what}`);
}
