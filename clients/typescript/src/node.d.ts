// node.d.ts — the few Node.js APIs the client uses, declared here so that it builds with
// TypeScript alone (no @types/node). Internal: the published declarations never name them.

declare module "node:crypto" {
  interface Hmac {
    update(data: string | Uint8Array): Hmac;
    digest(): Uint8Array;
    digest(encoding: "hex" | "base64"): string;
  }
  export function createHmac(algorithm: "sha256", key: string | Uint8Array): Hmac;
  export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}

interface NodeBuffer extends Uint8Array {
  toString(encoding?: "utf8" | "base64" | "hex" | "latin1"): string;
}

declare const Buffer: {
  from(data: string, encoding?: "utf8" | "base64" | "hex" | "latin1"): NodeBuffer;
  from(data: Uint8Array | ArrayBuffer): NodeBuffer;
  concat(chunks: readonly Uint8Array[], totalLength?: number): NodeBuffer;
  isBuffer(value: unknown): value is NodeBuffer;
};
