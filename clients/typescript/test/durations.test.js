// durations.test.js — parseDuration reads the server's duration strings exactly as the server
// does (docs/http-api.md "Durations and times"): the same table, the same refusals. No server.

import assert from "node:assert/strict";
import { test } from "node:test";

import { parseDuration } from "delayq";

test("the documented examples, in milliseconds", () => {
  const table = {
    "48h": 172_800_000,
    "1h30m": 5_400_000,
    "1d2h": 93_600_000,
    "90s": 90_000,
    "1.5s": 1500,
    "250ms": 250,
    "250": 250,
    "0": 0,
    "0s": 0,
    "1m30s": 90_000,
    "0ms": 0,
  };
  for (const [text, ms] of Object.entries(table)) assert.equal(parseDuration(text), ms, text);
});

test("fractions are exact, and rounded up to the millisecond", () => {
  assert.equal(parseDuration("0.3s"), 300);
  assert.equal(parseDuration("1.0001s"), 1001);
  assert.equal(parseDuration("0.5ms"), 1);
  assert.equal(parseDuration("1.25h"), 4_500_000);
});

test("the documented refusals", () => {
  for (const text of ["1m2h", "1.5", "1 h", "soon", "", "-5", "m", "1s1s"]) {
    assert.throws(() => parseDuration(text), TypeError, JSON.stringify(text));
  }
});
