// consumer.ts — a program written against the published declarations (dist/*.d.ts), as a user
// of the package would write it. test/package.test.js type-checks it with tsc (never runs it):
// a declaration that is missing, or typed wrongly, fails the check.

import {
  Client,
  ConflictError,
  DelayqError,
  NotFoundError,
  parseDuration,
  retryDelayMs,
  signatureProblem,
  signPayload,
  verifyRequest,
  verifySignature,
  version,
  webhookListener,
  webhookMiddleware,
} from "delayq";
import type {
  Backup,
  DueCounts,
  FlowSettings,
  Job,
  JobList,
  PutJob,
  Schedule,
  SchedulePage,
  Stats,
  TubeStats,
  Webhook,
  WebhookDelivery,
  WorkStats,
} from "delayq";

export async function everyMethod(client: Client): Promise<void> {
  const job: Job = await client.put("emails", "hi", { delay: "10m", priority: 5, key: "k", group: "g", replace: true });
  const bytes: Job = await client.put("emails", new Uint8Array([1, 2]), { at: new Date(), ttr: 30_000, contentType: "a/b" });
  const debounced: boolean = (await client.put("emails", "x", { key: "k", debounce: "1m", maxWait: 600_000 })).debounced;
  const batch: PutJob[] = [{ tube: "emails", body: "a", delay: "1h", key: "k" }, { tube: "sms" }];
  const answers: (Job | DelayqError)[] = await client.putMany(batch, { traceparent: undefined });
  const firstId: number | undefined = answers[0] instanceof DelayqError ? undefined : answers[0]?.id;
  const id: number = job.id + bytes.id;
  const due: Date = job.due;
  const text: string | undefined = job.body;
  const raw: Uint8Array | undefined = job.bytes;
  void [due, text, raw, firstId];
  await client.getJob(id);
  await client.reschedule(id, { at: new Date(), priority: 1 });
  await client.deleteJob(id);
  await client.getKey("t", "k");
  await client.rescheduleKey("t", "k", { delay: 0 });
  await client.deleteKey("t", "k");
  const group: Job[] = await client.listGroup("t", "g");
  const cancelled: number = await client.cancelGroup("t", "g");
  const reserved: Job | null = await client.reserve(["a", "b"], { timeout: "20s", signal: new AbortController().signal });
  if (reserved !== null) {
    await client.release(reserved.id, { delay: 1000, priority: 3 });
    await client.bury(reserved.id, { priority: 3 });
    await client.touch(reserved.id);
    await client.kickJob(reserved.id);
  }
  for await (const each of client.jobs("emails", { signal: new AbortController().signal, waitMs: 5000 })) {
    await client.deleteJob(each.id);
  }
  const stats: WorkStats = await client.work("emails", async (each: Job, context) => {
    if (context.signal.aborted) return;
    await context.touch();
    void each;
  }, { concurrency: 2, backoff: { minMs: 100 }, drainTimeoutMs: 10, onError: (error: unknown, failed?: Job) => void [error, failed] });
  const tubes: TubeStats[] = await client.listTubes();
  const tube: TubeStats = await client.tubeStats("t");
  const list: JobList = await client.listJobs("t", { state: "delayed", limit: 5 });
  const counts: DueCounts = await client.dueCounts(null, { edges: ["1h", 60_000] });
  await client.dueCounts("t", { edges: [new Date()] });
  const limit: number = await client.setMaxAttempts("t", 3);
  const flow: FlowSettings = await client.setFlow("t", { groupConcurrency: null, fair: true, groupRate: "10/s", groupBurst: 2 });
  const flowRate: string | null = flow.groupRate;
  const weighted: Record<string, number> = (await client.setFlow("t", { groupWeights: { gold: 3, old: null } })).groupWeights;
  const tubeWeights: Record<string, number> = tube.groupWeights;
  const held: number = tube.groupsHeld + tube.groupsReady + tube.groupConcurrency;
  const kicked: number = await client.kick("t", 10);
  const pauseMs: number = await client.pauseTube("t", "1m");
  const webhook: Webhook = await client.setWebhook("t", "http://h/", { secrets: ["a", "b"], backoff: { min: "1s", factor: 1.5 }, rate: 2 });
  await client.getWebhook("t");
  await client.removeWebhook("t");
  const schedule: Schedule = await client.setSchedule("n", "t", { cron: "@daily", tz: "UTC", misfire: "all", overlap: "buffer_one" });
  await client.getSchedule("n");
  const page: SchedulePage = await client.listSchedules({ after: "a", limit: 10 });
  for await (const each of client.schedules({ pageSize: 10 })) void each.name;
  await client.removeSchedule("n");
  await client.pauseSchedule("n");
  await client.resumeSchedule("n");
  const run: Job = await client.triggerSchedule("n");
  const backfilled: Job[] = await client.backfillSchedule("n", new Date(0), new Date());
  const next: Date[] = await client.nextRuns("n", { count: 3, after: new Date() });
  const preview: Date[] = await client.previewSchedule("t", { every: "1h", count: 2 });
  const server: Stats = await client.stats();
  const health: string = await client.health();
  const ready: string = await client.ready();
  const metrics: string = await client.metrics();
  const backup: Backup = await client.backup("/tmp/x");
  const anything: unknown = await client.request("GET", "/v1/stats", { query: { a: 1 } });
  void [debounced, flowRate, weighted, tubeWeights, held];
  void [group, cancelled, stats, tubes, tube, list, counts, limit, kicked, pauseMs, webhook, schedule, page, run,
    backfilled, next, preview, server, health, ready, metrics, backup, anything];
}

export function errors(error: unknown): string {
  if (error instanceof NotFoundError || error instanceof ConflictError) return error.code;
  if (error instanceof DelayqError) return `${error.status} ${error.code} ${error.message} ${error.retryAfterMs ?? ""}`;
  return String(error);
}

export async function receivers(request: Request): Promise<Response> {
  const ok: boolean = verifySignature({ secrets: ["a", "b"], headers: request.headers, body: "x", now: new Date(), toleranceMs: 1000 });
  const why: string | null = signatureProblem({ secrets: "a", headers: "t=1,v1=00", body: new Uint8Array() });
  const header: string = signPayload({ secrets: "a", body: "x" });
  const listener = webhookListener({ secrets: "a" }, (delivery: WebhookDelivery) => void delivery.json());
  const middleware = webhookMiddleware({ secrets: ["a"], toleranceMs: 1000, maxBodyBytes: 10 });
  void [ok, why, header, listener, middleware, version, parseDuration("1h"), retryDelayMs(1, { minMs: 1, maxMs: 2, factor: 2 })];
  const result = await verifyRequest(request, { secrets: "a" });
  if (result instanceof Response) return result;
  return new Response(`${result.jobId} ${result.text()}`);
}
