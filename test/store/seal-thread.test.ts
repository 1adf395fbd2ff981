// Sealing on the writer's thread (store/seal-thread.ts): a large draft sealed there gives the same
// bytes and digest as sealing at once (its large buffers moved there and back, not copied), a lying
// payload digest gives the same refusal, and the event loop keeps turning meanwhile. Small drafts
// stay on the main thread. An envelope already in its temp file, sealed on the sealing thread or by
// two threads side by side (prefix + footer, payload checks), gives the loop's bytes, digest and refusals.
import { mkdtempSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../core/formats/canonical-json.js';
import { layoutEnvelope, layoutEnvelopeHead, sealEnvelope } from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import { sealWrittenFile, type DeclaredRange } from '../../coordinator/store/file-seal.js';
import { sealFileOffLoop, sealOffLoop, THREAD_SEAL_MIN_BYTES } from '../../coordinator/store/seal-thread.js';
import { makeCheckpoint } from './helpers.js';

function draftOf(payloadBytes: number, reported: Record<string, string> = {}) {
  const c = makeCheckpoint('ckpt-t', 1, { payloadBytes });
  return {
    c,
    draft: layoutEnvelope(
      c.manifest,
      c.payloads.map((p) => ({ ...p, digest: reported[p.name] ?? sha256Hex(p.bytes) })),
    ),
  };
}

describe('sealOffLoop', () => {
  it('a large draft sealed on the thread: the same parts and digest as sealing at once, and the event loop turns meanwhile', async () => {
    const { c, draft } = draftOf(2 * THREAD_SEAL_MIN_BYTES);
    const expected = Buffer.concat(c.encoded.parts);
    const big = draft.body.find((b) => b.byteLength >= THREAD_SEAL_MIN_BYTES)!;
    let turns = 0;
    let running = true;
    const tick = (): void => {
      if (!running) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    const sealing = sealOffLoop(draft);
    // The large payload moved to the thread (no copy): this side's view is detached meanwhile.
    expect(big.byteLength).toBe(0);
    const sealed = await sealing;
    running = false;
    expect(sealed.envelopeDigest).toBe(c.encoded.envelopeDigest);
    expect(Buffer.concat(sealed.parts).equals(expected)).toBe(true);
    expect(turns).toBeGreaterThanOrEqual(10);
  });

  it('a lying payload digest: the thread refuses it exactly as sealing here would', async () => {
    const lie = sha256Hex('lie');
    const { draft } = draftOf(THREAD_SEAL_MIN_BYTES + 1, { 'agent-fly-a': lie });
    const here = (() => {
      try {
        sealEnvelope(draft);
      } catch (e) {
        return e as DetsimError;
      }
      throw new Error('sealed a lie');
    })();
    const there = await sealOffLoop(draft).then(
      () => null,
      (e: unknown) => e,
    );
    expect(there).toBeInstanceOf(DetsimError);
    expect([(there as DetsimError).reason, (there as DetsimError).message, (there as DetsimError).field]).toEqual([
      here.reason,
      here.message,
      here.field,
    ]);
  });

  it("imported in some other worker thread, the module leaves that thread's messages alone", async () => {
    const url = new URL('../../coordinator/store/seal-thread.ts', import.meta.url).href;
    const code = `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((t) => { t.register(); return import(${JSON.stringify(url)}); }).then(() => {
      const { parentPort } = require('node:worker_threads');
      parentPort.on('message', (m) => parentPort.postMessage({ echo: m }));
      parentPort.postMessage('ready');
    });`;
    const w = new Worker(code, { eval: true });
    const got: unknown[] = [];
    await new Promise<void>((resolve) => w.once('message', () => resolve()));
    w.on('message', (m) => got.push(m));
    w.postMessage({ id: 0, draft: { body: [], declared: [] } });
    await new Promise((r) => setTimeout(r, 500));
    await w.terminate();
    // Only the thread's own handler answered: no seal reply for a message shaped like a seal job.
    expect(got).toEqual([{ echo: { id: 0, draft: { body: [], declared: [] } } }]);
  });

  it('a small draft is sealed on the main thread with the same result', async () => {
    const { c, draft } = draftOf(1024);
    expect((await sealOffLoop(draft)).envelopeDigest).toBe(c.encoded.envelopeDigest);
  });
});

/**
 * The checkpoint's envelope written into a temp file as co-located capture leaves it (head and
 * payloads, no footer), with the digests its producers reported (`reported` overrides one).
 */
function writtenFile(payloadBytes: number, reported: Record<string, string> = {}) {
  const c = makeCheckpoint('ckpt-f', 1, { payloadBytes });
  const inputs = c.payloads.map((p) => ({
    name: p.name,
    byteLength: p.bytes.byteLength,
    digest: reported[p.name] ?? sha256Hex(p.bytes),
  }));
  const { head, layout } = layoutEnvelopeHead(c.manifest, inputs);
  const file = Buffer.alloc(layout.footerOffset);
  head.copy(file, 0);
  layout.entries.forEach((e, i) => file.set(c.payloads[i]!.bytes, e.offset));
  const path = join(mkdtempSync(join(tmpdir(), 'detsim-seal-')), 'tmp-ckpt-f.flysess');
  writeFileSync(path, file);
  const declared: DeclaredRange[] = [...layout.entries];
  return { c, path, layout, declared, file };
}

async function refusal(p: Promise<unknown>): Promise<[string, string, string | undefined]> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(DetsimError);
  return [(e as DetsimError).reason, (e as DetsimError).message, (e as DetsimError).field];
}

/** The two ways a large file is sealed off the loop: one pass on the sealing thread, or two threads side by side. */
const ways = [
  ['one pass on the sealing thread', {}],
  ['prefix and checks on two threads', { parallelCheckMinBytes: THREAD_SEAL_MIN_BYTES }],
] as const;

describe.each(ways)('sealFileOffLoop (%s)', (_, options) => {
  it('a large written envelope: the streamed bytes and digest, footer written', async () => {
    const { c, path, layout, declared } = writtenFile(2 * THREAD_SEAL_MIN_BYTES);
    expect(layout.footerOffset).toBeGreaterThanOrEqual(THREAD_SEAL_MIN_BYTES);
    const sealed = await sealFileOffLoop(path, layout, declared, options);
    expect(sealed.envelopeDigest).toBe(c.encoded.envelopeDigest);
    expect(readFileSync(path).equals(Buffer.concat(c.encoded.parts))).toBe(true);
  });

  it('lying digests and a short file: the same refusal as the one-pass seal on the loop, the first payload in file order', async () => {
    const lie = sha256Hex('lie');
    // Two payloads lie; the one-pass seal names the first in file order, and so must the threads.
    const both = { 'agent-fly-a': lie, 'task-ledger': lie };
    const a = writtenFile(THREAD_SEAL_MIN_BYTES + 1, both);
    const b = writtenFile(THREAD_SEAL_MIN_BYTES + 1, both);
    const here = await refusal(sealWrittenFile(a.path, a.layout, a.declared));
    expect(here[0]).toBe('audit_payload_digest_mismatch');
    expect(here[1]).toContain('"agent-fly-a"');
    expect(await refusal(sealFileOffLoop(b.path, b.layout, b.declared, options))).toEqual(here);
    // A file cut short: its payload hashes differ too, but the length is what both name first.
    const c = writtenFile(THREAD_SEAL_MIN_BYTES + 1);
    const d = writtenFile(THREAD_SEAL_MIN_BYTES + 1);
    for (const f of [c, d]) truncateSync(f.path, f.layout.footerOffset - 100);
    const shortHere = await refusal(sealWrittenFile(c.path, c.layout, c.declared));
    expect(shortHere[0]).toBe('audit_envelope_length');
    expect(await refusal(sealFileOffLoop(d.path, d.layout, d.declared, options))).toEqual(shortHere);
  });
});
