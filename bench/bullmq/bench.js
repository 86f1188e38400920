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
//   drain BullMQ: 20,000 jobs due now (BENCH_DRAIN sets another number) added first, then one
//         worker of concurrency 1 runs them: jobs/s, and per job meanwhile Redis's script calls
//         and its commands (those the scripts run included)
//   zdrain the poller: as drain, one script call taking one due job at a time
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

// Redis's counts so far: [script calls (EVAL, EVALSHA, FCALL and their _RO), commands (those
// scripts run included)].
async function commands(redis) {
  const stats = await redis.info('commandstats');
  let scripts = 0;
  let all = 0;
  for (const [, name, calls] of stats.matchAll(/cmdstat_([a-z_|]+):calls=(\d+)/g)) {
    all += Number(calls);
    if (/^(eval|evalsha|fcall)(_ro)?$/.test(name)) scripts += Number(calls);
  }
  return [scripts, all];
}

// Prints the drain's line; `before` is commands() at its start (that INFO is left out).
async function drained(mode, redis, total, seconds, before) {
  const after = await commands(redis);
  console.log(`mode=${mode} jobs=${total} jobs/s=${Math.round(total / seconds)} ` +
    `scripts/job=${((after[0] - before[0]) / total).toFixed(2)} ` +
    `commands/job=${((after[1] - before[1] - 1) / total).toFixed(2)}`);
}

async function drain() {
  const total = Number(process.env.BENCH_DRAIN || 20000);
  const queue = new Queue('bench-drain', { connection });
  for (let from = 0; from < total; from += 1000) {
    const n = Math.min(1000, total - from);
    await queue.addBulk(Array.from({ length: n }, () => ({ name: 'j', data: payload,
      opts: { removeOnComplete: true } })));
  }
  const redis = new IORedis(connection);
  const before = await commands(redis);
  let done = 0;
  let finished;
  const all = new Promise((r) => { finished = r; });
  const start = process.hrtime.bigint();
  const worker = new Worker('bench-drain', async () => {
    done += 1;
    if (done === total) finished();
  }, { connection, concurrency: 1 });
  await all;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  await drained('drain', redis, total, seconds, before);
  await worker.close();
  redis.disconnect();
  await queue.close();
}

async function zdrain() {
  const total = Number(process.env.BENCH_DRAIN || 20000);
  const redis = new IORedis(connection);
  redis.defineCommand('take', { numberOfKeys: 1, lua: TAKE });
  const pipeline = redis.pipeline();
  for (let id = 1; id <= total; id += 1) {
    pipeline.zadd('zd', Date.now(), JSON.stringify({ id, body: payload.body }));
  }
  await pipeline.exec();
  const before = await commands(redis);
  const start = process.hrtime.bigint();
  let done = 0;
  while (done < total) done += (await redis.take('zd', 1)).length;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  await drained('zdrain', redis, total, seconds, before);
  redis.disconnect();
}

const modes = { add, late, zadd, zlate, drain, zdrain };
if (!modes[mode]) {
  console.error(`bench.js: unknown mode ${mode} (${Object.keys(modes).join(', ')})`);
  process.exit(2);
}
modes[mode]().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
