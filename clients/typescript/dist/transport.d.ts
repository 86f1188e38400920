/** The fetch function the client calls; the global one by default. */
export declare type FetchFunction = (input: string, init: RequestInit) => Promise<Response>;
export interface TransportOptions {
    baseUrl: string;
    token: string | undefined;
    timeoutMs: number;
    headers: Record<string, string>;
    fetch: FetchFunction;
}
export interface RequestOptions {
    /** Query parameters; undefined values are left out. */
    query?: Record<string, string | number | undefined>;
    /** The JSON body; none if undefined. */
    body?: unknown;
    /** Ends the request early, until its answer begins to arrive; the promise then rejects with the
     * signal's reason. An answer under way is read whole: a reserve's job is not lost in it. */
    signal?: AbortSignal | undefined;
    /** Milliseconds the server may take beyond the usual timeout (a long-poll's wait). */
    extraTimeoutMs?: number;
    /** This request's own headers; undefined values are left out. */
    headers?: Record<string, string | undefined>;
}
/** An answer: its status, and its JSON (text for a non-JSON answer, null for 204). */
export interface Answer {
    status: number;
    data: unknown;
    headers: Headers;
}
export declare class Transport {
    readonly baseUrl: string;
    readonly timeoutMs: number;
    private readonly headers;
    private readonly fetchFn;
    constructor(options: TransportOptions);
    request(method: string, path: string, options?: RequestOptions): Promise<Answer>;
}
export declare function isObject(value: unknown): value is Record<string, unknown>;
