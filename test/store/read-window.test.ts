// The verify pass of a generation (coordinator/store/generation-reader.ts) reads in bounded
// windows whatever the payload size (#29 item 6): with every read the process makes spied on
// (node:fs readSync, which the window reader uses, and the handle's own reads), the largest single
// read while verifying an envelope with a 1 MiB payload and one with a 32 MiB payload is the same
// and at most one window, or the small head. A control shows the spy sees a larger window.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  DEFAULT_READ_CHUNK_BYTES,
  verifyEnvelopeFile,
  type ReadEnvelopeOptions,
} from '../../coordinator/store/generation-reader.js';
import { encodeEnvelope } from '../../core/formats/envelope.js';
import { MINIMAL_MANIFEST } from '../formats/envelope-raw.js';

const reads = vi.hoisted(() => ({ largest: 0 }));
vi.mock('node:fs', async (original) => {
  const fs = await original<typeof import('node:fs')>();
  const readSync = ((fd: number, buffer: NodeJS.ArrayBufferView, ...rest: unknown[]) => {
    const asked =
      typeof rest[1] === 'number'
        ? rest[1]
        : ((rest[0] as { length?: number } | undefined)?.length ?? buffer.byteLength);
    reads.largest = Math.max(reads.largest, asked);
    return (fs.readSync as (...a: unknown[]) => number)(fd, buffer, ...rest);
  }) as typeof fs.readSync;
  return { ...fs, readSync, default: { ...fs, readSync } };
});

const dir = mkdtempSync(join(tmpdir(), 'detsim-read-window-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The handle's own reads (the head, the footer), as the requested length. */
function spied(fh: FileHandle): FileHandle {
  return new Proxy(fh, {
    get(target, key) {
      const v = Reflect.get(target, key) as unknown;
      if (typeof v !== 'function') return v;
      if (key !== 'read') return v.bind(target);
      return (...args: unknown[]) => {
        const a0 = args[0] as Buffer;
        reads.largest = Math.max(reads.largest, (args[2] as number | undefined) ?? a0.length);
        return (v as (...x: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** The largest single read while verifying an envelope whose one payload is `size` bytes. */
async function largestRead(size: number, options: ReadEnvelopeOptions = {}): Promise<number> {
  const path = join(dir, `big-${size}.flysess`);
  writeFileSync(path, encodeEnvelope(MINIMAL_MANIFEST, [{ name: 'p', bytes: Buffer.alloc(size, 7) }]));
  const fh = await open(path, 'r');
  reads.largest = 0;
  try {
    await verifyEnvelopeFile(spied(fh), (await fh.stat()).size, options);
  } finally {
    await fh.close();
  }
  return reads.largest;
}

describe('the verify pass reads in windows whatever the payload size', () => {
  it('a 1 MiB and a 32 MiB payload: the same largest read, at most one window or the small head', async () => {
    const small = await largestRead(1024 * 1024);
    const large = await largestRead(32 * 1024 * 1024);
    expect(large).toBe(small);
    expect(large).toBeLessThanOrEqual(Math.max(DEFAULT_READ_CHUNK_BYTES, 64 * 1024));
    // A control: the spy sees what the reader asks for (a reader with a 512 KiB window is caught).
    expect(await largestRead(32 * 1024 * 1024, { chunkBytes: 512 * 1024 })).toBe(512 * 1024);
  });
});
