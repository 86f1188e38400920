// webhooks.ts — checking the Delayq-Signature of the requests delayqd's push delivery sends.
//
//   Delayq-Signature: t=<unix ms>,v1=<hex>[,v1=<hex>]     one v1 per secret of the webhook
//   v1 = lowercase hex HMAC-SHA256(secret, "<t>.<raw body>")
//
// A request passes if `t` is digits within toleranceMs of the receiver's clock (this bounds
// replays) and any v1 equals the HMAC under any secret the receiver accepts, compared in
// constant time; two secrets let a receiver accept both sides of a rotation. The raw body must
// be the bytes as received, before any JSON parsing. signatureProblem() is the one check; the
// helpers read the raw body from a Node request, an Express-style request or a Web Request and
// answer 401 for a request that fails. The scheme: docs/webhooks.md "Checking signatures".

import { createHmac, timingSafeEqual } from "node:crypto";
import { TooLargeError, WebhookSignatureError } from "./errors.js";

/** A secret of the webhook, as given to setWebhook(). */
export type Secret = string | Uint8Array;

/** Request headers: a Headers, Node's req.headers, or any record of header names (any case). */
export type HeadersLike = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

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

const kSignatureHeader = "delayq-signature";
const kDefaultToleranceMs = 5 * 60 * 1000;
const kDefaultMaxBodyBytes = 16 * 1024 * 1024;

// The t= and the v1= values of a Delayq-Signature. Spaces around each part are allowed (a proxy
// or a hand-written test may add them).
function signatureParts(header: string): { t: string | undefined; signatures: string[] } {
  let t: string | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",").map((item) => item.trim())) {
    const at = part.indexOf("=");
    const name = at < 0 ? part : part.slice(0, at);
    const value = at < 0 ? "" : part.slice(at + 1);
    if (name === "t") t = value;
    else if (name === "v1") signatures.push(value);
  }
  return { t, signatures };
}

/**
 * Why a request fails its Delayq-Signature check, or null if it passes. The reasons are for
 * logs: "no Delayq-Signature header", "no valid t=", "t is 412 s from now", "no v1= matches".
 */
export function signatureProblem(options: VerifyOptions): string | null {
  const secrets = secretList(options.secrets);
  const header = typeof options.headers === "string" ? options.headers : headerValue(options.headers, kSignatureHeader);
  if (header === undefined) return "no Delayq-Signature header";
  const { t, signatures } = signatureParts(header);
  if (t === undefined || !/^[0-9]{1,16}$/.test(t)) return "no valid t= in Delayq-Signature";
  const now = options.now === undefined ? Date.now() : Number(options.now);
  const toleranceMs = options.toleranceMs ?? kDefaultToleranceMs;
  const skewMs = Math.abs(now - Number(t));
  if (!(skewMs <= toleranceMs)) return `t is ${Math.round(skewMs / 1000)} s from now, beyond ${toleranceMs} ms`;
  const message = Buffer.concat([Buffer.from(`${t}.`), bodyBytes(options.body)]);
  for (const secret of secrets) {
    const expected = Buffer.from(createHmac("sha256", secret).update(message).digest("hex"));
    for (const given of signatures) {
      const candidate = Buffer.from(given);
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) return null;
    }
  }
  return signatures.length === 0 ? "no v1= in Delayq-Signature" : "no v1= matches a secret";
}

/** True if the request's Delayq-Signature signs its raw body with one of `secrets`, at a `t` within tolerance. */
export function verifySignature(options: VerifyOptions): boolean {
  return signatureProblem(options) === null;
}

/**
 * A Delayq-Signature value for `body`, signed at `t` with each secret, as delayqd writes it:
 * for testing a receiver.
 */
export function signPayload(options: { secrets: Secret | readonly Secret[]; body: string | Uint8Array | ArrayBuffer; t?: Date | number }): string {
  const t = String(Math.floor(options.t === undefined ? Date.now() : Number(options.t)));
  const message = Buffer.concat([Buffer.from(`${t}.`), bodyBytes(options.body)]);
  const v1 = secretList(options.secrets).map((secret) => `v1=${createHmac("sha256", secret).update(message).digest("hex")}`);
  return [`t=${t}`, ...v1].join(",");
}

// -- Node's http server --------------------------------------------------------------------------

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
export async function verifyNodeRequest(req: NodeRequestLike, options: ReceiverOptions): Promise<WebhookDelivery> {
  const body = await rawNodeBody(req, options.maxBodyBytes ?? kDefaultMaxBodyBytes);
  return verified(req.headers, body, options);
}

/**
 * A listener for http.createServer(): checks each request's signature, answers 401 (JSON error)
 * to one that fails, and otherwise runs `handler`. If the handler does not answer, the listener
 * answers 204 once it resolves (delayq deletes the job), or 500 if it throws (delayq retries).
 */
export function webhookListener(
  options: ReceiverOptions,
  handler: (delivery: WebhookDelivery, req: NodeRequestLike, res: NodeResponseLike) => unknown,
): (req: NodeRequestLike, res: NodeResponseLike) => void {
  secretList(options.secrets);
  return (req, res) => {
    void (async () => {
      let delivery: WebhookDelivery;
      try {
        delivery = await verifyNodeRequest(req, options);
      } catch (error) {
        refuseNode(res, error);
        return;
      }
      try {
        await handler(delivery, req, res);
        if (!answered(res)) answerNode(res, 204);
      } catch (error) {
        if (!answered(res)) answerNode(res, 500, "handler_failed", error instanceof Error ? error.message : String(error));
      }
    })();
  };
}

/**
 * Express-style middleware `(req, res, next)`: checks the signature; on success sets
 * `req.delayq` (the delivery) and `req.rawBody`, and calls next(); on failure answers 401 and
 * does not. Mount it before any JSON body parser, or after express.raw().
 */
export function webhookMiddleware(
  options: ReceiverOptions,
): (req: NodeRequestLike & { delayq?: WebhookDelivery; rawBody?: Uint8Array }, res: NodeResponseLike, next: (error?: unknown) => void) => void {
  secretList(options.secrets);
  return (req, res, next) => {
    verifyNodeRequest(req, options).then(
      (delivery) => {
        req.delayq = delivery;
        req.rawBody = delivery.body;
        next();
      },
      (error: unknown) => {
        if (error instanceof WebhookSignatureError || error instanceof TooLargeError) refuseNode(res, error);
        else next(error);
      },
    );
  };
}

// -- Web Request (fetch-style servers) -----------------------------------------------------------

/**
 * Checks a Web Request's signature: resolves to the verified delivery, or to a 401 Response
 * (413 for a body over maxBodyBytes) to return as it is.
 *
 *     const result = await verifyRequest(request, { secrets });
 *     if (result instanceof Response) return result;
 */
export async function verifyRequest(request: Request, options: ReceiverOptions): Promise<WebhookDelivery | Response> {
  const limit = options.maxBodyBytes ?? kDefaultMaxBodyBytes;
  const length = Number(request.headers.get("content-length") ?? "0");
  if (length > limit) return refusalResponse(new TooLargeError(`body over ${limit} bytes`, { status: 413 }));
  const body = new Uint8Array(await request.arrayBuffer());
  if (body.length > limit) return refusalResponse(new TooLargeError(`body over ${limit} bytes`, { status: 413 }));
  try {
    return verified(request.headers, body, options);
  } catch (error) {
    if (error instanceof WebhookSignatureError) return refusalResponse(error);
    throw error;
  }
}

// -- shared --------------------------------------------------------------------------------------

function verified(headers: HeadersLike, body: Uint8Array, options: ReceiverOptions): WebhookDelivery {
  const now = options.now?.() ?? Date.now();
  const problem = signatureProblem({
    secrets: options.secrets,
    headers,
    body,
    now,
    ...(options.toleranceMs === undefined ? {} : { toleranceMs: options.toleranceMs }),
  });
  if (problem !== null) throw new WebhookSignatureError(problem, { status: 401 });
  // The check passed: t is 1 to 16 digits.
  const t = signatureParts(headerValue(headers, kSignatureHeader) ?? "").t ?? "0";
  const header = (name: string) => headerValue(headers, name);
  const integer = (name: string) => {
    const value = header(name);
    return value !== undefined && /^[0-9]+$/.test(value) ? Number(value) : undefined;
  };
  const due = header("delayq-due");
  const key = header("delayq-key");
  return {
    body,
    text: () => new TextDecoder().decode(body),
    json: () => JSON.parse(new TextDecoder().decode(body)) as unknown,
    jobId: integer("delayq-job-id"),
    attempt: integer("delayq-attempt"),
    tube: header("delayq-tube"),
    key: key === undefined ? undefined : safeDecode(key),
    due: due === undefined || Number.isNaN(Date.parse(due)) ? undefined : new Date(due),
    contentType: header("content-type"),
    signedAt: new Date(Number(t)),
  };
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value; // a key of printable ASCII with a stray % arrives as put
  }
}

function secretList(secrets: Secret | readonly Secret[]): Secret[] {
  const list = typeof secrets === "string" || secrets instanceof Uint8Array ? [secrets] : [...(secrets ?? [])];
  if (list.length === 0 || !list.every((s) => (typeof s === "string" || s instanceof Uint8Array) && s.length > 0)) {
    throw new TypeError("secrets: a non-empty secret (string or Uint8Array), or an array of them");
  }
  return list;
}

function bodyBytes(body: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError("body: the raw body, a string, Uint8Array or ArrayBuffer");
}

function headerValue(headers: HeadersLike, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function" && typeof (headers as Headers).has === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  let value = record[name];
  if (value === undefined) {
    const found = Object.keys(record).find((key) => key.toLowerCase() === name);
    value = found === undefined ? undefined : record[found];
  }
  if (value === undefined) return undefined;
  return typeof value === "string" ? value : value.join(",");
}

async function rawNodeBody(req: NodeRequestLike, limit: number): Promise<Uint8Array> {
  if (req.body instanceof Uint8Array) return req.body;
  if (typeof req.body === "string") return Buffer.from(req.body, "utf8");
  if (req.body !== undefined && req.body !== null && !isEmptyObject(req.body)) {
    throw new TypeError("req.body was parsed already: its raw bytes are gone (use express.raw())");
  }
  const length = Number(headerValue(req.headers, "content-length") ?? "0");
  if (length > limit) throw new TooLargeError(`body over ${limit} bytes`, { status: 413 });
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of req) {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : (chunk as Uint8Array);
    total += bytes.length;
    if (total > limit) throw new TooLargeError(`body over ${limit} bytes`, { status: 413 });
    chunks.push(bytes);
  }
  return Buffer.concat(chunks, total);
}

// Body parsers that find no body of their type leave {} behind.
function isEmptyObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && Object.keys(value).length === 0 && !(value instanceof Uint8Array);
}

function answered(res: NodeResponseLike): boolean {
  return res.writableEnded === true || res.headersSent === true;
}

function answerNode(res: NodeResponseLike, status: number, code?: string, message?: string): void {
  res.statusCode = status;
  if (code === undefined) {
    res.end();
    return;
  }
  res.setHeader("content-type", "application/json");
  res.end(`${JSON.stringify({ error: { code, message } })}\n`);
}

function refuseNode(res: NodeResponseLike, error: unknown): void {
  if (answered(res)) return;
  if (error instanceof WebhookSignatureError) answerNode(res, 401, error.code, error.message);
  else if (error instanceof TooLargeError) answerNode(res, 413, error.code, error.message);
  else answerNode(res, 400, "bad_request", error instanceof Error ? error.message : String(error));
}

function refusalResponse(error: WebhookSignatureError | TooLargeError): Response {
  return new Response(`${JSON.stringify({ error: { code: error.code, message: error.message } })}\n`, {
    status: error.status,
    headers: { "content-type": "application/json" },
  });
}
