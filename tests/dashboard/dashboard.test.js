// dashboard.test.js DELAYQD OUT_DIR — drives delayqd's web dashboard in headless Chromium
// (Debian's /usr/bin/chromium, through playwright-core) against real delayqd processes on free
// loopback ports. It puts jobs and schedules through the HTTP API, checks what each page shows,
// acts through the page (reschedule, delete, cancel a group, pause and trigger a schedule) and
// checks the result through the API; with redis-server at hand, it also opens the schedules page
// of a node in Redis mode. Writes a screenshot of every page into OUT_DIR. Exit status 0 only if
// every check passed.
'use strict';

const { spawn } = require('node:child_process');
const http = require('node:http');
const net = require('node:net');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const assert = require('node:assert/strict');
const { chromium } = require('playwright-core');

const [delayqd, outDir] = process.argv.slice(2);
if (!delayqd || !outDir) {
  console.error('usage: dashboard.test.js DELAYQD OUT_DIR');
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });

const servers = [];

// Starts delayqd on free ports with a fresh data directory; resolves with its HTTP base URL.
function startServer(extraArgs = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-dashboard-'));
  const child = spawn(delayqd, ['-p', '0', '--http', '127.0.0.1:0', '-b', path.join(dir, 'db'),
                                ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  servers.push({ child, dir });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('delayqd did not start: ' + stderr)), 15000);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const found = /http listening on (\S+)/.exec(out);
      if (found) {
        clearTimeout(timer);
        resolve({ base: 'http://' + found[1], dir });
      }
    });
    child.on('exit', (code) => reject(new Error('delayqd exited with ' + code + ': ' + stderr)));
  });
}

function stopServers() {
  for (const { child, dir } of servers) {
    if (child.exitCode === null) child.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// Starts redis-server (REDIS_SERVER, else Debian's) on a free loopback port; resolves with the
// port once it answers PING, or with null when there is no redis-server.
async function startRedis() {
  const binary = process.env.REDIS_SERVER || '/usr/bin/redis-server';
  if (!fs.existsSync(binary)) return null;
  const port = await new Promise((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address();
      probe.close(() => resolve(free));
    });
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-dashboard-redis-'));
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
                               '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  servers.push({ child, dir });
  const pong = () => new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.on('data', (data) => { socket.destroy(); resolve(String(data).startsWith('+PONG')); });
    socket.on('error', () => resolve(false));
  });
  for (let i = 0; i < 100; i++) {
    if (await pong()) return port;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('redis-server on port ' + port + ' did not answer PING');
}

async function call(base, method, route, body, token) {
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = 'Bearer ' + token;
  const response = await fetch(base + route, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

const results = [];
async function check(name, fn) {
  try {
    await fn();
    results.push([name, true]);
    console.log('ok   ' + name);
  } catch (error) {
    results.push([name, false]);
    console.log('FAIL ' + name + '\n     ' + String(error.stack || error).split('\n').join('\n     '));
  }
}

// The bars of the page's due chart as [label, jobs] pairs, once it has drawn them.
async function dueBars(page) {
  const canvas = page.getByTestId('due-chart');
  await canvas.waitFor();
  await page.waitForFunction(() => {
    const c = document.querySelector('[data-testid="due-chart"]');
    return c && c.dataset.buckets;
  });
  return JSON.parse(await canvas.getAttribute('data-buckets'));
}

// The texts of a schedule's row on the schedules page.
async function scheduleCells(page, name) {
  const cells = await page.locator('tr[data-schedule="' + name + '"] td').allTextContents();
  return cells.map((text) => text.trim());
}

async function main() {
  const { base } = await startServer();
  // The jobs the checks look for.
  const put = (tube, job) => call(base, 'POST', '/v1/tubes/' + tube + '/jobs', job);
  for (let i = 0; i < 3; i++) assert.equal((await put('orders', { body: 'ready ' + i })).status, 201);
  const later = await put('orders', { body: '{"order":42}', delay: '2h', key: 'order-42' });
  assert.equal(later.status, 201);
  await put('orders', { body: 'soon', delay: '10m' });
  const grouped = [];
  for (let i = 0; i < 2; i++) {
    grouped.push((await put('orders', { body: 'batch ' + i, delay: '3d', group: 'batch-7' })).body.id);
  }
  await put('mail', { body: 'hello' });
  const binary = await put('mail', { body_base64: Buffer.from([0, 1, 2, 250, 65, 66]).toString('base64') });
  await put('mail', { body: 'to bury', priority: 0 });
  const reserved = await call(base, 'POST', '/v1/reserve', { tubes: ['mail'], timeout: '0s' });
  assert.equal(reserved.status, 200);
  assert.equal((await call(base, 'POST', '/v1/jobs/' + reserved.body.id + '/bury', {})).status, 200);

  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium' });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const outside = [];
  await page.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.hostname !== '127.0.0.1') {
      outside.push(url.href);
      return route.abort();
    }
    return route.continue();
  });
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  const shot = (name) => page.screenshot({ path: path.join(outDir, name + '.png'), fullPage: true });

  await check('GET / serves the dashboard, built into the binary, without a token', async () => {
    const response = await fetch(base + '/');
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type'), /^text\/html/);
    assert.match(response.headers.get('content-security-policy'), /default-src 'self'/);
    const chart = await fetch(base + '/dashboard/chart.min.js');
    assert.equal(chart.status, 200);
    assert.match(await chart.text(), /Chart\.js v3/);
    assert.equal((await fetch(base + '/dashboard/nothing.js')).status, 404);
  });

  await check('the overview shows the counts put by the test', async () => {
    await page.goto(base + '/');
    await page.waitForSelector('body[data-loaded]');
    const value = async (label) =>
      (await page.getByTestId('card-' + label).locator('.value').textContent()).trim();
    // orders: 3 ready, 4 delayed; mail: 2 ready, 1 buried.
    assert.equal(await value('ready'), '5');
    assert.equal(await value('delayed'), '4');
    assert.equal(await value('buried'), '1');
    assert.equal(await value('reserved'), '0');
    assert.equal((await page.locator('#health').textContent()).trim(), 'healthy');
    // Some traffic for the rates and lateness charts: jobs that fire within 3 s, ten of them
    // then reserved and deleted.
    for (let i = 1; i <= 30; i++) await put('reminders', { body: 'r' + i, delay: i * 100 });
    await page.waitForTimeout(3500);
    for (let i = 0; i < 10; i++) {
      const job = await call(base, 'POST', '/v1/reserve', { tubes: ['reminders'], timeout: '1s' });
      assert.equal(job.status, 200);
      assert.equal((await call(base, 'DELETE', '/v1/jobs/' + job.body.id)).status, 200);
    }
    await page.waitForTimeout(4500);
    const fired = await page.locator('[data-lateness]').textContent();
    assert.match(fired, /30 fired/);
    assert.doesNotMatch(fired, /p99 –/);
    await shot('overview');
  });

  await check('the due histogram puts a job due in 2 h in "next day", and zooms into it', async () => {
    const bars = Object.fromEntries(await dueBars(page));
    assert.deepEqual(bars, { overdue: 0, 'next minute': 0, 'next hour': 1, 'next day': 1,
                             'next week': 2, later: 0 });
    // Click the "next day" bar, where Chart.js drew it.
    const point = await page.evaluate(() => {
      const canvas = document.querySelector('[data-testid="due-chart"]');
      const bar = Chart.getChart(canvas).getDatasetMeta(0).data[3];
      return { x: bar.x, y: (bar.y + bar.base) / 2 };
    });
    await page.getByTestId('due-chart').click({ position: point });
    await page.waitForFunction(() => {
      const c = document.querySelector('[data-testid="due-chart"]');
      return !JSON.parse(c.dataset.buckets).some(([label]) => label === 'next day');
    });
    const zoomed = await dueBars(page);
    assert.ok(zoomed.length >= 10, 'about 12 bars: ' + JSON.stringify(zoomed));
    assert.equal(zoomed.reduce((sum, [, jobs]) => sum + jobs, 0), 1);
    // The bar holding the job starts between 1 h and 3 h from now.
    const due = (await call(base, 'GET', '/v1/tubes/orders/keys/order-42')).body.due_unix_ms;
    const stats = await call(base, 'GET', '/v1/due?at=' + (due - 60000) + ',' + (due + 60000));
    assert.equal(stats.body.buckets[1].jobs, 1);
    await page.locator('[data-due-panel]').screenshot({ path: path.join(outDir, 'due-zoomed.png') });
  });

  await check('the tubes page lists every tube with its counts, sortable', async () => {
    // A tube with a webhook, whose two jobs a real receiver on loopback takes.
    const received = [];
    const receiver = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        received.push(request.url);
        response.writeHead(204).end();
      });
    });
    await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const hook = 'http://127.0.0.1:' + receiver.address().port + '/hooks';
    assert.equal((await call(base, 'PUT', '/v1/tubes/hooks/webhook', { url: hook })).status, 200);
    await put('hooks', { body: 'one' });
    await put('hooks', { body: 'two' });
    for (let i = 0; i < 100 && received.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    receiver.close();
    assert.equal(received.length, 2);
    await page.goto(base + '/#/tubes');
    await page.waitForSelector('tr[data-tube="hooks"] td:text("2 delivered")');
    const webhook = await page.locator('tr[data-tube="hooks"] td').nth(8).textContent();
    assert.equal(webhook, hook + ' (2 delivered)');
    await page.waitForSelector('tr[data-tube="orders"]');
    const cells = async (tube) => page.locator('tr[data-tube="' + tube + '"] td').allTextContents();
    await page.waitForSelector('tr[data-tube="reminders"]');
    const orders = await cells('orders');
    assert.deepEqual(orders.slice(0, 5).map((s) => s.trim()), ['orders', '3', '4', '0', '0']);
    const mail = await cells('mail');
    assert.deepEqual(mail.slice(0, 5).map((s) => s.trim()), ['mail', '2', '0', '0', '1']);
    // A refresh changes a row's cells in place: the row is the element it was before.
    await put('kept', { body: 'one' });
    await page.waitForSelector('tr[data-tube="kept"] td:nth-child(2):text-is("1")');
    await page.locator('tr[data-tube="kept"]').evaluate((row) => { row.dataset.marked = 'yes'; });
    await put('kept', { body: 'two' });
    await page.waitForSelector('tr[data-tube="kept"] td:nth-child(2):text-is("2")');
    assert.equal(await page.locator('tr[data-tube="kept"]').getAttribute('data-marked'), 'yes',
                 'the row was made again by the refresh');
    // Sorting by delayed, most first.
    await page.locator('th[data-key="delayed"]').click();
    const first = await page.locator('tbody tr').first().getAttribute('data-tube');
    assert.equal(first, 'orders');
    await page.locator('th[data-key="buried"]').click();
    assert.equal(await page.locator('tbody tr').first().getAttribute('data-tube'), 'mail');
    await shot('tubes');
  });

  await check('a tube page lists its jobs by state, and its due histogram', async () => {
    await page.goto(base + '/#/tubes/orders');
    await page.waitForSelector('[data-jobs] tbody tr');
    assert.equal(await page.locator('[data-jobs] tbody tr').count(), 3);
    await page.locator('[data-state="delayed"]').click();
    await page.waitForSelector('[data-jobs] tbody tr[data-job="' + later.body.id + '"]');
    const rows = await page.locator('[data-jobs] tbody tr').count();
    assert.equal(rows, 4);
    // In due order: the 10-minute job, then order-42, then the group.
    const keys = await page.locator('[data-jobs] tbody tr td:nth-child(4)').allTextContents();
    assert.deepEqual(keys, ['', 'order-42', '', '']);
    const bars = Object.fromEntries(await dueBars(page));
    assert.equal(bars['next day'], 1);
    assert.equal(bars['next week'], 2);
    await shot('tube');
  });

  await check('a tube page shows its flow control, and its groups held back and ready', async () => {
    // The orders tube has no flow control: no panel, no group counts.
    await page.goto(base + '/#/tubes/orders');
    await page.waitForSelector('[data-cards] .card');
    assert.equal(await page.locator('[data-flow]').isHidden(), true);
    assert.equal(await page.getByTestId('card-groups-held').count(), 0);
    const flow = await call(base, 'PATCH', '/v1/tubes/flow', {
      group_concurrency: 1, fair: true, group_rate: '10/s', group_burst: 5,
      group_weights: { gold: 3, silver: 2 },
    });
    assert.equal(flow.status, 200, JSON.stringify(flow.body));
    // Two jobs of customer:1 and one of customer:2; a reserve takes customer:1's first, so that
    // customer:1 is at its concurrency (held back) and customer:2 may be served (ready).
    for (const group of ['customer:1', 'customer:1', 'customer:2']) {
      assert.equal((await put('flow', { body: 'for ' + group, group })).status, 201);
    }
    const taken = await call(base, 'POST', '/v1/reserve', { tubes: ['flow'], timeout: '0s' });
    assert.equal(taken.body.group, 'customer:1');
    const tube = (await call(base, 'GET', '/v1/tubes/flow')).body;
    assert.equal(tube.groups_held, 1);
    assert.equal(tube.groups_ready, 1);
    await page.goto(base + '/#/tubes/flow');
    await page.waitForSelector('[data-flow]:not([hidden]) [data-flow-facts] dt');
    const value = async (id) => (await page.getByTestId(id).locator('.value').textContent()).trim();
    assert.equal(await value('card-groups-held'), '1');
    assert.equal(await value('card-groups-ready'), '1');
    const terms = await page.locator('[data-flow-facts] dt').allTextContents();
    const values = await page.locator('[data-flow-facts] dd').allTextContents();
    assert.deepEqual(Object.fromEntries(terms.map((term, i) => [term, values[i]])), {
      'group concurrency': 'at most 1 reserved per group',
      'fair turns': 'on',
      'rate per group': '10/1s, burst 5',
      'weighted groups': '2',
    });
    await shot('tube-flow');
    // Every setting off again: the panel and the group counts go with the next refresh.
    const off = await call(base, 'PATCH', '/v1/tubes/flow', {
      group_concurrency: null, fair: false, group_rate: null,
      group_weights: { gold: null, silver: null },
    });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    await page.waitForSelector('[data-flow][hidden]', { state: 'attached' });
    assert.equal(await page.getByTestId('card-groups-held').count(), 0);
  });

  await check('the inspector finds a job by key and reschedules it (checked through the API)',
              async () => {
    await page.goto(base + '/#/jobs');
    await page.fill('input[name="tube"]', 'orders');
    await page.fill('input[name="key"]', 'order-42');
    await page.click('form[data-find] button[type="submit"]');
    await page.waitForSelector('[data-job]:not([hidden]) [data-state]:text("delayed")');
    assert.equal((await page.locator('[data-job] [data-id]').textContent()).trim(),
                 String(later.body.id));
    assert.match(await page.locator('[data-body]').textContent(), /"order":42/);
    await page.fill('[data-when]', '5h');
    await page.click('[data-action="reschedule"]');
    await page.waitForSelector('#confirm[open]');
    assert.match(await page.locator('#confirm [data-message]').textContent(), /Reschedule job/);
    const before = Date.now();
    await page.click('#confirm [data-ok]');
    await page.waitForFunction(() => !document.querySelector('#confirm').open);
    let job;
    for (let i = 0; i < 50; i++) {
      job = (await call(base, 'GET', '/v1/tubes/orders/keys/order-42')).body;
      if (job.due_unix_ms > before + 4 * 3600 * 1000) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const expected = before + 5 * 3600 * 1000;
    assert.ok(Math.abs(job.due_unix_ms - expected) < 60 * 1000,
              'due ' + job.due_unix_ms + ', expected about ' + expected);
    await shot('job');
  });

  await check('a binary body is shown in hex', async () => {
    await page.goto(base + '/#/jobs?id=' + binary.body.id);
    await page.waitForSelector('[data-body-note]:text("binary")');
    assert.match(await page.locator('[data-body]').textContent(), /00 01 02 fa 41 42/);
  });

  await check('a delete asks for confirmation, and does nothing when cancelled', async () => {
    const id = later.body.id;
    await page.goto(base + '/#/jobs?id=' + id);
    await page.waitForSelector('[data-job]:not([hidden]) [data-action="delete"]:not([disabled])');
    await page.click('[data-action="delete"]');
    await page.waitForSelector('#confirm[open]');
    assert.match(await page.locator('#confirm [data-message]').textContent(), /Delete job \d+/);
    await shot('confirm-delete');
    await page.click('#confirm button[value="cancel"]');
    assert.equal((await call(base, 'GET', '/v1/jobs/' + id)).status, 200);
    await page.click('[data-action="delete"]');
    await page.click('#confirm [data-ok]');
    await page.waitForSelector('[data-state]:text("not found")');
    assert.equal((await call(base, 'GET', '/v1/jobs/' + id)).status, 404);
  });

  await check('a group is listed with its job, and cancelled after a confirmation', async () => {
    await page.goto(base + '/#/jobs?id=' + grouped[0]);
    await page.waitForSelector('[data-group]:not([hidden]) tbody tr');
    assert.equal(await page.locator('[data-group] tbody tr').count(), 2);
    await page.click('[data-action="cancel-group"]');
    await page.click('#confirm [data-ok]');
    await page.waitForSelector('[data-state]:text("not found")');
    const group = await call(base, 'GET', '/v1/tubes/orders/groups/batch-7');
    assert.equal(group.body.jobs.length, 0);
  });

  await check('an action acts on the job its dialog names, though its key names another by then',
              async () => {
    const first = await put('keys', { body: 'first', delay: '1h', key: 'k-1' });
    await page.goto(base + '/#/jobs?tube=keys&key=k-1');
    await page.waitForSelector('[data-job]:not([hidden]) [data-id]:text("' + first.body.id + '")');
    await page.click('[data-action="delete"]');
    await page.waitForSelector('#confirm[open]');
    // Meanwhile another client deletes the job and puts another under the same key; the page
    // refreshes (every 2 s) while the dialog is open.
    assert.equal((await call(base, 'DELETE', '/v1/jobs/' + first.body.id)).status, 200);
    const second = await put('keys', { body: 'second', delay: '1h', key: 'k-1' });
    await page.waitForSelector('[data-job] [data-id]:text("' + second.body.id + '")');
    assert.match(await page.locator('#confirm [data-message]').textContent(),
                 new RegExp('Delete job ' + first.body.id + '\\?'));
    await page.click('#confirm [data-ok]');
    await page.waitForSelector('#error:not([hidden])');
    assert.equal((await call(base, 'GET', '/v1/jobs/' + second.body.id)).status, 200,
                 'the job the dialog did not name was deleted');
  });

  await check('a kick of "all" is refused on the page and its error stays over refreshes; a kick says how many',
              async () => {
    for (let i = 0; i < 3; i++) await put('kicks', { body: 'k' + i, delay: '1h' });
    await page.goto(base + '/#/tubes/kicks');
    await page.waitForSelector('[data-cards] .card');
    await page.click('[data-action="kick"]');
    await page.fill('#confirm [data-input]', 'all');
    await page.click('#confirm [data-ok]');
    await page.waitForSelector('#error:not([hidden])');
    assert.match(await page.locator('#error').textContent(), /whole number/);
    await page.waitForTimeout(4500);  // two refreshes
    assert.equal(await page.locator('#error').isHidden(), false, 'the error went with a refresh');
    assert.equal((await call(base, 'GET', '/v1/tubes/kicks')).body.delayed, 3, 'jobs were kicked');
    await page.click('#error');
    assert.equal(await page.locator('#error').isHidden(), true);

    await page.click('[data-action="kick"]');
    await page.fill('#confirm [data-input]', '2');
    await page.click('#confirm [data-ok]');
    await page.waitForSelector('#notice:not([hidden])');
    assert.match(await page.locator('#notice').textContent(), /^Kicked 2 jobs of kicks to ready/);
    assert.equal((await call(base, 'GET', '/v1/tubes/kicks')).body.ready, 2, 'two jobs kicked');

    // A bare number is not taken as milliseconds.
    await page.click('[data-action="pause"]');
    await page.fill('#confirm [data-input]', '5');
    await page.click('#confirm [data-ok]');
    await page.waitForSelector('#error:not([hidden])');
    assert.match(await page.locator('#error').textContent(), /pause: a delay needs its unit: "5s"/);
    assert.equal(await page.locator('#notice').isHidden(), true, 'the kick\'s notice outlived the next action');
    assert.equal((await call(base, 'GET', '/v1/tubes/kicks')).body.pause_left_ms, 0, 'the tube was paused');
  });

  await check('the schedules page lists each schedule with its next run, and its next 5 runs',
              async () => {
    await page.goto(base + '/#/schedules');
    await page.waitForSelector('[data-note]:text("no schedule")');
    const set = (name, definition) => call(base, 'PUT', '/v1/schedules/' + name, definition);
    assert.equal((await set('hourly-sync', { tube: 'sync', every: '1h' })).status, 201);
    assert.equal((await set('paris-report', { tube: 'reports', cron: '0 9 * * *',
                                              tz: 'Europe/Paris' })).status, 201);
    const listed = await call(base, 'GET', '/v1/schedules');
    assert.equal(listed.status, 200);
    const api = Object.fromEntries(listed.body.schedules.map((s) => [s.name, s]));
    await page.waitForSelector('tr[data-schedule="paris-report"]');
    assert.equal((await page.locator('nav a.current').textContent()).trim(), 'Schedules');
    const hourly = await scheduleCells(page, 'hourly-sync');
    assert.deepEqual(hourly.slice(0, 3), ['hourly-sync', 'sync', 'every 1h']);
    // The next run as the API gives it, and below it how far it is from now.
    assert.ok(hourly[3].startsWith(api['hourly-sync'].next.at + ' in '), 'next run: ' + hourly[3]);
    assert.match(hourly[3], / in (59 min|1 h)/);
    assert.deepEqual(hourly.slice(4), ['never', String(api['hourly-sync'].runs), '0', '0', 'active',
                                       'PauseTrigger']);
    const paris = await scheduleCells(page, 'paris-report');
    // The cron expression, and below it its zone.
    assert.deepEqual(paris.slice(0, 3), ['paris-report', 'reports', '0 9 * * * Europe/Paris']);
    // 09:00 Paris time, with the offset of the day (CET or CEST), as the API gives it.
    assert.ok(paris[3].startsWith(api['paris-report'].next.at + ' in '), 'next run: ' + paris[3]);
    assert.match(paris[3], /^\d{4}-\d\d-\d\dT09:00:00\.000\+0[12]:00 in /);
    assert.equal(paris[8], 'active');
    // A click on the name shows its next five runs, as GET .../next gives them.
    await page.click('tr[data-schedule="paris-report"] td:first-child a');
    await page.waitForSelector('[data-detail]:not([hidden]) ol[data-runs] li');
    const next = (await call(base, 'GET', '/v1/schedules/paris-report/next?count=5')).body.runs;
    assert.equal(next.length, 5);
    const shown = await page.locator('ol[data-runs] li').allTextContents();
    assert.equal(shown.length, 5);
    shown.forEach((text, i) => assert.ok(text.startsWith(next[i].at + ' ('), text));
    assert.equal(await page.locator('tr.selected').getAttribute('data-schedule'), 'paris-report');
    assert.match(await page.locator('[data-detail] [data-facts]').textContent(),
                 /time zoneEurope\/Paris/);
    await shot('schedules');
  });

  await check('a schedule is paused from the page, after a confirmation (checked through the API)',
              async () => {
    await page.goto(base + '/#/schedules');
    const row = 'tr[data-schedule="hourly-sync"]';
    await page.click(row + ' [data-action="pause"]');
    await page.waitForSelector('#confirm[open]');
    assert.match(await page.locator('#confirm [data-message]').textContent(),
                 /^Pause schedule hourly-sync\? No run is put while it is paused/);
    await page.click('#confirm [data-ok]');
    await page.waitForSelector(row + ' .pill:text-is("paused")');
    await page.waitForSelector(row + ' [data-action="resume"]');
    assert.equal((await scheduleCells(page, 'hourly-sync'))[3], '– (paused)');
    const schedule = (await call(base, 'GET', '/v1/schedules/hourly-sync')).body;
    assert.equal(schedule.paused, true);
    assert.equal(schedule.next, null);
    assert.equal(await page.locator('#error').isHidden(), true);
    // The other one is untouched.
    assert.equal((await call(base, 'GET', '/v1/schedules/paris-report')).body.paused, false);
  });

  await check('a schedule is triggered from the page: its runs grow, and its job is in its tube',
              async () => {
    const row = 'tr[data-schedule="paris-report"]';
    const before = (await call(base, 'GET', '/v1/schedules/paris-report')).body.runs;
    assert.equal((await scheduleCells(page, 'paris-report'))[5], String(before));
    // Cancelled, it does nothing.
    await page.click(row + ' [data-action="trigger"]');
    await page.waitForSelector('#confirm[open]');
    assert.match(await page.locator('#confirm [data-message]').textContent(),
                 /^Trigger schedule paris-report now\? One job is put into tube reports/);
    await page.click('#confirm button[value="cancel"]');
    await page.waitForTimeout(500);
    assert.equal((await call(base, 'GET', '/v1/schedules/paris-report')).body.runs, before);
    await page.click(row + ' [data-action="trigger"]');
    await page.waitForSelector('#confirm[open]');
    await page.click('#confirm [data-ok]');
    await page.waitForSelector(row + ' td:nth-child(6):text-is("' + (before + 1) + '")');
    const schedule = (await call(base, 'GET', '/v1/schedules/paris-report')).body;
    assert.equal(schedule.runs, before + 1);
    assert.notEqual(schedule.last_run, null);
    const last = (await scheduleCells(page, 'paris-report'))[4];
    assert.ok(last.startsWith(schedule.last_run.at + ' ') && last.endsWith(' ago'), 'last run: ' + last);
    const ready = (await call(base, 'GET', '/v1/tubes/reports/jobs?state=ready')).body.jobs;
    const run = ready.filter((j) => j.key && j.key.startsWith('paris-report@'));
    assert.equal(run.length, 1, 'ready jobs: ' + JSON.stringify(ready));
    assert.equal(run[0].key, 'paris-report@' + schedule.last_run.unix_ms);
    assert.match(await page.locator('[data-done]').textContent(),
                 new RegExp('^Triggered paris-report: job ' + run[0].id + ' \\(key paris-report@\\d+\\)'));
    assert.equal(await page.locator('#error').isHidden(), true);
    await shot('schedules-acted');
  });

  // A node in Redis mode: its schedules live in Redis, and the page shows them as it does the
  // local store's.
  const redisPort = await startRedis();
  if (redisPort === null) {
    console.log('skip the schedules page in Redis mode: no redis-server (set REDIS_SERVER)');
  } else {
    await check('in Redis mode the schedules page lists the schedules kept in Redis', async () => {
      const redis = await startServer(['--redis', '127.0.0.1:' + redisPort]);
      const made = await call(redis.base, 'PUT', '/v1/schedules/redis-hourly',
                              { tube: 'reports', every: '1h' });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      await page.goto(redis.base + '/#/schedules');
      await page.waitForSelector('tr[data-schedule="redis-hourly"]');
      const cells = await scheduleCells(page, 'redis-hourly');
      assert.equal(cells[0], 'redis-hourly');
      await page.waitForTimeout(2500);  // a refresh
      assert.equal(await page.locator('#error').isHidden(), true, 'an error banner');
      await shot('schedules-redis');
      // What Redis mode keeps no figure of says so, and the job lists and due counts the API
      // refuses there (501) are not asked again at each refresh.
      assert.equal((await call(redis.base, 'POST', '/v1/tubes/rtube/jobs', { body: 'x' })).status, 201);
      const refused = [];
      const onResponse = (response) => {
        if (response.status() === 501) refused.push(new URL(response.url()).pathname);
      };
      page.on('response', onResponse);
      await page.goto(redis.base + '/#/tubes');
      await page.waitForSelector('tr[data-tube="rtube"] td:text-is("not kept")');
      await page.goto(redis.base + '/#/tubes/rtube');
      await page.waitForSelector('[data-jobs-note]:text-matches("^not available: ")');
      await page.waitForTimeout(4500);  // two refreshes
      page.off('response', onResponse);
      // Once each: the job list and the due counts.
      assert.ok(refused.length <= 2, 'refused endpoints asked again: ' + refused.join(', '));
      await shot('tube-redis');
    });
  }

  await check('the page made no request off this machine and raised no error', async () => {
    assert.deepEqual(outside, []);
    assert.deepEqual(pageErrors, []);
  });

  // A server with a token: the page is served, the data only with the token.
  await check('with --http-token-file the page asks for the token, then shows the data', async () => {
    const tokenFile = path.join(outDir, 'token');
    fs.writeFileSync(tokenFile, 's3cret\n');
    const secured = await startServer(['--http-token-file', tokenFile]);
    assert.equal((await call(secured.base, 'POST', '/v1/tubes/t/jobs', { body: 'x' }, 's3cret')).status, 201);
    assert.equal((await call(secured.base, 'GET', '/v1/stats')).status, 401);
    const fresh = await browser.newPage();
    await fresh.goto(secured.base + '/');
    await fresh.waitForSelector('#token[open]');
    await fresh.fill('#token [data-token]', 's3cret');
    await fresh.click('#token button');
    await fresh.waitForFunction(() => {
      const card = document.querySelector('[data-testid="card-ready"] .value');
      return card && card.textContent.trim() === '1';
    });
    await fresh.close();
  });

  await browser.close();
}

main()
  .catch((error) => {
    console.log('FAIL setup\n     ' + (error.stack || error));
    results.push(['setup', false]);
  })
  .finally(() => {
    stopServers();
    const failed = results.filter(([, ok]) => !ok).length;
    console.log(results.length - failed + ' of ' + results.length + ' checks passed');
    process.exit(failed === 0 && results.length > 0 ? 0 : 1);
  });
