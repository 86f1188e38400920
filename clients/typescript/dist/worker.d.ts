import type { Job } from "./models.js";
interface WorkerClient {
    reserve(tubes: string[], options: {
        timeout?: number;
        signal?: AbortSignal;
    }): Promise<Job | null>;
    touch(id: number): Promise<Job>;
    deleteJob(id: number): Promise<number>;
    release(id: number, options: {
        delay?: number;
    }): Promise<Job>;
}
export interface JobsOptions {
    /** Ends the iteration: a reserve waiting is cut off, and no job is taken after it. */
    signal?: AbortSignal;
    /** How long each reserve waits for a job, in ms, at most 1 hour. Default 20000. */
    waitMs?: number;
    /** Told of each error that is retried (a reserve that failed). Default: console.warn. */
    onError?: (error: unknown) => void;
}
/** The release delay after a failure: drawn between half and all of min(maxMs, minMs × factor^(n−1)). */
export interface Backoff {
    /** Default 1000. */
    minMs?: number;
    /** Default 600000 (10 minutes). */
    maxMs?: number;
    /** Default 2. */
    factor?: number;
}
export interface WorkOptions {
    /** Handlers running at once, each reserving only when free. Default 1. */
    concurrency?: number;
    /** Stops the worker: no new job is taken, and work() resolves once the handlers finish. */
    signal?: AbortSignal;
    /** How long each reserve waits for a job, in ms, at most 1 hour. Default 20000. */
    waitMs?: number;
    backoff?: Backoff;
    /** After `signal`, how long work() waits for handlers still running, in ms. Default 30000. */
    drainTimeoutMs?: number;
    /** Told of every handler that threw, and of every error reaching the server. Default: console.warn. */
    onError?: (error: unknown, job?: Job) => void;
}
/** What a handler is given beside its job. */
export interface WorkContext {
    /** Aborts if the job's reservation is lost (its TTR lapsed, or someone deleted it): give up then. */
    signal: AbortSignal;
    /** Touches the job now (the worker also does, every half TTR). */
    touch(): Promise<void>;
}
/** Runs one job; resolving deletes the job, throwing releases it for a retry. */
export declare type WorkHandler = (job: Job, context: WorkContext) => unknown;
/** What a worker did, once stopped. */
export interface WorkStats {
    /** Jobs whose handler resolved. */
    handled: number;
    /** Jobs whose handler threw. */
    failed: number;
    /** Touches sent for handlers running past half their job's TTR. */
    touched: number;
    /** Jobs whose reservation was lost while their handler ran. */
    lost: number;
}
export declare function jobs(client: WorkerClient, tubes: string[], options?: JobsOptions): AsyncGenerator<Job, void, undefined>;
export declare function work(client: WorkerClient, tubes: string[], handler: WorkHandler, options?: WorkOptions): Promise<WorkStats>;
/** The release delay after the handler failed on a job's `attempt`-th reservation. */
export declare function retryDelayMs(attempt: number, backoff: Required<Backoff>, random?: () => number): number;
export {};
