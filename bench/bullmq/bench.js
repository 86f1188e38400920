// bench.js MODE PORT [SECONDS] — BullMQ 6.7, and a plain sorted-set poller, on the Redis at
// 127.0.0.1:PORT, for bench/compare-bullmq.sh. Modes:
//   add   BullMQ: 100,000 jobs (100-byte payloads; BENCH_JOBS sets another number) delayed an
//         hour, 64 adds in flight: adds/s
//   late  BullMQ: 1,000 jobs/s delayed 1 s for SECONDS, a worker of concurrency 2: lateness
//         percentiles from each job's due time (taken on this clock at its add) to its start
//   zadd  the poller: the same 100,000 jobs as ZADD of the job (id and body, as JSON) scored by
//         its due time, 64 in flight on one connection: adds/s
//   zlate the poller: the same 1,000 jobs/s; every 10 ms one script takes up to 100 due jobs
//         (ZRANGEBYSCORE, then ZREM) and hands them out: lateness as above
// One line of key=value on stdout.
'use strict';
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

const [mode, port, secondsArg] = process.argv.slice(2);
const connection = { host: '127.0.0.1', port: Number(port) };
const payload = { body: 'x'.repeat(100) };

function percentile(sorted, p) {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

// Calls put(n) for n = 1 to 100,000 (or BENCH_JOBS), 64 at a time; prints the rate as
// mode=<mode>.
async function puts(mode, put) {
  const total = Number(process.env.BENCH_JOBS || 100000);
  let next = 0;
  const start = process.hrtime.bigint();
  async function lane() {
    while (next < total) {
      next += 1;
      await put(next);
    }
  }
  await Promise.all(Array.from({ length: 64 }, lane));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`mode=${mode} jobs=${total} adds/s=${Math.round(total / seconds)}`);
}

async function add() {
  const queue = new Queue('bench-add', { connection });
  await puts('add', () => queue.add('j', payload, { delay: 3600000, removeOnComplete: true }));
  await queue.close();
}

async function late() {
  const seconds = Number(secondsArg || 5);
  const queue = new Queue('bench-late', { connection });
  const lateness = [];
  let added = 0;
  const worker = new Worker('bench-late', async (job) => {
    lateness.push((Date.now() - job.data.due) * 1000);
  }, { connection, concurrency: 2 });
  await worker.waitUntilReady();
  const start = Date.now();
  while (Date.now() - start < seconds * 1000) {
    const due = Date.now() + 1000;
    await queue.add('j', { due, body: payload.body }, { delay: 1000, removeOnComplete: true });
    added += 1;
    const wait = start + added - Date.now();  // 1,000 a second
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const deadline = Date.now() + 15000;
  while (lateness.length < added && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  lateness.sort((a, b) => a - b);
  console.log(`mode=late jobs=${added} received=${lateness.length} lateness us: ` +
    `p50=${Math.round(percentile(lateness, 0.5))} p99=${Math.round(percentile(lateness, 0.99))} ` +
    `max=${Math.round(lateness[lateness.length - 1] || 0)}`);
  await worker.close();
  await queue.close();
}

async function zadd() {
  const redis = new IORedis(connection);
  await puts('zadd', (id) =>
    redis.zadd('zq', Date.now() + 3600000, JSON.stringify({ id, body: payload.body })));
  redis.disconnect();
}

// Takes the due jobs, at most n, by the Redis server's clock.
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
if #due > 0 then redis.call('ZREM', KEYS[1], unpack(due)) end
return due`;

async function zlate() {
  const seconds = Number(secondsArg || 5);
  const redis = new IORedis(connection);
  const poller = new IORedis(connection);
  poller.defineCommand('take', { numberOfKeys: 1, lua: TAKE });
  const lateness = [];
  let added = 0;
  let polling = true;
  const poll = (async () => {
    while (polling || lateness.length < added) {
      for (const job of await poller.take('zl', 100)) lateness.push((Date.now() - JSON.parse(job).due) * 1000);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const start = Date.now();
  while (Date.now() - start < seconds * 1000) {
    const due = Date.now() + 1000;
    added += 1;
    await redis.zadd('zl', due, JSON.stringify({ id: added, due, body: payload.body }));
    const wait = start + added - Date.now();  // 1,000 a second
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  polling = false;
  await Promise.race([poll, new Promise((r) => setTimeout(r, 15000))]);
  lateness.sort((a, b) => a - b);
  console.log(`mode=zlate jobs=${added} received=${lateness.length} lateness us: ` +
    `p50=${Math.round(percentile(lateness, 0.5))} p99=${Math.round(percentile(lateness, 0.99))} ` +
    `max=${Math.round(lateness[lateness.length - 1] || 0)}`);
  redis.disconnect();
  poller.disconnect();
}

const modes = { add, late, zadd, zlate };
if (!modes[mode]) {
  console.error(`bench.js: unknown mode ${mode} (add, late, zadd, zlate)`);
  process.exit(2);
}
modes[mode]().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
