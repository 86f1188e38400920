// server.js — a real delayqd for the tests: started on free loopback ports with a fresh data
// directory (or, with DELAYQ_TEST_REDIS_SEEDS_FILE set, over that Redis Cluster under a prefix
// of its own), its ports read from its stdout, and stopped by its PID.
//   DELAYQ_DELAYQD               the delayqd binary (required)
//   DELAYQ_TEST_REDIS_SEEDS_FILE a file whose first line is a Redis Cluster's seeds (optional)
// Lives outside test/ so that `node --test test/` does not take it for a test file.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

let started = 0;

/** Whether the servers of this run keep their jobs in Redis. */
export const redisMode = Boolean(process.env.DELAYQ_TEST_REDIS_SEEDS_FILE);

/** Why a test is skipped in Redis mode (docs/redis-mode.md "What differs from a single delayqd"). */
export const kRedisSkips = {
  listJobs: redisMode && "Redis mode cannot list a tube's jobs (GET /v1/tubes/{tube}/jobs answers 501 unsupported)",
  dueCounts: redisMode && "Redis mode keeps no counts by due time (GET /v1/due answers 501 unsupported)",
  backup: redisMode && "Redis mode has no data directory to back up (POST /v1/admin/backup answers 501 unsupported)",
};

/**
 * Starts delayqd. `args`: more flags. Resolves to {baseUrl, httpPort, beanstalkPort, pid,
 * redis, dataDir, stop(), kill(signal)}.
 */
export async function startServer({ args = [], local = false } = {}) {
  const binary = process.env.DELAYQ_DELAYQD;
  if (!binary) throw new Error("set DELAYQ_DELAYQD to the path of delayqd");
  const dir = mkdtempSync(join(tmpdir(), "delayq-ts-"));
  const n = started++;
  const redis = redisMode && !local;
  const store = redis
    ? ["--redis", readFileSync(process.env.DELAYQ_TEST_REDIS_SEEDS_FILE, "utf8").split("\n")[0].trim(),
       "--redis-prefix", n === 0 ? `ts-${process.pid}` : `ts-${process.pid}-${n}`]
    : ["-b", join(dir, "db")];
  const child = spawn(binary, ["-p", "0", "--http", "127.0.0.1:0", ...store, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const ports = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`delayqd did not start within 30 s:\n${stderr}`)), 30_000);
    child.stdout.setEncoding("utf8").on("data", (chunk) => {
      stdout += chunk;
      const beanstalk = /^delayqd listening on .*:(\d+)$/m.exec(stdout);
      const http = /^delayqd http listening on .*:(\d+)$/m.exec(stdout);
      if (beanstalk && http) {
        clearTimeout(timer);
        resolve({ beanstalkPort: Number(beanstalk[1]), httpPort: Number(http[1]) });
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`delayqd exited (${code ?? signal}) before listening:\n${stderr}`));
    });
  });
  let stopped;
  return {
    ...ports,
    baseUrl: `http://127.0.0.1:${ports.httpPort}`,
    pid: child.pid,
    redis,
    dataDir: dir,
    get stderr() {
      return stderr;
    },
    exited,
    /** Sends `signal` to this server's PID. */
    kill(signal) {
      process.kill(child.pid, signal);
    },
    /** Stops the server (SIGTERM, then SIGKILL after 10 s) and removes its directory. */
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
          await exited;
          clearTimeout(timer);
        }
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/** Polls `check` until it returns a truthy value (resolved to), or throws after `timeoutMs`. */
export async function waitFor(check, { timeoutMs = 10_000, intervalMs = 50, what = "a condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A minimal beanstalkd-protocol connection: send(line) resolves to the reply's first line. */
export async function beanstalk(port) {
  const socket = net.connect(port, "127.0.0.1");
  await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.setEncoding("utf8");
  let buffer = "";
  const waiting = [];
  socket.on("data", (chunk) => {
    buffer += chunk;
    // A reply is a line, and for RESERVED, FOUND and OK a body of the length it names.
    for (;;) {
      const at = buffer.indexOf("\r\n");
      if (waiting.length === 0 || at < 0) return;
      const line = buffer.slice(0, at);
      const bytes = /^(?:RESERVED|FOUND) \d+ (\d+)$|^OK (\d+)$/.exec(line);
      const length = bytes ? Number(bytes[1] ?? bytes[2]) + 2 : 0;
      if (buffer.length < at + 2 + length) return;
      buffer = buffer.slice(at + 2 + length);
      waiting.shift()(line);
    }
  });
  return {
    send(line) {
      return new Promise((resolve) => {
        waiting.push(resolve);
        socket.write(`${line}\r\n`);
      });
    },
    close() {
      socket.destroy();
    },
  };
}
