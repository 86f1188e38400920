// tracing.test.js — OpenTelemetry against a real delayqd, with the SDK's BasicTracerProvider,
// an InMemorySpanExporter and the AsyncLocalStorage context manager (the devDependencies): a
// put sends the active span's trace context and nothing without one; work() runs a job's first
// attempt in a child span of the producer's and a retry in a trace of its own linked to it; and,
// from a copy of the package where @opentelemetry/api cannot be found, puts and work() run as
// before.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client } from "delayq";
import { startServer } from "../test-support/server.js";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");

let otel;
try {
  otel = {
    ...(await import("@opentelemetry/api")),
    ...(await import("@opentelemetry/sdk-trace-base")),
    ...(await import("@opentelemetry/context-async-hooks")),
  };
} catch {
  // not installed: the tests that need it are skipped, saying why
}
const noOtel =
  otel === undefined && "the devDependencies are not installed (tests/support/run-typescript-client.sh installs them)";

let server;
let client;
let exporter;
let tracer;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.baseUrl });
  if (otel === undefined) return;
  exporter = new otel.InMemorySpanExporter();
  const provider = new otel.BasicTracerProvider({ spanProcessors: [new otel.SimpleSpanProcessor(exporter)] });
  otel.trace.setGlobalTracerProvider(provider);
  otel.context.setGlobalContextManager(new otel.AsyncLocalStorageContextManager().enable());
  tracer = otel.trace.getTracer("delayq-tests");
});

after(() => server?.stop());

beforeEach(() => exporter?.reset());

/** Runs `fn` in a new active span named `name`; resolves to [fn's result, the span's context]. */
function inSpan(name, fn) {
  return tracer.startActiveSpan(name, async (span) => {
    try {
      return [await fn(span), span.spanContext()];
    } finally {
      span.end();
    }
  });
}

function processSpans(tube) {
  return exporter.getFinishedSpans().filter((span) => span.name === `delayq process ${tube}`);
}

// A producer's span from elsewhere, as a propagator would have read it.
const kRemote = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1, isRemote: true };

describe("put", { skip: noOtel }, () => {
  test("inside an active span sends that span's traceparent and tracestate", async () => {
    const [job, producer] = await inSpan("produce", () => client.put("traced-put", "x"));
    assert.equal(job.traceparent, `00-${producer.traceId}-${producer.spanId}-01`);
    assert.equal(job.tracestate, undefined);
    assert.equal((await client.getJob(job.id)).traceparent, job.traceparent);

    const remote = { ...kRemote, traceFlags: 0, traceState: otel.createTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE") };
    const ctx = otel.trace.setSpanContext(otel.context.active(), remote);
    const stated = await otel.context.with(ctx, () => client.put("traced-put", "y"));
    assert.equal(stated.traceparent, `00-${kRemote.traceId}-${kRemote.spanId}-00`);
    assert.equal(stated.tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  });

  test("a tracestate the server would refuse is left out, and the put goes through", async () => {
    // The API's own TraceState keeps to 512 bytes; another implementation of it need not.
    const long = Array.from({ length: 30 }, (_, i) => `k${i}=${"v".repeat(20)}`).join(",");
    for (const refused of [long, "rojo=\u00e9t\u00e9"]) {
      const traceState = { serialize: () => refused, get: () => undefined, set() { return this; }, unset() { return this; } };
      const ctx = otel.trace.setSpanContext(otel.context.active(), { ...kRemote, traceState });
      const job = await otel.context.with(ctx, () => client.put("traced-put", "z"));
      assert.equal(job.traceparent, `00-${kRemote.traceId}-${kRemote.spanId}-01`);
      assert.equal(job.tracestate, undefined);
    }
  });

  test("an explicit traceparent wins over the active span", async () => {
    const given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const [job] = await inSpan("produce", () => client.put("traced-put", "x", { traceparent: given }));
    assert.equal(job.traceparent, given);
  });

  test("with no active span, or an invalid one, nothing is sent", async () => {
    assert.equal(otel.trace.getActiveSpan(), undefined);
    assert.equal((await client.put("traced-put", "x")).traceparent, undefined);
    const invalid = otel.trace.setSpanContext(otel.context.active(), otel.INVALID_SPAN_CONTEXT);
    const job = await otel.context.with(invalid, () => client.put("traced-put", "x"));
    assert.equal(job.traceparent, undefined);
  });
});

describe("work()", { skip: noOtel }, () => {
  test("a job's first attempt runs in a child span of the producer's", async () => {
    const [put, producer] = await inSpan("produce", () => client.put("traced-work", "x"));
    const controller = new AbortController();
    let active;
    let next;
    const stats = await client.work("traced-work", async () => {
      active = otel.trace.getActiveSpan().spanContext();
      next = await client.put("traced-next", "y"); // from the handler: continues its span
      controller.abort();
    }, { signal: controller.signal });
    assert.equal(stats.handled, 1);

    const [span] = processSpans("traced-work");
    assert.ok(span, "a process span was exported");
    assert.equal(span.kind, otel.SpanKind.CONSUMER);
    assert.equal(span.spanContext().traceId, producer.traceId);
    assert.equal(span.parentSpanContext?.spanId, producer.spanId);
    assert.deepEqual(span.links, []);
    assert.deepEqual(span.attributes, {
      "messaging.system": "delayq",
      "messaging.operation.type": "process",
      "messaging.destination.name": "traced-work",
      "messaging.message.id": String(put.id),
    });
    assert.equal(span.status.code, otel.SpanStatusCode.UNSET);
    assert.equal(active.spanId, span.spanContext().spanId, "the handler ran inside the span");
    assert.equal(next.traceparent, `00-${producer.traceId}-${span.spanContext().spanId}-01`);
    await client.deleteJob(next.id);
  });

  test("a retry runs in a trace of its own, linked to the producer's span", async () => {
    const [put, producer] = await inSpan("produce", () => client.put("traced-retry", "x"));
    const controller = new AbortController();
    const errors = [];
    let attempts = 0;
    const stats = await client.work("traced-retry", async () => {
      attempts += 1;
      if (attempts === 1) throw new Error("the mail server is down");
      controller.abort();
    }, { signal: controller.signal, backoff: { minMs: 0, maxMs: 0 }, onError: (e) => errors.push(e) });
    assert.deepEqual([stats.failed, stats.handled], [1, 1]);
    assert.equal((await client.getJob(put.id).catch((e) => e)).code, "not_found");

    const [first, retry] = processSpans("traced-retry");
    assert.ok(first && retry, "two process spans were exported");
    assert.equal(first.spanContext().traceId, producer.traceId);
    assert.equal(first.parentSpanContext?.spanId, producer.spanId);
    assert.equal(first.status.code, otel.SpanStatusCode.ERROR);
    assert.equal(first.status.message, "the mail server is down");
    assert.ok(first.events.some((e) => e.name === "exception"), "the throw is recorded");

    assert.notEqual(retry.spanContext().traceId, producer.traceId);
    assert.equal(retry.parentSpanContext, undefined);
    assert.equal(retry.links.length, 1);
    assert.equal(retry.links[0].context.traceId, producer.traceId);
    assert.equal(retry.links[0].context.spanId, producer.spanId);
    assert.equal(retry.status.code, otel.SpanStatusCode.UNSET);
  });

  test("a job put without a trace context runs in a root span without links", async () => {
    const put = await client.put("traced-bare", "x");
    const controller = new AbortController();
    await client.work("traced-bare", () => controller.abort(), { signal: controller.signal });
    const [span] = processSpans("traced-bare");
    assert.ok(span, "a process span was exported");
    assert.equal(span.parentSpanContext, undefined);
    assert.deepEqual(span.links, []);
    assert.equal(span.attributes["messaging.message.id"], String(put.id));
  });
});

test("without @opentelemetry/api, puts send nothing and work() runs as before", async (t) => {
  // A copy of the package outside this directory, so that node_modules/ is out of its reach.
  const dir = mkdtempSync(join(tmpdir(), "delayq-ts-no-otel-"));
  try {
    cpSync(join(packageDir, "dist"), join(dir, "dist"), { recursive: true });
    cpSync(join(packageDir, "package.json"), join(dir, "package.json"));
    writeFileSync(join(dir, "check.js"), `
      import { Client } from "./dist/index.js";
      let found = true;
      try { await import("@opentelemetry/api"); } catch { found = false; }
      const client = new Client({ baseUrl: process.env.BASE_URL });
      const put = await client.put("untraced", "x");
      const controller = new AbortController();
      let seen;
      const stats = await client.work("untraced", (job) => { seen = job.id; controller.abort(); },
        { signal: controller.signal });
      console.log(JSON.stringify({ found, traceparent: put.traceparent ?? null, seen: seen === put.id, stats }));
    `);
    const out = execFileSync(process.execPath, [join(dir, "check.js")], {
      env: { ...process.env, BASE_URL: server.baseUrl }, encoding: "utf8",
    });
    const result = JSON.parse(out);
    if (result.found) return t.skip("@opentelemetry/api is installed above the temporary directory");
    assert.deepEqual(result, {
      found: false, traceparent: null, seen: true, stats: { handled: 1, failed: 0, touched: 0, lost: 0 },
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
