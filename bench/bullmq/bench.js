// bench.js MODE PORT [SECONDS] — BullMQ 6.7 on the Redis at 127.0.0.1:PORT, for
// bench/compare-bullmq.sh. Modes:
//   add   100,000 jobs (100-byte payloads) delayed an hour, 64 adds in flight: prints adds/s
//   late  1,000 jobs/s delayed 1 s for SECONDS, a worker of concurrency 2: prints lateness
//         percentiles from each job's due time (taken on this clock at its add) to its start
// One line of key=value on stdout.
'use strict';
const { Queue, Worker } = require('bullmq');

const [mode, port, secondsArg] = process.argv.slice(2);
const connection = { host: '127.0.0.1', port: Number(port) };
const payload = { body: 'x'.repeat(100) };

function percentile(sorted, p) {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

async function add() {
  const queue = new Queue('bench-add', { connection });
  const total = 100000;
  let next = 0;
  const start = process.hrtime.bigint();
  async function lane() {
    while (next < total) {
      next += 1;
      await queue.add('j', payload, { delay: 3600000, removeOnComplete: true });
    }
  }
  await Promise.all(Array.from({ length: 64 }, lane));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`mode=add jobs=${total} adds/s=${Math.round(total / seconds)}`);
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

(mode === 'add' ? add() : late()).then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
