// readme.test.js — every ```js block of README.md runs, as written, against a real delayqd:
// each is saved as a module in a scratch directory whose node_modules/delayq is this package,
// with the server's address (and the receiver's port) put in place of the README's, and run
// with node. A block that serves (listen) or works (work, jobs) is fed jobs and stopped with
// SIGTERM once it has done them; the others must exit 0. Each block's effect is then checked.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client, NotFoundError } from "delayq";
import { startServer, waitFor } from "../test-support/server.js";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const blocks = [...readFileSync(join(packageDir, "README.md"), "utf8").matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);

let server;
let client;
let scratch;

before(async () => {
  server = await startServer();
  client = new Client({ baseUrl: server.baseUrl });
  scratch = mkdtempSync(join(tmpdir(), "delayq-ts-readme-"));
  mkdirSync(join(scratch, "node_modules"));
  symlinkSync(packageDir, join(scratch, "node_modules", "delayq"), "dir");
});

after(async () => {
  await server?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

async function freePort() {
  const probe = net.createServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

// Starts block `n` as a module; resolves to {child, output(), exited}.
function run(n, code) {
  const file = join(scratch, `example-${n}.mjs`);
  writeFileSync(file, code.replaceAll("http://127.0.0.1:8080", server.baseUrl));
  const child = spawn(process.execPath, [file], {
    cwd: scratch,
    env: { ...process.env, WEBHOOK_SECRET: "whsec-readme" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  exited.then(() => clearTimeout(timer));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

test("README.md has the examples: put, reschedule by key, workers, a webhook receiver", () => {
  assert.ok(blocks.length >= 5, `found ${blocks.length} js blocks`);
  assert.ok(blocks.some((b) => b.includes("client.put(")));
  assert.ok(blocks.some((b) => b.includes("client.rescheduleKey(")));
  assert.ok(blocks.some((b) => b.includes("client.work(")));
  assert.ok(blocks.some((b) => b.includes("client.jobs(")));
  assert.ok(blocks.some((b) => b.includes("webhookListener(")));
});

blocks.forEach((block, n) => {
  const kind = block.includes(".listen(") ? "receiver" : /client\.(work|jobs)\(/.test(block) ? "worker" : "script";
  test(`README example ${n + 1} (${kind}) runs`, { timeout: 60_000 }, async () => {
    if (kind === "script") {
      const { exited, output } = run(n, block);
      const { code } = await exited;
      assert.equal(code, 0, output().stderr);
      assert.notEqual(output().stdout, "", "it printed what it did");
      assert.equal(output().stderr, "");
      await checkScript(block, output().stdout);
    } else if (kind === "worker") {
      await runWorker(n, block);
    } else {
      await runReceiver(n, block);
    }
  });
});

// What the put and reschedule examples left behind.
async function checkScript(block, stdout) {
  const job = await client.getKey("emails", "welcome:42");
  assert.equal(job.state, "delayed");
  assert.deepEqual(JSON.parse(job.body), { user: 42 });
  assert.match(stdout, new RegExp(`job ${job.id} `));
  if (block.includes("rescheduleKey")) {
    assert.equal(job.priority, 100);
    assert.equal(job.delayMs, 600_000);
  }
}

async function runWorker(n, block) {
  const users = [101 + 10 * n, 102 + 10 * n];
  const ids = [];
  for (const user of users) ids.push((await client.put("emails", JSON.stringify({ user }))).id);
  const { child, exited, output } = run(n, block);
  for (const id of ids) {
    await waitFor(() => client.getJob(id).then(() => false, (e) => e instanceof NotFoundError), {
      timeoutMs: 20_000,
      what: `job ${id} done by the worker`,
    });
  }
  child.kill("SIGTERM");
  const { code } = await exited;
  assert.equal(code, 0, output().stderr);
  for (const user of users) assert.match(output().stdout, new RegExp(`mailing user ${user}`));
  if (block.includes("stats.handled")) assert.match(output().stdout, /stopped after 2 jobs/);
  assert.equal((await client.getKey("emails", "welcome:42")).state, "delayed", "delayed jobs are left alone");
}

async function runReceiver(n, block) {
  const port = await freePort();
  assert.ok(block.includes("9000"));
  const { child, exited, output } = run(n, block.replaceAll("9000", String(port)));
  try {
    const webhook = await waitFor(() => client.getWebhook("orders").catch(() => false), {
      timeoutMs: 20_000,
      what: "the example's webhook",
    });
    assert.equal(webhook.url, `http://127.0.0.1:${port}/hook`);
    assert.equal(webhook.secrets, 1);
    const job = await client.put("orders", JSON.stringify({ order: 123 }));
    await waitFor(() => output().stdout.includes(`job ${job.id}, attempt 1:`), { timeoutMs: 20_000, what: "the delivery" });
    assert.match(output().stdout, /order: 123/);
    await waitFor(() => client.getJob(job.id).then(() => false, (e) => e instanceof NotFoundError), {
      what: "the delivered job's delete",
    });
    assert.equal(output().stderr, "");
  } finally {
    await client.removeWebhook("orders").catch(() => {});
    child.kill("SIGTERM");
    await exited;
  }
}
