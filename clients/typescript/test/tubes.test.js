// tubes.test.js — tubes (list, stats, jobs, due counts, max attempts, flow control, pause, kick),
// webhooks' settings, the server's stats, health, readiness, metrics and backup, and the raw request().

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { BadRequestError, Client, ConflictError, NotFoundError, UnsupportedError } from "delayq";
import { kRedisSkips, redisMode, startServer } from "../test-support/server.js";

let server;
let client;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.baseUrl });
});

after(() => server?.stop());

describe("tubes", () => {
  test("listTubes and tubeStats count a tube's jobs", async () => {
    await client.put("counted", "a", { delay: "1h" });
    await client.put("counted", "b", { priority: 5 });
    await client.put("counted", "c");
    const stats = await client.tubeStats("counted");
    assert.equal(stats.name, "counted");
    assert.equal(stats.ready, 2);
    assert.equal(stats.delayed, 1);
    assert.equal(stats.reserved, 0);
    assert.equal(stats.buried, 0);
    assert.equal(stats.urgent, 1);
    assert.equal(stats.totalJobs, 3);
    assert.equal(stats.pauseMs, 0);
    assert.equal(stats.maxAttempts, 0);
    assert.deepEqual(
      [stats.groupConcurrency, stats.fair, stats.groupRate, stats.groupBurst, stats.groupWeights, stats.groupsHeld, stats.groupsReady],
      [0, false, null, 1, {}, 0, 0],
    );
    assert.equal(typeof stats.oldestReadyAgeMs, "number");
    assert.deepEqual(stats.extra, {});
    const tubes = await client.listTubes();
    const names = tubes.map((t) => t.name);
    assert.ok(names.includes("counted") && names.includes("default"));
    assert.deepEqual(names, [...names].sort(), "sorted by name");
    assert.equal(tubes.find((t) => t.name === "counted").ready, 2);
    await assert.rejects(client.tubeStats("never-made"), NotFoundError);
  });

  test("listJobs lists a tube's jobs in one state, in serving order", { skip: kRedisSkips.listJobs }, async () => {
    const soon = await client.put("listed", "x", { delay: "10m" });
    const later = await client.put("listed", "y", { delay: "20m" });
    await client.put("listed", "z");
    const page = await client.listJobs("listed", { state: "delayed", limit: 1 });
    assert.equal(page.complete, true);
    assert.deepEqual(page.jobs.map((j) => j.id), [soon.id]);
    const all = await client.listJobs("listed", { state: "delayed" });
    assert.deepEqual(all.jobs.map((j) => j.id), [soon.id, later.id]);
    const ready = await client.listJobs("listed");
    assert.equal(ready.jobs.length, 1);
    assert.equal(ready.jobs[0].state, "ready");
    await assert.rejects(client.listJobs("listed", { limit: 0 }), BadRequestError);
    await assert.rejects(client.listJobs("never-made"), NotFoundError);
  });

  test("dueCounts by durations and by Dates, for a tube and for every tube", { skip: kRedisSkips.dueCounts }, async () => {
    await client.put("due", "a", { delay: "30m" });
    await client.put("due", "b", { delay: "2d" });
    const counts = await client.dueCounts("due", { edges: ["0s", "1h", "1d"] });
    assert.equal(counts.tube, "due");
    assert.equal(counts.delayed, 2);
    assert.equal(counts.resolutionMs, 60_000);
    assert.ok(counts.asOf instanceof Date);
    assert.deepEqual(counts.buckets.map((b) => b.jobs), [0, 1, 0, 1]);
    assert.equal(counts.buckets[0].from, null);
    assert.equal(counts.buckets[3].to, null);
    assert.ok(counts.buckets[1].from instanceof Date);
    const now = Date.now();
    const byDates = await client.dueCounts("due", { edges: [new Date(now + 3_600_000), new Date(now + 86_400_000)] });
    assert.deepEqual(byDates.buckets.map((b) => b.jobs), [1, 0, 1]);
    const everywhere = await client.dueCounts();
    assert.equal(everywhere.tube, undefined);
    assert.ok(everywhere.delayed >= 2);
    await assert.rejects(client.dueCounts("due", { edges: ["1h", new Date()] }), TypeError);
    await assert.rejects(client.dueCounts("never-made"), NotFoundError);
  });

  test("setMaxAttempts, pauseTube", async () => {
    assert.equal(await client.setMaxAttempts("limited", 3), 3);
    await client.put("limited", "x");
    assert.equal((await client.tubeStats("limited")).maxAttempts, 3);
    assert.equal(await client.setMaxAttempts("limited", 0), 0);
    await assert.rejects(client.setMaxAttempts("limited", 2_000_000), BadRequestError);

    assert.equal(await client.pauseTube("limited", "90s"), 90_000);
    const paused = await client.tubeStats("limited");
    assert.equal(paused.pauseMs, 90_000);
    assert.ok(paused.pauseLeftMs > 80_000 && paused.pauseLeftMs <= 90_000);
    assert.equal(await client.reserve("limited"), null, "a paused tube hands out nothing");
    assert.equal(await client.pauseTube("limited", 0), 0);
    const job = await client.reserve("limited");
    assert.equal(job.body, "x");
    await client.deleteJob(job.id);
    await assert.rejects(client.pauseTube("never-made", "1s"), NotFoundError);
  });
});

describe("flow control", () => {
  test("setFlow changes only the settings given; tubeStats shows them", async () => {
    const set = await client.setFlow("flowed", { groupConcurrency: 2, fair: true, groupRate: "10/s", groupBurst: 3 });
    assert.deepEqual(set, { tube: "flowed", groupConcurrency: 2, fair: true, groupRate: "10/1s", groupBurst: 3, groupWeights: {}, extra: {} });
    await client.put("flowed", "x", { group: "g" }); // the settings were kept while the tube did not exist
    const stats = await client.tubeStats("flowed");
    assert.deepEqual(
      [stats.groupConcurrency, stats.fair, stats.groupRate, stats.groupBurst, stats.groupsHeld, stats.groupsReady],
      [2, true, "10/1s", 3, 0, 1],
    );
    assert.deepEqual(stats.extra, {});
    assert.equal((await client.listTubes()).find((t) => t.name === "flowed").groupRate, "10/1s");
    const off = await client.setFlow("flowed", { groupConcurrency: null, groupRate: null });
    assert.deepEqual(off, { tube: "flowed", groupConcurrency: 0, fair: true, groupRate: null, groupBurst: 3, groupWeights: {}, extra: {} });
    assert.equal((await client.setFlow("flowed", { fair: false, groupRate: "1/1500ms" })).groupRate, "1/1s500ms");
    assert.equal((await client.setFlow("flowed", { groupConcurrency: 0 })).groupConcurrency, 0);
    await assert.rejects(client.setFlow("flowed", { groupBurst: 0 }), BadRequestError);
    await assert.rejects(client.setFlow("flowed", { groupRate: "fast" }), BadRequestError);
    await assert.rejects(client.setFlow("flowed", { groupConcurrency: 1_000_001 }), BadRequestError);
    await assert.rejects(client.setFlow("flowed", {}), TypeError);
    await assert.rejects(client.setFlow("flowed", { groupBurst: null }), TypeError);
    assert.equal((await client.tubeStats("flowed")).groupRate, "1/1s500ms");
  });

  test("setFlow changes only the group weights named; null resets one", async () => {
    const set = await client.setFlow("weighted", { fair: true, groupWeights: { gold: 3, silver: 2 } });
    await client.put("weighted", "x", { group: "gold" });
    assert.deepEqual(set, {
      tube: "weighted", groupConcurrency: 0, fair: true, groupRate: null, groupBurst: 1,
      groupWeights: { gold: 3, silver: 2 }, extra: {},
    });
    const stats = await client.tubeStats("weighted");
    assert.deepEqual([stats.groupWeights, stats.extra], [{ gold: 3, silver: 2 }, {}]);
    const listed = (await client.listTubes()).find((t) => t.name === "weighted");
    assert.deepEqual([listed.groupWeights, listed.extra], [{ gold: 3, silver: 2 }, {}]);
    // null and 1 both set a group back to the default, which the server then leaves unnamed.
    assert.deepEqual((await client.setFlow("weighted", { groupWeights: { gold: null } })).groupWeights, { silver: 2 });
    assert.deepEqual((await client.setFlow("weighted", { groupWeights: { silver: 1 } })).groupWeights, {});
    assert.deepEqual((await client.tubeStats("weighted")).groupWeights, {});
    await assert.rejects(client.setFlow("weighted", { groupWeights: { gold: 0 } }), BadRequestError);
    await assert.rejects(client.setFlow("weighted", { groupWeights: { gold: 1001 } }), BadRequestError);
    for (const bad of [{ gold: "3" }, { gold: 1.5 }, null, ["gold"]]) {
      await assert.rejects(client.setFlow("weighted", { groupWeights: bad }), TypeError);
    }
    assert.deepEqual((await client.tubeStats("weighted")).groupWeights, {});
  });

  test("groupConcurrency holds back a group's second job", async () => {
    await client.setFlow("held", { groupConcurrency: 1 });
    const first = await client.put("held", "a1", { group: "a" });
    const second = await client.put("held", "a2", { group: "a" });
    const other = await client.put("held", "b1", { group: "b" });
    assert.equal((await client.tubeStats("held")).groupsReady, 2);
    assert.equal((await client.reserve("held", { timeout: 0 })).id, first.id);
    // a2 is next by id, but group a has a job reserved: b1 comes instead.
    assert.equal((await client.reserve("held", { timeout: 0 })).id, other.id);
    assert.equal(await client.reserve("held", { timeout: 0 }), null);
    const stats = await client.tubeStats("held");
    assert.deepEqual([stats.ready, stats.groupsHeld, stats.groupsReady], [1, 1, 0]);
    await client.deleteJob(first.id);
    assert.equal((await client.reserve("held", { timeout: 0 })).id, second.id);
  });
});

describe("webhooks", () => {
  test("setWebhook with every option, getWebhook, removeWebhook", async () => {
    const set = await client.setWebhook("hooked", "http://127.0.0.1:9/delayq", {
      headers: { Authorization: "Bearer 7f3c9a" },
      timeout: "5s",
      maxAttempts: 10,
      backoff: { min: "2s", max: "10m", factor: 3 },
      rate: 0.5,
      concurrency: 4,
      secrets: ["one", "two"],
    });
    assert.equal(set.url, "http://127.0.0.1:9/delayq");
    assert.deepEqual(set.headers, { Authorization: "Bearer 7f3c9a" });
    assert.equal(set.timeoutMs, 5000);
    assert.equal(set.maxAttempts, 10);
    assert.equal(set.backoff.minMs, 2000);
    assert.equal(set.backoff.maxMs, 600_000);
    assert.equal(set.backoff.factor, 3);
    assert.equal(set.rate, 0.5);
    assert.equal(set.concurrency, 4);
    assert.equal(set.secrets, 2);
    const got = await client.getWebhook("hooked");
    assert.deepEqual(got, set);
    const listed = (await client.listTubes()).find((t) => t.name === "hooked");
    assert.equal(listed.webhookUrl, "http://127.0.0.1:9/delayq");
    assert.equal(typeof listed.webhookDeliveries, "object");

    const defaults = await client.setWebhook("hooked", "http://127.0.0.1:9/other");
    assert.equal(defaults.timeoutMs, 10_000);
    assert.equal(defaults.maxAttempts, 20);
    assert.deepEqual(defaults.headers, {});
    assert.equal(defaults.secrets, 0);
    assert.equal(defaults.backoff.maxMs, 3_600_000);

    const removed = await client.removeWebhook("hooked");
    assert.equal(removed.url, "http://127.0.0.1:9/other");
    await assert.rejects(client.getWebhook("hooked"), NotFoundError);
    await assert.rejects(client.removeWebhook("hooked"), NotFoundError);
    await assert.rejects(client.setWebhook("hooked", "ftp://127.0.0.1/hook"), BadRequestError);
  });
});

describe("server", () => {
  test("stats", async () => {
    await client.put("stats", "x");
    const stats = await client.stats();
    assert.equal(stats.version, "0.1.0");
    assert.equal(stats.mode, redisMode ? "redis" : "local");
    assert.equal(typeof stats.uptimeSeconds, "number");
    assert.equal(stats.draining, false);
    assert.ok(stats.ready >= 1);
    assert.ok(stats.totalJobs >= 1);
    assert.ok(stats.tubes >= 2);
    assert.equal(stats.health.status, "ok");
    assert.ok(stats.connections.http >= 1);
    assert.ok(Array.isArray(stats.fireLateness.buckets) && stats.fireLateness.buckets.length > 1);
    assert.equal(stats.fireLateness.buckets.at(-1).leMs, null);
    assert.deepEqual(stats.extra, {});
  });

  test("health, ready, metrics", async () => {
    assert.equal(await client.health(), "ok");
    assert.equal(await client.ready(), "ready");
    const metrics = await client.metrics();
    assert.match(metrics, /^# HELP delayq_jobs /m);
    assert.match(metrics, /^delayq_operations_total\{protocol="http",op="put_job",result="201"\} \d+$/m);
  });

  test("backup copies the data directory", { skip: kRedisSkips.backup }, async () => {
    await client.put("backed-up", "x");
    const dir = join(server.dataDir, "backup");
    const backup = await client.backup(dir);
    assert.equal(backup.dir, dir);
    assert.ok(backup.jobs >= 1);
    assert.ok(backup.bytes > 0);
    assert.equal(typeof backup.tookMs, "number");
    assert.ok(existsSync(dir));
    await assert.rejects(client.backup(dir), BadRequestError, "an existing directory is refused");
  });

  // Only in Redis mode: a server with a data directory serves these routes (tested above).
  if (redisMode) test("in Redis mode, the routes it cannot serve answer UnsupportedError", async () => {
    await assert.rejects(client.listJobs("default"), UnsupportedError);
    await assert.rejects(client.dueCounts(), UnsupportedError);
    await assert.rejects(client.backup(join(server.dataDir, "b")), UnsupportedError);
    // Flow control keeps a tube's jobs in one shard there: it is set before the tube's first job.
    await client.put("busy", "x");
    await assert.rejects(client.setFlow("busy", { groupConcurrency: 1 }), ConflictError);
  });

  test("request() reaches any route", async () => {
    assert.deepEqual(await client.request("GET", "/healthz"), { status: "ok" });
    const put = await client.request("POST", "/v1/tubes/raw/jobs", { body: { body: "r" } });
    assert.equal(put.tube, "raw");
    assert.equal(await client.request("POST", "/v1/reserve", { body: { tubes: ["nothing-here"] } }), null);
    await assert.rejects(client.request("GET", "/v1/tubes/never-made"), NotFoundError);
  });
});
