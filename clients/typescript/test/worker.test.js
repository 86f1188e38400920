// worker.test.js — client.jobs() and client.work() against a real delayqd: a success deletes
// the job, a throw releases it with an exponential backoff, a slow handler's job is touched,
// a lost reservation aborts the handler's signal, and an AbortSignal stops everything.

import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";

import { BadRequestError, Client, NotFoundError, TransportError, retryDelayMs } from "delayq";
import { startServer, waitFor } from "../test-support/server.js";

let server;
let client;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.baseUrl });
});

after(() => server?.stop());

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function gone(id) {
  return client.getJob(id).then(
    () => false,
    (error) => error instanceof NotFoundError,
  );
}

describe("jobs()", () => {
  test("yields reserved jobs in priority order until the signal aborts", async () => {
    const low = await client.put("iter", "low", { priority: 500 });
    const high = await client.put("iter", "high", { priority: 5 });
    const controller = new AbortController();
    const seen = [];
    for await (const job of client.jobs("iter", { signal: controller.signal, waitMs: 20_000 })) {
      assert.equal(job.state, "reserved");
      seen.push(job.body);
      await client.deleteJob(job.id);
      if (seen.length === 2) controller.abort();
    }
    assert.deepEqual(seen, ["high", "low"]);
    assert.ok((await gone(low.id)) && (await gone(high.id)));
  });

  test("an abort cuts a waiting reserve short, and the wait takes no job", async () => {
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 300);
    let yielded = 0;
    for await (const _job of client.jobs(["iter-empty"], { signal: controller.signal, waitMs: 20_000 })) yielded += 1;
    assert.equal(yielded, 0);
    assert.ok(Date.now() - started < 3000, "ended long before its 20 s wait");
    const put = await client.put("iter-empty", "x");
    const job = await client.reserve("iter-empty");
    assert.equal(job.id, put.id, "no job was taken for the cancelled wait");
    await client.deleteJob(job.id);
  });

  test("a job whose answer is under way when the signal aborts is given back, not stranded", async () => {
    // The kick hands the job to the waiting reserve at once; the abort comes as its answer does.
    for (let round = 0; round < 5; round += 1) {
      const job = await client.put("iter-race", "x", { delay: 3_600_000 });
      const controller = new AbortController();
      const iterating = (async () => {
        const got = [];
        for await (const j of client.jobs("iter-race", { signal: controller.signal, waitMs: 20_000 })) got.push(j.id);
        return got;
      })();
      await waitFor(async () => (await client.stats()).waiting >= 1, { what: "a reserve waiting" });
      await client.kickJob(job.id);
      controller.abort();
      const got = await iterating;
      const state = (await client.getJob(job.id)).state;
      assert.ok(got.length === 0 ? state === "ready" : state === "reserved", `round ${round}: ${state}, yielded ${got}`);
      if (state === "reserved") await client.deleteJob(job.id);
      else await client.deleteJob(job.id);
    }
  });

  test("a reserve that finds nothing at once is not sent again at once", async () => {
    let reserves = 0;
    const counting = new Client({
      baseUrl: server.baseUrl,
      fetch: (url, init) => {
        if (url.endsWith("/v1/reserve")) reserves += 1;
        return fetch(url, init);
      },
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 1000);
    for await (const _job of counting.jobs("iter-none", { signal: controller.signal, waitMs: 0 })) {
      // nothing is put
    }
    assert.ok(reserves <= 12, `${reserves} reserves in 1 s`);
  });

  test("a bad tube name is thrown, not retried", async () => {
    const iterate = async () => {
      for await (const _job of client.jobs("-bad", { waitMs: 0 })) break;
    };
    await assert.rejects(iterate(), BadRequestError);
  });
});

describe("work()", () => {
  test("a handler that resolves has its job deleted", async () => {
    const ids = [];
    for (const n of [1, 2, 3]) ids.push((await client.put("ok", `job ${n}`)).id);
    const controller = new AbortController();
    const bodies = [];
    const working = client.work("ok", async (job) => {
      bodies.push(job.body);
      if (bodies.length === 3) controller.abort();
    }, { signal: controller.signal });
    const stats = await working;
    assert.deepEqual(stats, { handled: 3, failed: 0, touched: 0, lost: 0 });
    assert.deepEqual(bodies.sort(), ["job 1", "job 2", "job 3"]);
    for (const id of ids) assert.ok(await gone(id), `job ${id} deleted`);
  });

  test("a handler that throws has its job released with an exponential backoff", async () => {
    const put = await client.put("failing", "boom");
    const controller = new AbortController();
    const errors = [];
    let attempts = 0;
    const working = client.work("failing", async () => {
      attempts += 1;
      throw new Error(`attempt ${attempts} failed`);
    }, { signal: controller.signal, backoff: { minMs: 4000, maxMs: 60_000, factor: 2 }, onError: (e) => errors.push(e) });

    const first = await waitFor(async () => {
      const job = await client.getJob(put.id);
      return job.counters.releases === 1 && job;
    }, { what: "the first release" });
    assert.equal(first.state, "delayed");
    assert.ok(first.delayMs >= 2000 && first.delayMs <= 4000, `first delay ${first.delayMs}`);

    await client.kickJob(put.id); // skip the wait
    const second = await waitFor(async () => {
      const job = await client.getJob(put.id);
      return job.counters.releases === 2 && job;
    }, { what: "the second release" });
    assert.ok(second.delayMs >= 4000 && second.delayMs <= 8000, `second delay ${second.delayMs}`);

    controller.abort();
    const stats = await working;
    assert.equal(stats.failed, 2);
    assert.equal(stats.handled, 0);
    assert.deepEqual(errors.map((e) => e.message), ["attempt 1 failed", "attempt 2 failed"]);
    await client.deleteJob(put.id);
  });

  test("a slow handler's job is touched, so its TTR does not lapse", async () => {
    const put = await client.put("slow", "slow", { ttr: "1s" });
    const controller = new AbortController();
    const working = client.work("slow", async (job, { signal }) => {
      await sleep(2300);
      const now = await client.getJob(job.id);
      assert.equal(now.state, "reserved");
      assert.equal(now.counters.timeouts, 0);
      assert.equal(now.counters.reserves, 1);
      assert.ok(now.reservedUntil > job.reservedUntil, "touched since the reserve");
      assert.equal(signal.aborted, false);
      controller.abort();
    }, { signal: controller.signal });
    const stats = await working;
    assert.equal(stats.handled, 1, "the handler's assertions passed");
    assert.ok(stats.touched >= 3, `touched ${stats.touched} times`);
    assert.ok(await gone(put.id));
  });

  test("a reservation lost while the handler runs aborts the handler's signal", async () => {
    const put = await client.put("lost", "x", { ttr: "1s" });
    const controller = new AbortController();
    const errors = [];
    let reason;
    const working = client.work("lost", async (job, { signal }) => {
      await client.deleteJob(job.id); // as if someone else finished it
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      reason = signal.reason;
      controller.abort();
    }, { signal: controller.signal, onError: (e) => errors.push(e) });
    const stats = await working;
    assert.equal(stats.lost, 1);
    assert.ok(reason instanceof NotFoundError, String(reason));
    assert.ok(errors.some((e) => e instanceof NotFoundError));
    assert.ok(await gone(put.id));
  });

  test("concurrency runs that many handlers at once", async () => {
    for (const n of [1, 2, 3]) await client.put("parallel", `p${n}`);
    const controller = new AbortController();
    let running = 0;
    let most = 0;
    let done = 0;
    const started = Date.now();
    const stats = await client.work("parallel", async () => {
      running += 1;
      most = Math.max(most, running);
      await sleep(600);
      running -= 1;
      if (++done === 3) controller.abort();
    }, { concurrency: 3, signal: controller.signal });
    assert.equal(stats.handled, 3);
    assert.equal(most, 3);
    assert.ok(Date.now() - started < 1700, "the three ran side by side");
  });

  test("an abort lets the running handler finish, then work() resolves", async () => {
    const put = await client.put("draining", "d");
    const controller = new AbortController();
    let finished = false;
    const working = client.work("draining", async () => {
      controller.abort();
      await sleep(400);
      finished = true;
    }, { signal: controller.signal });
    const stats = await working;
    assert.equal(finished, true);
    assert.equal(stats.handled, 1);
    assert.ok(await gone(put.id));
  });

  test("errors reaching the server are reported and retried until the signal aborts", async () => {
    const closed = net.createServer();
    await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address();
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = new Client({ baseUrl: `http://127.0.0.1:${port}` });
    const errors = [];
    const controller = new AbortController();
    const working = unreachable.work("any", () => {}, { signal: controller.signal, onError: (e) => errors.push(e) });
    await waitFor(() => errors.length >= 2, { what: "two failed reserves" });
    controller.abort();
    const stats = await working;
    assert.deepEqual(stats, { handled: 0, failed: 0, touched: 0, lost: 0 });
    assert.ok(errors.every((e) => e instanceof TransportError));
  });

  test("a proxy's 502 or 504 is retried, not fatal", async () => {
    let reserves = 0;
    const proxied = new Client({
      baseUrl: server.baseUrl,
      fetch: (url, init) => {
        if (url.endsWith("/v1/reserve") && (reserves += 1) <= 2) {
          const status = reserves === 1 ? 502 : 504;
          return Promise.resolve(new Response("<html>bad gateway</html>", { status, headers: { "content-type": "text/html" } }));
        }
        return fetch(url, init);
      },
    });
    const put = await client.put("proxied", "through");
    const errors = [];
    const controller = new AbortController();
    const working = proxied.work(
      "proxied",
      async () => {
        controller.abort();
      },
      { signal: controller.signal, waitMs: 1000, onError: (e) => errors.push(e) },
    );
    const stats = await working;
    assert.equal(stats.handled, 1);
    assert.deepEqual(
      errors.map((e) => e.status),
      [502, 504],
    );
    assert.ok(await gone(put.id));
  });

  test("an error no retry cures rejects work()", async () => {
    await assert.rejects(client.work("-bad", () => {}, { waitMs: 0 }), BadRequestError);
  });

  test("retryDelayMs: between half and all of min(max, min x factor^(n-1))", () => {
    const backoff = { minMs: 1000, maxMs: 10_000, factor: 2 };
    assert.equal(retryDelayMs(1, backoff, () => 0), 500);
    assert.equal(retryDelayMs(1, backoff, () => 1), 1000);
    assert.equal(retryDelayMs(3, backoff, () => 1), 4000);
    assert.equal(retryDelayMs(10, backoff, () => 1), 10_000);
    assert.equal(retryDelayMs(10, backoff, () => 0), 5000);
  });
});
