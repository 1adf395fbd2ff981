// Restore with the prefetch of store-files-v1 over real worker processes: co-located workers
// (TypeScript, Rust, Python) read and hash their own payload range while the coordinator verifies
// the generation, and the restored group steps exactly as the streamed path's (workers without the
// capability) and as an uninterrupted run, for a TypeScript-only and two mixed fleets; a damaged
// payload (footer resealed so that check 5 is the one to fail) is refused with the same reason and
// message on both paths, before anyone is staged.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import type { RunPlan } from '../../coordinator/config.js';
import { decodeEnvelope } from '../../core/formats/envelope.js';
import { CAPABILITIES, METHODS } from '../../core/protocol/index.js';
import { prepareRuntimesFor } from '../cross-lang/example-runtimes.js';
import { reseal } from '../formats/envelope-raw.js';
import { LIF, planOf, startSession, type Session } from './harness.js';

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/**
 * Record every State.PrefetchPayload reply (`matched`, or null for a release) and every StageRestore
 * (and those that named a range of the store file instead of sending the payload).
 */
function watch(s: Session): { prefetched: (boolean | null)[]; staged: number; fromFile: number } {
  const seen = { prefetched: [] as (boolean | null)[], staged: 0, fromFile: 0 };
  for (const w of s.fleet.all()) {
    const orig = w.client.call.bind(w.client);
    w.client.call = async (method, scope, params, o) => {
      const rep = await orig(method, scope, params, o);
      if (method === METHODS.stageRestore) seen.staged++;
      if (method === METHODS.stageRestore && 'file' in (params as { payload: object }).payload) seen.fromFile++;
      if (method === METHODS.prefetchPayload && rep.reply.type === 'result')
        seen.prefetched.push(
          (params as { payload: unknown }).payload === null ? null : (rep.reply.result as { matched: boolean }).matched,
        );
      return rep;
    };
  }
  return seen;
}

/** Take store-files-v1 away from every worker (as for workers on another node): the coordinator then streams. */
function withoutStoreFiles(s: Session): void {
  for (const w of s.fleet.all())
    w.hello = { ...w.hello, capabilities: w.hello.capabilities.filter((c) => c !== CAPABILITIES.storeFiles) };
}

/**
 * A session stepped to 2 and checkpointed there, with the behaviour of steps 3 and 4 uninterrupted.
 * `noStore`: its workers are started without --store-dir, as a hand-started worker may be.
 */
async function checkpointed(plan: RunPlan, noStore = false): Promise<{ s: Session; after: unknown[] }> {
  const s = await startSession(plan, noStore ? { streamed: true } : {});
  open.push(s);
  for (let i = 0; i < 2; i++) await s.group.step();
  const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-2' });
  expect(await rec.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
  const after = [];
  for (let i = 0; i < 2; i++) after.push(behaviourOf(await s.group.step()));
  return { s, after };
}

function behaviourOf(step: { behaviour: { agents: unknown; worldDigest: unknown; controlDigest: unknown } }) {
  const { agents, worldDigest, controlDigest } = step.behaviour;
  return { agents, worldDigest, controlDigest };
}

/** Restore ckpt-e1-2 into `epoch` and step twice: the behaviour of those steps. */
async function restoredSteps(s: Session, epoch: string): Promise<unknown[]> {
  await restoreGroup(s.group, { store: s.ck.store, checkpointId: 'ckpt-e1-2' }, { epoch });
  s.group.resume();
  const out = [];
  for (let i = 0; i < 2; i++) out.push(behaviourOf(await s.group.step()));
  return out;
}

async function bothPathsAgree(plan: RunPlan): Promise<Session> {
  const { s, after } = await checkpointed(plan);
  // Every worker of these fleets is co-located and given the store: all of them offer it.
  const offering = s.fleet.all().filter((w) => w.hello.capabilities.includes(CAPABILITIES.storeFiles));
  expect(offering).toHaveLength(s.fleet.all().length);
  const seen = watch(s);
  expect(await restoredSteps(s, 'e2')).toEqual(after);
  // Each offering worker confirmed its range while the coordinator verified (its stage used it up).
  const hosted = offering.reduce((n, w) => n + Math.max(1, w.plan.agentIds.length), 0);
  expect(seen.prefetched.filter((m) => m === true)).toHaveLength(hosted);
  expect(seen.prefetched.filter((m) => m === false)).toHaveLength(0);
  expect({ staged: seen.staged, fromFile: seen.fromFile }).toEqual({ staged: hosted, fromFile: hosted });
  withoutStoreFiles(s);
  const before = { ...seen, prefetched: seen.prefetched.length };
  expect(await restoredSteps(s, 'e3')).toEqual(after);
  expect(seen.prefetched).toHaveLength(before.prefetched);
  // Every payload staged again, each sent as an attachment.
  expect({ staged: seen.staged - before.staged, fromFile: seen.fromFile - before.fromFile }).toEqual({
    staged: hosted,
    fromFile: 0,
  });
  return s;
}

describe('restore with the prefetch of store-files-v1', () => {
  it('TypeScript workers: the same restored behaviour as the streamed path and an uninterrupted run', async () => {
    await bothPathsAgree(LIF(4096));
  }, 180_000);

  for (const config of ['examples/mixed-walkers.yaml', 'examples/mixed-python.yaml']) {
    it(`a mixed fleet (${config}: every runtime prefetches its own range): the same`, async (ctx) => {
      const skip = prepareRuntimesFor(config);
      if (skip) return ctx.skip(skip);
      const s = await bothPathsAgree(planOf(config));
      const runtimes = new Set(s.fleet.all().map((w) => w.hello.runtime));
      expect(runtimes.size).toBeGreaterThan(1);
    }, 240_000);
  }

  it('workers without a store (started without --store-dir, e.g. by hand) offer no payload files and are sent their payloads as attachments: the group restores', async (ctx) => {
    const config = 'examples/mixed-python.yaml';
    const skip = prepareRuntimesFor(config);
    if (skip) return ctx.skip(skip);
    const { s, after } = await checkpointed(planOf(config), true);
    for (const w of s.fleet.all()) expect(w.hello.capabilities).not.toContain(CAPABILITIES.storeFiles);
    const seen = watch(s);
    expect(await restoredSteps(s, 'e2')).toEqual(after);
    expect(seen.prefetched).toEqual([]);
    expect({ staged: seen.staged, fromFile: seen.fromFile }).toEqual({ staged: 7, fromFile: 0 }); // each from an attachment
  }, 240_000);

  it('[STORE-16] a damaged payload behind a resealed footer: the same check-5 refusal on both paths, nobody staged', async () => {
    const { s } = await checkpointed(LIF(4096));
    const path = join(s.ck.store.dir, s.ck.store.highWater()!.file);
    const bytes = readFileSync(path);
    const entry = decodeEnvelope(bytes).layout.entries.find((e) => e.name === 'agent-lif-b')!;
    bytes[entry.offset + (entry.byteLength >> 1)]! ^= 0xff;
    writeFileSync(path, reseal(bytes));
    const seen = watch(s);
    const refused = async (epoch: string): Promise<CheckpointRefusal> => {
      const e = await restoreGroup(s.group, { store: s.ck.store }, { epoch }).then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(CheckpointRefusal);
      return e as CheckpointRefusal;
    };
    const prefetched = await refused('e2');
    expect(seen.prefetched).toContain(false); // lif-b's worker did not confirm its range
    withoutStoreFiles(s);
    const streamed = await refused('e3');
    expect(prefetched.reason).toBe('audit_payload_digest_mismatch');
    expect(prefetched.message).toMatch(/check 5 \(payload entry\): entry \d+ "agent-lif-b"/);
    expect({ reason: streamed.reason, message: streamed.message, field: streamed.field }).toEqual({
      reason: prefetched.reason,
      message: prefetched.message,
      field: prefetched.field,
    });
    expect(seen.staged).toBe(0);
    expect(s.group.tainted.size).toBe(0);
  }, 180_000);
});
