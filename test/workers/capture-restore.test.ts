// Capture → StageRestore → ActivateRestore with real worker processes: a restored walker, lif and
// forage continue exactly like the uninterrupted worker; capture does not mutate; the worker-side
// refusals of docs/spec/checkpoint-store.md (restore; digest/length, compatibility, token, double activation, nothing
// staged, stale epoch after activation); lifecycle replies are BUSY until acknowledged; a state
// larger than one gRPC message travels chunked.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS, type CallReply, type CaptureResult, type WorkerClient } from '../../core/protocol/index.js';
import {
  REPO_ROOT,
  STEP_60HZ,
  SESSION,
  type SpawnedWorker,
  errorOf,
  resultOf,
  scope,
  spawnWorker,
  stopAll,
} from './harness.js';

afterAll(stopAll);

const OBS = { x: 1, y: 2, foodDx: -3, foodDy: 1, score: 0 };
function agentsSpec(neurons = 200): Record<string, unknown>[] {
  return [
    { agentId: 'a-lif', model: 'lif', params: { neurons }, seed: -987654, stepDuration: STEP_60HZ, observation: OBS },
    {
      agentId: 'a-walk',
      model: 'walker',
      params: { explore: 3 },
      seed: 4242,
      stepDuration: STEP_60HZ,
      observation: OBS,
    },
  ];
}
const IDS = [{ agentId: 'a-lif' }, { agentId: 'a-walk' }];

async function step(c: WorkerClient, k: number, epoch: string, ids = IDS): Promise<unknown[]> {
  const p = await c.call(METHODS.agentPrepare, scope(k, epoch), { agents: ids });
  const prepared = resultOf<{ agents: unknown[] }>(p).agents;
  const obs = { x: k % 7, y: (k * 3) % 5, foodDx: (k % 5) - 2, foodDy: (k % 3) - 1, score: k };
  const agents = ids.map((a) => ({
    agentId: a.agentId,
    preparedRequestId: p.requestId,
    observation: obs,
    rewards: k % 3 === 0 ? [{ eventId: `eat-${k}-${a.agentId}`, ruleId: 'eat', value: 1 }] : [],
  }));
  resultOf(await c.call(METHODS.agentCommit, scope(k, epoch), { agents }));
  return prepared;
}

async function progress(c: WorkerClient): Promise<string> {
  return resultOf<{ progressCounter: string }>(await c.call(METHODS.status, null, {})).progressCounter;
}

async function bootAgents(id: string, neurons?: number): Promise<SpawnedWorker> {
  const w = await spawnWorker('agent', id);
  resultOf(await w.client.callUnchecked(METHODS.agentInitialize, scope(0), { agents: agentsSpec(neurons) }));
  return w;
}

async function capture(
  c: WorkerClient,
  checkpointId: string,
  agentId: string | null,
  k: number,
  epoch = 'e1',
): Promise<{ result: CaptureResult; payload: Buffer; requestId: string }> {
  const r = await c.call(METHODS.capture, scope(k, epoch), { checkpointId, agentId });
  const result = resultOf<CaptureResult>(r);
  expect(r.attachment).toBeDefined();
  return { result, payload: r.attachment!, requestId: r.requestId };
}

function stageParams(cap: CaptureResult, sourceEpoch: string, k: number): Record<string, unknown> {
  return {
    checkpointId: cap.checkpointId,
    agentId: cap.agentId,
    sourceScope: scope(k, sourceEpoch),
    compatibilityDigest: cap.compatibilityDigest,
    payload: cap.payload,
  };
}

function expectedToken(
  checkpointId: string,
  epoch: string,
  step: number,
  payloadDigest: string,
  incarnationId: string,
): string {
  const text = `detsim/restore-token-v1\n${checkpointId}\n${SESSION}\n${epoch}\n${step}\n${payloadDigest}\n${incarnationId}\n`;
  return `rt-${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
}

describe('agent capture and restore', () => {
  const K = 4;
  const M = 9;

  it('a walker and a lif restored into a fresh worker (new epoch) decide exactly like the uninterrupted worker', async () => {
    const a = await bootAgents('w-orig');
    for (let k = 0; k < K; k++) await step(a.client, k, 'e1');
    const before = await progress(a.client);
    const caps = [await capture(a.client, 'ck-4', 'a-lif', K), await capture(a.client, 'ck-4', 'a-walk', K)];
    expect(await progress(a.client)).toBe(before); // capture does not mutate
    for (const c of caps) {
      expect(c.result).toMatchObject({
        checkpointId: 'ck-4',
        boundary: String(K),
        payload: { byteLength: String(c.payload.length) },
      });
      expect(c.result.payload.digest).toBe(createHash('sha256').update(c.payload).digest('hex'));
    }
    // capturing twice gives the same bytes (deterministic encoding)
    const again = await capture(a.client, 'ck-4', 'a-lif', K);
    expect(again.payload.equals(caps[0]!.payload)).toBe(true);
    expect(
      resultOf<{ acknowledged: number }>(
        await a.client.call(METHODS.acknowledge, null, { requestIds: [...caps, again].map((c) => c.requestId) }),
      ).acknowledged,
    ).toBe(3);
    const expected: unknown[] = [];
    for (let k = K; k < M; k++) expected.push(await step(a.client, k, 'e1'));

    const b = await spawnWorker('agent', 'w-fresh');
    const incarnation = b.client.identity!.incarnationId;
    for (const c of caps) {
      const staged = resultOf<{ restoreToken: string; agentId: string }>(
        await b.client.callUnchecked(METHODS.stageRestore, scope(K, 'e2'), stageParams(c.result, 'e1', K), {
          attachment: c.payload,
        }),
      );
      expect(staged.restoreToken).toBe(expectedToken('ck-4', 'e2', K, c.result.payload.digest, incarnation));
      const act = resultOf<{ committedStep: string; observation: unknown }>(
        await b.client.call(METHODS.activateRestore, scope(K, 'e2'), {
          restoreToken: staged.restoreToken,
          agentId: c.result.agentId,
        }),
      );
      expect(act).toMatchObject({ committedStep: String(K), observation: null, checkpointId: 'ck-4' });
    }
    const got: unknown[] = [];
    for (let k = K; k < M; k++) got.push(await step(b.client, k, 'e2'));
    expect(got).toEqual(expected);
    await a.stop();
    await b.stop();
  });

  it('a large lif restored from the store file (its fields read into memory the model takes over) decides like the uninterrupted worker', async () => {
    const neurons = 40_000; // 480 KB of typed arrays: above MIN_SCATTER_BYTES, fields above MIN_FIELD_BYTES
    const store = mkdtempSync(join(tmpdir(), 'detsim-big-lif-'));
    try {
      const a = await bootAgents('w-big-orig', neurons);
      for (let k = 0; k < K; k++) await step(a.client, k, 'e1');
      const cap = await capture(a.client, 'ck-big', 'a-lif', K);
      const file = join(store, 'ck-big.flysess');
      writeFileSync(file, Buffer.concat([Buffer.alloc(3, 0x5a), cap.payload]));
      const expected: unknown[] = [];
      for (let k = K; k < M; k++) expected.push(await step(a.client, k, 'e1', [{ agentId: 'a-lif' }]));

      const b = await spawnWorker('agent', 'w-big-fresh', ['--store-dir', store]);
      const payload = { ...cap.result.payload, file: { path: file, offset: '3' } };
      const pre = await b.client.call(METHODS.prefetchPayload, scope(0), { agentId: 'a-lif', payload });
      expect(resultOf<{ matched: boolean }>(pre).matched).toBe(true);
      const staged = resultOf<{ restoreToken: string }>(
        await b.client.callUnchecked(METHODS.stageRestore, scope(K, 'e2'), {
          ...stageParams(cap.result, 'e1', K),
          payload,
        }),
      );
      resultOf(
        await b.client.call(METHODS.activateRestore, scope(K, 'e2'), {
          restoreToken: staged.restoreToken,
          agentId: 'a-lif',
        }),
      );
      const got: unknown[] = [];
      for (let k = K; k < M; k++) got.push(await step(b.client, k, 'e2', [{ agentId: 'a-lif' }]));
      expect(got).toEqual(expected);
      await a.stop();
      await b.stop();
    } finally {
      rmSync(store, { recursive: true, force: true });
    }
  });

  it('a user model takes its restored field over when the payload is read from the store file (into memory it gave back, once it has), and copies an attachment', async () => {
    const store = mkdtempSync(join(tmpdir(), 'detsim-takeover-'));
    try {
      const reportFile = join(store, 'report.txt');
      writeFileSync(reportFile, '');
      const model = join(REPO_ROOT, 'test/workers/fixtures/takeover-model.ts');
      const agent = { agentId: 't', model, params: { reportFile, n: 50_000 }, seed: 3, stepDuration: STEP_60HZ };
      const a = await spawnWorker('agent', 'w-take', ['--model', model, '--store-dir', store]);
      resultOf(await a.client.call(METHODS.agentInitialize, scope(0), { agents: [{ ...agent, observation: OBS }] }));
      for (let k = 0; k < K; k++) await step(a.client, k, 'e1', [{ agentId: 't' }]);
      const cap = await capture(a.client, 'ck-t', 't', K);
      const expected = await step(a.client, K, 'e1', [{ agentId: 't' }]);
      const file = join(store, 'ck-t.flysess');
      writeFileSync(file, cap.payload);
      const restoreAt = async (epoch: string, via: 'file' | 'attachment'): Promise<unknown> => {
        const payload =
          via === 'file' ? { ...cap.result.payload, file: { path: file, offset: '0' } } : cap.result.payload;
        const staged = resultOf<{ restoreToken: string }>(
          await a.client.callUnchecked(
            METHODS.stageRestore,
            scope(K, epoch),
            { ...stageParams(cap.result, 'e1', K), payload },
            via === 'file' ? {} : { attachment: cap.payload },
          ),
        );
        const act = await a.client.call(METHODS.activateRestore, scope(K, epoch), {
          restoreToken: staged.restoreToken,
          agentId: 't',
        });
        resultOf(act);
        return step(a.client, K, epoch, [{ agentId: 't' }]);
      };
      // e2 reads into fresh memory (nothing was given back yet); its activation drops the initial
      // state, whose array the model gives back; e4 reads its field into memory given back.
      expect(await restoreAt('e2', 'file')).toEqual(expected);
      expect(await restoreAt('e3', 'attachment')).toEqual(expected);
      expect(await restoreAt('e4', 'file')).toEqual(expected);
      expect(readFileSync(reportFile, 'utf8')).toBe('taken\ncopied\ntaken reused\n');
      await a.stop();
    } finally {
      rmSync(store, { recursive: true, force: true });
    }
  });

  it('restores into a worker that moved on (Ready at a later step) and enforces the activation rules', async () => {
    const a = await bootAgents('w-moved');
    for (let k = 0; k < K; k++) await step(a.client, k, 'e1');
    const cap = await capture(a.client, 'ck-x', 'a-walk', K);
    const capLif = await capture(a.client, 'ck-x', 'a-lif', K);
    const expected: unknown[] = [];
    for (let k = K; k < M; k++) expected.push(await step(a.client, k, 'e1'));
    // a is now at Ready(M) in e1; stage both agents back to K in e2
    const stage = (
      c: typeof cap,
      extra: Partial<Record<string, unknown>> = {},
      attachment: Buffer = c.payload,
      epoch = 'e2',
    ) =>
      a.client.callUnchecked(
        METHODS.stageRestore,
        scope(K, epoch),
        { ...stageParams(c.result, 'e1', K), ...extra },
        { attachment },
      );
    expect(errorOf(await stage(cap, {}, cap.payload, 'e1'))).toMatchObject({ code: 'STALE_EPOCH' });
    const flipped = Buffer.from(cap.payload);
    flipped[flipped.length - 1]! ^= 1;
    expect(errorOf(await stage(cap, {}, flipped))).toMatchObject({ code: 'BUFFER_INVALID', mutation: 'none' });
    expect(errorOf(await stage(cap, {}, cap.payload.subarray(1)))).toMatchObject({ code: 'BUFFER_INVALID' });
    const wrongCompat = errorOf(await stage(cap, { compatibilityDigest: capLif.result.compatibilityDigest }));
    expect(wrongCompat).toMatchObject({ code: 'INCOMPATIBLE_STATE' });
    expect(wrongCompat.message).toMatch(/compatibilityDigest/);
    expect(errorOf(await stage(cap, { agentId: 'a-lif' }))).toMatchObject({ code: 'INCOMPATIBLE_STATE' }); // payload of another agent
    expect(
      errorOf(
        await a.client.call(METHODS.activateRestore, scope(K, 'e2'), { restoreToken: 'rt-0', agentId: 'a-walk' }),
      ),
    ).toMatchObject({ code: 'INVALID_PHASE' });

    const token = resultOf<{ restoreToken: string }>(await stage(cap)).restoreToken;
    const tokenLif = resultOf<{ restoreToken: string }>(await stage(capLif)).restoreToken;
    expect(errorOf(await stage(cap))).toMatchObject({ code: 'CONFLICT' }); // one staged restore at a time
    expect(
      errorOf(
        await a.client.call(METHODS.activateRestore, scope(K, 'e2'), { restoreToken: tokenLif, agentId: 'a-walk' }),
      ),
    ).toMatchObject({ code: 'IDENTITY_MISMATCH' });
    const act = await a.client.call(METHODS.activateRestore, scope(K, 'e2'), {
      restoreToken: token,
      agentId: 'a-walk',
    });
    expect(resultOf(act)).toMatchObject({ committedStep: String(K) });
    const replay = await a.client.call(
      METHODS.activateRestore,
      scope(K, 'e2'),
      { restoreToken: token, agentId: 'a-walk' },
      { requestId: act.requestId },
    );
    expect(replay.reply).toEqual(act.reply); // exact duplicate: cached reply
    expect(
      errorOf(await a.client.call(METHODS.activateRestore, scope(K, 'e2'), { restoreToken: token, agentId: 'a-walk' })),
    ).toMatchObject({ code: 'CONFLICT' });
    resultOf(
      await a.client.call(METHODS.activateRestore, scope(K, 'e2'), { restoreToken: tokenLif, agentId: 'a-lif' }),
    );
    // after activation the old epoch is stale, for steps and captures alike
    expect(errorOf(await a.client.call(METHODS.agentPrepare, scope(K, 'e1'), { agents: IDS }))).toMatchObject({
      code: 'STALE_EPOCH',
    });
    expect(
      errorOf(await a.client.call(METHODS.capture, scope(K, 'e1'), { checkpointId: 'ck-y', agentId: 'a-walk' })),
    ).toMatchObject({ code: 'STALE_EPOCH' });
    const got: unknown[] = [];
    for (let k = K; k < M; k++) got.push(await step(a.client, k, 'e2'));
    expect(got).toEqual(expected);
    await a.stop();
  });

  it('store-files-v1: stages from a range of a file in its store (no attachment) and refuses a bad range, changed bytes or both sources', async () => {
    const a = await bootAgents('w-file');
    for (let k = 0; k < K; k++) await step(a.client, k, 'e1');
    const cap = await capture(a.client, 'ck-f', 'a-walk', K);
    const expected: unknown[] = [];
    for (let k = K; k < M; k++) expected.push(await step(a.client, k, 'e1'));
    // Only a worker given a store offers it (one without is sent its payloads as attachments).
    expect(a.client.identity!.capabilities).not.toContain('store-files-v1');
    // The payload sits at an offset inside a bigger file, as in a FLYSESS1 envelope.
    const dir = mkdtempSync(join(tmpdir(), 'detsim-payload-file-'));
    const path = join(dir, 'ckpt.flysess');
    const offset = 40;
    writeFileSync(path, Buffer.concat([Buffer.alloc(offset, 7), cap.payload, Buffer.alloc(9, 7)]));
    const b = await spawnWorker('agent', 'w-file-b', ['--store-dir', dir]);
    expect(b.client.identity!.capabilities).toContain('store-files-v1');
    const stage = (file: Record<string, unknown>, attachment?: Buffer) => {
      const params = stageParams(cap.result, 'e1', K);
      return b.client.callUnchecked(
        METHODS.stageRestore,
        scope(K, 'e2'),
        { ...params, payload: { ...(params.payload as object), file } },
        attachment ? { attachment } : {},
      );
    };
    expect(errorOf(await stage({ path: 'ckpt.flysess', offset: String(offset) }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(errorOf(await stage({ path, offset: String(offset) }, cap.payload)).message).toMatch(
      /both an attachment and params.payload.file/,
    );
    expect(errorOf(await stage({ path, offset: String(offset + 1) }))).toMatchObject({ code: 'BUFFER_INVALID' }); // wrong range: digest differs
    expect(errorOf(await stage({ path, offset: String(offset + 10) })).message).toMatch(
      /run past the end of the payload file/,
    );
    expect(errorOf(await stage({ path: join(dir, 'missing.flysess'), offset: '0' })).message).toMatch(
      /not a regular file inside this worker's store directory/,
    );
    const token = resultOf<{ restoreToken: string }>(await stage({ path, offset: String(offset) })).restoreToken;
    resultOf(await b.client.call(METHODS.activateRestore, scope(K, 'e2'), { restoreToken: token, agentId: 'a-walk' }));
    const got: unknown[] = [];
    for (let k = K; k < M; k++) got.push(await step(b.client, k, 'e2', [{ agentId: 'a-walk' }]));
    expect(got).toEqual(expected.map((p) => (p as { agentId: string }[]).filter((d) => d.agentId === 'a-walk')));
    rmSync(dir, { recursive: true, force: true });
    await a.stop();
    await b.stop();
  });

  it('[LOCK-2, STORE-13] captures only at the committed boundary', async () => {
    const a = await bootAgents('w-cap');
    await step(a.client, 0, 'e1');
    expect(
      errorOf(await a.client.call(METHODS.capture, scope(0), { checkpointId: 'c', agentId: 'a-walk' })),
    ).toMatchObject({ code: 'STALE_STEP', mutation: 'none' });
    expect(
      errorOf(await a.client.call(METHODS.capture, scope(2), { checkpointId: 'c', agentId: 'a-walk' })),
    ).toMatchObject({ code: 'FUTURE_STEP' });
    const p = await a.client.call(METHODS.agentPrepare, scope(1), { agents: IDS });
    resultOf(p);
    expect(
      errorOf(await a.client.call(METHODS.capture, scope(1), { checkpointId: 'c', agentId: 'a-walk' })),
    ).toMatchObject({ code: 'INVALID_PHASE' });
    expect(errorOf(await a.client.call(METHODS.capture, scope(1), { checkpointId: 'c', agentId: null }))).toMatchObject(
      { code: 'INVALID_ARGUMENT' },
    );
    await a.stop();
  });

  it('[LOCK-13] holds lifecycle replies until acknowledged: the 17th unacknowledged capture is BUSY', async () => {
    const a = await bootAgents('w-busy');
    const ack = await a.client.call(METHODS.acknowledge, null, { requestIds: ['req-1', 'req-2'] }); // hello + initialize
    expect(resultOf<{ acknowledged: number }>(ack).acknowledged).toBe(1); // Hello is not a lifecycle reply
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) ids.push((await capture(a.client, `c${i}`, 'a-walk', 0)).requestId);
    const busy = errorOf(await a.client.call(METHODS.capture, scope(0), { checkpointId: 'c16', agentId: 'a-walk' }));
    expect(busy).toMatchObject({ code: 'BUSY', mutation: 'none' });
    expect(busy.message).toMatch(/Acknowledge/);
    expect(
      resultOf<{ acknowledged: number }>(await a.client.call(METHODS.acknowledge, null, { requestIds: ids }))
        .acknowledged,
    ).toBe(16);
    await capture(a.client, 'c16', 'a-walk', 0);
    await a.stop();
  });

  it('a lif state larger than one gRPC message (8 MiB) captures and restores in chunks', async () => {
    const neurons = 800_000; // 12 bytes per neuron: ~9.6 MB of payload
    const a = await bootAgents('w-big', neurons);
    const lifOnly = [{ agentId: 'a-lif' }, { agentId: 'a-walk' }];
    await step(a.client, 0, 'e1', lifOnly);
    const cap = await capture(a.client, 'ck-big', 'a-lif', 1);
    const capWalk = await capture(a.client, 'ck-big', 'a-walk', 1);
    expect(cap.payload.length).toBeGreaterThan(9 * 1024 * 1024);
    const expected = await step(a.client, 1, 'e1', lifOnly);
    const b = await spawnWorker('agent', 'w-big2');
    for (const c of [cap, capWalk]) {
      const token = resultOf<{ restoreToken: string }>(
        await b.client.callUnchecked(METHODS.stageRestore, scope(1, 'e2'), stageParams(c.result, 'e1', 1), {
          attachment: c.payload,
        }),
      ).restoreToken;
      resultOf(
        await b.client.call(METHODS.activateRestore, scope(1, 'e2'), {
          restoreToken: token,
          agentId: c.result.agentId,
        }),
      );
    }
    expect(await step(b.client, 1, 'e2', lifOnly)).toEqual(expected);
    await a.stop();
    await b.stop();
  });
});

describe('environment capture and restore', () => {
  const PORTS = [
    { portId: 'p0', agentId: 'a' },
    { portId: 'p1', agentId: 'b' },
    { portId: 'p2', agentId: 'c' },
  ];
  const INIT = {
    environmentId: 'world',
    model: 'forage',
    params: { width: 7, height: 5, food: 4 },
    seed: 5,
    stepDuration: STEP_60HZ,
    ports: PORTS,
  };
  const MOVES = ['north', 'east', 'south', 'west', 'stay'];
  const advance = (c: WorkerClient, k: number, epoch: string): Promise<CallReply> =>
    c.call(METHODS.environmentAdvance, scope(k, epoch), {
      batchId: `batch-${k}`,
      actions: PORTS.map((p, i) => ({ ...p, action: { move: MOVES[(k * 7 + i * 3) % 5] } })),
    });

  it('a restored forage world continues exactly like the uninterrupted one', async () => {
    const a = await spawnWorker('environment', 'env-a');
    resultOf(await a.client.call(METHODS.environmentInitialize, scope(0), INIT));
    let lastObs: unknown;
    for (let k = 0; k < 6; k++)
      lastObs = resultOf<{ observations: unknown }>(await advance(a.client, k, 'e1')).observations;
    const cap = await capture(a.client, 'ck-6', null, 6);
    expect(cap.result.agentId).toBeNull();
    const expected: unknown[] = [];
    for (let k = 6; k < 20; k++) expected.push(resultOf(await advance(a.client, k, 'e1')));
    const b = await spawnWorker('environment', 'env-b');
    const token = resultOf<{ restoreToken: string }>(
      await b.client.callUnchecked(METHODS.stageRestore, scope(6, 'e2'), stageParams(cap.result, 'e1', 6), {
        attachment: cap.payload,
      }),
    ).restoreToken;
    const act = resultOf<{ observation: { observations: unknown } }>(
      await b.client.call(METHODS.activateRestore, scope(6, 'e2'), { restoreToken: token, agentId: null }),
    );
    expect(act.observation.observations).toEqual(lastObs);
    const got: unknown[] = [];
    for (let k = 6; k < 20; k++) got.push(resultOf(await advance(b.client, k, 'e2')));
    expect(got).toEqual(expected);
    expect(errorOf(await advance(b.client, 20, 'e1'))).toMatchObject({ code: 'STALE_EPOCH' });
    await a.stop();
    await b.stop();
  });

  it("an environment's activation releases the state it replaced, once (the model's release hook)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-release-'));
    try {
      const reportFile = join(dir, 'report.txt');
      writeFileSync(reportFile, '');
      const model = join(REPO_ROOT, 'test/workers/fixtures/release-env-model.ts');
      const init = { ...INIT, model, params: { ...INIT.params, reportFile } };
      const a = await spawnWorker('environment', 'env-rel', ['--model', model]);
      resultOf(await a.client.call(METHODS.environmentInitialize, scope(0), init));
      for (let k = 0; k < 3; k++) resultOf(await advance(a.client, k, 'e1'));
      const cap = await capture(a.client, 'ck-3', null, 3);
      for (let k = 3; k < 5; k++) resultOf(await advance(a.client, k, 'e1'));
      const restoreAt = async (epoch: string): Promise<void> => {
        const token = resultOf<{ restoreToken: string }>(
          await a.client.callUnchecked(METHODS.stageRestore, scope(3, epoch), stageParams(cap.result, 'e1', 3), {
            attachment: cap.payload,
          }),
        ).restoreToken;
        // Staged only: the live state is still the one stepping, nothing is released.
        expect(readFileSync(reportFile, 'utf8')).toBe(epoch === 'e2' ? '' : 'released a state of 5 steps\n');
        resultOf(await a.client.call(METHODS.activateRestore, scope(3, epoch), { restoreToken: token, agentId: null }));
      };
      await restoreAt('e2');
      expect(readFileSync(reportFile, 'utf8')).toBe('released a state of 5 steps\n');
      resultOf(await advance(a.client, 3, 'e2'));
      await restoreAt('e3');
      expect(readFileSync(reportFile, 'utf8')).toBe('released a state of 5 steps\nreleased a state of 4 steps\n');
      await a.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
