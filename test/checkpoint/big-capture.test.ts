// Big states at CI size (issue 16): the capture/commit path of bench/big-state.ts (ballast agents,
// bench/models/ballast.ts) with its thresholds lowered so that MBs run every branch a > 4 GiB
// state runs: streamed payloads past the in-memory budget spill to disk and are copied into the
// envelope file, the seal reads many small chunks, payload sizes that are not multiples of 8 pad.
// Real worker processes, real files; the envelope is checked against the reference writer byte for
// byte and restored. The 64-bit table and footer fields are checked on a layout of > 4 GiB sizes
// (no bytes: the layout reads none). The big case itself is `bench/big-state.ts --total 5GiB`.
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup, type CaptureOptions } from '../../coordinator/checkpoint/capture.js';
import { storeDirOf } from '../../coordinator/checkpoint/checkpointing.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import type { RunPlan } from '../../coordinator/config.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { METHODS } from '../../core/protocol/index.js';
import {
  FOOTER_BYTES,
  TABLE_ENTRY_BYTES,
  align8,
  decodeEnvelope,
  encodeEnvelope,
  envelopeFooter,
  layoutEnvelopeHead,
} from '../../core/formats/envelope.js';
import { planOf, startSession, type Session } from './harness.js';

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

const MiB = 1024 * 1024;
/** Three ballast agents of a few MB, sizes not multiples of 8, in one worker process (spawns cost most here). */
const BALLAST = (sizes = [3 * MiB + 5, 2 * MiB + 3, MiB + 1]): RunPlan =>
  planOf('examples/lif-pair.yaml', (c) => {
    const model = resolve('bench/models/ballast.ts');
    c.agents = sizes.map((bytes, i) => ({ id: `ballast-${i}`, model, params: { bytes }, actionFields: ['move'] }));
    c.workers.agentsPerWorker = sizes.length;
  });

/** Start a session, step twice, capture and wait until durable; the committed file. */
async function committed(
  plan: RunPlan,
  opts: { streamed?: boolean; hooks?: CaptureOptions['fileHooks'] } = {},
): Promise<{ s: Session; file: Buffer }> {
  const s = await startSession(plan, opts.streamed ? { streamed: true } : {});
  open.push(s);
  for (let i = 0; i < 2; i++) await s.group.step();
  const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-2', fileHooks: opts.hooks ?? {} });
  expect(await rec.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
  expect((await s.ck.store.scan()).temporaries).toEqual([]); // no temp, no spill file left
  return { s, file: readFileSync(join(storeDirOf(s.runDir), 'ckpt-e1-2.flysess')) };
}

describe('big states at CI size', () => {
  it('streamed payloads past the in-memory budget spill to disk: the coordinator keeps at most the budget, and the envelope is the reference writer’s bytes and the co-located path’s, and restores', async () => {
    const plan = BALLAST();
    const budget = 2 * MiB;
    let kept = 0;
    let calls = 0;
    const onKept = (bytes: number): void => {
      kept = Math.max(kept, bytes);
      calls++;
    };
    const spilled = await committed(plan, {
      streamed: true,
      hooks: { spillAboveBytes: budget, onKept, chunkBytes: 64 * 1024 },
    });
    const local = await committed(plan, { hooks: { chunkBytes: 64 * 1024 } });
    // Every streamed payload (environment + three agents) passed the budget check, and the kept
    // bytes never exceeded it although the payloads add up to three times as much.
    expect(calls).toBe(4);
    expect(kept).toBeLessThanOrEqual(budget);
    const decoded = decodeEnvelope(spilled.file); // the seven checks of the reference reader
    const agentBytes = decoded.layout.entries.filter((e) => e.name.startsWith('agent'));
    expect(agentBytes.reduce((n, e) => n + e.byteLength, 0)).toBeGreaterThan(3 * budget);
    expect(agentBytes.some((e) => e.byteLength % 8 !== 0)).toBe(true);
    // The reference writer, given the decoded manifest and payloads, writes the same bytes.
    const { payloads: _payloads, ...manifest } = decoded.manifest;
    const reference = encodeEnvelope(
      manifest,
      decoded.payloads.map((p) => ({ name: p.name, bytes: p.bytes })),
    );
    expect(spilled.file.equals(reference)).toBe(true);
    expect(spilled.file.equals(local.file)).toBe(true);
    // The same generation restores and decides like the run that kept going (restored on the
    // co-located fleet, whose workers read their payload ranges from the store file: store-files-v1).
    const s = local.s;
    const next = [];
    for (let i = 0; i < 2; i++) next.push((await s.group.step()).behaviour);
    await restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2' });
    s.group.resume();
    for (const want of next) {
      const again = (await s.group.step()).behaviour;
      expect(again.agents).toEqual(want.agents);
      expect(again.worldDigest).toBe(want.worldDigest);
    }
  }, 180_000);

  it('a capture refused after payloads spilled removes the spill file; the next capture commits', async () => {
    const s = await startSession(BALLAST(), { streamed: true });
    open.push(s);
    await s.group.step();
    // The last agent's capture fails in transport: refused after both agents before it spilled.
    const restore: (() => void)[] = [];
    for (const w of s.fleet.all()) {
      const orig = w.client.call;
      restore.push(() => (w.client.call = orig));
      const call = orig.bind(w.client);
      w.client.call = (method, scope, params, o) => {
        if (method === METHODS.capture && (params as { agentId?: unknown }).agentId === 'ballast-2')
          return Promise.reject(new Error('the link dropped'));
        return call(method, scope, params, o);
      };
    }
    let kept = 0;
    const hooks = { spillAboveBytes: MiB, onKept: (n: number) => void (kept = n) };
    const e = await captureGroup(s.group, { checkpointId: 'ckpt-x', fileHooks: hooks }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CheckpointRefusal);
    expect((e as CheckpointRefusal).reason).toBe('audit_participant_refused');
    expect((e as CheckpointRefusal).message).toContain('ballast-2');
    expect(kept).toBeLessThan(MiB); // the environment's payload only: both agents before ballast-2 spilled
    expect(readdirSync(storeDirOf(s.runDir)).filter((n) => n.startsWith('tmp-'))).toEqual([]);
    for (const r of restore) r();
    const rec = await captureGroup(s.group, { checkpointId: 'ckpt-y', fileHooks: hooks });
    expect(await rec.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
    expect((await s.ck.store.verify()).ok).toBe(true);
  }, 120_000);

  it('lays out a state above 4 GiB with a payload above 2 GiB: 64-bit offsets and lengths in the table and the footer', () => {
    const GiB = 2 ** 30;
    const sizes = [2.5 * GiB + 3, 2 * GiB + 1, 7];
    const digest = 'ab'.repeat(32);
    const reference = JSON.parse(readFileSync('fixtures/reference/checkpoint-envelope.json', 'utf8'));
    const { payloads: _p, ...manifest } = reference.manifest;
    const head = layoutEnvelopeHead(
      manifest,
      sizes.map((byteLength, i) => ({ name: `big-${i}`, byteLength, digest })),
    );
    const { entries, footerOffset, totalBytes, tableOffset } = head.layout;
    let end = tableOffset + TABLE_ENTRY_BYTES * sizes.length;
    entries.forEach((e, i) => {
      expect(e.offset).toBe(align8(end));
      const at = tableOffset + i * TABLE_ENTRY_BYTES;
      expect(head.head.readBigUInt64LE(at + 64)).toBe(BigInt(e.offset));
      expect(head.head.readBigUInt64LE(at + 72)).toBe(BigInt(sizes[i]!));
      end = e.offset + e.byteLength;
    });
    expect(entries[2]!.offset).toBeGreaterThan(2 ** 32);
    expect(totalBytes).toBe(footerOffset + FOOTER_BYTES);
    expect(envelopeFooter(totalBytes, Buffer.alloc(32)).readBigUInt64LE(0)).toBe(BigInt(totalBytes));
  });
});
