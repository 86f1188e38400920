// dashboard-refresh.js DELAYQD — what the dashboard's tubes page costs the browser: starts DELAYQD
// (a fresh data directory under /tmp, HTTP on a free loopback port), puts one job into each of
// 1,000 tubes, opens #/tubes in Debian's headless Chromium and prints the page's busy time
// (Chrome's Performance metrics: tasks, layout, style) over 10 s of its 2-second refreshes.
// Needs playwright-core, which `make test` installs for the browser test:
//   NODE_PATH=build/release/tests/dashboard/node_modules node bench/dashboard-refresh.js \
//     build/release/apps/delayqd
const { chromium } = require('playwright-core');
const fs = require('fs');
const http = require('http');
const { spawn } = require('child_process');

const call = (port, method, path, body) => new Promise((resolve, reject) => {
  const data = body ? JSON.stringify(body) : '';
  const request = http.request({
    host: '127.0.0.1', port, method, path,
    headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) },
  }, (response) => { response.resume(); response.on('end', () => resolve(response.statusCode)); });
  request.on('error', reject);
  request.end(data);
});

(async () => {
  const dir = fs.mkdtempSync('/tmp/dashboard-refresh-');
  const server = spawn(process.argv[2], ['-p', '0', '--http', '127.0.0.1:0', '-b', dir + '/db']);
  try {
    const port = await new Promise((resolve) => {
      let out = '';
      server.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/http listening on .*:(\d+)/);
        if (m) resolve(Number(m[1]));
      });
    });
    for (let i = 0; i < 1000; i++) {
      await call(port, 'POST', '/v1/tubes/tube-' + String(i).padStart(4, '0') + '/jobs', { body: 'x' });
    }
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
    const page = await browser.newPage();
    await page.goto('http://127.0.0.1:' + port + '/#/tubes');
    await page.waitForSelector('tr[data-tube="tube-0999"]');
    await page.waitForTimeout(1000);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const metrics = async () => Object.fromEntries(
      (await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    const before = await metrics();
    await page.waitForTimeout(10000);
    const after = await metrics();
    const ms = (name) => ((after[name] - before[name]) * 1000).toFixed(0);
    console.log('over 10 s of refreshes, 1,000 tubes: tasks ' + ms('TaskDuration') + ' ms, layout ' +
                ms('LayoutDuration') + ' ms, style ' + ms('RecalcStyleDuration') + ' ms');
    await browser.close();
  } finally {
    server.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
})();
