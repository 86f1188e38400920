/** A duration: a whole number of milliseconds, or the server's string ("10m", "1h30m", "250ms"). */
export declare type Duration = number | string;
/**
 * Milliseconds in a duration written as the server writes it: "48h", "1h30m", "1.5s", "250ms",
 * or digits alone (milliseconds). Fractions are rounded up to the millisecond, as the server
 * does. Throws a TypeError for anything else.
 */
export declare function parseDuration(text: string): number;
/** A duration as a request field: an integer of milliseconds, or the string as given. */
export declare function encodeDuration(value: Duration, name: string): number | string;
/** Milliseconds in a duration given by the caller (number or string). */
export declare function durationMs(value: Duration, name: string): number;
/** A time as a request field: Unix milliseconds. */
export declare function encodeTime(value: Date, name: string): number;
