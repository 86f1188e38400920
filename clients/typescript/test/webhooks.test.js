// webhooks.test.js — Delayq-Signature checks on requests a real delayqd sent: verifySignature
// and each receiver helper (Node listener, Express-style middleware, Web Request) with a good
// signature, a wrong secret, the second of two secrets, a stale one and a tampered body; and
// end to end, delayqd delivering to a Node listener (accepted: the job is deleted; refused:
// the job is retried with last_status 401).

import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import {
  Client,
  WebhookSignatureError,
  signPayload,
  signatureProblem,
  verifyNodeRequest,
  verifyRequest,
  verifySignature,
  webhookListener,
  webhookMiddleware,
} from "delayq";
import { startServer, waitFor } from "../test-support/server.js";

let server;
let client;
const listeners = [];


after(async () => {
  await Promise.all(listeners.map((l) => new Promise((resolve) => l.close(resolve))));
  await server?.stop();
});

async function listen(handler) {
  const listener = http.createServer(handler);
  await new Promise((resolve) => listener.listen(0, "127.0.0.1", resolve));
  listeners.push(listener);
  return `http://127.0.0.1:${listener.address().port}`;
}

async function readAll(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

// Requests delayqd sent, as received: {headers, body}.
const captured = [];
let signedTwice; // signed with ["new-secret", "old-secret"]

const kBody = '{"order":123,"note":"é"}';

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.baseUrl });
  const url = await listen(async (req, res) => {
    captured.push({ headers: req.headers, body: await readAll(req) });
    res.statusCode = 204;
    res.end();
  });
  await client.setWebhook("signed", `${url}/hook`, { secrets: ["new-secret", "old-secret"] });
  const job = await client.put("signed", kBody, { key: "order 7/é", contentType: "application/json" });
  signedTwice = await waitFor(() => captured.find((c) => c.headers["delayq-job-id"] === String(job.id)), {
    what: "delayqd's delivery",
  });
  await waitFor(() => client.getJob(job.id).then(() => false, () => true), { what: "the delivered job's delete" });
});

// The cases every helper is put through, on the captured request: which secrets the receiver
// accepts, and whether the body is tampered with or the receiver's clock is 6 minutes on.
const kCases = [
  { name: "good signature", secrets: ["new-secret"], ok: true },
  { name: "the second of two secrets", secrets: ["old-secret"], ok: true },
  { name: "either secret the receiver accepts", secrets: ["unrelated", "old-secret"], ok: true },
  { name: "wrong secret", secrets: ["wrong-secret"], ok: false },
  { name: "stale", secrets: ["new-secret"], stale: true, ok: false },
  { name: "tampered body", secrets: ["new-secret"], tampered: true, ok: false },
];

// A case's body, and the receiver's clock if it is moved.
function materialize(k) {
  const t = Number(/t=(\d+)/.exec(signedTwice.headers["delayq-signature"])[1]);
  return {
    ...k,
    body: k.tampered ? Buffer.from(kBody.replace("123", "124")) : signedTwice.body,
    ...(k.stale ? { now: t + 6 * 60_000 } : {}),
  };
}

describe("the request delayqd sent", () => {
  test("carries a Delayq-Signature with one v1 per secret, and the job's headers", () => {
    const header = signedTwice.headers["delayq-signature"];
    assert.match(header, /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    assert.equal(signedTwice.body.toString(), kBody);
    assert.equal(signedTwice.headers["content-type"], "application/json");
    assert.equal(signedTwice.headers["delayq-tube"], "signed");
  });
});

describe("verifySignature", () => {
  for (const c of kCases) {
    test(c.name, () => {
      const k = materialize(c);
      const options = { secrets: k.secrets, headers: signedTwice.headers, body: k.body, ...(k.now ? { now: k.now } : {}) };
      assert.equal(verifySignature(options), k.ok);
      // The same through a Headers object, and through the header value alone.
      assert.equal(verifySignature({ ...options, headers: new Headers(Object.entries(signedTwice.headers)) }), k.ok);
      assert.equal(verifySignature({ ...options, headers: signedTwice.headers["delayq-signature"] }), k.ok);
    });
  }

  test("the reasons, and the tolerance", () => {
    const headers = signedTwice.headers;
    const body = signedTwice.body;
    const t = Number(/t=(\d+)/.exec(headers["delayq-signature"])[1]);
    assert.equal(signatureProblem({ secrets: "new-secret", headers, body }), null);
    assert.equal(signatureProblem({ secrets: "new-secret", headers: {}, body }), "no Delayq-Signature header");
    // Spaces after the commas, as a proxy or a hand-written header may have them.
    const spaced = headers["delayq-signature"].split(",").join(", ");
    assert.equal(signatureProblem({ secrets: "old-secret", headers: ` ${spaced} `, body, now: t }), null);
    assert.match(signatureProblem({ secrets: "new-secret", headers, body, now: t + 400_000 }), /from now/);
    assert.equal(verifySignature({ secrets: "new-secret", headers, body, now: t + 400_000, toleranceMs: 500_000 }), true);
    assert.equal(verifySignature({ secrets: "new-secret", headers, body, now: new Date(t - 1000), toleranceMs: 2000 }), true);
    assert.equal(signatureProblem({ secrets: "x", headers, body }), "no v1= matches a secret");
    assert.match(signatureProblem({ secrets: "x", headers: "v1=abc", body }), /no valid t=/);
    assert.throws(() => verifySignature({ secrets: [], headers, body }), TypeError);
  });

  test("signPayload signs as delayqd does", () => {
    const t = Number(/t=(\d+)/.exec(signedTwice.headers["delayq-signature"])[1]);
    assert.equal(signPayload({ secrets: ["new-secret", "old-secret"], body: signedTwice.body, t }), signedTwice.headers["delayq-signature"]);
  });
});

// Replays the captured request (its headers, the case's body; `signature` in place of its
// Delayq-Signature if given) to a URL; resolves to the answer.
async function replay(url, body, signature) {
  const headers = Object.fromEntries(
    Object.entries(signedTwice.headers).filter(([name]) => !["host", "content-length", "connection"].includes(name)),
  );
  if (signature !== undefined) headers["delayq-signature"] = signature;
  const response = await fetch(url, { method: "POST", headers, body });
  return { status: response.status, text: await response.text() };
}

describe("webhookListener (Node's http server)", () => {
  test("signedAt is the t of a signature whose parts come in another order, with spaces", async () => {
    const header = signedTwice.headers["delayq-signature"];
    const t = Number(/t=(\d+)/.exec(header)[1]);
    const [tPart, ...v1Parts] = header.split(",");
    let delivery;
    const url = await listen(webhookListener({ secrets: ["new-secret"], now: () => t }, (d) => {
      delivery = d;
    }));
    const answer = await replay(url, signedTwice.body, `${v1Parts.join(", ")}, ${tPart}`);
    assert.equal(answer.status, 204);
    assert.equal(delivery.signedAt.getTime(), t);
  });
  for (const c of kCases) {
    test(c.name, async () => {
      const k = materialize(c);
      let delivery;
      const url = await listen(webhookListener({ secrets: k.secrets, ...(k.now ? { now: () => k.now } : {}) }, (d) => {
        delivery = d;
      }));
      const answer = await replay(url, k.body);
      if (k.ok) {
        assert.equal(answer.status, 204);
        assert.equal(delivery.text(), kBody);
        assert.deepEqual(delivery.json(), JSON.parse(kBody));
        assert.equal(delivery.jobId, Number(signedTwice.headers["delayq-job-id"]));
        assert.equal(delivery.attempt, 1);
        assert.equal(delivery.tube, "signed");
        assert.equal(delivery.key, "order 7/é");
        assert.equal(delivery.contentType, "application/json");
        assert.ok(delivery.due instanceof Date);
        assert.ok(delivery.signedAt instanceof Date);
      } else {
        assert.equal(answer.status, 401);
        assert.equal(delivery, undefined, "the handler did not run");
        assert.equal(JSON.parse(answer.text).error.code, "bad_signature");
      }
    });
  }

  test("a handler that throws answers 500; one that answers keeps its answer", async () => {
    const failing = await listen(webhookListener({ secrets: "new-secret" }, () => {
      throw new Error("down");
    }));
    assert.equal((await replay(failing, signedTwice.body)).status, 500);
    const custom = await listen(webhookListener({ secrets: "new-secret" }, (d, req, res) => {
      res.statusCode = 202;
      res.end(`job ${d.jobId}`);
    }));
    const answer = await replay(custom, signedTwice.body);
    assert.equal(answer.status, 202);
    assert.equal(answer.text, `job ${signedTwice.headers["delayq-job-id"]}`);
  });

  test("verifyNodeRequest refuses a body over maxBodyBytes", async () => {
    let error;
    const url = await listen(async (req, res) => {
      error = await verifyNodeRequest(req, { secrets: "new-secret", maxBodyBytes: 10 }).catch((e) => e);
      res.end();
    });
    await replay(url, signedTwice.body);
    assert.equal(error.status, 413);
  });
});

describe("webhookMiddleware (Express-style)", () => {
  // An app of two handlers, as Express runs them: the middleware, then a route.
  function app(middleware, { preRead = false } = {}) {
    return async (req, res) => {
      if (preRead) req.body = await readAll(req); // what express.raw() leaves
      middleware(req, res, (error) => {
        if (error) {
          res.statusCode = 500;
          res.end(String(error));
          return;
        }
        res.statusCode = 200;
        res.end(`${req.delayq.jobId}:${Buffer.from(req.rawBody).toString()}`);
      });
    };
  }

  for (const c of kCases) {
    test(c.name, async () => {
      const k = materialize(c);
      const middleware = webhookMiddleware({ secrets: k.secrets, ...(k.now ? { now: () => k.now } : {}) });
      for (const preRead of [false, true]) {
        const url = await listen(app(middleware, { preRead }));
        const answer = await replay(url, k.body);
        if (k.ok) {
          assert.equal(answer.status, 200);
          assert.equal(answer.text, `${signedTwice.headers["delayq-job-id"]}:${kBody}`);
        } else {
          assert.equal(answer.status, 401, `preRead ${preRead}`);
          assert.equal(JSON.parse(answer.text).error.code, "bad_signature");
        }
      }
    });
  }

  test("a body parsed already cannot be checked: next(error)", async () => {
    const url = await listen(async (req, res) => {
      await readAll(req);
      req.body = { order: 123 };
      webhookMiddleware({ secrets: "new-secret" })(req, res, (error) => {
        res.statusCode = error ? 500 : 200;
        res.end(String(error));
      });
    });
    const answer = await replay(url, signedTwice.body);
    assert.equal(answer.status, 500);
    assert.match(answer.text, /express\.raw/);
  });
});

describe("verifyRequest (Web Request)", () => {
  for (const c of kCases) {
    test(c.name, async () => {
      const k = materialize(c);
      const request = new Request("http://receiver.test/hook", {
        method: "POST",
        headers: Object.entries(signedTwice.headers).filter(([name]) => name !== "content-length" && name !== "connection"),
        body: k.body,
      });
      const result = await verifyRequest(request, { secrets: k.secrets, ...(k.now ? { now: () => k.now } : {}) });
      if (k.ok) {
        assert.ok(!(result instanceof Response));
        assert.equal(result.text(), kBody);
        assert.equal(result.key, "order 7/é");
      } else {
        assert.ok(result instanceof Response);
        assert.equal(result.status, 401);
        assert.equal((await result.json()).error.code, "bad_signature");
      }
    });
  }
});

describe("end to end: delayqd delivers to a webhookListener", () => {
  test("a request that checks out runs the handler, and the job is deleted", async () => {
    const deliveries = [];
    const url = await listen(webhookListener({ secrets: ["rotated-in"] }, (delivery) => {
      deliveries.push(delivery);
    }));
    await client.setWebhook("e2e-ok", url, { secrets: ["rotated-in", "rotated-out"] });
    const job = await client.put("e2e-ok", "payload", { key: "k" });
    const delivery = await waitFor(() => deliveries.find((d) => d.jobId === job.id), { what: "the delivery" });
    assert.equal(delivery.text(), "payload");
    assert.equal(delivery.key, "k");
    await waitFor(() => client.getJob(job.id).then(() => false, () => true), { what: "the job's delete" });
  });

  test("a request signed with other secrets is refused 401, and delayqd retries it", async () => {
    let handled = 0;
    const url = await listen(webhookListener({ secrets: ["receiver-secret"] }, () => {
      handled += 1;
    }));
    await client.setWebhook("e2e-refused", url, { secrets: ["sender-secret"], backoff: { min: "1h" } });
    const job = await client.put("e2e-refused", "payload");
    const failed = await waitFor(async () => {
      const now = await client.getJob(job.id);
      // Released too: in Redis mode the 401 is kept, then the job released, in two calls.
      return now.lastStatus !== undefined && now.state !== "reserved" && now;
    }, { what: "the failed attempt, released" });
    assert.equal(failed.lastStatus, 401);
    assert.equal(failed.lastError, "HTTP 401");
    assert.equal(failed.state, "delayed", "released for another attempt");
    assert.equal(handled, 0);
    await client.removeWebhook("e2e-refused");
  });
});

test("WebhookSignatureError is a DelayqError with status 401", async () => {
  const error = await verifyNodeRequest(
    { headers: {}, body: Buffer.from("x"), async *[Symbol.asyncIterator]() {} },
    { secrets: "s" },
  ).catch((e) => e);
  assert.ok(error instanceof WebhookSignatureError);
  assert.equal(error.status, 401);
  assert.equal(error.code, "bad_signature");
});
