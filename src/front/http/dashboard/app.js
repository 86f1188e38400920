// app.js — the delayq dashboard: a page per hash route (#/, #/tubes, #/tubes/<name>,
// #/schedules, #/jobs), each drawn from the HTTP API and refreshed every two seconds while "live"
// is on and the tab is visible. Everything shown comes from the API with the user's bearer token,
// if the server wants one; nothing is computed on the server for this page but what the API
// answers anyway.
'use strict';

const REFRESH_MS = 2000;
const REQUEST_TIMEOUT_MS = 10000;  // a server that answers nothing in this long is unreachable
const RATE_WINDOW_MS = 5 * 60 * 1000;
const MINUTE = 60 * 1000, HOUR = 60 * MINUTE, DAY = 24 * HOUR, WEEK = 7 * DAY;
// Bar lengths of a zoomed due histogram, all whole minutes (the counts' resolution).
const NICE_STEPS = [MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR,
  2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, WEEK, 2 * WEEK, 4 * WEEK];

// --- the API -----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let tokenPrompt = null;  // a pending token dialog, shared by the requests that wait for it

async function askToken(refused) {
  if (!tokenPrompt) {
    const dialog = document.getElementById('token');
    dialog.querySelector('[data-token-refused]').hidden = !refused;
    tokenPrompt = new Promise((resolve) => {
      dialog.addEventListener('close', () => {
        sessionStorage.setItem('delayq-token', dialog.querySelector('[data-token]').value.trim());
        tokenPrompt = null;
        resolve();
      }, { once: true });
      dialog.showModal();
    });
  }
  return tokenPrompt;
}

async function api(path, { method = 'GET', body } = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = {};
    const token = sessionStorage.getItem('delayq-token');
    if (token) headers.Authorization = 'Bearer ' + token;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response;
    try {
      response = await fetch(path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (error) {
      markUnreachable();
      throw new ApiError(0, 'unreachable', 'the server does not answer (' +
                         (error.name === 'TimeoutError' ? 'no answer in ' + REQUEST_TIMEOUT_MS / 1000 + ' s' : error.message) + ')');
    }
    if (response.status === 401 && attempt < 3) {
      await askToken(Boolean(token));
      continue;
    }
    const text = await response.text();
    let data;
    try {
      // delayqd's refusals carry a JSON error object: an empty one is a proxy's (502, 504).
      if (!text && !response.ok) throw new SyntaxError('no body');
      data = text ? JSON.parse(text) : {};
    } catch (error) {
      // Not delayqd's answer (a proxy's error page): delayqd is not reached.
      markUnreachable();
      throw new ApiError(response.status, 'unreachable', 'HTTP ' + response.status +
                         ' from something that is not delayqd (a proxy in between?)');
    }
    // The first answer after the server could not be reached: the header's pill, at once.
    if (unreachable) {
      unreachable = false;
      if (path !== '/v1/stats') api('/v1/stats').then(renderHeader, () => {});
    }
    if (!response.ok) {
      const error = data.error || {};
      throw new ApiError(response.status, error.code || 'error',
                         error.message || response.statusText);
    }
    return data;
  }
}

const enc = encodeURIComponent;

// --- formatting --------------------------------------------------------------------------------

const number = new Intl.NumberFormat();
function fmtCount(n) { return number.format(n); }

function fmtSpan(ms) {
  const sign = ms < 0 ? '-' : '';
  ms = Math.abs(ms);
  if (ms < 1000) return sign + Math.round(ms) + ' ms';
  const s = Math.floor(ms / 1000);
  if (s < 60) return sign + s + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return sign + m + ' min ' + (s % 60 ? (s % 60) + ' s' : '');
  const h = Math.floor(m / 60);
  if (h < 48) return sign + h + ' h ' + (m % 60 ? (m % 60) + ' min' : '');
  return sign + Math.floor(h / 24) + ' d ' + (h % 24 ? (h % 24) + ' h' : '');
}

function fmtTime(unixMs) {
  return new Date(unixMs).toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit',
    second: '2-digit',
  });
}

// A time from now: "in 2 h", "5 min 3 s ago".
function fromNow(unixMs, nowMs) {
  const delta = unixMs - nowMs;
  return delta >= 0 ? 'in ' + fmtSpan(delta).trim() : fmtSpan(-delta).trim() + ' ago';
}

// A due time, absolute and from now: "Nov 26, 02:34:47 (in 2 h)".
function fmtDue(unixMs, nowMs) {
  return fmtTime(unixMs) + ' (' + fromNow(unixMs, nowMs) + ')';
}

// A schedule's time ({at, unix_ms}) as the API gives it, in the schedule's zone, and from now:
// "2026-12-02T09:00:00.000+01:00 (in 2 h 30 min)".
function fmtRun(run, nowMs) {
  return run.at + ' (' + fromNow(run.unix_ms, nowMs) + ')';
}

// --- small DOM helpers -------------------------------------------------------------------------

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === 'class') node.className = value;
    else if (name === 'text') node.textContent = value;
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function card(label, value, testId) {
  return el('div', { class: 'card', 'data-testid': testId || 'card-' + label },
            el('div', { class: 'value', text: value }), el('div', { class: 'label', text: label }));
}

function facts(dl, pairs) {
  dl.replaceChildren();
  for (const [name, value] of pairs) {
    dl.append(el('dt', { text: name }), value instanceof Node ? el('dd', {}, value)
                                                              : el('dd', { text: String(value) }));
  }
}

// The red banner. An action's error stays until the next action, another page or a click on
// it; a refresh's goes with the next refresh that succeeds.
let actionFailed = false;
function showError(error, fromAction = false) {
  if (actionFailed && !fromAction) return;
  actionFailed = Boolean(error) && fromAction;
  const banner = document.getElementById('error');
  banner.hidden = !error;
  if (error) {
    banner.textContent = (error.message || String(error)) + (fromAction ? ' (click to dismiss)' : '');
  }
}
document.getElementById('error').addEventListener('click', () => {
  actionFailed = false;
  showError(null);
});

// The header's pill when the server cannot be reached; the next answer puts it right.
let unreachable = false;
function markUnreachable() {
  unreachable = true;
  const pill = document.getElementById('health');
  pill.textContent = 'unreachable';
  pill.className = 'pill bad';
}

// Asks the user to confirm; with `input`, also for a value (returned), else true. null: cancelled.
function confirmAction(message, input) {
  const dialog = document.getElementById('confirm');
  dialog.querySelector('[data-message]').textContent = message;
  const row = dialog.querySelector('[data-input-row]');
  const field = dialog.querySelector('[data-input]');
  row.hidden = input === undefined;
  field.value = input === undefined ? '' : input;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      if (dialog.returnValue !== 'ok') return resolve(null);
      resolve(input === undefined ? true : field.value.trim());
    }, { once: true });
    dialog.returnValue = '';
    dialog.showModal();
    if (input !== undefined) field.focus();
  });
}

// What an action did, when its answer says more than "done" (a kick's count); the next action,
// or a click, takes it away.
function showNotice(text) {
  const notice = document.getElementById('notice');
  notice.hidden = !text;
  notice.textContent = text ? text + ' (click to dismiss)' : '';
}
document.getElementById('notice').addEventListener('click', () => showNotice(null));

// A delay typed into a dialog says its unit, as the CLI asks: the API reads a bare number as
// milliseconds, which "5" is seldom meant to be. A bare 0 is the same in every unit.
function checkDelay(action, text) {
  if (/^[0-9]+$/.test(text) && /[1-9]/.test(text)) {
    throw new Error(action + ': a delay needs its unit: "' + text + 's", "' + text + 'm" or "' +
                    text + 'ms"');
  }
  return text;
}

// An action the user confirms (and gives a value to, with `input`): its error stays on the
// banner until read, and the page refreshes either way. run(answer) may return a line saying
// what the action did, shown until the next action.
async function runAction(message, input, run, refresh) {
  const answer = await confirmAction(message, input);
  if (answer === null) return;
  showNotice(null);
  try {
    const said = await run(answer);
    showError(null, true);
    if (typeof said === 'string') showNotice(said);
  } catch (error) {
    showError(error, true);
  }
  refresh().catch(showError);
}

const charts = new Set();
function makeChart(canvas, config) {
  config.options = Object.assign({ animation: false, responsive: true, maintainAspectRatio: false },
                                 config.options || {});
  const chart = new Chart(canvas, config);
  charts.add(chart);
  return chart;
}

// --- the due histogram (overview and tube pages) ------------------------------------------------

// Bars of delayed jobs by due time: first the next minute, hour, day, week and later; a click on
// a bar splits it into smaller ones (down to the server's resolution, a minute), "zoom out" goes
// back. tube: a tube's name, or '' for every tube.
class DueChart {
  constructor(container, tube) {
    this.tube = tube;
    this.stack = [];  // zoomed ranges: {from, to}
    this.bar = el('div', { class: 'due-bar' });
    this.note = el('span', { class: 'muted' });
    this.back = el('button', { text: 'zoom out', onclick: () => { this.stack.pop(); this.refresh(); } });
    this.bar.append(this.back, this.note);
    const holder = el('div', { class: 'chart' });
    this.canvas = el('canvas', { 'data-testid': 'due-chart' });
    holder.append(this.canvas);
    container.replaceChildren(this.bar, holder);
    this.buckets = [];
    this.chart = makeChart(this.canvas, {
      type: 'bar',
      data: { labels: [], datasets: [{ label: 'delayed jobs', data: [], backgroundColor: '#2f6fde' }] },
      options: {
        plugins: { legend: { display: false } },
        scales: { y: { beginAtZero: true, ticks: { precision: 0 } } },
        // A click anywhere in a bar's column zooms: a bar of 13 jobs beside one of 98,000 is
        // less than a pixel tall.
        interaction: { mode: 'index', intersect: false },
        onClick: (event, elements) => {
          if (elements.length) this.zoom(this.buckets[elements[0].index]);
        },
      },
    });
    // What the page shows, for people and for tests: the buckets as text.
    this.canvas.setAttribute('role', 'img');
  }

  path() {
    return this.tube ? '/v1/tubes/' + enc(this.tube) + '/due' : '/v1/due';
  }

  zoom(bucket) {
    if (!bucket || bucket.from === null) return;
    const to = bucket.to === null ? bucket.from + 52 * WEEK : bucket.to;
    if (to - bucket.from <= MINUTE) return;
    this.stack.push({ from: bucket.from, to });
    this.refresh();
  }

  async refresh() {
    this.back.disabled = this.stack.length === 0;
    // Only the latest request draws: a zoom may start while a periodic refresh is under way.
    const mine = this.requests = (this.requests || 0) + 1;
    const zoomed = this.stack.length > 0;
    let data;
    try {
      if (notAvailable.due) throw new ApiError(501, 'unsupported', notAvailable.due);
      if (this.stack.length === 0) {
        data = await api(this.path() + '?in=0s,1m,1h,1d,7d');
      } else {
        const { from, to } = this.stack[this.stack.length - 1];
        // About 12 bars, each a round length: the first of these that is long enough.
        const step = NICE_STEPS.find((length) => length * 12 >= to - from) ||
                     NICE_STEPS[NICE_STEPS.length - 1];
        const edges = [];
        for (let t = from; t < to; t += step) edges.push(t);
        edges.push(to);
        data = await api(this.path() + '?at=' + edges.join(','));
      }
    } catch (error) {
      if (mine !== this.requests) return;
      if (error.code === 'unsupported') notAvailable.due = error.message;
      this.note.textContent = error.code === 'unsupported' ? 'not available: ' + error.message
                              : error.status === 404 ? 'no such tube' : error.message;
      this.chart.data.labels = [];
      this.chart.data.datasets[0].data = [];
      this.chart.update();
      return;
    }
    if (mine !== this.requests) return;
    const raw = data.buckets.map((b) => ({ from: b.from_unix_ms, to: b.to_unix_ms, jobs: b.jobs }));
    let labels;
    if (!zoomed) {
      this.buckets = raw;
      labels = ['overdue', 'next minute', 'next hour', 'next day', 'next week', 'later'];
    } else {
      this.buckets = raw.slice(1, -1);  // the zoomed range only
      const span = this.buckets.length ? this.buckets[0].to - this.buckets[0].from : MINUTE;
      const format = span >= DAY ? { month: 'short', day: 'numeric' }
                                 : { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' };
      labels = this.buckets.map((b) => new Date(b.from).toLocaleString(undefined, format));
    }
    this.chart.data.labels = labels;
    this.chart.data.datasets[0].data = this.buckets.map((b) => b.jobs);
    this.chart.update();
    const total = this.buckets.reduce((sum, b) => sum + b.jobs, 0);
    const where = this.stack.length === 0 ? 'delayed'
      : 'between ' + fmtTime(this.stack[this.stack.length - 1].from) + ' and ' +
        fmtTime(this.stack[this.stack.length - 1].to);
    this.note.textContent = fmtCount(total) + ' ' + where +
      (this.stack.length === 0 ? ' · click a bar to zoom in' : '');
    this.canvas.setAttribute('aria-label', labels.map((l, i) => l + ': ' + this.buckets[i].jobs).join('; '));
    this.canvas.dataset.buckets = JSON.stringify(labels.map((l, i) => [l, this.buckets[i].jobs]));
  }
}

// --- pages -------------------------------------------------------------------------------------

function instantiate(id) {
  const main = document.getElementById('main');
  for (const chart of charts) chart.destroy();
  charts.clear();
  main.replaceChildren(document.getElementById(id).content.cloneNode(true));
  return main;
}

// Counter samples for the rates chart, kept across page changes.
const samples = [];

const LATENESS_LABELS = (bounds) => bounds.map((b, i) =>
  b.le_ms === null ? '> ' + bounds[i - 1].le_ms + ' ms' : '≤ ' + b.le_ms + ' ms');

function overviewPage() {
  const root = instantiate('page-overview');
  const rates = makeChart(root.querySelector('[data-rates]'), {
    type: 'line',
    data: {
      labels: [],
      datasets: ['puts', 'fires', 'deletes', 'buries'].map((label, i) => ({
        label, data: [], borderColor: ['#2f6fde', '#1f9254', '#8a8f98', '#c53030'][i],
        pointRadius: 0, tension: 0.2,
      })),
    },
    options: { scales: { y: { beginAtZero: true } } },
  });
  const lateness = makeChart(root.querySelector('[data-lateness-chart]'), {
    type: 'bar',
    data: { labels: [], datasets: [{ label: 'jobs', data: [], backgroundColor: '#1f9254' }] },
    options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true } } },
  });
  const due = new DueChart(root.querySelector('[data-due]'), '');
  return async () => {
    const s = await api('/v1/stats');
    renderHeader(s);
    root.querySelector('[data-cards]').replaceChildren(
      card('ready', fmtCount(s.ready)), card('delayed', fmtCount(s.delayed)),
      card('reserved', fmtCount(s.reserved)), card('buried', fmtCount(s.buried)),
      card('urgent', fmtCount(s.urgent)), card('waiting workers', fmtCount(s.waiting), 'card-waiting'),
      card('tubes', fmtCount(s.tubes)));
    const now = Date.now();
    samples.push({ t: now, up: s.uptime_s, puts: s.total_jobs, fires: s.fired, deletes: s.deletes,
                   buries: s.buries });
    while (samples.length && samples[0].t < now - RATE_WINDOW_MS) samples.shift();
    const labels = [], series = [[], [], [], []];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i];
      const seconds = (b.t - a.t) / 1000;
      if (seconds <= 0 || b.up < a.up) continue;  // a restart resets the counters
      labels.push(new Date(b.t).toLocaleTimeString());
      ['puts', 'fires', 'deletes', 'buries'].forEach((k, j) => series[j].push((b[k] - a[k]) / seconds));
    }
    rates.data.labels = labels;
    series.forEach((data, j) => { rates.data.datasets[j].data = data; });
    rates.update();
    const l = s.fire_lateness;
    const ms = (v) => (v === null ? '–' : v < 1 ? v.toFixed(2) + ' ms' : v.toFixed(1) + ' ms');
    root.querySelector('[data-lateness]').textContent =
      'p50 ' + ms(l.p50_ms) + ' · p90 ' + ms(l.p90_ms) + ' · p99 ' + ms(l.p99_ms) +
      ' · ' + fmtCount(s.fired) + ' fired';
    lateness.data.labels = LATENESS_LABELS(l.buckets);
    lateness.data.datasets[0].data = l.buckets.map((b) => b.jobs);
    lateness.update();
    const connections = Object.entries(s.connections).map(([p, n]) => p + ' ' + n).join(', ');
    facts(root.querySelector('[data-server]'), [
      ['store', s.health.status + (s.health.message ? ': ' + s.health.message : '')],
      ['draining', s.draining ? 'yes: puts are refused' : 'no'],
      ['connections', connections || 'none'],
      ['jobs put', fmtCount(s.total_jobs) +
        (serverMode === 'redis' ? ' (every node\'s, as the tubes count them)' : ' since the start')],
      ['TTRs lapsed', fmtCount(s.job_timeouts)],
      // Ids are drawn per shard in Redis mode: no next id to show.
      ...(serverMode === 'redis' ? [] : [['next id', fmtCount(s.next_id)]]),
    ]);
    await due.refresh();
  };
}

// "redis" once the server has said so: some figures are not kept there (redis-mode.md).
let serverMode = 'local';
// The first refusal of a tube's job list, or of due counts, as unsupported (Redis mode): that
// endpoint is not asked again, and says "not available" with its reason.
const notAvailable = { jobs: null, due: null };

function renderHeader(stats) {
  serverMode = stats.mode || 'local';
  const pill = document.getElementById('health');
  const status = stats.health.status;
  pill.textContent = status === 'ok' ? 'healthy' : status;
  pill.className = 'pill ' + (status === 'ok' ? 'ok' : status === 'draining' ? 'warn' : 'bad');
  document.getElementById('server').textContent =
    'v' + stats.version + ' · up ' + fmtSpan(stats.uptime_s * 1000);
}

// " (12 delivered, 1 buried)": what became of a tube's deliveries on this node since its start.
function webhookSummary(deliveries) {
  const parts = Object.entries(deliveries || {}).map(([outcome, n]) => fmtCount(n) + ' ' + outcome);
  return parts.length ? ' (' + parts.join(', ') + ')' : '';
}

// How long the oldest ready job has waited; Redis mode keeps no such age.
function oldestReady(t) {
  if (serverMode === 'redis') return 'not kept';
  return t.ready ? fmtSpan(t.oldest_ready_age_ms) : '–';
}

function tubesPage() {
  const root = instantiate('page-tubes');
  const table = root.querySelector('[data-tubes]');
  const filter = root.querySelector('[data-filter]');
  let sort = { key: 'name', descending: false };
  let tubes = [];
  // Each tube's row, kept across refreshes: a refresh changes the text of the cells whose values
  // changed and moves rows only when the order changed, so that a page of a thousand tubes stays
  // cheap to refresh.
  const rowsByName = new Map();
  const rowOf = (name) => {
    let row = rowsByName.get(name);
    if (!row) {
      const cells = Array.from({ length: 9 }, (_, i) => el('td', i < 6 || i === 8 ? { class: 'num' } : {}));
      row = el('tr', { 'data-tube': name }, el('td', {}, el('a', { href: '#/tubes/' + enc(name), text: name })), ...cells);
      row.cellsToFill = cells;
      rowsByName.set(name, row);
    }
    return row;
  };
  const fill = (row, t) => {
    const texts = [fmtCount(t.ready), fmtCount(t.delayed), fmtCount(t.reserved), fmtCount(t.buried),
      fmtCount(t.urgent), fmtCount(t.waiting),
      t.pause_left_ms > 0 ? fmtSpan(t.pause_left_ms) + ' left' : '–',
      t.webhook_url ? t.webhook_url + webhookSummary(t.webhook_deliveries) : '–',
      oldestReady(t)];
    texts.forEach((text, i) => {
      const cell = row.cellsToFill[i];
      if (cell.textContent !== text) cell.textContent = text;
    });
    return row;
  };
  const draw = () => {
    const wanted = filter.value.trim().toLowerCase();
    const rows = tubes.filter((t) => t.name.toLowerCase().includes(wanted));
    rows.sort((a, b) => {
      const x = a[sort.key] ?? '', y = b[sort.key] ?? '';
      const order = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
      return sort.descending ? -order : order;
    });
    table.querySelectorAll('th').forEach((th) => {
      th.setAttribute('aria-sort', th.dataset.key === sort.key ? (sort.descending ? 'descending' : 'ascending') : 'none');
    });
    const body = table.tBodies[0];
    const wantedRows = rows.map((t) => fill(rowOf(t.name), t));
    const shown = body.children;
    if (shown.length !== wantedRows.length || wantedRows.some((row, i) => shown[i] !== row)) {
      body.replaceChildren(...wantedRows);
    }
  };
  table.querySelectorAll('th').forEach((th) => th.addEventListener('click', () => {
    sort = { key: th.dataset.key, descending: sort.key === th.dataset.key ? !sort.descending : th.classList.contains('num') };
    draw();
  }));
  filter.addEventListener('input', draw);
  return async () => {
    tubes = (await api('/v1/tubes')).tubes;
    const names = new Set(tubes.map((t) => t.name));
    for (const name of rowsByName.keys()) if (!names.has(name)) rowsByName.delete(name);
    draw();
  };
}

// A tube's flow control settings (docs/flow-control.md) as [name, value] facts; none when every
// setting is off.
function flowFacts(t) {
  const weighted = Object.keys(t.group_weights || {}).length;
  if (!t.group_concurrency && !t.fair && !t.group_rate && !weighted) return [];
  return [
    ['group concurrency', t.group_concurrency ? 'at most ' + fmtCount(t.group_concurrency) + ' reserved per group' : 'off'],
    ['fair turns', t.fair ? 'on' : 'off'],
    ['rate per group', t.group_rate ? t.group_rate + ', burst ' + fmtCount(t.group_burst) : 'off'],
    ['weighted groups', weighted ? fmtCount(weighted) : 'none'],
  ];
}

function tubePage(name) {
  const root = instantiate('page-tube');
  root.querySelector('[data-name]').textContent = name;
  const due = new DueChart(root.querySelector('[data-due]'), name);
  let state = 'ready';
  const tabs = root.querySelectorAll('[data-state]');
  const jobs = root.querySelector('[data-jobs] tbody');
  const note = root.querySelector('[data-jobs-note]');
  const flow = root.querySelector('[data-flow]');
  let refresh;
  tabs.forEach((tab) => tab.addEventListener('click', () => {
    state = tab.dataset.state;
    refresh().catch(showError);
  }));
  const act = (message, input, run) => runAction(message, input, run, refresh);
  root.querySelector('[data-action="kick"]').addEventListener('click', () =>
    act('Kick how many jobs of ' + name + ' (buried first, else delayed)?', '100', (bound) => {
      if (!/^[1-9][0-9]*$/.test(bound)) {
        throw new Error('kick: a whole number of jobs, 1 or more, not "' + bound + '"');
      }
      return api('/v1/tubes/' + enc(name) + '/kick', { method: 'POST', body: { bound: Number(bound) } })
        .then((done) => 'Kicked ' + fmtCount(done.kicked) + (done.kicked === 1 ? ' job' : ' jobs') +
                        ' of ' + name + ' to ready');
    }));
  root.querySelector('[data-action="pause"]').addEventListener('click', () =>
    act('Pause ' + name + ' for how long?', '5m',
        (delay) => api('/v1/tubes/' + enc(name) + '/pause',
                       { method: 'POST', body: { delay: checkDelay('pause', delay) } })));
  root.querySelector('[data-action="resume"]').addEventListener('click', () =>
    act('End the pause of ' + name + '?', undefined,
        () => api('/v1/tubes/' + enc(name) + '/pause', { method: 'POST', body: { delay: 0 } })));
  refresh = async () => {
    let t;
    try {
      t = await api('/v1/tubes/' + enc(name));
    } catch (error) {
      if (error.status !== 404) throw error;
      root.querySelector('[data-cards]').replaceChildren(card('state', 'no such tube (it has no jobs)', 'card-missing'));
      flow.hidden = true;
      jobs.replaceChildren();
      note.textContent = '';
      await due.refresh();  // says "no such tube" and empties the chart
      return;
    }
    // Groups held back and groups ready count only under flow control: shown with it.
    const flowSettings = flowFacts(t);
    root.querySelector('[data-cards]').replaceChildren(
      card('ready', fmtCount(t.ready)), card('delayed', fmtCount(t.delayed)),
      card('reserved', fmtCount(t.reserved)), card('buried', fmtCount(t.buried)),
      card('waiting workers', fmtCount(t.waiting), 'card-waiting'),
      card('paused', t.pause_left_ms > 0 ? fmtSpan(t.pause_left_ms) + ' left' : 'no'),
      card('oldest ready', oldestReady(t)),
      ...(flowSettings.length ? [card('groups held back', fmtCount(t.groups_held), 'card-groups-held'),
                                 card('groups ready', fmtCount(t.groups_ready), 'card-groups-ready')] : []));
    flow.hidden = flowSettings.length === 0;
    facts(flow.querySelector('[data-flow-facts]'), flowSettings);
    tabs.forEach((tab) => {
      tab.classList.toggle('current', tab.dataset.state === state);
      tab.disabled = Boolean(notAvailable.jobs);
    });
    try {
      if (notAvailable.jobs) throw new ApiError(501, 'unsupported', notAvailable.jobs);
      const list = await api('/v1/tubes/' + enc(name) + '/jobs?state=' + state + '&limit=50');
      const now = Date.now();
      jobs.replaceChildren(...list.jobs.map((j) => el('tr', { 'data-job': j.id },
        el('td', {}, el('a', { href: '#/jobs?id=' + j.id, text: String(j.id) })),
        el('td', { class: 'num', text: String(j.priority) }),
        el('td', { text: fmtDue(j.due_unix_ms, now) }),
        el('td', { text: j.key || '' }), el('td', { text: j.group || '' }),
        el('td', { class: 'num', text: String(j.counters.reserves) }))));
      const partial = ' (the search stopped early: the list may miss some)';
      note.textContent = list.jobs.length === 0
        ? (list.complete ? 'no ' + state + ' job' : 'none found' + partial)
        : 'the first ' + list.jobs.length + ' in the order they are served' +
          (list.complete ? '' : partial);
    } catch (error) {
      jobs.replaceChildren();
      if (error.code === 'unsupported') notAvailable.jobs = error.message;
      note.textContent = error.code === 'unsupported' ? 'not available: ' + error.message : error.message;
    }
    await due.refresh();
  };
  return refresh;
}

// A body as text when it is, else as a hex dump; at most 4 KiB either way.
function showBody(job, pre, noteEl) {
  const limit = 4096;
  if (job.body !== undefined) {
    // Whole characters (code points) only: a cut in a surrogate pair would show a broken one.
    const characters = job.body.length > limit ? Array.from(job.body) : null;
    pre.textContent = characters && characters.length > limit
      ? characters.slice(0, limit).join('') + '…' : job.body;
    noteEl.textContent = '(' + fmtCount(new TextEncoder().encode(job.body).length) + ' bytes, text)';
    return;
  }
  if (job.body_base64 === undefined) {
    pre.textContent = '';
    noteEl.textContent = '';
    return;
  }
  const bytes = Uint8Array.from(atob(job.body_base64), (c) => c.charCodeAt(0));
  const lines = [];
  for (let i = 0; i < Math.min(bytes.length, limit); i += 16) {
    const row = Array.from(bytes.slice(i, i + 16));
    lines.push(i.toString(16).padStart(6, '0') + '  ' +
               row.map((b) => b.toString(16).padStart(2, '0')).join(' ').padEnd(48) + '  ' +
               row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join(''));
  }
  pre.textContent = lines.join('\n') + (bytes.length > limit ? '\n…' : '');
  noteEl.textContent = '(' + fmtCount(bytes.length) + ' bytes, binary: shown in hex)';
}

function jobsPage(params) {
  const root = instantiate('page-jobs');
  const form = root.querySelector('[data-find]');
  const panel = root.querySelector('[data-job]');
  const groupPanel = root.querySelector('[data-group]');
  for (const name of ['id', 'tube', 'key']) form.elements[name].value = params.get(name) || '';
  let job = null;
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const name of ['id', 'tube', 'key']) {
      const value = form.elements[name].value.trim();
      if (value) query.set(name, value);
    }
    location.hash = '#/jobs?' + query.toString();
  });
  // An action names the job shown when it was clicked, by its id: the page refreshes while the
  // dialog is open, and a key looked up may by then name another job.
  const act = (message, run) => runAction(message, undefined, run, refresh);
  const on = (action, handler) => root.querySelector('[data-action="' + action + '"]')
    .addEventListener('click', () => { if (job) handler(job, '/v1/jobs/' + job.id); });
  on('delete', (shown, path) =>
    act('Delete job ' + shown.id + '? It will not run.', () => api(path, { method: 'DELETE' })));
  on('kick', (shown, path) =>
    act('Kick job ' + shown.id + ' (ready at once)?', () => api(path + '/kick', { method: 'POST' })));
  on('bury', (shown, path) =>
    act('Bury job ' + shown.id + '?', () => api(path + '/bury', { method: 'POST', body: {} })));
  on('reschedule', (shown, path) => {
    const when = root.querySelector('[data-when]').value.trim();
    if (!when) return showError(new Error('reschedule: give a delay ("2h") or a time'), true);
    const body = /^\d{4}-/.test(when) ? { at: when } : { delay: when };
    try {
      if (body.delay) checkDelay('reschedule', when);
    } catch (error) {
      return showError(error, true);
    }
    act('Reschedule job ' + shown.id + ' to ' + when + (body.delay ? ' from now' : '') + '?',
        () => api(path, { method: 'PATCH', body }));
  });
  on('cancel-group', (shown) =>
    act('Cancel group ' + shown.group + ' of ' + shown.tube + '? Every job of it not reserved is deleted.',
        () => api('/v1/tubes/' + enc(shown.tube) + '/groups/' + enc(shown.group), { method: 'DELETE' })));

  const refresh = async () => {
    const id = params.get('id'), tube = params.get('tube'), key = params.get('key');
    if (!id && !(tube && key)) return;
    try {
      job = await api(id ? '/v1/jobs/' + enc(id) : '/v1/tubes/' + enc(tube) + '/keys/' + enc(key));
    } catch (error) {
      if (error.status !== 404) throw error;
      panel.hidden = false;
      groupPanel.hidden = true;
      root.querySelector('[data-id]').textContent = id || tube + ' / ' + key;
      root.querySelector('[data-state]').textContent = 'not found';
      facts(root.querySelector('[data-facts]'), [['', 'no such job: deleted, or never put']]);
      panel.querySelectorAll('button').forEach((b) => { b.disabled = true; });
      root.querySelector('[data-body]').textContent = '';
      root.querySelector('[data-body-note]').textContent = '';
      job = null;
      return;
    }
    panel.hidden = false;
    const now = Date.now();
    root.querySelector('[data-id]').textContent = String(job.id);
    root.querySelector('[data-state]').textContent = job.state;
    const rows = [
      ['tube', el('a', { href: '#/tubes/' + enc(job.tube), text: job.tube })],
      ['state', job.state],
      [job.state === 'delayed' ? 'due' : job.state === 'ready' ? 'ready since' : 'was due',
       fmtDue(job.due_unix_ms, now)],
      ['priority', job.priority],
      ['attempts', job.counters.reserves],
      ['TTR', fmtSpan(job.ttr_ms)],
      ['created', fmtTime(Date.parse(job.created))],
      ['delay', fmtSpan(job.delay_ms)],
    ];
    if (job.reserved_until_unix_ms) rows.push(['reserved until', fmtDue(job.reserved_until_unix_ms, now)]);
    if (job.key) rows.push(['key', job.key]);
    if (job.group) rows.push(['group', job.group]);
    if (job.url) rows.push(['webhook URL', job.url]);
    if (job.last_attempt) {
      rows.push(['last attempt', fmtTime(Date.parse(job.last_attempt)) + ' (' +
                 (job.last_status ? 'HTTP ' + job.last_status : 'no answer') + ')']);
      if (job.last_error) rows.push(['last error', job.last_error]);
    }
    const c = job.counters;
    rows.push(['counters', 'reserves ' + c.reserves + ' · timeouts ' + c.timeouts + ' · releases ' +
               c.releases + ' · buries ' + c.buries + ' · kicks ' + c.kicks]);
    facts(root.querySelector('[data-facts]'), rows);
    showBody(job, root.querySelector('[data-body]'), root.querySelector('[data-body-note]'));
    const can = {
      reschedule: job.state === 'delayed' || job.state === 'ready',
      kick: job.state === 'delayed' || job.state === 'buried',
      bury: job.state === 'reserved',
      delete: true,  // a job reserved over HTTP is finished so; the server says when it may not
    };
    for (const [action, allowed] of Object.entries(can)) {
      root.querySelector('[data-action="' + action + '"]').disabled = !allowed;
    }
    groupPanel.hidden = !job.group;
    if (job.group) {
      const group = await api('/v1/tubes/' + enc(job.tube) + '/groups/' + enc(job.group));
      root.querySelector('[data-group-name]').textContent = job.group;
      root.querySelector('[data-group-count]').textContent = '(' + group.jobs.length + ' jobs)';
      groupPanel.querySelector('tbody').replaceChildren(...group.jobs.map((j) => el('tr', {},
        el('td', {}, el('a', { href: '#/jobs?id=' + j.id, text: String(j.id) })),
        el('td', { text: j.state }), el('td', { text: fmtDue(j.due_unix_ms, now) }),
        el('td', { text: j.key || '' }))));
    }
  };
  return refresh;
}

// --- the schedules page ------------------------------------------------------------------------

const SCHEDULES_PER_REQUEST = 1000;  // the most GET /v1/schedules lists at once
const MAX_SCHEDULES = 5000;          // the most this page lists: five requests a refresh

// A schedule's rule: "0 9 * * *" (in its zone), or "every 1h".
function scheduleRule(s) {
  return s.cron !== undefined ? s.cron : 'every ' + s.every;
}

// Why a schedule has no next run.
function noNextRun(s, nowMs) {
  if (s.paused) return '– (paused)';
  if (s.limit !== null && s.runs >= s.limit) {
    return 'none: its limit of ' + fmtCount(s.limit) + ' runs is reached';
  }
  if (s.end_at && s.end_at.unix_ms <= nowMs) return 'none: it ended ' + s.end_at.at;
  return 'none to come';
}

// Every schedule, by name, following the API's pages up to MAX_SCHEDULES. more: some were left.
async function listSchedules() {
  const schedules = [];
  for (let after = null; ;) {
    const page = await api('/v1/schedules?limit=' + SCHEDULES_PER_REQUEST +
                           (after === null ? '' : '&after=' + enc(after)));
    schedules.push(...page.schedules);
    if (!page.more || page.schedules.length === 0) return { schedules, more: false };
    if (schedules.length >= MAX_SCHEDULES) return { schedules, more: true };
    after = page.schedules[page.schedules.length - 1].name;
  }
}

// #/schedules, #/schedules?name=<name>: every schedule with its next and last run and counts, to
// pause, resume and trigger; the one named, with its rules and its next five runs.
function schedulesPage(params) {
  const root = instantiate('page-schedules');
  const table = root.querySelector('[data-schedules]');
  const bar = root.querySelector('[data-list-bar]');
  const filter = root.querySelector('[data-filter]');
  const note = root.querySelector('[data-note]');
  const done = root.querySelector('[data-done]');
  const detail = root.querySelector('[data-detail]');
  const selected = params.get('name');
  const path = (name) => '/v1/schedules/' + enc(name);
  let schedules = [];
  let refresh;
  const act = (message, run) => runAction(message, undefined, run, refresh);
  // The actions name the schedule of their row, and say what the schedule shown when clicked
  // will do (the page refreshes while the dialog is open).
  const toggle = (s) => {
    if (s.paused) {
      return act('Resume schedule ' + s.name + '? The instants missed while it was paused go by ' +
                 'its misfire rule (' + s.misfire + ').',
                 () => api(path(s.name) + '/resume', { method: 'POST' }));
    }
    const ahead = s.overlap === 'allow' && s.next
      ? ': its next run, if already put ahead into tube ' + s.tube + ' (10 s before ' +
        s.next.at + '), is deleted if still delayed' : '';
    return act('Pause schedule ' + s.name + '? No run is put while it is paused' + ahead + '.',
               () => api(path(s.name) + '/pause', { method: 'POST' }));
  };
  const trigger = (s) => act(
    'Trigger schedule ' + s.name + ' now? One job is put into tube ' + s.tube + ', due now' +
    (s.paused ? ', though the schedule is paused' : '') + '.',
    async () => {
      const job = await api(path(s.name) + '/trigger', { method: 'POST' });
      done.hidden = false;
      done.replaceChildren('Triggered ' + s.name + ': job ',
                           el('a', { href: '#/jobs?id=' + job.id, text: String(job.id) }),
                           ' (key ' + job.key + ') in tube ',
                           el('a', { href: '#/tubes/' + enc(job.tube), text: job.tube }), '.');
    });
  // Each schedule's row, kept across refreshes as on the tubes page: a refresh changes the text
  // of the cells whose values changed, and the buttons stay the elements being clicked.
  const rowsByName = new Map();
  const rowOf = (name) => {
    let row = rowsByName.get(name);
    if (row) return row;
    // A cell of two lines: the time as the API gives it, and below it how far from now; or a
    // cron expression, and below it its zone.
    const twoLines = () => {
      const td = el('td', {}, el('span', { class: 'stamp' }), ' ', el('span', { class: 'muted below' }));
      [td.stamp, td.below] = [td.firstChild, td.lastChild];
      return td;
    };
    const parts = {
      tube: el('a', { class: 'word' }), when: twoLines(), next: twoLines(), last: twoLines(),
      runs: el('td', { class: 'num' }), misfires: el('td', { class: 'num' }),
      overlaps: el('td', { class: 'num' }), state: el('span', { class: 'pill' }),
      waiting: el('span', { class: 'muted' }), toggle: el('button'),
      trigger: el('button', { 'data-action': 'trigger', text: 'Trigger' }),
    };
    row = el('tr', { 'data-schedule': name },
             el('td', {}, el('a', { class: 'word', href: '#/schedules?name=' + enc(name), text: name })),
             el('td', {}, parts.tube), parts.when, parts.next, parts.last, parts.runs,
             parts.misfires, parts.overlaps, el('td', {}, parts.state, parts.waiting),
             el('td', {}, el('span', { class: 'row-actions' }, parts.toggle, parts.trigger)));
    parts.toggle.addEventListener('click', () => toggle(row.schedule));
    parts.trigger.addEventListener('click', () => trigger(row.schedule));
    row.parts = parts;
    rowsByName.set(name, row);
    return row;
  };
  const fill = (row, s, now) => {
    const p = row.parts;
    row.schedule = s;
    setText(p.tube, s.tube);
    p.tube.setAttribute('href', '#/tubes/' + enc(s.tube));
    setText(p.when.stamp, scheduleRule(s));
    p.when.stamp.classList.toggle('stamp', s.cron !== undefined);  // "every 1h30m" may wrap
    setText(p.when.below, s.cron !== undefined ? s.tz : '');
    const setRun = (td, run, none) => {
      setText(td.stamp, run ? run.at : none);
      setText(td.below, run ? fromNow(run.unix_ms, now) : '');
    };
    setRun(p.next, s.next, noNextRun(s, now));
    setRun(p.last, s.last_run, 'never');
    setText(p.runs, fmtCount(s.runs));
    setText(p.misfires, fmtCount(s.misfires));
    setText(p.overlaps, fmtCount(s.overlaps_skipped));
    setText(p.state, s.paused ? 'paused' : 'active');
    p.state.className = 'pill ' + (s.paused ? 'warn' : 'ok');
    setText(p.waiting, s.waiting_run ? ' a run waits: ' + s.waiting_run.at : '');
    p.toggle.dataset.action = s.paused ? 'resume' : 'pause';
    setText(p.toggle, s.paused ? 'Resume' : 'Pause');
    row.classList.toggle('selected', s.name === selected);
    return row;
  };
  const draw = () => {
    const wanted = filter.value.trim().toLowerCase();
    const now = Date.now();
    const rows = schedules
      .filter((s) => s.name.toLowerCase().includes(wanted) || s.tube.toLowerCase().includes(wanted))
      .map((s) => fill(rowOf(s.name), s, now));
    const body = table.tBodies[0];
    const shown = body.children;
    if (shown.length !== rows.length || rows.some((row, i) => shown[i] !== row)) {
      body.replaceChildren(...rows);
    }
  };
  filter.addEventListener('input', draw);
  // The schedule named in the address: its rules and next runs.
  const showDetail = async () => {
    detail.hidden = !selected;
    if (!selected) return;
    root.querySelector('[data-detail-name]').textContent = selected;
    const list = root.querySelector('[data-runs]');
    const runsNote = root.querySelector('[data-runs-note]');
    let s = schedules.find((x) => x.name === selected), runs;
    try {
      if (!s) s = await api(path(selected));  // beyond the schedules listed
      runs = (await api(path(selected) + '/next?count=5')).runs;
    } catch (error) {
      if (error.status !== 404) throw error;
      facts(root.querySelector('[data-facts]'), [['', 'no such schedule: deleted, or never set']]);
      list.replaceChildren();
      runsNote.textContent = '';
      return;
    }
    const now = Date.now();
    const rows = [
      ['tube', el('a', { href: '#/tubes/' + enc(s.tube), text: s.tube })],
      ['when', scheduleRule(s)],
      ['time zone', s.tz + (s.cron !== undefined ? '' : ' (only sets the offset of its times)')],
      ['state', s.paused ? 'paused' : 'active'],
      ['start', s.start_at ? s.start_at.at : 'none'],
      ['end', s.end_at ? s.end_at.at : 'none'],
      ['limit', s.limit === null ? 'none'
                                 : fmtCount(s.runs) + ' of ' + fmtCount(s.limit) + ' runs put'],
      ['jitter', s.jitter],
      ['misfire', s.misfire + ' (up to ' + s.max_lateness + ' late)'],
      ['overlap', s.overlap],
    ];
    if (s.waiting_run) rows.push(['waiting run', fmtRun(s.waiting_run, now)]);
    rows.push(['job', 'priority ' + s.priority + ' · TTR ' + s.ttr +
               (s.group ? ' · group ' + s.group : '') + (s.url ? ' · webhook URL ' + s.url : '')]);
    facts(root.querySelector('[data-facts]'), rows);
    runsNote.textContent = '(by its rule alone: ' +
      (s.paused ? 'none runs while it is paused; ' : '') + 'limit and jitter not applied)';
    list.replaceChildren(...(runs.length ? runs.map((run) => el('li', { text: fmtRun(run, now) }))
                                        : [el('li', { text: 'none to come' })]));
  };
  refresh = async () => {
    const listed = await listSchedules();
    schedules = listed.schedules;
    const names = new Set(schedules.map((s) => s.name));
    for (const name of rowsByName.keys()) if (!names.has(name)) rowsByName.delete(name);
    note.textContent = schedules.length === 0
      ? 'no schedule: set one with PUT /v1/schedules/{name} or delayq schedule'
      : fmtCount(schedules.length) + (schedules.length === 1 ? ' schedule' : ' schedules') +
        (listed.more ? ' listed, the first by name: there are more' : '');
    draw();
    await showDetail();
  };
  return refresh;
}

// --- routing and refreshing --------------------------------------------------------------------

let current = null;  // the page's refresh function
let timer = null;

function route() {
  actionFailed = false;
  showError(null);
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  let page = 'overview';
  if (path === '/tubes' || path === '/tubes/') {
    page = 'tubes';
    current = tubesPage();
  } else if (path.startsWith('/tubes/')) {
    page = 'tubes';
    let name = path.slice('/tubes/'.length);
    try {
      name = decodeURIComponent(name);
    } catch (error) {
      // a malformed escape: the name as it is
    }
    current = tubePage(name);
  } else if (path === '/schedules') {
    page = 'schedules';
    current = schedulesPage(params);
  } else if (path === '/jobs') {
    page = 'jobs';
    current = jobsPage(params);
  } else {
    current = overviewPage();
  }
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('current', a.dataset.nav === page));
  tick();
}

// One refresh of the current page, then the next in REFRESH_MS while live and visible. A tick
// that another started since (a new page, "live" ticked, the tab shown) schedules nothing.
let ticks = 0;
async function tick() {
  clearTimeout(timer);
  const mine = ++ticks;
  const page = current;
  try {
    await page();
    if (page === current) showError(null);
  } catch (error) {
    if (page === current) showError(error);
  }
  document.body.dataset.loaded = 'true';
  if (mine === ticks && !document.hidden && document.getElementById('live').checked) {
    timer = setTimeout(tick, REFRESH_MS);
  }
}

window.addEventListener('hashchange', route);
document.getElementById('live').addEventListener('change', tick);
document.addEventListener('visibilitychange', () => {
  if (document.hidden) clearTimeout(timer);
  else tick();
});
// The header's health and version, on pages that do not read /v1/stats themselves.
setInterval(() => {
  if (!document.hidden && document.getElementById('live').checked) {
    api('/v1/stats').then(renderHeader, () => {});
  }
}, 10 * REFRESH_MS);
api('/v1/stats').then(renderHeader, () => {});
route();
