// times.ts — durations and times as the HTTP API writes them, both ways.
// A duration is given as a number of milliseconds or as the server's own string ("1h30m",
// "250ms", "1.5s"), and read back from the server's strings as milliseconds. A time is given
// as a Date and sent as Unix milliseconds. Pure functions; docs/http-api.md "Durations and
// times" has the grammar.

/** A duration: a whole number of milliseconds, or the server's string ("10m", "1h30m", "250ms"). */
export type Duration = number | string;

const kUnitMs: Record<string, bigint> = {
  d: 86_400_000n,
  h: 3_600_000n,
  m: 60_000n,
  s: 1_000n,
  ms: 1n,
};

// <number><unit> parts, each unit at most once and largest first; `m` is not the start of `ms`.
const kDurationPattern =
  /^(?=\d)(?:(\d+(?:\.\d*)?)d)?(?:(\d+(?:\.\d*)?)h)?(?:(\d+(?:\.\d*)?)m(?!s))?(?:(\d+(?:\.\d*)?)s)?(?:(\d+(?:\.\d*)?)ms)?$/;

/**
 * Milliseconds in a duration written as the server writes it: "48h", "1h30m", "1.5s", "250ms",
 * or digits alone (milliseconds). Fractions are rounded up to the millisecond, as the server
 * does. Throws a TypeError for anything else.
 */
export function parseDuration(text: string): number {
  if (/^\d+$/.test(text)) return checkedMs(BigInt(text), text);
  const match = kDurationPattern.exec(text);
  if (match === null) throw new TypeError(`not a duration: ${JSON.stringify(text)}`);
  const units = ["d", "h", "m", "s", "ms"];
  // Exact decimal arithmetic: 0.3s is 300 ms, not 300.00000000000006 rounded up to 301.
  let numerator = 0n;
  let denominator = 1n;
  units.forEach((unit, i) => {
    const part = match[i + 1];
    if (part === undefined) return;
    const [whole, fraction = ""] = part.split(".");
    const scale = 10n ** BigInt(fraction.length);
    const value = (BigInt(whole ?? "0") * scale + BigInt(fraction || "0")) * (kUnitMs[unit] ?? 0n);
    // numerator/denominator += value/scale, over the larger of the two powers of ten.
    if (scale > denominator) {
      numerator = numerator * (scale / denominator) + value;
      denominator = scale;
    } else {
      numerator += value * (denominator / scale);
    }
  });
  return checkedMs((numerator + denominator - 1n) / denominator, text);
}

function checkedMs(ms: bigint, text: string): number {
  if (ms > BigInt(Number.MAX_SAFE_INTEGER)) throw new TypeError(`duration too long: ${text}`);
  return Number(ms);
}

/** A duration as a request field: an integer of milliseconds, or the string as given. */
export function encodeDuration(value: Duration, name: string): number | string {
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new TypeError(`${name}: a duration in milliseconds is a whole number >= 0, not ${value}`);
    }
    return value;
  }
  if (typeof value === "string" && value !== "") return value;
  throw new TypeError(`${name}: a duration is milliseconds (number) or a string such as "10m"`);
}

/** Milliseconds in a duration given by the caller (number or string). */
export function durationMs(value: Duration, name: string): number {
  const encoded = encodeDuration(value, name);
  return typeof encoded === "number" ? encoded : parseDuration(encoded);
}

/** A time as a request field: Unix milliseconds. */
export function encodeTime(value: Date, name: string): number {
  if (!(value instanceof Date)) throw new TypeError(`${name}: a time is a Date`);
  const ms = value.getTime();
  if (!Number.isFinite(ms)) throw new TypeError(`${name}: an invalid Date`);
  return ms;
}
