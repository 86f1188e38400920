// package.test.js — the package as npm and TypeScript see it: package.json's promises (ESM,
// exports, types, Node >= 18, no dependency but an optional @opentelemetry/api, devDependencies
// pinned as package-lock.json has them), every exported name present at run time and
// declared in dist/index.d.ts, and, where tsc is installed (Debian's node-typescript), dist/
// being exactly what src/ compiles to and a program using every method type-checking.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import * as delayq from "delayq";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));

const kRuntimeExports = [
  "BadRequestError", "Client", "ConflictError", "DelayqError", "DrainingError", "ForbiddenError",
  "HeadersTooLargeError", "InternalError", "LimitError", "MethodNotAllowedError", "NoRouteError",
  "NoSpaceError", "NotFoundError", "ServiceUnavailableError", "StartingError", "StoppingError",
  "TooLargeError", "TransportError", "UnauthorizedError", "UnavailableError", "UnexpectedResponseError",
  "UnsupportedError", "WebhookSignatureError", "errorFor", "kErrorsByCode", "parseDuration",
  "retryDelayMs", "signPayload", "signatureProblem", "verifyNodeRequest", "verifyRequest",
  "verifySignature", "version", "webhookListener", "webhookMiddleware",
];

const kTypeExports = [
  "Backoff", "Backup", "Body", "ClientOptions", "DelayqErrorOptions", "DueBucket", "DueCounts",
  "DueCountsOptions", "Duration", "FetchFunction", "FireLateness", "FlowOptions", "FlowSettings",
  "HeadersLike", "Job", "JobCounters", "JobList", "JobState", "JobsOptions", "ListJobsOptions",
  "ListSchedulesOptions", "NextRunsOptions", "NodeRequestLike", "NodeResponseLike", "PreviewOptions",
  "PutJob", "PutOptions", "ReceiverOptions", "ReleaseOptions", "RescheduleOptions", "ReserveOptions", "Schedule",
  "ScheduleOptions", "SchedulePage", "ScheduleRun", "Secret", "Stats", "TraceOptions", "Tubes", "TubeStats",
  "VerifyOptions", "Webhook", "WebhookBackoff", "WebhookDelivery", "WebhookOptions", "WhenOptions",
  "WorkContext", "WorkHandler", "WorkOptions", "WorkStats",
];

function which(program) {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    try {
      execFileSync(join(dir, program), ["--version"], { stdio: "ignore" });
      return join(dir, program);
    } catch {
      // not here
    }
  }
  return undefined;
}

const tsc = which("tsc");
const noTsc = tsc === undefined && "tsc is not installed (Debian's node-typescript): nothing to compile with";

test("package.json: ESM only, exports with types, Node >= 18, no dependency, version 0.1.0", () => {
  assert.equal(manifest.name, "delayq");
  assert.equal(manifest.version, "0.1.0");
  assert.equal(manifest.type, "module");
  assert.equal(manifest.types, "./dist/index.d.ts");
  assert.deepEqual(manifest.exports["."], { types: "./dist/index.d.ts", default: "./dist/index.js" });
  assert.equal(manifest.engines.node, ">=18");
  assert.equal(manifest.dependencies, undefined);
  assert.equal(manifest.optionalDependencies, undefined);
  assert.equal(delayq.version, manifest.version);
});

test("@opentelemetry/api is an optional peer, imported only at run time (tracing.ts)", () => {
  assert.deepEqual(Object.keys(manifest.peerDependencies), ["@opentelemetry/api"]);
  assert.deepEqual(manifest.peerDependenciesMeta, { "@opentelemetry/api": { optional: true } });
  for (const file of readdirSync(join(packageDir, "dist")).filter((f) => f.endsWith(".js"))) {
    const code = readFileSync(join(packageDir, "dist", file), "utf8");
    assert.doesNotMatch(code, /^\s*import\b[^;(]*["']@opentelemetry\//m, `${file} imports no OpenTelemetry statically`);
  }
});

test("devDependencies are pinned, and package-lock.json has them so", () => {
  const lock = JSON.parse(readFileSync(join(packageDir, "package-lock.json"), "utf8"));
  assert.equal(lock.name, manifest.name);
  assert.deepEqual(lock.packages[""].devDependencies, manifest.devDependencies);
  assert.deepEqual(lock.packages[""].peerDependencies, manifest.peerDependencies);
  for (const [name, version] of Object.entries(manifest.devDependencies)) {
    assert.match(version, /^\d+\.\d+\.\d+$/, `${name} pinned to one version`);
    assert.equal(lock.packages[`node_modules/${name}`]?.version, version, `${name} locked at ${version}`);
  }
});

test("every runtime export is there, and nothing else", () => {
  assert.deepEqual(Object.keys(delayq).sort(), [...kRuntimeExports].sort());
  for (const name of kRuntimeExports) assert.notEqual(delayq[name], undefined, name);
  for (const [name, value] of Object.entries(delayq)) {
    if (name.endsWith("Error") && name !== "errorFor") {
      assert.ok(value === delayq.DelayqError || value.prototype instanceof delayq.DelayqError, `${name} extends DelayqError`);
    }
  }
});

test("dist/index.d.ts declares every export, values and types", () => {
  const declarations = readFileSync(join(packageDir, "dist", "index.d.ts"), "utf8");
  for (const name of [...kRuntimeExports, ...kTypeExports]) {
    assert.match(declarations, new RegExp(`\\b${name}\\b`), name);
  }
  for (const file of readdirSync(join(packageDir, "dist")).filter((f) => f.endsWith(".d.ts"))) {
    const code = readFileSync(join(packageDir, "dist", file), "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
    assert.doesNotMatch(code, /node:|\bNodeBuffer\b|\bBuffer\b|\bNodeJS\b/, `${file} names no Node.js type`);
  }
});

test("dist/ is what src/ compiles to", { skip: noTsc }, () => {
  const out = mkdtempSync(join(tmpdir(), "delayq-ts-build-"));
  try {
    execFileSync(tsc, ["-p", packageDir, "--outDir", out], { stdio: "pipe" });
    const built = readdirSync(out).sort();
    assert.deepEqual(readdirSync(join(packageDir, "dist")).sort(), built);
    for (const file of built) {
      assert.equal(readFileSync(join(packageDir, "dist", file), "utf8"), readFileSync(join(out, file), "utf8"), file);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test("a program using every method type-checks against the declarations", { skip: noTsc }, () => {
  const dir = mkdtempSync(join(tmpdir(), "delayq-ts-types-"));
  try {
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022", lib: ["ES2022", "DOM", "DOM.Iterable"], module: "Node16", moduleResolution: "Node16",
        strict: true, noEmit: true, types: [],
        // The package, by its name, as a project that installed it would resolve it.
        baseUrl: ".", paths: { delayq: [join(packageDir, "dist", "index.d.ts")] },
      },
      files: [join(packageDir, "test-support", "consumer.ts")],
    }));
    writeFileSync(join(dir, "package.json"), '{"type": "module"}');
    try {
      execFileSync(tsc, ["-p", dir], { stdio: "pipe" });
    } catch (error) {
      assert.fail(`tsc found errors:\n${error.stdout}${error.stderr}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
