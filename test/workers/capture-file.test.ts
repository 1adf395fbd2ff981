// Held captures (store-files-v1) on a real TypeScript worker process: offered only with
// --store-dir; a held Capture replies with the size only and no attachment (a replay too);
// State.WritePayload writes exactly the held bytes at the given offset of a checkpoint temp file in
// the store and replies with their SHA-256 (across many write slices for a large state held as the
// model's own arrays), which is the streamed capture's digest; it refuses any other file, an
// unknown capture, malformed params, a worker without a store, and a write after a state-changing
// call (writing nothing).
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

describe('held captures, store-files-v1 (TypeScript worker)', () => {
  it('offered only with --store-dir; hold without a store is UNSUPPORTED', async () => {
    const bare = await boot('w-cf-bare');
    expect(bare.client.identity!.capabilities).not.toContain('store-files-v1');
    const e = errorOf(
      await bare.client.callUnchecked(METHODS.capture, scope(0), { checkpointId: 'ck', agentId: 'a-walk', hold: true }),
    );
    expect(e).toMatchObject({ code: 'UNSUPPORTED', mutation: 'none' });
    expect(e.message).toMatch(/without --store-dir/);
    await bare.stop();
  });

  it('a held capture carries no attachment and gives its size only; WritePayload writes exactly its bytes into a store temp file and gives their digest, nothing else', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-capture-file-'));
    const w = await boot('w-cf', dir);
    expect(w.client.identity!.capabilities).toContain('store-files-v1');
    // The streamed reply, for the bytes and digest the held one must match.
    const streamed = await w.client.call(METHODS.capture, scope(0), { checkpointId: 'ck-h', agentId: 'a-walk' });
    const bytes = streamed.attachment!;
    const params = { checkpointId: 'ck-h', agentId: 'a-walk', hold: true as const };
    const held = await w.client.call(METHODS.capture, scope(0), params);
    expect(held.attachment).toBeUndefined();
    expect(resultOf<CaptureResult>(held)).toEqual({
      ...resultOf<CaptureResult>(streamed),
      payload: { byteLength: String(bytes.byteLength) },
    });
    const bad = await w.client.callUnchecked(METHODS.capture, scope(0), { ...params, hold: false });
    expect(errorOf(bad).message).toMatch(/params.hold must be true/);
    // No other Capture param is known (the one that chose between hashing at Capture or at write included).
    const unknown = await w.client.callUnchecked(METHODS.capture, scope(0), { ...params, hashAtWrite: true });
    expect(errorOf(unknown)).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'params: unknown field "hashAtWrite"',
    });

    const tmp = join(dir, 'tmp-ck-h.flysess');
    writeFileSync(tmp, Buffer.alloc(16 + bytes.byteLength + 8, 0xee));
    const write = (extra: Record<string, unknown>) =>
      w.client.callUnchecked(METHODS.writePayload, scope(0), {
        captureRequestId: held.requestId,
        file: { path: tmp, offset: '16' },
        ...extra,
      });
    expect(resultOf(await write({}))).toEqual({
      byteLength: String(bytes.byteLength),
      digest: createHash('sha256').update(bytes).digest('hex'),
    });
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

  it('capture-hold-from-v1: held only from `holdFrom` bytes on, else the unheld reply (cached, replayed, not writable); holdFrom only beside hold, a U64, part of the request', async () => {
    const bare = await boot('w-cf-from-bare');
    expect(bare.client.identity!.capabilities).not.toContain('capture-hold-from-v1');
    await bare.stop();
    const dir = mkdtempSync(join(tmpdir(), 'detsim-capture-from-'));
    const w = await boot('w-cf-from', dir);
    expect(w.client.identity!.capabilities).toContain('capture-hold-from-v1');
    const ref = { checkpointId: 'ck-f', agentId: 'a-walk' };
    const streamed = await w.client.call(METHODS.capture, scope(0), ref);
    const bytes = streamed.attachment!;
    // Shorter than holdFrom: exactly the unheld capture's reply and bytes, and a replay carries them.
    const small = { ...ref, hold: true as const, holdFrom: String(bytes.byteLength + 1) };
    const under = await w.client.call(METHODS.capture, scope(0), small);
    expect(resultOf<CaptureResult>(under)).toEqual(resultOf<CaptureResult>(streamed));
    expect(Buffer.from(under.attachment!).equals(Buffer.from(bytes))).toBe(true);
    const replay = await w.client.call(METHODS.capture, scope(0), small, { requestId: under.requestId });
    expect(Buffer.from(replay.attachment!).equals(Buffer.from(bytes))).toBe(true);
    const tmp = join(dir, 'tmp-ck-f.flysess');
    writeFileSync(tmp, Buffer.alloc(bytes.byteLength));
    const write = (captureRequestId: string) =>
      w.client.callUnchecked(METHODS.writePayload, scope(0), { captureRequestId, file: { path: tmp, offset: '0' } });
    expect(errorOf(await write(under.requestId)).message).toMatch(/no held capture/);
    // At least holdFrom: held, the size alone; its write gives the unheld capture's digest.
    for (const holdFrom of ['0', String(bytes.byteLength)]) {
      const held = await w.client.call(METHODS.capture, scope(0), { ...ref, hold: true, holdFrom });
      expect(held.attachment, holdFrom).toBeUndefined();
      expect(resultOf<CaptureResult>(held).payload).toEqual({ byteLength: String(bytes.byteLength) });
      expect(resultOf(await write(held.requestId))).toEqual({
        byteLength: String(bytes.byteLength),
        digest: createHash('sha256').update(bytes).digest('hex'),
      });
    }
    // The same request id with another holdFrom is another request.
    const other = await w.client.callUnchecked(
      METHODS.capture,
      scope(0),
      { ...small, holdFrom: '0' },
      { requestId: under.requestId },
    );
    expect(errorOf(other).code).toBe('CONFLICT');
    const refused = async (params: Record<string, unknown>) =>
      errorOf(await w.client.callUnchecked(METHODS.capture, scope(0), { ...ref, ...params }));
    expect(await refused({ holdFrom: '0' })).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'params.holdFrom is allowed only with params.hold',
    });
    expect((await refused({ hold: false, holdFrom: '0' })).message).toBe('params.hold must be true when present');
    expect(await refused({ hold: true, holdFrom: 65536 })).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message:
        'params.holdFrom: 65536 is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615)',
    });
    for (const bad of ['01', 'x', '-1', '18446744073709551616'])
      expect((await refused({ hold: true, holdFrom: bad })).message, bad).toMatch(/^params.holdFrom: .* is not a U64/);
    await w.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a large state is held as the model's own arrays: WritePayload writes the streamed capture's bytes over several slices and gives their digest; after a step it refuses and writes nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-capture-pieces-'));
    // 900k neurons: a payload of ~10.8 MB, so the write hashes it over several 4 MiB slices.
    const lif = { agentId: 'a-lif', model: 'lif', params: { neurons: 900_000 }, seed: 7, stepDuration: STEP_60HZ };
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
      expect(bytes.byteLength).toBeGreaterThan(2 * 4 * 1024 * 1024); // three write slices
      const digest = createHash('sha256').update(bytes).digest('hex');
      const hold = async (name: string) => {
        const held = await w.client.call(METHODS.capture, scope(1), {
          checkpointId: 'ck-p',
          agentId: 'a-lif',
          hold: true,
        });
        expect(resultOf<CaptureResult>(held).payload).toEqual({ byteLength: String(bytes.byteLength) });
        const tmp = join(dir, `tmp-${name}.flysess`);
        writeFileSync(tmp, Buffer.alloc(5 + bytes.byteLength + 3, 0xee));
        const write = () =>
          w.client.callUnchecked(METHODS.writePayload, scope(1), {
            captureRequestId: held.requestId,
            file: { path: tmp, offset: '5' },
          });
        return { tmp, write };
      };
      const still = await hold('still');
      expect(resultOf(await still.write())).toEqual({ byteLength: String(bytes.byteLength), digest });
      const file = readFileSync(still.tmp);
      expect(file.subarray(5, 5 + bytes.byteLength).equals(bytes)).toBe(true);
      expect([...file.subarray(0, 5), ...file.subarray(5 + bytes.byteLength)]).toEqual(Array(8).fill(0xee));
      // The coordinator never steps a group between a held Capture and its WritePayload; if the
      // state did change, the write would hash a moved state: it is refused and writes nothing.
      const moved = await hold('moved');
      await stepOnce(1);
      const refused = await moved.write();
      expect(errorOf(refused)).toMatchObject({
        code: 'INVALID_PHASE',
        message:
          'params.captureRequestId: this worker has served a state-changing call since that capture; capture again',
      });
      expect(readFileSync(moved.tmp).every((b) => b === 0xee)).toBe(true);
    } finally {
      await w.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
