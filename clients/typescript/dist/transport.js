// transport.ts — one HTTP exchange with delayqd over the global fetch: the URL, the bearer
// token, a bounded wait, the JSON both ways, and error answers turned into exceptions
// (errors.ts). Used by Client only. Every request has a deadline: the client's timeoutMs,
// plus the server-side wait of a long-poll; a caller's AbortSignal ends it sooner.
import { DelayqError, TransportError, UnexpectedResponseError, errorFor } from "./errors.js";
export class Transport {
    baseUrl;
    timeoutMs;
    headers;
    fetchFn;
    constructor(options) {
        this.baseUrl = options.baseUrl.replace(/\/+$/, "");
        this.timeoutMs = options.timeoutMs;
        this.headers = { accept: "application/json", ...options.headers };
        if (options.token !== undefined)
            this.headers["authorization"] = `Bearer ${options.token}`;
        this.fetchFn = options.fetch;
    }
    async request(method, path, options = {}) {
        const url = this.baseUrl + path + queryString(options.query);
        const headers = { ...this.headers };
        for (const [name, value] of Object.entries(options.headers ?? {})) {
            if (value !== undefined)
                headers[name] = value;
        }
        // A line break or NUL would end the header (fetch refuses it, and nothing is sent): said
        // here, not as a TransportError.
        for (const [name, value] of Object.entries(headers)) {
            if (/[\r\n\0]/.test(value))
                throw new TypeError(`header ${name}: a value without CR, LF or NUL`);
        }
        let body;
        if (options.body !== undefined) {
            // NaN and infinities are not JSON (stringify writes null, which the server reads as a
            // field left out): refused here.
            body = JSON.stringify(options.body, (name, value) => {
                if (typeof value === "number" && !Number.isFinite(value)) {
                    throw new TypeError(`${name === "" ? "the body" : name}: not a finite number: ${String(value)}`);
                }
                return value;
            });
            headers["content-type"] = "application/json";
        }
        const waitMs = this.timeoutMs + (options.extraTimeoutMs ?? 0);
        const deadline = new Deadline(waitMs, options.signal);
        try {
            const response = await this.fetchFn(url, { method, headers, body, signal: deadline.signal });
            // The answer has begun: the caller's signal no longer cuts it (the server has done what
            // was asked, a reserve's job included); the timeout still does.
            deadline.detachCaller();
            const text = await response.text();
            return readAnswer(method, path, response, text);
        }
        catch (error) {
            throw deadline.explain(error, `${method} ${path}`);
        }
        finally {
            deadline.clear();
        }
    }
}
function queryString(query) {
    if (query === undefined)
        return "";
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
        if (value !== undefined)
            params.append(name, String(value));
    }
    const text = params.toString();
    return text === "" ? "" : `?${text}`;
}
// An AbortSignal that fires at the timeout or when the caller's signal does, and which of the
// two it was. (AbortSignal.any is not in Node 18.)
class Deadline {
    waitMs;
    callerSignal;
    signal;
    controller = new AbortController();
    timer;
    timedOut = false;
    onAbort;
    constructor(waitMs, callerSignal) {
        this.waitMs = waitMs;
        this.callerSignal = callerSignal;
        this.signal = this.controller.signal;
        this.onAbort = () => this.controller.abort(callerSignal?.reason);
        if (callerSignal?.aborted)
            this.controller.abort(callerSignal.reason);
        callerSignal?.addEventListener("abort", this.onAbort, { once: true });
        this.timer = setTimeout(() => {
            this.timedOut = true;
            this.controller.abort();
        }, waitMs);
    }
    clear() {
        clearTimeout(this.timer);
        this.detachCaller();
    }
    detachCaller() {
        this.callerSignal?.removeEventListener("abort", this.onAbort);
    }
    explain(error, what) {
        if (this.timedOut)
            return new TransportError(`${what}: no answer within ${this.waitMs} ms`);
        if (error instanceof DelayqError)
            return error;
        if (this.controller.signal.aborted && this.callerSignal?.aborted)
            return this.callerSignal.reason ?? error;
        const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
        const reason = cause instanceof Error ? cause.message : String(cause);
        return new TransportError(`${what}: ${reason}`, { cause: error });
    }
}
function readAnswer(method, path, response, text) {
    const { status, headers } = response;
    const isJson = (headers.get("content-type") ?? "").startsWith("application/json");
    let data = status === 204 ? null : text;
    if (isJson && status !== 204) {
        try {
            data = JSON.parse(text);
        }
        catch (error) {
            throw new UnexpectedResponseError(`${method} ${path}: ${status} with a body that is not JSON`, {
                status,
                cause: error,
            });
        }
    }
    if (status >= 200 && status < 300)
        return { status, data, headers };
    throw errorAnswer(method, path, status, data, headers);
}
function errorAnswer(method, path, status, data, headers) {
    const retryAfter = headers.get("retry-after");
    const retryAfterMs = retryAfter !== null && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter) * 1000 : undefined;
    const answer = isObject(data) ? data : {};
    const error = isObject(answer["error"]) ? answer["error"] : undefined;
    if (error === undefined || typeof error["code"] !== "string") {
        // Not delayqd's answer (a proxy's page, a wrong base URL): its status says nothing of a job,
        // so a 404 here is no NotFoundError. Its status is kept (a worker retries a 502, 503 or 504).
        return new UnexpectedResponseError(`${method} ${path}: HTTP ${status} without delayqd's error object: is it delayqd?`, { status, retryAfterMs });
    }
    const { code, message, ...rest } = error;
    const { error: _error, ...besides } = answer;
    return errorFor(status, code, typeof message === "string" ? message : `HTTP ${status}`, {
        retryAfterMs,
        details: { ...rest, ...besides },
    });
}
export function isObject(value) {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}
