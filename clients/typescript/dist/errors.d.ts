/** What an error carries besides its message. */
export interface DelayqErrorOptions {
    /** The HTTP status; 0 when no answer came. */
    status?: number;
    /** The server's error code; defaults to the class's. */
    code?: string;
    /** Milliseconds of a `Retry-After` header (503 answers). */
    retryAfterMs?: number;
    /** The error object's other fields, and the answer's (a starting server's `progress`). */
    details?: Record<string, unknown>;
    cause?: unknown;
}
/** Base of every error the client throws about the server or the way to it. */
export declare class DelayqError extends Error {
    /** The code this class stands for. */
    static readonly code: string;
    /** The server's error code (`not_found`, ...), or the client's own for its classes. */
    readonly code: string;
    /** The HTTP status; 0 when no answer came. */
    readonly status: number;
    /** Milliseconds of a `Retry-After` header, if the answer had one. */
    readonly retryAfterMs: number | undefined;
    /** Other fields of the error answer. */
    readonly details: Record<string, unknown>;
    constructor(message: string, options?: DelayqErrorOptions);
}
/** 400 bad_request: a field unknown, missing, of the wrong type or out of range. */
export declare class BadRequestError extends DelayqError {
    static readonly code: string;
}
/** 401 unauthorized: the server wants a bearer token (--http-token-file) and got none or a wrong one. */
export declare class UnauthorizedError extends DelayqError {
    static readonly code: string;
}
/** 403 forbidden: no tokens are set and the request looks like a web page's (an Origin of another site). */
export declare class ForbiddenError extends DelayqError {
    static readonly code: string;
}
/** 404 not_found: no such job, key holder, tube, webhook or schedule. */
export declare class NotFoundError extends DelayqError {
    static readonly code: string;
}
/** 404 no_route: no endpoint has this path. */
export declare class NoRouteError extends DelayqError {
    static readonly code: string;
}
/** 405 method_not_allowed: the path exists, not with this method. */
export declare class MethodNotAllowedError extends DelayqError {
    static readonly code: string;
}
/**
 * 409 conflict: the job is in a state the request cannot act on (not reserved over HTTP, a
 * new due time for a reserved job), a `url` for a tube without a webhook, or a backup running.
 */
export declare class ConflictError extends DelayqError {
    static readonly code: string;
}
/** 413 too_large: the job body is over the server's maximum job size (-z), or the request body over its limit. */
export declare class TooLargeError extends DelayqError {
    static readonly code: string;
}
/** 431 headers_too_large: the request line and headers are over 8192 bytes. */
export declare class HeadersTooLargeError extends DelayqError {
    static readonly code: string;
}
/** 500 internal: the server could not read a job back (in Redis mode: Redis did not answer in time). */
export declare class InternalError extends DelayqError {
    static readonly code: string;
}
/** 501 unsupported: not served in this mode (backups, job lists and due counts in Redis mode), or an unknown method. */
export declare class UnsupportedError extends DelayqError {
    static readonly code: string;
}
/** A 503: the server cannot do this now. The subclasses say why; `retryAfterMs` may say when to try again. */
export declare class ServiceUnavailableError extends DelayqError {
    static readonly code: string;
}
/** 503 draining: the server is in drain mode (SIGUSR1) and takes no new jobs. */
export declare class DrainingError extends ServiceUnavailableError {
    static readonly code: string;
}
/** 503 unavailable (readiness only): the store has failed, or Redis has not answered for 5 s. */
export declare class UnavailableError extends ServiceUnavailableError {
    static readonly code: string;
}
/** 503 stopping: a long-poll reserve was waiting when the server was told to stop; no job was taken. */
export declare class StoppingError extends ServiceUnavailableError {
    static readonly code: string;
}
/** 503 starting: the server is loading its jobs; `details.progress` says how far. */
export declare class StartingError extends ServiceUnavailableError {
    static readonly code: string;
}
/** 503 limit: job ids used up, too many jobs held, or too many connections open. */
export declare class LimitError extends ServiceUnavailableError {
    static readonly code: string;
}
/** 507 no_space (503 from readiness): the disk is below --min-free-disk, or Redis over its maxmemory. */
export declare class NoSpaceError extends DelayqError {
    static readonly code: string;
}
/**
 * No answer: the connection could not be made, broke, or timed out. The request may or may not
 * have been carried out (a put with a key can be retried safely).
 */
export declare class TransportError extends DelayqError {
    static readonly code: string;
}
/** An answer this client cannot read: not JSON, or without a field it needs. */
export declare class UnexpectedResponseError extends DelayqError {
    static readonly code: string;
}
/** A webhook request that fails its Delayq-Signature check (status 401, as a receiver answers it). */
export declare class WebhookSignatureError extends DelayqError {
    static readonly code: string;
}
declare type ErrorClass = typeof DelayqError;
/** The one table from the server's error codes to the classes. */
export declare const kErrorsByCode: Readonly<Record<string, ErrorClass>>;
/**
 * The exception for an error answer: by its code, else by its status, else DelayqError. An
 * unknown code is kept in the exception's `code`.
 */
export declare function errorFor(status: number, code: string | undefined, message: string, options?: Omit<DelayqErrorOptions, "status" | "code">): DelayqError;
export {};
