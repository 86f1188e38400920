// errors.test.js — every error the API documents reaches the caller as its own class, with
// its code, status and message: provoked on real delayqd servers (tokens, drain mode, a disk
// "below" --min-free-disk, a connection limit, a stop during a long-poll), plus the table.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  BadRequestError,
  Client,
  ConflictError,
  DelayqError,
  DrainingError,
  ForbiddenError,
  HeadersTooLargeError,
  InternalError,
  LimitError,
  MethodNotAllowedError,
  NoRouteError,
  NoSpaceError,
  NotFoundError,
  ServiceUnavailableError,
  StartingError,
  StoppingError,
  TooLargeError,
  TransportError,
  UnauthorizedError,
  UnavailableError,
  UnexpectedResponseError,
  UnsupportedError,
  errorFor,
  kErrorsByCode,
} from "delayq";
import { startServer } from "../test-support/server.js";

const servers = [];
async function server(options) {
  const started = await startServer(options);
  servers.push(started);
  return started;
}

after(() => Promise.all(servers.map((s) => s.stop())));

describe("on a plain server", () => {
  let client;
  let baseUrl;
  before(async () => {
    baseUrl = (await server()).baseUrl;
    client = new Client({ baseUrl });
  });

  test("no_route, method_not_allowed, unsupported method", async () => {
    const noRoute = await client.request("GET", "/v1/nothing-here").catch((e) => e);
    assert.ok(noRoute instanceof NoRouteError);
    assert.equal(noRoute.status, 404);
    assert.equal(noRoute.code, "no_route");
    const method = await client.request("PUT", "/v1/stats").catch((e) => e);
    assert.ok(method instanceof MethodNotAllowedError);
    assert.equal(method.status, 405);
    const unsupported = await client.request("FOO", "/v1/stats").catch((e) => e);
    assert.ok(unsupported instanceof UnsupportedError);
    assert.equal(unsupported.status, 501);
  });

  test("forbidden: a request with another site's Origin", async () => {
    const browserish = new Client({ baseUrl, headers: { Origin: "http://evil.example" } });
    const error = await browserish.stats().catch((e) => e);
    assert.ok(error instanceof ForbiddenError);
    assert.equal(error.status, 403);
    assert.match(error.message, /evil\.example/);
  });

  test("headers_too_large", async () => {
    const bloated = new Client({ baseUrl, headers: { "x-padding": "a".repeat(9000) } });
    const error = await bloated.health().catch((e) => e);
    assert.ok(error instanceof HeadersTooLargeError);
    assert.equal(error.status, 431);
  });

  test("no answer: a refused connection and a silent server are TransportErrors", async () => {
    const closed = net.createServer();
    await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address();
    await new Promise((resolve) => closed.close(resolve));
    const refused = await new Client({ baseUrl: `http://127.0.0.1:${port}` }).health().catch((e) => e);
    assert.ok(refused instanceof TransportError && refused instanceof DelayqError);
    assert.equal(refused.status, 0);
    assert.equal(refused.code, "transport");

    const sockets = [];
    const silent = net.createServer((socket) => sockets.push(socket));
    await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const started = Date.now();
      const client = new Client({ baseUrl: `http://127.0.0.1:${silent.address().port}`, timeoutMs: 300 });
      const timedOut = await client.health().catch((e) => e);
      assert.ok(timedOut instanceof TransportError);
      assert.match(timedOut.message, /no answer within 300 ms/);
      assert.ok(Date.now() - started < 5000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  test("an answer that is not delayq's JSON is an UnexpectedResponseError", async () => {
    const other = http.createServer((req, res) => {
      res.setHeader("content-type", req.url === "/v1/stats" ? "application/json" : "text/html");
      res.end(req.url === "/v1/stats" ? '{"version": 1}' : "<html>");
    });
    await new Promise((resolve) => other.listen(0, "127.0.0.1", resolve));
    try {
      const wrong = new Client({ baseUrl: `http://127.0.0.1:${other.address().port}` });
      const stats = await wrong.stats().catch((e) => e);
      assert.ok(stats instanceof UnexpectedResponseError);
      assert.match(stats.message, /version/);
      await assert.rejects(wrong.health(), UnexpectedResponseError);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  test("an error page that is not delayqd's is an UnexpectedResponseError with its status", async () => {
    // A proxy's pages, or a wrong base URL: a 404 there says nothing of a job.
    const proxy = http.createServer((req, res) => {
      res.statusCode = req.url.startsWith("/v1/jobs/") ? 404 : 503;
      res.setHeader("content-type", "text/html");
      if (res.statusCode === 503) res.setHeader("retry-after", "3");
      res.end("<html>not here</html>");
    });
    await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    try {
      const wrong = new Client({ baseUrl: `http://127.0.0.1:${proxy.address().port}` });
      const missing = await wrong.getJob(1).catch((e) => e);
      assert.ok(missing instanceof UnexpectedResponseError, String(missing));
      assert.ok(!(missing instanceof NotFoundError));
      assert.equal(missing.status, 404);
      assert.match(missing.message, /is it delayqd/);
      const busy = await wrong.stats().catch((e) => e);
      assert.ok(busy instanceof UnexpectedResponseError, String(busy));
      assert.equal(busy.status, 503);
      assert.equal(busy.retryAfterMs, 3000);
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }
  });

  test("a timeoutMs that is not positive is refused", () => {
    assert.throws(() => new Client({ timeoutMs: 0 }), RangeError);
  });

  test("what cannot be sent is a TypeError before anything is sent", async () => {
    const offline = new Client({ baseUrl: "http://127.0.0.1:9" });
    await assert.rejects(offline.setWebhook("t", "http://127.0.0.1:9/", { rate: NaN }), /rate: not a finite number/);
    await assert.rejects(offline.setWebhook("t", "http://127.0.0.1:9/", { rate: Infinity }), TypeError);
    await assert.rejects(offline.getKey("t", "\udcff"), /not Unicode text/);
    await assert.rejects(offline.reschedule(1), /a reschedule's options: an object/);
    await assert.rejects(offline.reserve(null), /tubes: a tube name or a non-empty array/);
    const headed = new Client({ baseUrl: "http://127.0.0.1:9", headers: { "x-note": "a\r\nb" } });
    await assert.rejects(headed.stats(), /header x-note/);
  });

  test("fromEnv reads DELAYQ_SERVER and DELAYQ_TOKEN", async () => {
    const saved = { ...process.env };
    try {
      process.env.DELAYQ_SERVER = baseUrl;
      process.env.DELAYQ_TOKEN = "";
      const fromEnv = Client.fromEnv();
      assert.equal(fromEnv.baseUrl, baseUrl);
      assert.equal(await fromEnv.health(), "ok");
    } finally {
      process.env.DELAYQ_SERVER = saved.DELAYQ_SERVER;
      process.env.DELAYQ_TOKEN = saved.DELAYQ_TOKEN;
      if (saved.DELAYQ_SERVER === undefined) delete process.env.DELAYQ_SERVER;
      if (saved.DELAYQ_TOKEN === undefined) delete process.env.DELAYQ_TOKEN;
    }
  });
});

describe("with bearer tokens", () => {
  let baseUrl;
  const dir = mkdtempSync(join(tmpdir(), "delayq-ts-token-"));
  before(async () => {
    const file = join(dir, "tokens");
    writeFileSync(file, "# tokens\nsecret-token-1\n");
    baseUrl = (await server({ args: ["--http-token-file", file] })).baseUrl;
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("no token or a wrong one is unauthorized; the right one passes; health needs none", async () => {
    const none = await new Client({ baseUrl }).stats().catch((e) => e);
    assert.ok(none instanceof UnauthorizedError);
    assert.equal(none.status, 401);
    assert.equal(none.code, "unauthorized");
    await assert.rejects(new Client({ baseUrl, token: "wrong" }).put("t", "x"), UnauthorizedError);
    const client = new Client({ baseUrl, token: "secret-token-1" });
    const job = await client.put("t", "x");
    assert.equal((await client.getJob(job.id)).body, "x");
    assert.equal(await new Client({ baseUrl }).health(), "ok");
  });
});

describe("while draining, then stopping", () => {
  let started;
  let client;
  before(async () => {
    started = await server();
    client = new Client({ baseUrl: started.baseUrl });
  });

  test("drain mode refuses puts with DrainingError and says so in ready(); reserves go on", async () => {
    const job = await client.put("drained", "before");
    started.kill("SIGUSR1");
    const error = await (async () => {
      for (let i = 0; i < 100; i += 1) {
        const answer = await client.put("drained", "after").catch((e) => e);
        if (answer instanceof DelayqError) return answer;
        await client.deleteJob(answer.id);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return undefined;
    })();
    assert.ok(error instanceof DrainingError && error instanceof ServiceUnavailableError, String(error));
    assert.equal(error.status, 503);
    await assert.rejects(client.ready(), (e) => e instanceof DrainingError && e.status === 503);
    assert.equal((await client.stats()).draining, true);
    const reserved = await client.reserve("drained");
    assert.equal(reserved.id, job.id);
  });

  test("a long-poll waiting when the server stops gets StoppingError with a Retry-After", async () => {
    const waiting = client.reserve("never-filled", { timeout: "30s" }).catch((e) => e);
    await new Promise((resolve) => setTimeout(resolve, 300));
    started.kill("SIGTERM");
    const error = await waiting;
    assert.ok(error instanceof StoppingError, String(error));
    assert.equal(error.status, 503);
    assert.equal(error.retryAfterMs, 1000);
  });
});

describe("limits", () => {
  test("no_space: a put below --min-free-disk is NoSpaceError (507); ready() says no_space (503)", async () => {
    // The disk check belongs to a data directory: this server has one in either mode.
    const { baseUrl } = await server({ args: ["--min-free-disk", "1125899906842624"], local: true });
    const client = new Client({ baseUrl });
    const error = await client.put("full", "x").catch((e) => e);
    assert.ok(error instanceof NoSpaceError, String(error));
    assert.equal(error.status, 507);
    await assert.rejects(client.ready(), (e) => e instanceof NoSpaceError && e.status === 503);
  });

  test("limit: a connection over --http-max-connections is LimitError with a Retry-After", async () => {
    const { httpPort, baseUrl } = await server({ args: ["--http-max-connections", "1"] });
    const holder = net.connect(httpPort, "127.0.0.1");
    await new Promise((resolve) => holder.once("connect", resolve));
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const error = await new Client({ baseUrl }).stats().catch((e) => e);
      assert.ok(error instanceof LimitError && error instanceof ServiceUnavailableError, String(error));
      assert.equal(error.status, 503);
      assert.equal(error.retryAfterMs, 1000);
    } finally {
      holder.destroy();
    }
  });
});

describe("the table from codes to classes", () => {
  test("every documented code has its class, with its status", () => {
    const documented = {
      bad_request: [400, BadRequestError],
      unauthorized: [401, UnauthorizedError],
      forbidden: [403, ForbiddenError],
      no_route: [404, NoRouteError],
      not_found: [404, NotFoundError],
      method_not_allowed: [405, MethodNotAllowedError],
      conflict: [409, ConflictError],
      too_large: [413, TooLargeError],
      headers_too_large: [431, HeadersTooLargeError],
      draining: [503, DrainingError],
      unavailable: [503, UnavailableError],
      stopping: [503, StoppingError],
      no_space: [507, NoSpaceError],
      starting: [503, StartingError],
      unsupported: [501, UnsupportedError],
      limit: [503, LimitError],
      internal: [500, InternalError],
    };
    assert.deepEqual(Object.keys(kErrorsByCode).sort(), Object.keys(documented).sort());
    for (const [code, [status, cls]] of Object.entries(documented)) {
      const error = errorFor(status, code, "m", { details: { progress: { percent: 5 } } });
      assert.ok(error instanceof cls && error instanceof DelayqError, code);
      assert.equal(error.code, code);
      assert.equal(error.status, status);
      assert.equal(error.message, "m");
      assert.equal(error.name, cls.name);
      assert.deepEqual(error.details, { progress: { percent: 5 } });
    }
  });

  test("an unknown code takes the class of its status, and keeps its code", () => {
    const error = errorFor(409, "brand_new", "newer server");
    assert.ok(error instanceof ConflictError);
    assert.equal(error.code, "brand_new");
    const unknown = errorFor(418, "teapot", "?");
    assert.equal(unknown.constructor, DelayqError);
    assert.equal(unknown.status, 418);
    assert.ok(errorFor(503, undefined, "x") instanceof ServiceUnavailableError);
  });
});
