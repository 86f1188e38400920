// schedules.test.js — recurring schedules: set, get, list (and page through), pause, resume,
// trigger, backfill, next runs, preview and remove; against a real delayqd.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { BadRequestError, Client, NotFoundError } from "delayq";
import { startServer } from "../test-support/server.js";

let server;
let client;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.baseUrl });
});

after(() => server?.stop());

describe("schedules", () => {
  test("setSchedule with cron: every field comes back", async () => {
    const schedule = await client.setSchedule("nightly-report", "reports", {
      cron: "0 3 * * *",
      tz: "Europe/Paris",
      body: '{"report":"daily"}',
      ttr: "5m",
      overlap: "skip",
      group: "reports",
      priority: 7,
    });
    assert.equal(schedule.name, "nightly-report");
    assert.equal(schedule.tube, "reports");
    assert.equal(schedule.cron, "0 3 * * *");
    assert.equal(schedule.everyMs, undefined);
    assert.equal(schedule.tz, "Europe/Paris");
    assert.equal(schedule.body, '{"report":"daily"}');
    assert.equal(schedule.priority, 7);
    assert.equal(schedule.group, "reports");
    assert.equal(schedule.ttrMs, 300_000);
    assert.equal(schedule.jitterMs, 0);
    assert.equal(schedule.misfire, "once");
    assert.equal(schedule.maxLatenessMs, 3_600_000);
    assert.equal(schedule.overlap, "skip");
    assert.equal(schedule.paused, false);
    assert.equal(schedule.limit, null);
    assert.equal(schedule.startAt, null);
    assert.equal(schedule.lastRun, null);
    assert.equal(schedule.waitingRun, null);
    assert.equal(schedule.runs, 0);
    assert.ok(schedule.next instanceof Date && schedule.next.getTime() > Date.now());
    // 03:00 in Paris is 01:00 or 02:00 UTC.
    assert.ok([1, 2].includes(schedule.next.getUTCHours()) && schedule.next.getUTCMinutes() === 0);
    assert.deepEqual(schedule.extra, {});
    const again = await client.getSchedule("nightly-report");
    assert.deepEqual(again, schedule);
  });

  test("an every schedule puts its next run ahead, 10 s before its instant, keyed by it", async () => {
    const setAt = Date.now();
    const later = await client.setSchedule("later", "ticks", { every: "1h" });
    assert.ok(later.startAt instanceof Date);
    // Without startAt the first run is an interval away, and it is the startAt shown.
    assert.equal(later.next.getTime(), later.startAt.getTime());
    assert.ok(later.startAt.getTime() >= setAt + 3_600_000 - 1000, later.startAt.toISOString());
    assert.equal(later.runs, 0, "an hour off: no job yet");
    await client.removeSchedule("later");
    const startAt = new Date(Math.floor(Date.now() / 1000) * 1000 + 8000);
    const schedule = await client.setSchedule("hourly", "ticks", { every: "1h", body: "tick", startAt });
    assert.equal(schedule.everyMs, 3_600_000);
    assert.equal(schedule.runs, 1);
    assert.equal(schedule.next.getTime(), startAt.getTime());
    const run = await client.getKey("ticks", `hourly@${schedule.next.getTime()}`);
    assert.equal(run.state, "delayed");
    assert.equal(run.body, "tick");
    assert.equal(run.schedule.name, "hourly");
    assert.equal(run.schedule.instant.getTime(), schedule.next.getTime());
  });

  test("listSchedules pages by name; schedules() walks every page", async () => {
    for (const name of ["page-a", "page-b", "page-c"]) await client.setSchedule(name, "pages", { every: "1d" });
    const first = await client.listSchedules({ limit: 2 });
    assert.equal(first.schedules.length, 2);
    assert.equal(first.more, true);
    const second = await client.listSchedules({ after: first.schedules[1].name, limit: 1000 });
    assert.equal(second.more, false);
    const names = [];
    for await (const schedule of client.schedules({ pageSize: 1 })) names.push(schedule.name);
    assert.deepEqual(names, [...first.schedules, ...second.schedules].map((s) => s.name));
    assert.ok(names.includes("page-a") && names.includes("page-c"));
    assert.deepEqual(names, [...names].sort());
  });

  test("pause, resume, trigger", async () => {
    await client.setSchedule("pausable", "pausing", { every: "1h" });
    const paused = await client.pauseSchedule("pausable");
    assert.equal(paused.paused, true);
    assert.equal(paused.next, null);
    const triggered = await client.triggerSchedule("pausable");
    assert.equal(triggered.tube, "pausing");
    assert.equal(triggered.state, "ready");
    assert.equal(triggered.existed, false);
    assert.equal(triggered.schedule.name, "pausable");
    assert.match(triggered.key, /^pausable@\d+$/);
    const resumed = await client.resumeSchedule("pausable");
    assert.equal(resumed.paused, false);
    assert.ok(resumed.next instanceof Date);
    assert.ok(resumed.lastRun instanceof Date);
    assert.equal(resumed.lastRun.getTime(), triggered.schedule.instant.getTime());
  });

  test("backfill puts one run per instant, and answers the runs standing when asked again", async () => {
    const startAt = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 10 * 60_000);
    await client.setSchedule("minutely", "backfilled", { every: "1m", startAt, body: "b" });
    const to = new Date(startAt.getTime() + 2 * 60_000);
    const jobs = await client.backfillSchedule("minutely", startAt, to);
    assert.deepEqual(
      jobs.map((job) => job.schedule.instant.getTime()),
      [0, 1, 2].map((n) => startAt.getTime() + n * 60_000),
    );
    assert.ok(jobs.every((job) => job.state === "ready" && job.tube === "backfilled"));
    const again = await client.backfillSchedule("minutely", startAt, to);
    assert.deepEqual(again.map((job) => job.id), jobs.map((job) => job.id));
  });

  test("nextRuns", async () => {
    const startAt = new Date("2030-01-01T00:00:00Z");
    await client.setSchedule("future", "later", { every: "15m", startAt });
    const runs = await client.nextRuns("future", { count: 3, after: new Date("2030-01-01T00:10:00Z") });
    assert.deepEqual(runs.map((d) => d.toISOString()), [
      "2030-01-01T00:15:00.000Z",
      "2030-01-01T00:30:00.000Z",
      "2030-01-01T00:45:00.000Z",
    ]);
    const defaults = await client.nextRuns("future");
    assert.equal(defaults.length, 10);
    assert.equal(defaults[0].toISOString(), "2030-01-01T00:00:00.000Z");
    await assert.rejects(client.nextRuns("no-such-schedule"), NotFoundError);
  });

  test("removeSchedule answers it as it was, and it is gone", async () => {
    await client.setSchedule("doomed", "gone", { every: "1h" });
    const removed = await client.removeSchedule("doomed");
    assert.equal(removed.name, "doomed");
    assert.equal(removed.next, null);
    await assert.rejects(client.getSchedule("doomed"), NotFoundError);
    await assert.rejects(client.removeSchedule("doomed"), NotFoundError);
  });

  test("errors: a bad cron, a bad name, cron and every both", async () => {
    const bad = await client.setSchedule("bad", "x", { cron: "0 9 32 * *" }).catch((e) => e);
    assert.ok(bad instanceof BadRequestError);
    assert.match(bad.message, /day of month/);
    await assert.rejects(client.setSchedule("bad name!", "x", { every: "1h" }), BadRequestError);
    await assert.rejects(client.setSchedule("both", "x", { every: "1h", cron: "@daily" }), BadRequestError);
  });

  test("previewSchedule: an every schedule keeps absolute time across a DST change", async () => {
    const runs = await client.previewSchedule("x", {
      every: "24h",
      tz: "Europe/Paris",
      startAt: new Date("2026-03-27T09:00:00+01:00"),
      after: new Date("2026-03-27T00:00:00Z"),
      count: 4,
    });
    assert.deepEqual(runs.map((d) => d.toISOString()), [
      "2026-03-27T08:00:00.000Z",
      "2026-03-28T08:00:00.000Z",
      "2026-03-29T08:00:00.000Z",
      "2026-03-30T08:00:00.000Z",
    ]);
    const cron = await client.previewSchedule("x", { cron: "0 9 * * *", tz: "Europe/Paris", after: new Date("2026-03-28T12:00:00Z"), count: 2 });
    assert.deepEqual(cron.map((d) => d.toISOString()), ["2026-03-29T07:00:00.000Z", "2026-03-30T07:00:00.000Z"]);
  });
});
