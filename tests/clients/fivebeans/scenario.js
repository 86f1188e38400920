// A delayed-job scenario against delayqd through fivebeans, an unmodified npm beanstalkd client:
// jobs put with delays are reserved no earlier than due and deleted; one job is buried and
// kicked, one released with a delay, one touched; every job is received exactly once.
// Usage: node scenario.js PORT   (exits 0 on success, 1 with a message on the first failure)
'use strict';
const fivebeans = require('fivebeans');

const port = Number(process.argv[2]);
const fail = (why) => {
  console.error('FAIL: ' + why);
  process.exit(1);
};
setTimeout(() => fail('scenario did not finish in 30 s'), 30000).unref();

function connect() {
  return new Promise((resolve, reject) => {
    const client = new fivebeans.client('127.0.0.1', port);
    client.on('connect', () => resolve(client)).on('error', reject).connect();
  });
}
// fivebeans calls back (err, ...results); make each command a promise of its results.
const call = (client, command, ...args) =>
  new Promise((resolve, reject) => {
    client[command](...args, (err, ...results) => (err ? reject(new Error(command + ': ' + err)) : resolve(results)));
  });

async function main() {
  const producer = await connect();
  const worker = await connect();
  await call(producer, 'use', 'orders');
  await call(worker, 'watch', 'orders');
  await call(worker, 'ignore', 'default');

  // Five jobs, due 0, 1, 1, 2 and 2 seconds from now.
  const due = new Map();  // id -> earliest moment it may be handed out (ms, this clock)
  for (const [delay, body] of [[0, 'now'], [1, 'one-a'], [1, 'one-b'], [2, 'two-a'], [2, 'two-b']]) {
    const before = Date.now();
    const [id] = await call(producer, 'put', 10, delay, 30, body);
    due.set(String(id), { at: before + delay * 1000, body });
  }
  const [delayed] = await call(producer, 'peek_delayed');
  if (!due.has(String(delayed))) fail('peek-delayed gave an unknown job ' + delayed);

  const received = new Map();  // id -> times received
  const take = async () => {
    const [id, payload] = await call(worker, 'reserve_with_timeout', 5);
    const job = due.get(String(id));
    if (!job) fail('reserved unknown job ' + id);
    if (Date.now() < job.at) fail('job ' + id + ' reserved ' + (job.at - Date.now()) + ' ms early');
    if (payload.toString() !== job.body) fail('job ' + id + ' body ' + payload);
    received.set(String(id), (received.get(String(id)) || 0) + 1);
    return String(id);
  };

  // 1: the ready job; bury it, kick it back, take it again and finish it.
  let id = await take();
  await call(worker, 'bury', id, 5);
  const [buried] = await call(producer, 'peek_buried');
  if (String(buried) !== id) fail('peek-buried gave ' + buried + ', not ' + id);
  const [kicked] = await call(producer, 'kick', 10);
  if (Number(kicked) !== 1) fail('kick kicked ' + kicked);
  received.set(id, 0);  // a kicked job comes back: count it once more
  id = await take();
  await call(worker, 'destroy', id);

  // 2: a job due in 1 s; release it with a delay of 1 s, touch nothing, take it again later.
  id = await take();
  const stats = await call(worker, 'stats_job', id);
  if (stats[0].state !== 'reserved') fail('stats-job state ' + stats[0].state);
  // Its delay counts from when the server got the release, which is before its reply (which
  // waits for the disk): the moment the command was sent is the earliest it can count from.
  const releasedAt = Date.now();
  await call(worker, 'release', id, 10, 1);
  due.get(id).at = releasedAt + 1000;
  received.set(id, 0);

  // The rest: take each as it comes due, touch one, delete all.
  for (let left = 4; left > 0; left--) {
    id = await take();
    if (left === 2) await call(worker, 'touch', id);
    await call(worker, 'destroy', id);
  }
  for (const [jobId, times] of received) {
    if (times !== 1) fail('job ' + jobId + ' received ' + times + ' times');
  }
  if (received.size !== due.size) fail('received ' + received.size + ' of ' + due.size + ' jobs');
  const [tube] = await call(producer, 'stats_tube', 'orders');
  if (tube['current-jobs-ready'] !== 0 || tube['current-jobs-delayed'] !== 0) {
    fail('jobs left over: ' + JSON.stringify(tube));
  }
  producer.end();
  worker.end();
  console.log('fivebeans scenario passed: ' + due.size + ' jobs, each received once, none early');
}

main().catch((err) => fail(err.stack || String(err)));
