// errors.ts — the exceptions the client throws: one class per error code of the HTTP API.
// Every error answer is {"error": {"code", "message"}}; `code` is stable and picks the class
// (kErrorsByCode, the one table), `message` is for people. Three classes are the client's own:
// TransportError (no answer came), UnexpectedResponseError (an answer it cannot read) and
// WebhookSignatureError (a webhook request whose Delayq-Signature does not check out). All
// extend DelayqError, so one `catch (e) { if (e instanceof DelayqError) ... }` covers them.
// The codes and statuses: docs/http-api.md "Errors".

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
export class DelayqError extends Error {
  /** The code this class stands for. */
  static readonly code: string = "error";
  /** The server's error code (`not_found`, ...), or the client's own for its classes. */
  readonly code: string;
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** Milliseconds of a `Retry-After` header, if the answer had one. */
  readonly retryAfterMs: number | undefined;
  /** Other fields of the error answer. */
  readonly details: Record<string, unknown>;

  constructor(message: string, options: DelayqErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? (new.target as typeof DelayqError).code;
    this.status = options.status ?? 0;
    this.retryAfterMs = options.retryAfterMs;
    this.details = options.details ?? {};
  }
}

/** 400 bad_request: a field unknown, missing, of the wrong type or out of range. */
export class BadRequestError extends DelayqError {
  static override readonly code: string = "bad_request";
}

/** 401 unauthorized: the server wants a bearer token (--http-token-file) and got none or a wrong one. */
export class UnauthorizedError extends DelayqError {
  static override readonly code: string = "unauthorized";
}

/** 403 forbidden: no tokens are set and the request looks like a web page's (an Origin of another site). */
export class ForbiddenError extends DelayqError {
  static override readonly code: string = "forbidden";
}

/** 404 not_found: no such job, key holder, tube, webhook or schedule. */
export class NotFoundError extends DelayqError {
  static override readonly code: string = "not_found";
}

/** 404 no_route: no endpoint has this path. */
export class NoRouteError extends DelayqError {
  static override readonly code: string = "no_route";
}

/** 405 method_not_allowed: the path exists, not with this method. */
export class MethodNotAllowedError extends DelayqError {
  static override readonly code: string = "method_not_allowed";
}

/**
 * 409 conflict: the job is in a state the request cannot act on (not reserved over HTTP, a
 * new due time for a reserved job), a `url` for a tube without a webhook, or a backup running.
 */
export class ConflictError extends DelayqError {
  static override readonly code: string = "conflict";
}

/** 413 too_large: the job body is over the server's maximum job size (-z), or the request body over its limit. */
export class TooLargeError extends DelayqError {
  static override readonly code: string = "too_large";
}

/** 431 headers_too_large: the request line and headers are over 8192 bytes. */
export class HeadersTooLargeError extends DelayqError {
  static override readonly code: string = "headers_too_large";
}

/** 500 internal: the server could not read a job back (in Redis mode: Redis did not answer in time). */
export class InternalError extends DelayqError {
  static override readonly code: string = "internal";
}

/** 501 unsupported: not served in this mode (backups, job lists and due counts in Redis mode), or an unknown method. */
export class UnsupportedError extends DelayqError {
  static override readonly code: string = "unsupported";
}

/** A 503: the server cannot do this now. The subclasses say why; `retryAfterMs` may say when to try again. */
export class ServiceUnavailableError extends DelayqError {
  static override readonly code: string = "service_unavailable";
}

/** 503 draining: the server is in drain mode (SIGUSR1) and takes no new jobs. */
export class DrainingError extends ServiceUnavailableError {
  static override readonly code: string = "draining";
}

/** 503 unavailable (readiness only): the store has failed, or Redis has not answered for 5 s. */
export class UnavailableError extends ServiceUnavailableError {
  static override readonly code: string = "unavailable";
}

/** 503 stopping: a long-poll reserve was waiting when the server was told to stop; no job was taken. */
export class StoppingError extends ServiceUnavailableError {
  static override readonly code: string = "stopping";
}

/** 503 starting: the server is loading its jobs; `details.progress` says how far. */
export class StartingError extends ServiceUnavailableError {
  static override readonly code: string = "starting";
}

/** 503 limit: job ids used up, too many jobs held, or too many connections open. */
export class LimitError extends ServiceUnavailableError {
  static override readonly code: string = "limit";
}

/** 507 no_space (503 from readiness): the disk is below --min-free-disk, or Redis over its maxmemory. */
export class NoSpaceError extends DelayqError {
  static override readonly code: string = "no_space";
}

/**
 * No answer: the connection could not be made, broke, or timed out. The request may or may not
 * have been carried out (a put with a key can be retried safely).
 */
export class TransportError extends DelayqError {
  static override readonly code: string = "transport";
}

/** An answer this client cannot read: not JSON, or without a field it needs. */
export class UnexpectedResponseError extends DelayqError {
  static override readonly code: string = "unexpected_response";
}

/** A webhook request that fails its Delayq-Signature check (status 401, as a receiver answers it). */
export class WebhookSignatureError extends DelayqError {
  static override readonly code: string = "bad_signature";
}

type ErrorClass = typeof DelayqError;

/** The one table from the server's error codes to the classes. */
export const kErrorsByCode: Readonly<Record<string, ErrorClass>> = Object.freeze(
  Object.fromEntries(
    [
      BadRequestError,
      UnauthorizedError,
      ForbiddenError,
      NotFoundError,
      NoRouteError,
      MethodNotAllowedError,
      ConflictError,
      TooLargeError,
      HeadersTooLargeError,
      InternalError,
      UnsupportedError,
      DrainingError,
      UnavailableError,
      StoppingError,
      StartingError,
      LimitError,
      NoSpaceError,
    ].map((cls) => [cls.code, cls]),
  ),
);

// For a code this client does not know (a newer server): the class its status implies.
const kErrorsByStatus: Readonly<Record<number, ErrorClass>> = {
  400: BadRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  405: MethodNotAllowedError,
  409: ConflictError,
  413: TooLargeError,
  431: HeadersTooLargeError,
  500: InternalError,
  501: UnsupportedError,
  503: ServiceUnavailableError,
  507: NoSpaceError,
};

/**
 * The exception for an error answer: by its code, else by its status, else DelayqError. An
 * unknown code is kept in the exception's `code`.
 */
export function errorFor(
  status: number,
  code: string | undefined,
  message: string,
  options: Omit<DelayqErrorOptions, "status" | "code"> = {},
): DelayqError {
  const cls =
    (code !== undefined && Object.hasOwn(kErrorsByCode, code) ? kErrorsByCode[code] : undefined) ??
    kErrorsByStatus[status] ??
    DelayqError;
  return new cls(message, { ...options, status, ...(code === undefined ? {} : { code }) });
}
