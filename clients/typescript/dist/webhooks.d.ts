/** A secret of the webhook, as given to setWebhook(). */
export declare type Secret = string | Uint8Array;
/** Request headers: a Headers, Node's req.headers, or any record of header names (any case). */
export declare type HeadersLike = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;
export interface VerifyOptions {
    /** The secret, or the secrets (two while rotating), any of which may have signed. */
    secrets: Secret | readonly Secret[];
    /** The request's headers, or the Delayq-Signature value itself. */
    headers: HeadersLike | string;
    /** The raw request body, as received. */
    body: string | Uint8Array | ArrayBuffer;
    /** The receiver's clock. Default now. */
    now?: Date | number;
    /** How far `t` may be from `now`, in ms. Default 300000 (5 minutes). */
    toleranceMs?: number;
}
/** The options of the receiver helpers. */
export interface ReceiverOptions {
    secrets: Secret | readonly Secret[];
    /** Default 300000 (5 minutes). */
    toleranceMs?: number;
    /** Bodies longer than this are refused with 413 unread. Default 16 MiB. */
    maxBodyBytes?: number;
    /** The receiver's clock, for tests. Default Date.now. */
    now?: () => number;
}
/** A verified push delivery: the raw body and what delayqd's headers say of the job. */
export interface WebhookDelivery {
    /** The raw body: the job's body, byte for byte. */
    body: Uint8Array;
    /** The body as UTF-8 text. */
    text(): string;
    /** The body parsed as JSON. */
    json(): unknown;
    /** Delayq-Job-Id: deduplicate on it (delivery is at least once). */
    jobId: number | undefined;
    /** Delayq-Attempt: 1 for a first attempt. */
    attempt: number | undefined;
    tube: string | undefined;
    /** Delayq-Key, percent-decoded. */
    key: string | undefined;
    /** Delayq-Due: when the job last became ready. */
    due: Date | undefined;
    contentType: string | undefined;
    /** When the attempt was signed (`t`). */
    signedAt: Date;
}
/**
 * Why a request fails its Delayq-Signature check, or null if it passes. The reasons are for
 * logs: "no Delayq-Signature header", "no valid t=", "t is 412 s from now", "no v1= matches".
 */
export declare function signatureProblem(options: VerifyOptions): string | null;
/** True if the request's Delayq-Signature signs its raw body with one of `secrets`, at a `t` within tolerance. */
export declare function verifySignature(options: VerifyOptions): boolean;
/**
 * A Delayq-Signature value for `body`, signed at `t` with each secret, as delayqd writes it:
 * for testing a receiver.
 */
export declare function signPayload(options: {
    secrets: Secret | readonly Secret[];
    body: string | Uint8Array | ArrayBuffer;
    t?: Date | number;
}): string;
/** What the helpers read of a Node request (http.IncomingMessage fits). */
export interface NodeRequestLike extends AsyncIterable<unknown> {
    headers: Readonly<Record<string, string | readonly string[] | undefined>>;
    /** A raw body already read by a body parser (express.raw() gives a Buffer). */
    body?: unknown;
}
/** What the helpers write to a Node response (http.ServerResponse fits). */
export interface NodeResponseLike {
    statusCode: number;
    readonly headersSent?: boolean;
    readonly writableEnded?: boolean;
    setHeader(name: string, value: string): unknown;
    end(chunk?: string): unknown;
}
/**
 * Reads a Node request's raw body and checks its signature: resolves to the delivery, or
 * throws WebhookSignatureError (status 401) or TooLargeError (413). A body that a body parser
 * has read already (req.body, a Buffer or a string) is used as it is; a parsed object cannot
 * be checked (its raw bytes are gone): mount express.raw() rather than express.json().
 */
export declare function verifyNodeRequest(req: NodeRequestLike, options: ReceiverOptions): Promise<WebhookDelivery>;
/**
 * A listener for http.createServer(): checks each request's signature, answers 401 (JSON error)
 * to one that fails, and otherwise runs `handler`. If the handler does not answer, the listener
 * answers 204 once it resolves (delayq deletes the job), or 500 if it throws (delayq retries).
 */
export declare function webhookListener(options: ReceiverOptions, handler: (delivery: WebhookDelivery, req: NodeRequestLike, res: NodeResponseLike) => unknown): (req: NodeRequestLike, res: NodeResponseLike) => void;
/**
 * Express-style middleware `(req, res, next)`: checks the signature; on success sets
 * `req.delayq` (the delivery) and `req.rawBody`, and calls next(); on failure answers 401 and
 * does not. Mount it before any JSON body parser, or after express.raw().
 */
export declare function webhookMiddleware(options: ReceiverOptions): (req: NodeRequestLike & {
    delayq?: WebhookDelivery;
    rawBody?: Uint8Array;
}, res: NodeResponseLike, next: (error?: unknown) => void) => void;
/**
 * Checks a Web Request's signature: resolves to the verified delivery, or to a 401 Response
 * (413 for a body over maxBodyBytes) to return as it is.
 *
 *     const result = await verifyRequest(request, { secrets });
 *     if (result instanceof Response) return result;
 */
export declare function verifyRequest(request: Request, options: ReceiverOptions): Promise<WebhookDelivery | Response>;
