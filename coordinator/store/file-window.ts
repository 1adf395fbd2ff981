// Reading a range of an open file through one small reused window: each window is read
// synchronously and handed to the caller while it is still in the CPU cache, and every YIELD_BYTES
// the event loop gets a turn (worker replies, timers, the step loop). Why not large asynchronous
// reads: on a VM with low memory bandwidth, copying 1-4 MiB chunks out of the page cache costs more
// than the SHA-256 over them (24 MB: ≈ 19 ms through a 4 MiB buffer, ≈ 5 ms through 128 KiB; see
// bench/README.md, "A cache-sized verify window"), and each asynchronous read is a thread-pool round
// trip. Used by the verify pass (generation-reader.ts) and the file seal (file-seal.ts, which on the
// sealing thread reads without yielding: eachWindowSync).
// NOT hashing, NOT any check: callers decide what a short file means.
import { readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

/** Bytes per read: small enough to stay in a core's L2 cache while it is hashed. */
export const WINDOW_BYTES = 128 * 1024;
/** Bytes read and handed on between two turns of the event loop (about a millisecond of work). */
export const YIELD_BYTES = 1024 * 1024;

/**
 * Hand [start, end) of the file to `use` window by window (`use` must copy what it keeps: the
 * window is reused), letting the event loop run every YIELD_BYTES. Returns where the bytes
 * stopped: `end`, or less when the file ended first.
 */
export async function eachWindow(
  fh: FileHandle,
  start: number,
  end: number,
  use: (window: Buffer, at: number) => void,
  windowBytes = WINDOW_BYTES,
): Promise<number> {
  const window = takeWindow(Math.max(1, Math.min(windowBytes, end - start)));
  let at = start;
  try {
    for (;;) {
      const next = readWindows(fh.fd, window, at, Math.min(end, at + YIELD_BYTES), use);
      const ended = next < Math.min(end, at + YIELD_BYTES);
      at = next;
      if (ended || at >= end) return at;
      await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    if (window.length === WINDOW_BYTES) spare = window;
  }
}

/** eachWindow without turns of the event loop: for a thread whose loop nothing else shares. */
export function eachWindowSync(
  fd: number,
  start: number,
  end: number,
  use: (window: Buffer, at: number) => void,
  windowBytes = WINDOW_BYTES,
): number {
  return readWindows(fd, Buffer.allocUnsafe(Math.max(1, Math.min(windowBytes, end - start))), start, end, use);
}

/** Read [at, end) through `window`, handing each filled window to `use`; where the bytes stopped. */
function readWindows(
  fd: number,
  window: Buffer,
  at: number,
  end: number,
  use: (window: Buffer, at: number) => void,
): number {
  while (at < end) {
    const want = Math.min(window.length, end - at);
    const filled = fill(fd, window.subarray(0, want), at);
    if (filled.length > 0) use(filled, at);
    at += filled.length;
    if (filled.length < want) break; // the file ended
  }
  return at;
}

/** Fill `out` from `position` as far as the file goes: the part of `out` that was read. */
function fill(fd: number, out: Buffer, position: number): Buffer {
  let got = 0;
  while (got < out.length) {
    const n = readSync(fd, out, got, out.length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return out.subarray(0, got);
}

/**
 * A window kept for the next pass (one, of the default size): memory already touched instead of
 * fresh pages every pass. Two passes at once each get a window of their own.
 */
let spare: Buffer | null = null;

function takeWindow(size: number): Buffer {
  if (spare !== null && spare.length === size) {
    const w = spare;
    spare = null;
    return w;
  }
  return Buffer.allocUnsafe(size);
}
