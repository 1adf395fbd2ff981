// capture-file-v1 on a real TypeScript worker process: offered only with --store-dir; a held
// Capture replies with size and digest and no attachment (a replay too); State.WritePayload writes
// exactly the held bytes at the given offset of a checkpoint temp file in the store, and refuses
// any other file, an unknown capture, malformed params, and a worker without a store. capture-file-v2:
// a Capture held with hashAtWrite replies with the size only, and WritePayload replies with the
// SHA-256 of what it wrote (across many write slices), which is the streamed capture's digest; a
// state-changing call between the two refuses the write.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS, type CaptureResult } from '../../core/protocol/index.js';
import { STEP_60HZ, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

const OBS = { x: 1, y: 2, foodDx: -3, foodDy: 1, score: 0 };
const AGENTS = [
  { agentId: 'a-walk', model: 'walker', params: { explore: 3 }, seed: 4242, stepDuration: STEP_60HZ, observation: OBS },
];

async function boot(id: string, storeDir?: string) {
  const w = await spawnWorker('agent', id, storeDir ? ['--store-dir', storeDir] : []);
  resultOf(await w.client.callUnchecked(METHODS.agentInitialize, scope(0), { agents: AGENTS }));
  return w;
}

describe('capture-file-v1 (TypeScript worker)', () => {
  it('offered only with --store-dir; hold without a store is UNSUPPORTED', async () => {
    const bare = await boot('w-cf-bare');
    expect(bare.client.identity!.capabilities).not.toContain('capture-file-v1');
    const e = errorOf(
      await bare.client.callUnchecked(METHODS.capture, scope(0), { checkpointId: 'ck', agentId: 'a-walk', hold: true }),
    );
    expect(e).toMatchObject({ code: 'UNSUPPORTED', mutation: 'none' });
    expect(e.message).toMatch(/without --store-dir/);
    await bare.stop();
  });

  it('a held capture carries no attachment; WritePayload writes exactly its bytes into a store temp file, nothing else', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-capture-file-'));
    const w = await boot('w-cf', dir);
    expect(w.client.identity!.capabilities).toContain('capture-file-v1');
    // The streamed reply, for the bytes and digest the held one must match.
    const streamed = await w.client.call(METHODS.capture, scope(0), { checkpointId: 'ck-h', agentId: 'a-walk' });
    const bytes = streamed.attachment!;
    const params = { checkpointId: 'ck-h', agentId: 'a-walk', hold: true as const };
    const held = await w.client.call(METHODS.capture, scope(0), params);
    expect(held.attachment).toBeUndefined();
    const r = resultOf<CaptureResult>(held);
    expect(r.payload).toEqual({
      byteLength: String(bytes.byteLength),
      digest: createHash('sha256').update(bytes).digest('hex'),
    });
    const bad = await w.client.callUnchecked(METHODS.capture, scope(0), { ...params, hold: false });
    expect(errorOf(bad).message).toMatch(/params.hold must be true/);

    const tmp = join(dir, 'tmp-ck-h.flysess');
    writeFileSync(tmp, Buffer.alloc(16 + bytes.byteLength + 8, 0xee));
    const write = (extra: Record<string, unknown>) =>
      w.client.callUnchecked(METHODS.writePayload, scope(0), {
        captureRequestId: held.requestId,
        file: { path: tmp, offset: '16' },
        ...extra,
      });
    expect(resultOf<{ byteLength: string }>(await write({}))).toEqual({ byteLength: String(bytes.byteLength) });
    const file = readFileSync(tmp);
    expect(file.subarray(16, 16 + bytes.byteLength).equals(bytes)).toBe(true);
    expect(file.subarray(0, 16).every((b) => b === 0xee)).toBe(true);
    expect(file.subarray(16 + bytes.byteLength).every((b) => b === 0xee)).toBe(true);

    // Refusals: not a temp, a committed generation, the manifest, outside the store, a symlink, unknown capture, bad params.
    writeFileSync(join(dir, 'ck-h.flysess'), 'x');
    writeFileSync(join(dir, 'manifest.json'), '{}');
    symlinkSync(join(dir, 'ck-h.flysess'), join(dir, 'tmp-link.flysess'));
    const outside = join(mkdtempSync(join(tmpdir(), 'detsim-outside-')), 'tmp-ck-h.flysess');
    writeFileSync(outside, '');
    for (const path of [
      join(dir, 'ck-h.flysess'),
      join(dir, 'manifest.json'),
      outside,
      join(dir, 'tmp-link.flysess'),
      'tmp-ck-h.flysess',
    ]) {
      const e = errorOf(await write({ file: { path, offset: '0' } }));
      expect(e, path).toMatchObject({ code: 'INVALID_ARGUMENT', mutation: 'none' });
      expect(e.message).toMatch(/not a checkpoint temporary file/);
    }
    expect(readFileSync(join(dir, 'ck-h.flysess'), 'utf8')).toBe('x');
    expect(readFileSync(outside).byteLength).toBe(0);
    // The streamed capture holds nothing to write; an unknown id neither.
    expect(errorOf(await write({ captureRequestId: streamed.requestId })).message).toMatch(/no held capture/);
    expect(errorOf(await write({ captureRequestId: 'req-999999' })).message).toMatch(/no held capture/);
    expect(errorOf(await write({ file: { path: tmp, offset: '-1' } })).code).toBe('INVALID_ARGUMENT');
    expect(errorOf(await write({ extra: 1 })).code).toBe('INVALID_ARGUMENT');

    // A replay of the held capture still carries no attachment; once acknowledged nothing is held.
    const again = await w.client.call(METHODS.capture, scope(0), params, { requestId: held.requestId });
    expect(again.attachment).toBeUndefined();
    resultOf(await w.client.call(METHODS.acknowledge, null, { requestIds: [held.requestId, streamed.requestId] }));
    expect(errorOf(await write({})).message).toMatch(/no held capture/);
    await w.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a large state is held as the model's own arrays: WritePayload writes the streamed capture's bytes, and a step before it shows", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-capture-pieces-'));
    const lif = { agentId: 'a-lif', model: 'lif', params: { neurons: 200_000 }, seed: 7, stepDuration: STEP_60HZ };
    const w = await spawnWorker('agent', 'w-cf-lif', ['--store-dir', dir]);
    try {
      resultOf(
        await w.client.callUnchecked(METHODS.agentInitialize, scope(0), { agents: [{ ...lif, observation: OBS }] }),
      );
      const stepOnce = async (k: number) => {
        const p = await w.client.call(METHODS.agentPrepare, scope(k), { agents: [{ agentId: 'a-lif' }] });
        resultOf(p);
        const agents = [{ agentId: 'a-lif', preparedRequestId: p.requestId, observation: OBS, rewards: [] }];
        resultOf(await w.client.call(METHODS.agentCommit, scope(k), { agents }));
      };
      await stepOnce(0);
      const streamed = await w.client.call(METHODS.capture, scope(1), { checkpointId: 'ck-p', agentId: 'a-lif' });
      const bytes = streamed.attachment!;
      expect(bytes.byteLength).toBeGreaterThan(2_400_000); // 12 bytes per neuron: pieces, not one copy
      const holdAndWrite = async (name: string, between?: () => Promise<void>) => {
        const held = await w.client.call(METHODS.capture, scope(1), {
          checkpointId: 'ck-p',
          agentId: 'a-lif',
          hold: true,
        });
        const reported = resultOf<CaptureResult>(held).payload;
        await between?.();
        const tmp = join(dir, `tmp-${name}.flysess`);
        writeFileSync(tmp, Buffer.alloc(8 + bytes.byteLength, 0xee));
        const params = { captureRequestId: held.requestId, file: { path: tmp, offset: '8' } };
        resultOf(await w.client.call(METHODS.writePayload, scope(1), params));
        const written = readFileSync(tmp).subarray(8);
        return { reported, written, same: createHash('sha256').update(written).digest('hex') === reported.digest };
      };
      const still = await holdAndWrite('still');
      expect(still.written.equals(bytes)).toBe(true);
      expect(still.reported).toEqual({
        byteLength: String(bytes.byteLength),
        digest: createHash('sha256').update(bytes).digest('hex'),
      });
      expect(still.same).toBe(true);
      // The coordinator never steps a group between a held Capture and its WritePayload; if the
      // state did change, the bytes written no longer hash to the digest reported, which the file
      // seal refuses (audit_payload_digest_mismatch), so the change cannot go unnoticed.
      const moved = await holdAndWrite('moved', () => stepOnce(1));
      expect(moved.same).toBe(false);
      expect(moved.written.byteLength).toBe(bytes.byteLength);
    } finally {
      await w.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('capture-file-v2: the digest at write (TypeScript worker)', () => {
  it('a Capture held with hashAtWrite gives its size only; WritePayload writes the same bytes and replies with their digest', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-capture-v2-'));
    // 900k neurons: a payload of ~10.8 MB, so the write hashes it over several 4 MiB slices.
    const lif = { agentId: 'a-lif', model: 'lif', params: { neurons: 900_000 }, seed: 9, stepDuration: STEP_60HZ };
    const w = await spawnWorker('agent', 'w-cf-v2', ['--store-dir', dir]);
    try {
      expect(w.client.identity!.capabilities).toEqual(expect.arrayContaining(['capture-file-v1', 'capture-file-v2']));
      resultOf(
        await w.client.callUnchecked(METHODS.agentInitialize, scope(0), { agents: [{ ...lif, observation: OBS }] }),
      );
      const streamed = await w.client.call(METHODS.capture, scope(0), { checkpointId: 'ck-v2', agentId: 'a-lif' });
      const bytes = streamed.attachment!;
      expect(bytes.byteLength).toBeGreaterThan(2 * 4 * 1024 * 1024); // three write slices
      const digest = createHash('sha256').update(bytes).digest('hex');

      const params = { checkpointId: 'ck-v2', agentId: 'a-lif', hold: true as const, hashAtWrite: true as const };
      const held = await w.client.call(METHODS.capture, scope(0), params);
      expect(held.attachment).toBeUndefined();
      expect(resultOf<CaptureResult>(held).payload).toEqual({ byteLength: String(bytes.byteLength) });
      const tmp = join(dir, 'tmp-ck-v2.flysess');
      writeFileSync(tmp, Buffer.alloc(5 + bytes.byteLength + 3, 0xee));
      const write = { captureRequestId: held.requestId, file: { path: tmp, offset: '5' } };
      const wrote = resultOf(await w.client.call(METHODS.writePayload, scope(0), write));
      expect(wrote).toEqual({ byteLength: String(bytes.byteLength), digest });
      const file = readFileSync(tmp);
      expect(file.subarray(5, 5 + bytes.byteLength).equals(bytes)).toBe(true);
      expect([...file.subarray(0, 5), ...file.subarray(5 + bytes.byteLength)]).toEqual(Array(8).fill(0xee));

      // A v1 hold (digest at Capture) on the same worker: WritePayload gives no digest.
      const { hashAtWrite: _atWrite, ...v1Params } = params;
      const v1 = await w.client.call(METHODS.capture, scope(0), v1Params);
      expect(resultOf<CaptureResult>(v1).payload).toEqual({ byteLength: String(bytes.byteLength), digest });
      const v1Write = { captureRequestId: v1.requestId, file: { path: tmp, offset: '5' } };
      expect(resultOf(await w.client.call(METHODS.writePayload, scope(0), v1Write))).toEqual({
        byteLength: String(bytes.byteLength),
      });

      // A state-changing call after a hashAtWrite capture: its write is refused and writes nothing
      // (v1 leaves that to the seal's digest check; v2's digest would be of the moved state).
      const late = await w.client.call(METHODS.capture, scope(0), params);
      const p = await w.client.call(METHODS.agentPrepare, scope(0), { agents: [{ agentId: 'a-lif' }] });
      resultOf(p);
      writeFileSync(tmp, Buffer.alloc(5 + bytes.byteLength + 3, 0xee));
      const refused = await w.client.callUnchecked(METHODS.writePayload, scope(0), {
        captureRequestId: late.requestId,
        file: { path: tmp, offset: '5' },
      });
      expect(errorOf(refused)).toMatchObject({ code: 'INVALID_PHASE' });
      expect(errorOf(refused).message).toMatch(/state-changing call since that capture/);
      expect(readFileSync(tmp).every((b) => b === 0xee)).toBe(true);

      // hashAtWrite is exactly true, and only beside hold.
      const notTrue = await w.client.callUnchecked(METHODS.capture, scope(0), { ...params, hashAtWrite: 1 });
      expect(errorOf(notTrue)).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(errorOf(notTrue).message).toMatch(/params.hashAtWrite must be true/);
      const alone = await w.client.callUnchecked(METHODS.capture, scope(0), {
        checkpointId: 'ck-v2',
        agentId: 'a-lif',
        hashAtWrite: true,
      });
      expect(errorOf(alone).message).toMatch(/params.hashAtWrite is only valid with params.hold/);
    } finally {
      await w.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
