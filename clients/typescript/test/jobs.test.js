// jobs.test.js — puts, gets, reschedules and deletes, by id and by key; groups; reserve,
// release, bury, touch and kicks; against a real delayqd.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  BadRequestError,
  Client,
  ConflictError,
  DelayqError,
  NotFoundError,
  TooLargeError,
} from "delayq";
import { beanstalk, startServer } from "../test-support/server.js";

let server;
let client;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.baseUrl });
});

after(() => server?.stop());

describe("put", () => {
  test("a delayed job with a key and a group", async () => {
    const before = Date.now();
    const job = await client.put("emails", "send welcome mail to user 42", {
      delay: "48h",
      key: "welcome:42",
      group: "user:42",
    });
    assert.ok(Number.isSafeInteger(job.id) && job.id > 0);
    assert.equal(job.tube, "emails");
    assert.equal(job.state, "delayed");
    assert.equal(job.priority, 1024);
    assert.equal(job.delayMs, 48 * 3600 * 1000);
    assert.equal(job.ttrMs, 60_000);
    assert.equal(job.key, "welcome:42");
    assert.equal(job.group, "user:42");
    assert.equal(job.existed, false);
    assert.ok(job.due instanceof Date && job.created instanceof Date);
    assert.ok(Math.abs(job.due.getTime() - (before + 48 * 3600 * 1000)) < 5000);
    assert.deepEqual(job.counters, { reserves: 0, timeouts: 0, releases: 0, buries: 0, kicks: 0, extra: {} });
    assert.equal(job.body, undefined, "a put's answer carries no body");
    assert.deepEqual(job.extra, {});
  });

  test("putMany puts each job as put would and answers each in its order", async () => {
    const answers = await client.putMany([
      { tube: "batch-ts", body: "one", key: "k" },
      { tube: "batch-ts", body: "two", key: "k" },
      { tube: "batch-ts-later", body: new Uint8Array([0, 255]), delay: "1h", priority: 7 },
      { tube: "batch-ts", priority: 2 ** 32 },
    ]);
    const [first, again, later, refused] = answers;
    assert.equal(first.state, "ready");
    assert.equal(first.existed, false);
    assert.equal(again.id, first.id);
    assert.equal(again.existed, true);
    assert.equal(later.state, "delayed");
    assert.equal(later.priority, 7);
    assert.ok(refused instanceof BadRequestError);
    assert.equal(refused.status, 400);
    assert.deepEqual([...(await client.getJob(later.id)).bytes], [0, 255]);
    assert.equal((await client.reserve("batch-ts")).body, "one");
    await assert.rejects(client.putMany([]), BadRequestError);
  });

  test("reserveMany takes the ready jobs most urgent first", async () => {
    for (const priority of [5, 1, 3]) await client.put("many-ts", `p${priority}`, { priority });
    const taken = await client.reserveMany("many-ts", 2);
    assert.deepEqual(taken.map((job) => job.body), ["p1", "p3"]);
    for (const job of taken) assert.equal(job.state, "reserved");
    const rest = await client.reserveMany(["many-ts"], 10, { timeout: "5s" });
    assert.deepEqual(rest.map((job) => job.body), ["p5"]);
    assert.deepEqual(await client.reserveMany("many-ts", 10, { timeout: 200 }), []);
    for (const job of [...taken, ...rest]) await client.deleteJob(job.id);
    await assert.rejects(client.reserveMany("many-ts", 101), BadRequestError);
  });

  test("the same key again answers the job that holds it", async () => {
    const first = await client.put("emails", "one", { key: "same", delay: 60_000 });
    const again = await client.put("emails", "two", { key: "same" });
    assert.equal(again.id, first.id);
    assert.equal(again.existed, true);
    assert.equal((await client.getJob(first.id)).body, "one");
  });

  test("replace puts a new job in the place of the key's holder", async () => {
    const first = await client.put("emails", "old", { key: "replace-me", delay: "1h" });
    const second = await client.put("emails", "new", { key: "replace-me", replace: true });
    assert.notEqual(second.id, first.id);
    assert.equal(second.existed, false);
    await assert.rejects(client.getJob(first.id), NotFoundError);
    assert.equal((await client.getKey("emails", "replace-me")).body, "new");
  });

  test("a debounce moves the pending holder of its key", async () => {
    const first = await client.put("debounced", "first", { key: "k", debounce: "1h" });
    assert.equal(first.state, "delayed");
    assert.equal(first.debounced, false);
    assert.equal(first.existed, false);
    const moved = await client.put("debounced", "second", { key: "k", debounce: 2 * 3600 * 1000, priority: 7 });
    assert.equal(moved.debounced, true);
    assert.equal(moved.existed, false);
    assert.equal(moved.id, first.id);
    assert.equal(moved.created.getTime(), first.created.getTime());
    assert.ok(moved.due.getTime() - first.due.getTime() > 3_500_000, "due an hour later");
    assert.equal("debounced" in moved.extra, false);
    const got = await client.getJob(first.id);
    assert.equal(got.body, "second");
    assert.equal(got.priority, 7);
    assert.equal(got.debounced, false);
    for (const bad of [{ debounce: "1m" }, { key: "k", debounce: "1m", delay: "1m" },
      { key: "k", debounce: "1m", replace: true }, { key: "k", maxWait: "1m" }]) {
      await assert.rejects(client.put("debounced", "x", bad), BadRequestError);
    }
    await client.deleteJob(first.id);
  });

  test("maxWait caps how far a debounce moves a job", async () => {
    const first = await client.put("debounced", "a", { key: "capped", debounce: "10m", maxWait: "30m" });
    const moved = await client.put("debounced", "b", { key: "capped", debounce: "1h", maxWait: "30m" });
    assert.equal(moved.debounced, true);
    assert.equal(moved.id, first.id);
    assert.ok(Math.abs(moved.due.getTime() - (first.created.getTime() + 30 * 60_000)) <= 1);
    await client.deleteJob(first.id);
  });

  test("a debounce replaces a buried holder and conflicts with a reserved one", async () => {
    const held = await client.put("debounce-held", "x", { key: "k" });
    assert.equal((await client.reserve("debounce-held")).id, held.id);
    await assert.rejects(client.put("debounce-held", "y", { key: "k", debounce: "1m" }), ConflictError);
    await client.bury(held.id);
    const replaced = await client.put("debounce-held", "z", { key: "k", debounce: "1m" });
    assert.notEqual(replaced.id, held.id);
    assert.equal(replaced.debounced, false);
    assert.equal(replaced.state, "delayed");
    assert.equal((await client.getKey("debounce-held", "k")).body, "z");
  });

  test("an absolute time, a priority, a TTR, a content type and bytes", async () => {
    const at = new Date(Date.now() + 3_600_000);
    const bytes = new Uint8Array([0x00, 0xff, 0x01, 0x80]);
    const job = await client.put("binary", bytes, { at, priority: 10, ttr: "5m", contentType: "application/x-thing" });
    assert.equal(job.state, "delayed");
    assert.equal(job.priority, 10);
    assert.equal(job.ttrMs, 300_000);
    assert.equal(job.due.getTime(), at.getTime());
    const got = await client.getJob(job.id);
    assert.equal(got.body, undefined, "bytes that are not UTF-8 have no text");
    assert.deepEqual([...got.bytes], [...bytes]);
    assert.equal(got.contentType, "application/x-thing");
  });

  test("a trace context is kept with the job and comes back reserved", async () => {
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const job = await client.put("traced", "x", { traceparent, tracestate: "rojo=1" });
    assert.equal(job.traceparent, traceparent);
    assert.equal(job.tracestate, "rojo=1");
    assert.equal((await client.getJob(job.id)).traceparent, traceparent);
    const reserved = await client.reserve("traced");
    assert.equal(reserved.id, job.id);
    assert.equal(reserved.traceparent, traceparent);
    const bad = await client.put("traced", "x", { traceparent: "00-nope" }).catch((e) => e);
    assert.ok(bad instanceof BadRequestError, String(bad));
    assert.match(bad.message, /traceparent/);
  });

  test("a text body comes back as text and as bytes", async () => {
    const job = await client.put("text", "héllo ✓");
    const got = await client.getJob(job.id);
    assert.equal(got.body, "héllo ✓");
    assert.equal(new TextDecoder().decode(got.bytes), "héllo ✓");
  });

  test("a tube name with a slash and a key with spaces and UTF-8 travel encoded", async () => {
    const job = await client.put("eu/orders", "x", { key: "order 7 é/?#", delay: "1m" });
    assert.equal(job.tube, "eu/orders");
    const got = await client.getKey("eu/orders", "order 7 é/?#");
    assert.equal(got.id, job.id);
    assert.equal(got.key, "order 7 é/?#");
    assert.equal(await client.deleteKey("eu/orders", "order 7 é/?#"), job.id);
  });

  test("errors: a bad duration, both delay and at, a url without a webhook, a body too large", async () => {
    const bad = await client.put("emails", "x", { delay: "soon" }).catch((e) => e);
    assert.ok(bad instanceof BadRequestError && bad instanceof DelayqError);
    assert.equal(bad.status, 400);
    assert.equal(bad.code, "bad_request");
    assert.match(bad.message, /delay/);
    await assert.rejects(client.put("emails", "x", { delay: 1, at: new Date() }), TypeError);
    await assert.rejects(client.put("emails", "x", { delay: 1.5 }), TypeError);
    const conflict = await client.put("emails", "x", { url: "https://example.com/hook" }).catch((e) => e);
    assert.ok(conflict instanceof ConflictError);
    assert.equal(conflict.status, 409);
    const tooLarge = await client.put("emails", "x".repeat(70_000)).catch((e) => e);
    assert.ok(tooLarge instanceof TooLargeError);
    assert.equal(tooLarge.status, 413);
  });
});

describe("by id", () => {
  test("getJob, reschedule with a delay and a priority, with at, deleteJob", async () => {
    const job = await client.put("resched", "body", { delay: "1h" });
    const moved = await client.reschedule(job.id, { delay: 0, priority: 100 });
    assert.equal(moved.state, "ready");
    assert.equal(moved.priority, 100);
    assert.equal(moved.delayMs, 0);
    const at = new Date(Date.now() + 7_200_000);
    const later = await client.reschedule(job.id, { at });
    assert.equal(later.state, "delayed");
    assert.equal(later.due.getTime(), at.getTime());
    assert.equal(later.priority, 100);
    const got = await client.getJob(job.id);
    assert.equal(got.body, "body");
    assert.equal(await client.deleteJob(job.id), job.id);
    await assert.rejects(client.getJob(job.id), (e) => e instanceof NotFoundError && e.status === 404);
    await assert.rejects(client.deleteJob(job.id), NotFoundError);
    await assert.rejects(client.reschedule(job.id, { delay: 5 }), NotFoundError);
  });

  test("reschedule needs a field; a job id must be a positive integer", async () => {
    const job = await client.put("resched", "x");
    await assert.rejects(client.reschedule(job.id, {}), BadRequestError);
    await assert.rejects(client.getJob(0), TypeError);
    await assert.rejects(client.getJob(1.5), TypeError);
  });
});

describe("by key", () => {
  test("getKey, rescheduleKey, deleteKey", async () => {
    const job = await client.put("keyed", "hello", { key: "k-1", delay: "1h" });
    const got = await client.getKey("keyed", "k-1");
    assert.equal(got.id, job.id);
    assert.equal(got.body, "hello");
    const ready = await client.rescheduleKey("keyed", "k-1", { delay: 0 });
    assert.equal(ready.state, "ready");
    assert.equal(ready.id, job.id);
    const prio = await client.rescheduleKey("keyed", "k-1", { priority: 7 });
    assert.equal(prio.priority, 7);
    assert.equal(await client.deleteKey("keyed", "k-1"), job.id);
    await assert.rejects(client.getKey("keyed", "k-1"), NotFoundError);
    await assert.rejects(client.rescheduleKey("keyed", "k-1", { delay: 0 }), NotFoundError);
    await assert.rejects(client.deleteKey("keyed", "k-1"), NotFoundError);
  });
});

describe("groups", () => {
  test("listGroup and cancelGroup leave reserved jobs alone", async () => {
    const a = await client.put("grouped", "a", { group: "user:7", delay: "1h" });
    const b = await client.put("grouped", "b", { group: "user:7" });
    await client.put("grouped", "c", { group: "user:8", delay: "1h" });
    const listed = await client.listGroup("grouped", "user:7");
    assert.deepEqual(listed.map((j) => j.id).sort((x, y) => x - y), [a.id, b.id].sort((x, y) => x - y));
    assert.ok(listed.every((j) => j.group === "user:7" && j.body === undefined));
    const reserved = await client.reserve("grouped");
    assert.equal(reserved.id, b.id);
    assert.equal(await client.cancelGroup("grouped", "user:7"), 1);
    assert.deepEqual((await client.listGroup("grouped", "user:7")).map((j) => j.id), [b.id]);
    assert.deepEqual(await client.listGroup("grouped", "nobody"), []);
    assert.equal(await client.cancelGroup("no-such-tube", "g"), 0);
    await client.deleteJob(b.id);
  });
});

describe("reserve and finish", () => {
  test("reserve hands out the most urgent job with its body and reservedUntil", async () => {
    const low = await client.put("work", "low", { priority: 2000 });
    const high = await client.put("work", "high", { priority: 1, ttr: "30s" });
    const before = Date.now();
    const job = await client.reserve(["work", "other"]);
    assert.equal(job.id, high.id);
    assert.equal(job.state, "reserved");
    assert.equal(job.body, "high");
    assert.equal(job.counters.reserves, 1);
    assert.ok(job.reservedUntil.getTime() >= before + 29_000);
    const second = await client.reserve("work");
    assert.equal(second.id, low.id);
    assert.equal(await client.reserve("work"), null, "no job ready: null at once");
    await client.deleteJob(job.id);
    await client.deleteJob(second.id);
  });

  test("a wait over an hour is refused, as the server refuses it", async () => {
    await assert.rejects(client.reserve("any", { timeout: "2h" }), RangeError);
  });

  test("a long-poll answers when a delayed job falls due", async () => {
    const put = await client.put("sms", "code", { delay: 700 });
    const started = Date.now();
    const job = await client.reserve("sms", { timeout: "10s" });
    const waited = Date.now() - started;
    assert.equal(job.id, put.id);
    assert.ok(waited >= 500 && waited < 5000, `waited ${waited} ms`);
    await client.deleteJob(job.id);
  });

  test("a long-poll with nothing to hand out resolves to null after its timeout", async () => {
    const started = Date.now();
    assert.equal(await client.reserve("empty-tube", { timeout: 600 }), null);
    assert.ok(Date.now() - started >= 550);
  });

  test("an aborted long-poll rejects with the signal's reason and takes no job", async () => {
    const controller = new AbortController();
    const pending = client.reserve("abortable", { timeout: "30s", signal: controller.signal });
    setTimeout(() => controller.abort(new Error("enough")), 200);
    await assert.rejects(pending, /enough/);
    const put = await client.put("abortable", "after");
    const job = await client.reserve("abortable", { timeout: "2s" });
    assert.equal(job.id, put.id, "the aborted wait took nothing");
    await client.deleteJob(job.id);
  });

  test("release with a delay and a priority, touch, bury, kickJob, kick", async () => {
    const put = await client.put("cycle", "c", { ttr: "2s" });
    let job = await client.reserve("cycle");
    const released = await client.release(job.id, { delay: "10s", priority: 5 });
    assert.equal(released.state, "delayed");
    assert.equal(released.priority, 5);
    assert.equal(released.delayMs, 10_000);
    assert.equal(released.counters.releases, 1);
    await assert.rejects(client.release(job.id), ConflictError);

    const kicked = await client.kickJob(put.id);
    assert.equal(kicked.state, "ready");
    assert.equal(kicked.counters.kicks, 1);
    await assert.rejects(client.kickJob(put.id), ConflictError);

    job = await client.reserve("cycle");
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const touched = await client.touch(job.id);
    assert.equal(touched.state, "reserved");
    assert.ok(touched.reservedUntil > job.reservedUntil, "a touch starts the TTR again");

    const buried = await client.bury(job.id, { priority: 2000 });
    assert.equal(buried.state, "buried");
    assert.equal(buried.priority, 2000);
    assert.equal(buried.counters.buries, 1);
    await assert.rejects(client.touch(job.id), ConflictError);
    await assert.rejects(client.bury(job.id), ConflictError);

    assert.equal(await client.kick("cycle", 10), 1);
    assert.equal((await client.getJob(put.id)).state, "ready");
    assert.equal(await client.kick("cycle"), 0);
    assert.equal(await client.kick("no-such-tube", 5), 0);
    await client.deleteJob(put.id);
    await assert.rejects(client.touch(put.id), NotFoundError);
  });

  test("a job reserved by a beanstalkd connection cannot be finished over HTTP", async () => {
    const put = await client.put("bs", "x");
    const conn = await beanstalk(server.beanstalkPort);
    try {
      assert.match(await conn.send("watch bs"), /^WATCHING/);
      assert.equal(await conn.send("reserve-with-timeout 5"), `RESERVED ${put.id} 1`);
      const error = await client.deleteJob(put.id).catch((e) => e);
      assert.ok(error instanceof ConflictError, String(error));
      await assert.rejects(client.release(put.id), ConflictError);
      assert.equal(await conn.send(`delete ${put.id}`), "DELETED");
    } finally {
      conn.close();
    }
  });
});
