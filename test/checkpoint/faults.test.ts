// STATE-01 worker-involving fault cases (docs/spec/checkpoint-store.md), adapted to detsim, over real workers
// on each transport (processes on Unix sockets, worker threads): corrupt payloads, a participant dying
// mid-capture, a participant refusing StageRestore, half activation (fenced),
// token activates once, stale epochs after restore, another compatibility field, capture only at
// a committed boundary, and queue stress (third capture BUSY while the run keeps stepping).
import { canonicalize } from '../../core/formats/canonical-json.js';
import { closeSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup, checkpointIdFor } from '../../coordinator/checkpoint/capture.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { decodeEnvelope, encodeEnvelope } from '../../core/formats/envelope.js';
import { METHODS } from '../../core/protocol/index.js';
import type { Transport } from '../../coordinator/config.js';
import { rejectionOf } from '../refusal.js';
import { LIF, startSession, tmpDir, type Session } from './harness.js';

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => undefined);
});

/** Invert one byte of a file in place (a payload damaged after its producer wrote it). */
function flipByte(path: string, at: number): void {
  const fd = openSync(path, 'r+');
  try {
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, at);
    b[0]! ^= 0xff;
    writeSync(fd, b, 0, 1, at);
  } finally {
    closeSync(fd);
  }
}

/** A lif-pair session on `transport` (worker processes on Unix sockets, or worker threads). */
async function sessionOn(transport: Transport, opts: Parameters<typeof startSession>[1] = {}): Promise<Session> {
  const s = await startSession({ ...LIF(16), transport }, opts);
  open.push(s);
  return s;
}

/** Record every method sent to any worker of the session. */
function spy(s: Session): string[] {
  const sent: string[] = [];
  for (const w of s.fleet.all()) {
    const orig = w.client.call.bind(w.client);
    w.client.call = (method, scope, params, o) => {
      sent.push(`${w.plan.workerId}:${method}`);
      return orig(method, scope, params, o);
    };
  }
  return sent;
}

/** Each worker's current epoch (Worker.Status), by worker id. */
async function epochs(s: Session): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const w of s.fleet.all()) {
    const r = await w.client.call(METHODS.status, null, {}, { deadlineMs: 10_000 });
    out[w.plan.workerId] =
      r.reply.type === 'result'
        ? ((r.reply.result as { currentScope: { epoch: string } | null }).currentScope?.epoch ?? null)
        : 'error';
  }
  return out;
}

/** Step twice and commit a durable checkpoint at boundary 2; returns its bytes. */
async function checkpointAt2(s: Session): Promise<Buffer> {
  await s.group.step();
  await s.group.step();
  const rec = await captureGroup(s.group, { checkpointId: checkpointIdFor('e1', 2) });
  expect((await rec.ticket.wait(30_000)).kind).toBe('Committed');
  return (await s.ck.store.load(rec.checkpointId)).bytes;
}

/** Re-encode an envelope with one payload's bytes replaced by `change` of them (digests agree with the new bytes). */
function withPayload(bytes: Buffer, name: string, change: (b: Buffer) => Buffer): Buffer {
  const d = decodeEnvelope(bytes);
  const { payloads: _drop, ...manifest } = d.manifest;
  return encodeEnvelope(
    manifest,
    d.payloads.map((p) => ({ name: p.name, bytes: p.name === name ? change(Buffer.from(p.bytes)) : p.bytes })),
  );
}

/** One payload's last byte XOR 0xff. */
function corrupt(bytes: Buffer, name: string): Buffer {
  return withPayload(bytes, name, (b) => {
    b[b.length - 1]! ^= 0xff;
    return b;
  });
}

/** One JSON payload replaced by `edit` of it, canonical again. */
function editPayload(bytes: Buffer, name: string, edit: (v: Record<string, any>) => void): Buffer {
  return withPayload(bytes, name, (b) => {
    const v = JSON.parse(b.toString('utf8')) as Record<string, any>;
    edit(v);
    return Buffer.from(canonicalize(v), 'utf8');
  });
}

/** Re-encode with the manifest edited. */
function editManifest(bytes: Buffer, edit: (m: Record<string, any>) => void): Buffer {
  const d = decodeEnvelope(bytes);
  const { payloads: _drop, ...manifest } = structuredClone(d.manifest) as Record<string, any>;
  edit(manifest);
  return encodeEnvelope(
    manifest,
    d.payloads.map((p) => ({ name: p.name, bytes: p.bytes })),
  );
}

const refusal = (p: Promise<unknown>): Promise<CheckpointRefusal> => rejectionOf(p, CheckpointRefusal);

const T = 240_000;

describe.each(['unix', 'thread'] as const)('STATE-01 fault cases over real workers (%s)', (transport) => {
  const session = (opts: Parameters<typeof startSession>[1] = {}) => sessionOn(transport, opts);

  it(
    '[STORE-18] corrupt world or task-ledger: refused before anyone activates, nothing tainted, intact bytes then restore',
    async () => {
      const s = await session();
      const good = await checkpointAt2(s);
      const sent = spy(s);
      // world: the environment is staged first and refuses; nobody was staged.
      const w = await refusal(restoreGroup(s.group, { bytes: corrupt(good, 'world') }, { epoch: 'e2' }));
      expect(w.participant).toBe('environment');
      expect(w.workerCode).toMatch(/INCOMPATIBLE_STATE|INVALID_ARGUMENT/);
      expect(s.group.tainted.size).toBe(0);
      expect(sent.filter((m) => m.endsWith(METHODS.activateRestore))).toEqual([]);
      // task-ledger: a coordinator payload, refused before any participant is staged.
      const before = sent.length;
      const t = await refusal(restoreGroup(s.group, { bytes: corrupt(good, 'task-ledger') }, { epoch: 'e2' }));
      expect(t.reason).toBe('audit_coordinator_payload');
      // A task ledger as an older detsim sealed it (the behaviour chain, not the digest state): refused by name.
      const older = editPayload(good, 'task-ledger', (v) => {
        v.behaviour = { baseEpoch: v.behaviour.baseEpoch, steps: v.behaviour.steps, digest: 'a'.repeat(64) };
      });
      const o = await refusal(restoreGroup(s.group, { bytes: older }, { epoch: 'e2' }));
      expect([o.reason, o.message]).toEqual([
        'struct_legacy_run',
        expect.stringMatching(/^payload task-ledger: records the behaviour chain of an older detsim/),
      ]);
      expect(sent.slice(before).filter((m) => m.includes('State.'))).toEqual([]);
      expect(Object.values(await epochs(s)).every((e) => e === 'e1')).toBe(true);
      // Intact bytes restore on the same workers.
      const rep = await restoreGroup(s.group, { bytes: good }, { epoch: 'e2' });
      expect(rep.boundary).toBe(2n);
      expect(s.group.phase).toBe('paused');
      expect(Object.values(await epochs(s)).every((e) => e === 'e2')).toBe(true);
    },
    T,
  );

  it(
    '[STORE-18] corrupt one agent payload: the group install fails, stagers tainted, nobody runs e2; replaced workers restore the intact bytes',
    async () => {
      const s = await session();
      const good = await checkpointAt2(s);
      const sent = spy(s);
      const e = await refusal(restoreGroup(s.group, { bytes: corrupt(good, 'agent-lif-b') }, { epoch: 'e2' }));
      expect(e.participant).toBe('agent lif-b');
      expect(e.workerCode).toMatch(/INCOMPATIBLE_STATE|INVALID_ARGUMENT/);
      expect(sent.filter((m) => m.endsWith(METHODS.activateRestore))).toEqual([]);
      expect([...s.group.tainted].sort()).toEqual(['agent lif-a', 'environment']);
      expect(Object.values(await epochs(s)).every((x) => x === 'e1')).toBe(true);
      await expect(s.group.step()).rejects.toMatchObject({ status: 'INVALID_PHASE' });
      expect((await refusal(restoreGroup(s.group, { bytes: good }, { epoch: 'e3' }))).status).toBe('INVALID_PHASE');
      // Replace every participant (fresh processes), then the intact bytes restore.
      const fresh = await session({ identities: s.lockstep.identities!, runDir: tmpDir() });
      await restoreGroup(fresh.group, { bytes: good }, { epoch: 'e2' });
      fresh.group.resume();
      expect((await fresh.group.step()).behaviour.scope).toMatchObject({ epoch: 'e2', step: '2' });
    },
    T,
  );

  it(
    '[STORE-18] one participant refuses StageRestore: attributed to it, nobody activates',
    async () => {
      const s = await session();
      const good = await checkpointAt2(s);
      const sent = spy(s);
      const e = await refusal(
        restoreGroup(
          s.group,
          { bytes: good },
          {
            epoch: 'e2',
            hooks: {
              beforeStage: (who, p) => (who === 'agent lif-a' ? { ...p, compatibilityDigest: 'f'.repeat(64) } : p),
            },
          },
        ),
      );
      expect(e.participant).toBe('agent lif-a');
      expect(e.workerCode).toBe('INCOMPATIBLE_STATE');
      expect(e.message).toMatch(/nothing activates/);
      expect(sent.filter((m) => m.endsWith(METHODS.activateRestore))).toEqual([]);
      // Staging runs side by side: every participant is asked, every stager is tainted.
      expect([...s.group.tainted].sort()).toEqual(['agent lif-b', 'environment']);
      expect(Object.values(await epochs(s)).every((x) => x === 'e1')).toBe(true);
    },
    T,
  );

  it(
    '[STORE-19] half activation (second agent fails ActivateRestore): fenced, stepping refused, restore over the tainted refused; replaced, it restores',
    async () => {
      const s = await session();
      const good = await checkpointAt2(s);
      const e = await refusal(
        restoreGroup(
          s.group,
          { bytes: good },
          {
            epoch: 'e2',
            hooks: {
              beforeActivate: (who, p) =>
                who === 'agent lif-b' ? { ...p, restoreToken: 'rt-00000000000000000000000000000000' } : p,
            },
          },
        ),
      );
      expect(e.participant).toBe('agent lif-b');
      expect(e.message).toMatch(/fenced/);
      expect(s.group.phase).toBe('fenced');
      expect([...s.group.tainted].sort()).toEqual(['agent lif-a', 'agent lif-b', 'environment']);
      expect(await epochs(s)).toEqual({ 'worker-env': 'e2', 'worker-0': 'e2', 'worker-1': 'e1' });
      await expect(s.group.step()).rejects.toMatchObject({ status: 'INVALID_PHASE' });
      await expect(captureGroup(s.group, { checkpointId: 'ckpt-x' })).rejects.toMatchObject({
        status: 'INVALID_PHASE',
      });
      expect((await refusal(restoreGroup(s.group, { bytes: good }, { epoch: 'e3' }))).status).toBe('INVALID_PHASE');
      const fresh = await session({ identities: s.lockstep.identities!, runDir: tmpDir() });
      const rep = await restoreGroup(fresh.group, { bytes: good }, { epoch: 'e3' });
      expect(rep.epoch).toBe('e3');
      expect(fresh.group.phase).toBe('paused');
      fresh.group.resume();
      expect((await fresh.group.step()).behaviour.scope).toMatchObject({ epoch: 'e3', step: '2' });
    },
    T,
  );

  it(
    '[LOCK-9, STORE-19] a restore token activates once (CONFLICT); old-epoch Prepare and Advance are STALE_EPOCH; restoring into the current epoch is STALE_EPOCH',
    async () => {
      const s = await session();
      const good = await checkpointAt2(s);
      await s.group.step();
      const rep = await restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2' });
      const env = rep.participants.find((p) => p.agentId === null)!;
      const again = await s.fleet.environment.client.call(
        METHODS.activateRestore,
        { sessionId: 'lif-pair', epoch: 'e2', step: '2' },
        { restoreToken: env.restoreToken, agentId: null },
        { deadlineMs: 10_000 },
      );
      expect(again.reply.type === 'error' && again.reply.error.code).toBe('CONFLICT');
      const old = { sessionId: 'lif-pair', epoch: 'e1', step: '2' };
      const prep = await s.fleet.agents[0]!.client.call(
        METHODS.agentPrepare,
        old,
        { agents: [{ agentId: 'lif-a' }] },
        { deadlineMs: 10_000 },
      );
      expect(prep.reply.type === 'error' && prep.reply.error.code).toBe('STALE_EPOCH');
      const adv = await s.fleet.environment.client.call(
        METHODS.environmentAdvance,
        old,
        { batchId: 'batch-e1-2', actions: [] },
        { deadlineMs: 10_000 },
      );
      expect(adv.reply.type === 'error' && adv.reply.error.code).toBe('STALE_EPOCH');
      expect((await refusal(restoreGroup(s.group, { bytes: good }, { epoch: 'e2' }))).status).toBe('STALE_EPOCH');
      // Paused(2) until resumed explicitly; capture works from Paused and returns to Paused.
      await expect(s.group.step()).rejects.toMatchObject({ status: 'INVALID_PHASE' });
      const c = await captureGroup(s.group, { checkpointId: 'ckpt-e2-2' });
      expect((await c.ticket.wait(30_000)).kind).toBe('Committed');
      expect(s.group.phase).toBe('paused');
      s.group.resume();
      expect((await s.group.step()).behaviour.scope).toMatchObject({ epoch: 'e2', step: '2' });
    },
    T,
  );

  it(
    '[STORE-17] another compatibility field (edited parserDigest) or another seed: refused naming it, nothing staged',
    async () => {
      const s = await session();
      const good = await checkpointAt2(s);
      const sent = spy(s);
      const p = await refusal(
        restoreGroup(
          s.group,
          { bytes: editManifest(good, (m) => (m.compatibility.parserDigest = 'a'.repeat(64))) },
          { epoch: 'e2' },
        ),
      );
      expect(p.reason).toBe('ident_compatibility_mismatch');
      expect(p.message).toMatch(/compatibility parser differs/);
      expect(p.field).toBe('compatibility.parserDigest');
      const seed = await refusal(
        restoreGroup(s.group, { bytes: editManifest(good, (m) => (m.agents[1].seed = 12345)) }, { epoch: 'e2' }),
      );
      expect(seed.reason).toBe('ident_seed_mismatch');
      expect(seed.message).toMatch(/agent lif-b seed 12345/);
      expect(sent.filter((m) => m.includes('State.'))).toEqual([]);
      expect(s.group.tainted.size).toBe(0);
    },
    T,
  );

  it(
    '[LOCK-2, STORE-13] capture only at a committed boundary: before initialization INVALID_PHASE',
    async () => {
      const s = await session();
      const bare = await session({ identities: s.lockstep.identities!, runDir: tmpDir() });
      const sent = spy(bare);
      const e = await refusal(captureGroup(bare.group, { checkpointId: 'ckpt-e1-0' }));
      expect(e.status).toBe('INVALID_PHASE');
      expect(sent).toEqual([]);
      expect(bare.ck.writer.stats().outstanding).toBe(0);
    },
    T,
  );

  it(
    '[STORE-18] from the store, TypeScript workers read their payloads from the verified file (no attachment); a file changed after verification is refused by the stager, nobody activates',
    async () => {
      const s = await session();
      await checkpointAt2(s);
      const sent: { method: string; file: unknown; attachment: boolean }[] = [];
      for (const w of s.fleet.all()) {
        const orig = w.client.call.bind(w.client);
        w.client.call = (method, scope, params, o) => {
          if (method === METHODS.stageRestore)
            sent.push({
              method,
              file: (params as { payload: { file?: unknown } }).payload.file,
              attachment: o?.attachment !== undefined,
            });
          return orig(method, scope, params, o);
        };
      }
      const record = s.ck.store.highWater()!;
      const path = join(s.ck.store.dir, record.file);
      const report = await restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2' });
      expect(report.participants.map((p) => p.participant)).toEqual(['environment', 'agent lif-a', 'agent lif-b']);
      expect(sent).toHaveLength(3);
      for (const m of sent) expect(m).toMatchObject({ attachment: false, file: { path: resolve(path) } });
      s.group.resume();
      await s.group.step();

      // Between the coordinator's verification and lif-b's stage, lif-b's payload bytes change on disk.
      const entry = decodeEnvelope(readFileSync(path)).layout.entries.find((e) => e.name === 'agent-lif-b')!;
      const e = await refusal(
        restoreGroup(
          s.group,
          { store: s.ck.store },
          {
            epoch: 'e3',
            hooks: {
              beforeStage: (who, p) => {
                if (who === 'agent lif-b') flipByte(path, entry.offset + entry.byteLength - 1);
                return p;
              },
            },
          },
        ),
      );
      expect(e.participant).toBe('agent lif-b');
      expect(e.workerCode).toBe('BUFFER_INVALID');
      expect(e.message).toMatch(/the payload digest check failed for payload agent-lif-b/);
      expect(e.message).toMatch(/nothing activates/);
      expect(Object.values(await epochs(s)).every((x) => x === 'e2')).toBe(true);
    },
    T,
  );

  it(
    "[STORE-5, STORE-14] a payload damaged after its participant hashed it: capture returns and stepping goes on (hashing is the writer's), the save fails naming it, the last commit stays",
    async () => {
      const s = await session();
      await checkpointAt2(s);
      const victim = s.fleet.agents[0]!;
      const agentId = victim.plan.agentIds[0]!;
      const orig = victim.client.call.bind(victim.client);
      let damaged = 0;
      victim.client.call = async (method, scope, params, o) => {
        const rep = await orig(method, scope, params, o);
        // Streamed: damaged in transit. Co-located (store-files-v1): damaged in the file after the write.
        if (method === METHODS.capture && rep.attachment) rep.attachment[0]! ^= 0xff;
        if (method === METHODS.writePayload && rep.reply.type === 'result') {
          const { path, offset } = (params as { file: { path: string; offset: string } }).file;
          flipByte(path, Number(offset));
        } else if (method !== METHODS.capture || !rep.attachment) return rep;
        damaged++;
        return rep;
      };
      await s.group.step();
      const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-3' });
      const t = await s.group.step();
      expect(t.behaviour.scope.step).toBe('3');
      const outcome = await rec.ticket.wait(30_000);
      expect(damaged).toBe(1);
      expect(outcome).toMatchObject({ kind: 'Failed', reason: 'seal_failed' });
      expect(outcome.kind === 'Failed' && outcome.message).toContain(`payload "agent-${agentId}": its bytes hash to`);
      expect(s.ck.store.highWater()?.checkpointId).toBe('ckpt-e1-2');
      expect((await s.ck.store.verify()).ok).toBe(true);
      expect((await s.ck.store.scan()).temporaries).toEqual([]);
    },
    T,
  );

  it(
    '[STORE-14] a participant that dies while the group captures: the capture fails naming it and how it died, nothing is submitted, the last commit stays intact',
    async () => {
      const s = await session();
      await checkpointAt2(s);
      await s.group.step();
      // lif-b's worker dies just as its State.Capture goes out (the environment and lif-a replied).
      const victim = s.fleet.agents[1]!;
      const orig = victim.client.call.bind(victim.client);
      victim.client.call = async (method, scope, params, o) => {
        if (method === METHODS.capture) {
          victim.instance.kill();
          await victim.instance.exited;
        }
        return orig(method, scope, params, o);
      };
      const e = await refusal(captureGroup(s.group, { checkpointId: 'ckpt-e1-3' }));
      expect(e.status).toBe('FAILED');
      expect(e.participant).toBe('agent lif-b');
      expect(e.message).toMatch(
        transport === 'thread'
          ? /^agent lif-b \(worker-1\): State\.Capture failed: thread \d+ exited \(terminated by the coordinator\)/
          : /^agent lif-b \(worker-1\): State\.Capture failed: process \d+ exited \(signal SIGKILL\)/,
      );
      // Never durable: not captured, not committed; the writer holds nothing; the store is as it was.
      const ledger = readFileSync(join(s.runDir, 'ledger.jsonl'), 'utf8');
      expect(ledger).not.toContain('ckpt-e1-3');
      expect(s.ck.writer.stats().outstanding).toBe(0);
      expect(s.ck.store.generations().map((g) => g.checkpointId)).toEqual(['ckpt-e1-2']);
      expect(s.ck.store.highWater()?.checkpointId).toBe('ckpt-e1-2');
      expect((await s.ck.store.verify()).ok).toBe(true);
    },
    T,
  );

  it(
    '[STORE-9] queue stress: with the writer stalled the third capture is BUSY before anyone is asked, the run keeps stepping, bounds hold, both commit later',
    async () => {
      const s = await session();
      const release = s.ck.writer.testHooks.stall();
      await s.group.step();
      const c1 = await captureGroup(s.group, { checkpointId: 'ckpt-e1-1' });
      await s.group.step();
      const c2 = await captureGroup(s.group, { checkpointId: 'ckpt-e1-2' });
      await s.group.step();
      const sent = spy(s);
      const busy = await refusal(captureGroup(s.group, { checkpointId: 'ckpt-e1-3' }));
      expect(busy.status).toBe('BUSY');
      expect(busy.mutation).toBe('none');
      expect(sent).toEqual([]);
      const t = await s.group.step();
      expect(t.behaviour.scope.step).toBe('3');
      const stats = s.ck.writer.stats();
      expect(stats.peak_queue).toBeLessThanOrEqual(2);
      expect(stats.peak_bytes).toBeLessThanOrEqual(64 * 1024 * 1024);
      expect(stats.rejected).toBe(1);
      release();
      expect((await c1.ticket.wait(30_000)).kind).toBe('Committed');
      expect((await c2.ticket.wait(30_000)).kind).toBe('Committed');
      expect(s.ck.store.generations().map((g) => g.checkpointId)).toEqual(['ckpt-e1-1', 'ckpt-e1-2']);
    },
    T,
  );
});
