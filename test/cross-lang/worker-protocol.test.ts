// The Rust agent worker (detsim-worker-rs) and the Python one (python -m detsim_worker) against the
// TypeScript worker, message for message: the
// same requests sent to one process of each give the same canonical replies (incarnation ids
// aside), including refusals, idempotent retries, captured payload bytes, and restores across
// languages that continue identically — over gRPC and over the socket wire alike. Every request states its expected outcome (ok, or the
// refusal's error code) and both sides must meet it, so two workers failing the same way fail
// the test. Not the coordinator run (worker-run.test.ts).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import {
  CAPABILITIES,
  CONTRACT_DIGEST,
  METHODS,
  WorkerClient,
  type CallOptions,
  type CallReply,
  type ErrorCode,
  type Params,
} from '../../core/protocol/index.js';
import type { Scope } from '../../core/formats/scalars.js';
import { REPO_ROOT, SESSION, STEP_60HZ } from '../workers/harness.js';
import {
  RUST_WORKER,
  ensureRustWorker,
  rustWorkerSkip,
  spawnAgentWorker,
  stopAllWorkers,
  type Spawned,
} from './rust-worker.js';
import { ensurePythonWorker, pythonWorkerSkip } from './python-worker.js';

afterAll(stopAllWorkers);

const sc = (step: number, epoch = 'e1'): Scope => ({ sessionId: SESSION, epoch, step: String(step) });
const OBS = { x: 1, y: 2, foodDx: -3, foodDy: 1, score: 0 };
const AGENTS = [
  { agentId: 'a-lif', model: 'lif', params: { neurons: 64 }, seed: -987654, stepDuration: STEP_60HZ, observation: OBS },
  { agentId: 'a-walk', model: 'walker', params: { explore: 3 }, seed: 4242, stepDuration: STEP_60HZ, observation: OBS },
  {
    agentId: 'a-zero',
    model: 'walker',
    params: {},
    seed: 0,
    stepDuration: { numerator: '7000001', denominator: '7' },
    observation: { note: 'no food' },
  },
];
const IDS = AGENTS.map((a) => ({ agentId: a.agentId }));

/** What a request must get: a result, or an error reply with this code. */
type Expected = 'ok' | ErrorCode;

/** The outcome of a reply in the terms of Expected. */
const outcomeOf = (r: CallReply): Expected => (r.reply.type === 'result' ? 'ok' : r.reply.error.code);

/** A reply as comparable text: the incarnation id (random per process) blanked. */
function norm(r: CallReply): string {
  const reply = { ...r.reply, incarnationId: 'inc' } as Record<string, unknown>;
  return canonicalize(reply);
}

/** The other implementations compared with the TypeScript worker, message for message. */
const OTHERS = [
  { runtime: 'rust', name: 'Rust', skip: rustWorkerSkip, ensure: ensureRustWorker, runtimeName: /^detsim-rs\// },
  {
    runtime: 'python',
    name: 'Python',
    skip: pythonWorkerSkip,
    ensure: ensurePythonWorker,
    runtimeName: /^detsim-py\//,
  },
] as const;

/** Both wires a worker process speaks: gRPC (every worker) and the socket wire (`detsim run`'s own). */
const WIRES = [
  { name: 'gRPC', flags: [] as string[], client: 'grpc' },
  { name: 'the socket wire', flags: ['--wire', 'socket'], client: 'socket' },
] as const;

for (const other of OTHERS)
  for (const wire of WIRES)
    describe.skipIf(other.skip !== null)(
      `${other.name} worker speaks proto/detsim/v1 like the TypeScript worker, over ${wire.name}`,
      () => {
        let ts: Spawned;
        let rs: Spawned;
        /** Both workers' --store-dir: the one directory store-files-v1 may read and write. */
        let store: string;

        beforeAll(async () => {
          other.ensure();
          store = mkdtempSync(join(tmpdir(), 'detsim-xlang-store-'));
          const storeDir = ['--store-dir', store, ...wire.flags];
          [ts, rs] = await Promise.all([
            spawnAgentWorker('typescript', 'w-1', storeDir),
            spawnAgentWorker(other.runtime, 'w-1', storeDir),
          ]);
        }, 1_500_000);
        afterAll(() => rmSync(store, { recursive: true, force: true }));

        /** Send the same request to both; assert each side got the expected outcome and the replies match. */
        async function both(
          method: string,
          scope: Scope | null,
          params: Params,
          expected: Expected,
          opts: CallOptions = {},
        ): Promise<{ t: CallReply; r: CallReply }> {
          const [t, r] = await Promise.all([
            ts.client.callUnchecked(method, scope, params, opts),
            rs.client.callUnchecked(method, scope, params, opts),
          ]);
          const what = `${method} ${JSON.stringify(params).slice(0, 200)}`;
          expect({ typescript: outcomeOf(t), rust: outcomeOf(r) }, what).toEqual({
            typescript: expected,
            rust: expected,
          });
          expect(norm(r), what).toBe(norm(t));
          expect(r.attachment === undefined).toBe(t.attachment === undefined);
          if (t.attachment) expect(Buffer.compare(r.attachment!, t.attachment), `${method}: attachment bytes`).toBe(0);
          return { t, r };
        }

        async function stepBoth(k: number, epoch = 'e1'): Promise<void> {
          const { t } = await both(METHODS.agentPrepare, sc(k, epoch), { agents: IDS }, 'ok');
          const obs = {
            x: k % 7,
            y: (k * 3) % 5,
            foodDx: (k % 5) - 2,
            foodDy: (k % 3) - 1,
            score: k,
            mood: k % 2 === 0 ? 'calm' : 'ünïcode',
          };
          const agents = IDS.map((a) => ({
            agentId: a.agentId,
            preparedRequestId: t.requestId,
            observation: obs,
            rewards: k % 3 === 0 ? [{ eventId: `eat-${k}`, ruleId: 'eat', value: 0.1 * k - 0.25 }] : [],
          }));
          await both(METHODS.agentCommit, sc(k, epoch), { agents }, 'ok');
        }

        it('ready line and Hello: the contract digest is the proto file SHA-256, its own runtime name, same capabilities and limits', async () => {
          const ready = JSON.parse(rs.readyLine) as Record<string, unknown>;
          expect(Object.keys(ready)).toEqual(['ready', 'listen', 'pid']);
          expect(ready.pid).toBe(rs.proc.pid);
          // Refusals first (the worker stays un-introduced): wrong contract, wrong worker id, role, majors.
          const hello = {
            sessionId: SESSION,
            expectedWorkerId: 'w-1',
            role: 'agent',
            supportedMajors: [1],
            contractDigest: CONTRACT_DIGEST,
          };
          await both(METHODS.agentPrepare, sc(0), { agents: IDS }, 'INVALID_PHASE');
          // Nothing but Hello before Hello, not even Status or Shutdown (the worker keeps running).
          for (const [method, params] of [
            [METHODS.status, {}],
            [METHODS.shutdown, { reason: 'early' }],
            [METHODS.acknowledge, { requestIds: ['req-1'] }],
          ] as const) {
            const { t } = await both(method, null, params, 'INVALID_PHASE');
            expect(t.reply).toMatchObject({
              type: 'error',
              error: { code: 'INVALID_PHASE', message: `${method} before Worker.Hello` },
            });
          }
          await both(METHODS.hello, null, { ...hello, contractDigest: 'f'.repeat(64) }, 'IDENTITY_MISMATCH');
          await both(METHODS.hello, null, { ...hello, expectedWorkerId: 'w-2' }, 'IDENTITY_MISMATCH');
          await both(METHODS.hello, null, { ...hello, role: 'environment' }, 'UNSUPPORTED');
          await both(METHODS.hello, null, { ...hello, role: 'judge' }, 'UNSUPPORTED');
          await both(METHODS.hello, null, { ...hello, supportedMajors: [2, 3] }, 'UNSUPPORTED');
          await both(METHODS.hello, null, { ...hello, extra: true }, 'INVALID_ARGUMENT');
          await both(METHODS.hello, sc(0), hello, 'INVALID_ARGUMENT');
          const [t, r] = await Promise.all([
            ts.client.callUnchecked(METHODS.hello, null, hello),
            rs.client.callUnchecked(METHODS.hello, null, hello),
          ]);
          if (t.reply.type !== 'result' || r.reply.type !== 'result') throw new Error('Hello refused');
          const { runtime, buildDigest, incarnationId, ...rest } = r.reply.result as Record<string, unknown>;
          const {
            runtime: _r,
            buildDigest: _b,
            incarnationId: _i,
            ...tsRest
          } = t.reply.result as Record<string, unknown>;
          // Everything is shared, the capabilities that come with --store-dir included: store-files-v1
          // and capture-hold-from-v1 (docs/spec/capture-file.md).
          expect(tsRest.capabilities).toEqual([
            CAPABILITIES.agentStep,
            CAPABILITIES.captureHoldFrom,
            CAPABILITIES.checkpoint,
            CAPABILITIES.storeFiles,
          ]);
          expect(rest).toEqual(tsRest);
          expect(rest.contractDigest).toBe(
            createHash('sha256')
              .update(readFileSync(join(REPO_ROOT, 'proto/detsim/v1/worker.proto')))
              .digest('hex'),
          );
          expect(runtime).toMatch(other.runtimeName);
          expect(buildDigest).toMatch(/^[0-9a-f]{64}$/);
          expect(incarnationId).toMatch(/^inc-[0-9a-f]{16}$/);
          expect(r.reply.incarnationId).toBe(incarnationId);
        });

        it('a stranger on each live worker’s socket is served nothing before its own Hello and learns no identity, alike', async () => {
          const [tStranger, rStranger] = await Promise.all([
            WorkerClient.connect(ts.listen, { processExit: ts.exited, label: 'stranger', wire: wire.client }),
            WorkerClient.connect(rs.listen, { processExit: rs.exited, label: 'stranger', wire: wire.client }),
          ]);
          /** The same request from both strangers: identical replies, and the expected refusal. */
          const refusedAlike = async (
            method: string,
            scope: Scope | null,
            params: Params,
            code: string,
            message: string,
          ): Promise<void> => {
            const [t, r] = await Promise.all([
              tStranger.callUnchecked(method, scope, params),
              rStranger.callUnchecked(method, scope, params),
            ]);
            expect(norm(r), method).toBe(norm(t));
            expect(t.reply, method).toMatchObject({ type: 'error', error: { code, message } });
          };
          for (const [method, scope, params] of [
            [METHODS.status, null, {}],
            [METHODS.shutdown, null, { reason: 'stranger' }],
            [METHODS.acknowledge, null, { requestIds: ['req-1'] }],
            [METHODS.agentInitialize, sc(0), { agents: [{ ...AGENTS[1], agentId: 'intruder' }] }],
            [METHODS.agentPrepare, sc(0), { agents: IDS }],
            [METHODS.capture, sc(0), { checkpointId: 'ck-x', agentId: 'a-walk' }],
          ] as const) {
            await refusedAlike(method, scope, params, 'INVALID_PHASE', `${method} before Worker.Hello`);
          }
          const hello = {
            sessionId: 's-guess',
            expectedWorkerId: 'w-guess',
            role: 'agent',
            supportedMajors: [1],
            contractDigest: CONTRACT_DIGEST,
          };
          await refusedAlike(
            METHODS.hello,
            null,
            hello,
            'IDENTITY_MISMATCH',
            'workerId: params.expectedWorkerId does not name this worker',
          );
          await refusedAlike(
            METHODS.hello,
            null,
            { ...hello, expectedWorkerId: 'w-1' },
            'IDENTITY_MISMATCH',
            'sessionId: params.sessionId is not the session this worker is bound to',
          );
          tStranger.close();
          rStranger.close();
          // The Shutdown above stopped nothing: the introduced streams are still served.
          const { t } = await both(METHODS.status, null, {}, 'ok');
          expect(t.reply).toMatchObject({ type: 'result', result: { state: 'uninitialized' } });
        });

        it('a stranger’s attachment before its own Hello ends that stream at its header or first chunk, alike; the worker keeps serving', async () => {
          const [tStranger, rStranger] = await Promise.all([
            WorkerClient.connect(ts.listen, { processExit: ts.exited, label: 'stranger', wire: wire.client }),
            WorkerClient.connect(rs.listen, { processExit: rs.exited, label: 'stranger', wire: wire.client }),
          ]);
          // 3 MiB in 1 MiB chunks: neither worker may buffer it for a stream that has not said Hello.
          const attachment = new Uint8Array(3 * 1024 * 1024);
          const outcome = (c: WorkerClient) =>
            c.call(METHODS.status, null, {}, { attachment }).then(
              () => 'replied',
              () => 'stream ended',
            );
          expect(await Promise.all([outcome(tStranger), outcome(rStranger)])).toEqual(['stream ended', 'stream ended']);
          tStranger.close();
          rStranger.close();
          const { t } = await both(METHODS.status, null, {}, 'ok');
          expect(t.reply).toMatchObject({ type: 'result' });
        });

        it('Initialize (and its refusals), Status, and 12 steps of Prepare/Commit give identical replies', async () => {
          await both(METHODS.agentInitialize, sc(3), { agents: AGENTS }, 'INVALID_ARGUMENT');
          await both(METHODS.agentInitialize, sc(0), { agents: [{ ...AGENTS[0], model: 'nope' }] }, 'INVALID_ARGUMENT');
          await both(
            METHODS.agentInitialize,
            sc(0),
            { agents: [{ ...AGENTS[1], params: { explore: 0 } }] },
            'INVALID_ARGUMENT',
          );
          await both(
            METHODS.agentInitialize,
            sc(0),
            { agents: [{ ...AGENTS[1], params: { explor: 2 } }] },
            'INVALID_ARGUMENT',
          );
          await both(
            METHODS.agentInitialize,
            sc(0),
            { agents: [{ ...AGENTS[1], params: { strict: 'yes' } }] },
            'INVALID_ARGUMENT',
          );
          await both(METHODS.agentInitialize, sc(0), { agents: [{ ...AGENTS[1], seed: 2 ** 31 }] }, 'INVALID_ARGUMENT');
          await both(METHODS.agentInitialize, sc(0), { agents: [AGENTS[1], AGENTS[1]] }, 'INVALID_ARGUMENT');
          await both(
            METHODS.agentInitialize,
            { ...sc(0), sessionId: 'other' },
            { agents: AGENTS },
            'IDENTITY_MISMATCH',
          );
          await both(METHODS.status, null, {}, 'ok');
          await both(METHODS.agentInitialize, sc(0), { agents: AGENTS }, 'ok');
          // The same Initialize again is answered from the agents' records; a different one is CONFLICT.
          await both(METHODS.agentInitialize, sc(0), { agents: AGENTS }, 'ok');
          await both(METHODS.agentInitialize, sc(0), { agents: [{ ...AGENTS[1], seed: 1 }] }, 'CONFLICT');
          await both(METHODS.status, null, {}, 'ok');
          for (let k = 0; k < 12; k++) await stepBoth(k);
          await both(METHODS.status, null, {}, 'ok');
        });

        it('[LOCK-9, LOCK-10, LOCK-11] idempotency per operation key: cached replies, CONFLICT, STALE_EPOCH / STALE_STEP / FUTURE_STEP, phase refusals', async () => {
          const k = 12;
          const first = await both(METHODS.agentPrepare, sc(k), { agents: IDS }, 'ok');
          // The same request id and body, and a new id with the same body: the cached decisions, no new ticks.
          const again = await both(METHODS.agentPrepare, sc(k), { agents: IDS }, 'ok', {
            requestId: first.t.requestId,
          });
          expect(norm(again.r)).toBe(norm(first.r));
          await both(METHODS.agentPrepare, sc(k), { agents: [IDS[1]!, IDS[0]!] }, 'ok');
          await both(METHODS.agentPrepare, sc(k - 3), { agents: IDS }, 'STALE_STEP');
          await both(METHODS.agentPrepare, sc(k + 5), { agents: IDS }, 'FUTURE_STEP');
          await both(METHODS.agentPrepare, sc(k, 'e0'), { agents: IDS }, 'STALE_EPOCH');
          await both(METHODS.agentPrepare, sc(k), { agents: [{ agentId: 'stranger' }] }, 'INVALID_ARGUMENT');
          await both(
            METHODS.agentCommit,
            sc(k),
            { agents: [{ agentId: 'a-walk', preparedRequestId: 'req-1', observation: OBS, rewards: [] }] },
            'CONFLICT',
          );
          const commit = {
            agents: IDS.map((a) => ({
              agentId: a.agentId,
              preparedRequestId: first.t.requestId,
              observation: OBS,
              rewards: [],
            })),
          };
          await both(METHODS.agentCommit, sc(k), commit, 'ok');
          await both(METHODS.agentCommit, sc(k), commit, 'ok');
          await both(
            METHODS.agentCommit,
            sc(k),
            { agents: commit.agents.map((a) => ({ ...a, observation: { ...OBS, x: 9 } })) },
            'CONFLICT',
          );
          await both(METHODS.agentCommit, sc(k + 1), commit, 'INVALID_PHASE');
          await both(
            METHODS.agentCommit,
            sc(k + 1),
            {
              agents: [
                {
                  agentId: 'a-walk',
                  preparedRequestId: first.t.requestId,
                  observation: OBS,
                  rewards: [{ eventId: 'x', ruleId: 'y', value: 'big' }],
                },
              ],
            },
            'INVALID_ARGUMENT',
          );
          await both(METHODS.status, null, {}, 'ok');
        });

        it('capture gives identical payload bytes; each language restores the other’s payload and both continue identically', async () => {
          const k = 13;
          for (let i = 0; i < AGENTS.length; i++) {
            const agentId = AGENTS[i]!.agentId;
            const { t, r } = await both(METHODS.capture, sc(k), { checkpointId: `ck-${agentId}`, agentId }, 'ok');
            expect(t.attachment!.length).toBeGreaterThan(100);
            if (t.reply.type !== 'result') throw new Error(`capture refused: ${JSON.stringify(t.reply.error)}`);
            // Cross: each worker stages the OTHER language's bytes (identical, so the tokens differ only by incarnation).
            const cap = t.reply.result as {
              checkpointId: string;
              agentId: string;
              compatibilityDigest: string;
              payload: { digest: string; byteLength: string };
            };
            const stage = {
              checkpointId: cap.checkpointId,
              agentId,
              sourceScope: sc(k),
              compatibilityDigest: cap.compatibilityDigest,
              payload: cap.payload,
            };
            const [st, sr] = await Promise.all([
              ts.client.call(METHODS.stageRestore, sc(k, 'e2'), stage, { attachment: r.attachment! }),
              rs.client.call(METHODS.stageRestore, sc(k, 'e2'), stage, { attachment: t.attachment! }),
            ]);
            if (st.reply.type !== 'result' || sr.reply.type !== 'result')
              throw new Error(`stage refused: ${norm(st)} / ${norm(sr)}`);
            const token = (reply: CallReply, inc: string): void => {
              const text = `detsim/restore-token-v1\n${cap.checkpointId}\n${SESSION}\ne2\n${k}\n${cap.payload.digest}\n${inc}\n`;
              expect((reply.reply as unknown as { result: { restoreToken: string } }).result.restoreToken).toBe(
                `rt-${createHash('sha256').update(text).digest('hex').slice(0, 32)}`,
              );
            };
            token(st, st.reply.incarnationId);
            token(sr, sr.reply.incarnationId);
            // Refusals on a staged agent: a second stage is CONFLICT; a wrong token keeps the staged restore.
            await both(METHODS.stageRestore, sc(k, 'e2'), stage, 'CONFLICT', { attachment: t.attachment! });
            await both(METHODS.activateRestore, sc(k, 'e2'), { restoreToken: 'rt-0', agentId }, 'IDENTITY_MISMATCH');
            const [at, ar] = await Promise.all([
              ts.client.call(METHODS.activateRestore, sc(k, 'e2'), {
                restoreToken: (st.reply.result as { restoreToken: string }).restoreToken,
                agentId,
              }),
              rs.client.call(METHODS.activateRestore, sc(k, 'e2'), {
                restoreToken: (sr.reply.result as { restoreToken: string }).restoreToken,
                agentId,
              }),
            ]);
            expect(norm(ar)).toBe(norm(at));
            expect(at.reply.type).toBe('result');
          }
          // Payload checks refuse alike: wrong digest, wrong length, no attachment.
          await both(
            METHODS.stageRestore,
            sc(k, 'e3'),
            {
              checkpointId: 'ck-x',
              agentId: 'a-walk',
              sourceScope: sc(k, 'e2'),
              compatibilityDigest: 'a'.repeat(64),
              payload: { digest: 'b'.repeat(64), byteLength: '3' },
            },
            'BUFFER_INVALID',
            { attachment: Buffer.from('abc') },
          );
          await both(
            METHODS.stageRestore,
            sc(k, 'e3'),
            {
              checkpointId: 'ck-x',
              agentId: 'a-walk',
              sourceScope: sc(k, 'e2'),
              compatibilityDigest: 'a'.repeat(64),
              payload: { digest: 'b'.repeat(64), byteLength: '4' },
            },
            'BUFFER_INVALID',
            { attachment: Buffer.from('abc') },
          );
          await both(
            METHODS.stageRestore,
            sc(k, 'e3'),
            {
              checkpointId: 'ck-x',
              agentId: 'a-walk',
              sourceScope: sc(k, 'e2'),
              compatibilityDigest: 'a'.repeat(64),
              payload: { digest: 'b'.repeat(64), byteLength: '4' },
            },
            'BUFFER_INVALID',
          );
          // A payload range of a store file (store-files-v1) is refused alike: a relative path, both sources, a range whose bytes differ, a short
          // file, a huge byteLength, and every path that is not a regular file in the store (missing, outside,
          // a symlink out of it, a `..` escape, the store itself).
          const dir = mkdtempSync(join(tmpdir(), 'detsim-xlang-file-'));
          const file = join(store, 'ckpt.flysess');
          writeFileSync(file, 'xxabcdyy');
          writeFileSync(join(dir, 'outside.flysess'), 'xxabcdyy');
          symlinkSync(join(dir, 'outside.flysess'), join(store, 'link.flysess'));
          const fileStage = (f: Record<string, unknown>, byteLength = '4') => ({
            checkpointId: 'ck-x',
            agentId: 'a-walk',
            sourceScope: sc(k, 'e2'),
            compatibilityDigest: 'a'.repeat(64),
            payload: { digest: createHash('sha256').update('abcd').digest('hex'), byteLength, file: f },
          });
          await both(
            METHODS.stageRestore,
            sc(k, 'e3'),
            fileStage({ path: 'ckpt.flysess', offset: '2' }),
            'INVALID_ARGUMENT',
          );
          await both(METHODS.stageRestore, sc(k, 'e3'), fileStage({ path: file, offset: '2' }), 'INVALID_ARGUMENT', {
            attachment: Buffer.from('abcd'),
          });
          await both(METHODS.stageRestore, sc(k, 'e3'), fileStage({ path: file, offset: '3' }), 'BUFFER_INVALID');
          await both(METHODS.stageRestore, sc(k, 'e3'), fileStage({ path: file, offset: '6' }), 'BUFFER_INVALID');
          await both(
            METHODS.stageRestore,
            sc(k, 'e3'),
            fileStage({ path: file, offset: '2', extra: 1 }),
            'INVALID_ARGUMENT',
          );
          await both(
            METHODS.stageRestore,
            sc(k, 'e3'),
            fileStage({ path: file, offset: '2' }, '18446744073709551615'),
            'BUFFER_INVALID',
          );
          await both(
            METHODS.stageRestore,
            sc(k, 'e3'),
            fileStage({ path: file, offset: '18446744073709551615' }),
            'BUFFER_INVALID',
          );
          for (const path of [
            join(store, 'missing'),
            join(dir, 'outside.flysess'),
            join(store, 'link.flysess'),
            `${store}/../${dir.split('/').pop()}/outside.flysess`,
            store,
            '/etc/passwd',
          ]) {
            const { t } = await both(
              METHODS.stageRestore,
              sc(k, 'e3'),
              fileStage({ path, offset: '2' }),
              'INVALID_ARGUMENT',
            );
            expect(t.reply, path).toMatchObject({
              type: 'error',
              error: {
                code: 'INVALID_ARGUMENT',
                message: "params.payload.file.path is not a regular file inside this worker's store directory",
              },
            });
          }
          rmSync(dir, { recursive: true, force: true });
          // The old epoch is stale now; the restored timelines continue in e2 identically.
          await both(METHODS.agentPrepare, sc(k, 'e1'), { agents: IDS }, 'STALE_EPOCH');
          await both(METHODS.status, null, {}, 'ok');
          for (let j = k; j < k + 8; j++) await stepBoth(j, 'e2');
          const agentId = 'a-lif';
          await both(METHODS.capture, sc(k + 8, 'e2'), { checkpointId: 'ck-end', agentId }, 'ok');
          await both(METHODS.acknowledge, null, { requestIds: ['req-1', 'req-99999'] }, 'ok');
          await both(METHODS.acknowledge, null, { requestIds: [] }, 'INVALID_ARGUMENT');
        });

        it('a fresh worker of either language restores a payload captured by the other and continues identically', async () => {
          const k = 21;
          const agents = ['a-lif', 'a-walk', 'a-zero'];
          const [freshTs, freshRs] = await Promise.all([
            spawnAgentWorker('typescript', 'w-2', [...wire.flags]),
            spawnAgentWorker(other.runtime, 'w-2', [...wire.flags]),
          ]);
          const hello = { sessionId: SESSION, workerId: 'w-2', role: 'agent' as const };
          await Promise.all([freshTs.client.hello(hello), freshRs.client.hello(hello)]);
          for (const agentId of agents) {
            // The Rust worker's capture goes to the fresh TypeScript worker and the reverse.
            const [t, r] = await Promise.all([
              ts.client.call(METHODS.capture, sc(k, 'e2'), { checkpointId: 'ck-fresh', agentId }),
              rs.client.call(METHODS.capture, sc(k, 'e2'), { checkpointId: 'ck-fresh', agentId }),
            ]);
            if (t.reply.type !== 'result' || r.reply.type !== 'result') throw new Error('capture refused');
            const cap = r.reply.result as { compatibilityDigest: string; payload: unknown };
            const stage = {
              checkpointId: 'ck-fresh',
              agentId,
              sourceScope: sc(k, 'e2'),
              compatibilityDigest: cap.compatibilityDigest,
              payload: cap.payload,
            };
            const [st, sr] = await Promise.all([
              freshTs.client.callUnchecked(METHODS.stageRestore, sc(k, 'e5'), stage, { attachment: r.attachment! }),
              freshRs.client.callUnchecked(METHODS.stageRestore, sc(k, 'e5'), stage, { attachment: t.attachment! }),
            ]);
            if (st.reply.type !== 'result' || sr.reply.type !== 'result')
              throw new Error(`stage refused: ${norm(st)} / ${norm(sr)}`);
            const [at, ar] = await Promise.all([
              freshTs.client.call(METHODS.activateRestore, sc(k, 'e5'), {
                restoreToken: (st.reply.result as { restoreToken: string }).restoreToken,
                agentId,
              }),
              freshRs.client.call(METHODS.activateRestore, sc(k, 'e5'), {
                restoreToken: (sr.reply.result as { restoreToken: string }).restoreToken,
                agentId,
              }),
            ]);
            expect(norm(ar)).toBe(norm(at));
          }
          const decisions = async (w: Spawned, j: number): Promise<string> => {
            const p = await w.client.call(METHODS.agentPrepare, sc(j, 'e5'), { agents: IDS });
            const obs = { foodDx: (j % 5) - 2, foodDy: 1 - (j % 3) };
            const c = await w.client.call(METHODS.agentCommit, sc(j, 'e5'), {
              agents: IDS.map((a) => ({
                agentId: a.agentId,
                preparedRequestId: p.requestId,
                observation: obs,
                rewards: [],
              })),
            });
            expect(c.reply.type).toBe('result');
            return norm(p);
          };
          for (let j = k; j < k + 6; j++) expect(await decisions(freshRs, j)).toBe(await decisions(freshTs, j));
          // Injected divergence: different observations on one side make the decisions differ within a
          // few steps (the comparison above can fail).
          const walk = async (w: Spawned, j: number, foodDx: number): Promise<string> => {
            const p = await w.client.call(METHODS.agentPrepare, sc(j, 'e5'), { agents: [{ agentId: 'a-walk' }] });
            await w.client.call(METHODS.agentCommit, sc(j, 'e5'), {
              agents: [
                { agentId: 'a-walk', preparedRequestId: p.requestId, observation: { foodDx, foodDy: 0 }, rewards: [] },
              ],
            });
            return norm(p);
          };
          const rsDecisions: string[] = [];
          const tsDecisions: string[] = [];
          for (let j = k + 6; j < k + 10; j++) {
            rsDecisions.push(await walk(freshRs, j, 5));
            tsDecisions.push(await walk(freshTs, j, -5));
          }
          expect(rsDecisions[0]).toBe(tsDecisions[0]);
          expect(rsDecisions).not.toEqual(tsDecisions);
        });

        it('store-files-v1: a held capture sends no bytes; State.WritePayload writes the same bytes into a checkpoint temp file, hashing them, and refuses alike', async () => {
          const k = 21; // the boundary both live workers reached in e2 (the test above)
          const ref = { checkpointId: 'ck-held', agentId: 'a-lif' };
          // The tests above left lifecycle replies unacknowledged: release them all (the cache holds 16).
          const last = Number((await both(METHODS.status, null, {}, 'ok')).t.requestId.slice('req-'.length));
          for (let from = 1; from <= last; from += 16) {
            const requestIds = Array.from({ length: Math.min(16, last - from + 1) }, (_, i) => `req-${from + i}`);
            await both(METHODS.acknowledge, null, { requestIds }, 'ok');
          }
          const streamed = await both(METHODS.capture, sc(k, 'e2'), ref, 'ok');
          const data = streamed.t.attachment!;
          const held = await both(METHODS.capture, sc(k, 'e2'), { ...ref, hold: true }, 'ok');
          expect(held.t.attachment).toBeUndefined();
          // The streamed reply's fields, but the payload's size alone: the write gives the digest.
          const { payload: _payload, ...fields } = (streamed.t.reply as { result: Record<string, unknown> }).result;
          expect((held.t.reply as { result: object }).result).toEqual({
            ...fields,
            payload: { byteLength: String(data.length) },
          });
          // `hold` is exactly true; no other Capture param is known (hashAtWrite included).
          for (const bad of [{ hold: false }, { hashAtWrite: true }, { hold: true, hashAtWrite: true }])
            await both(METHODS.capture, sc(k, 'e2'), { ...ref, ...bad }, 'INVALID_ARGUMENT');
          // capture-hold-from-v1: held only from `holdFrom` bytes on; a shorter payload comes in the
          // reply as an unheld capture's, and its write is refused like a streamed one's (below).
          const under = await both(
            METHODS.capture,
            sc(k, 'e2'),
            { ...ref, hold: true, holdFrom: String(data.length + 1) },
            'ok',
          );
          expect((under.t.reply as { result: object }).result).toEqual((streamed.t.reply as { result: object }).result);
          expect(under.t.attachment?.equals(data)).toBe(true);
          const from = await both(
            METHODS.capture,
            sc(k, 'e2'),
            { ...ref, hold: true, holdFrom: String(data.length) },
            'ok',
          );
          expect(from.t.attachment).toBeUndefined();
          expect((from.t.reply as { result: object }).result).toEqual((held.t.reply as { result: object }).result);
          for (const bad of [
            { holdFrom: '0' },
            { hold: false, holdFrom: '0' },
            { hold: true, holdFrom: 65536 },
            { hold: true, holdFrom: '01' },
            { hold: true, holdFrom: '18446744073709551616' },
          ])
            await both(METHODS.capture, sc(k, 'e2'), { ...ref, ...bad }, 'INVALID_ARGUMENT');
          // Each side writes its own temporary (the store is shared); replies and bytes must agree.
          const temp = { ts: join(store, 'tmp-ck-ts.flysess'), other: join(store, 'tmp-ck-other.flysess') };
          for (const path of Object.values(temp)) writeFileSync(path, Buffer.alloc(2 * data.length + 16));
          const writeEach = async (capture: CallReply, offset: number, expected: Expected): Promise<CallReply> => {
            const params = (path: string): Params => ({
              captureRequestId: capture.requestId,
              file: { path, offset: String(offset) },
            });
            const [t, r] = await Promise.all([
              ts.client.callUnchecked(METHODS.writePayload, null, params(temp.ts)),
              rs.client.callUnchecked(METHODS.writePayload, null, params(temp.other)),
            ]);
            expect({ typescript: outcomeOf(t), other: outcomeOf(r) }).toEqual({
              typescript: expected,
              other: expected,
            });
            expect(norm(r)).toBe(norm(t));
            return t;
          };
          const wrote = { byteLength: String(data.length), digest: createHash('sha256').update(data).digest('hex') };
          const resultOf = (r: CallReply): unknown => (r.reply as { result: unknown }).result;
          expect(resultOf(await writeEach(held.t, 8, 'ok'))).toEqual(wrote);
          // Not a lifecycle call: the same bytes may be written again, elsewhere.
          expect(resultOf(await writeEach(held.t, 8 + data.length, 'ok'))).toEqual(wrote);
          const expectedFile = Buffer.concat([Buffer.alloc(8), data, data, Buffer.alloc(8)]);
          expect(readFileSync(temp.ts).equals(expectedFile)).toBe(true);
          expect(readFileSync(temp.other).equals(expectedFile)).toBe(true);
          // Refused alike: strict params, a capture that is not held, and every file that is not a
          // checkpoint temporary inside the store (one text for all of them).
          const write = (params: Params, expected: Expected) => both(METHODS.writePayload, null, params, expected);
          const file = { path: temp.ts, offset: '0' };
          await write({ captureRequestId: held.t.requestId, file: { ...file, extra: 1 } }, 'INVALID_ARGUMENT');
          await write({ captureRequestId: held.t.requestId, file: { path: '', offset: '0' } }, 'INVALID_ARGUMENT');
          await write(
            { captureRequestId: held.t.requestId, file: { path: temp.ts, offset: '-1' } },
            'INVALID_ARGUMENT',
          );
          await write({ captureRequestId: held.t.requestId }, 'INVALID_ARGUMENT');
          await write({ captureRequestId: streamed.t.requestId, file }, 'INVALID_ARGUMENT');
          await write({ captureRequestId: under.t.requestId, file }, 'INVALID_ARGUMENT');
          const outside = mkdtempSync(join(tmpdir(), 'detsim-xlang-out-'));
          writeFileSync(join(outside, 'tmp-ck-out.flysess'), 'keep');
          symlinkSync(join(outside, 'tmp-ck-out.flysess'), join(store, 'tmp-ck-link.flysess'));
          writeFileSync(join(store, 'ck-done.flysess'), Buffer.alloc(data.length));
          symlinkSync(join(store, 'ck-done.flysess'), join(store, 'tmp-ck-alias.flysess'));
          for (const path of [
            join(store, 'ck-done.flysess'),
            join(store, 'tmp-ck-link.flysess'),
            join(store, 'tmp-ck-alias.flysess'),
            join(store, 'tmp-ck-missing.flysess'),
            join(outside, 'tmp-ck-out.flysess'),
            store,
          ]) {
            const { t } = await write(
              { captureRequestId: held.t.requestId, file: { path, offset: '0' } },
              'INVALID_ARGUMENT',
            );
            expect((t.reply as { error: { message: string } }).error.message, path).toBe(
              "params.file.path is not a checkpoint temporary file (tmp-<checkpointId>.flysess) inside this worker's store directory",
            );
          }
          expect(readFileSync(join(outside, 'tmp-ck-out.flysess'), 'utf8')).toBe('keep');
          rmSync(outside, { recursive: true, force: true });
          // After a state-changing call the write refuses (its digest would be of a moved state), and
          // writes nothing.
          await stepBoth(k, 'e2');
          for (const path of Object.values(temp)) writeFileSync(path, Buffer.alloc(2 * data.length + 16));
          const moved = await writeEach(held.t, 8, 'INVALID_PHASE');
          expect((moved.reply as { error: { message: string } }).error.message).toBe(
            'params.captureRequestId: this worker has served a state-changing call since that capture; capture again',
          );
          for (const path of Object.values(temp)) expect(readFileSync(path).every((b) => b === 0)).toBe(true);
          // Acknowledged, the held bytes are gone.
          await both(METHODS.acknowledge, null, { requestIds: [held.t.requestId, streamed.t.requestId] }, 'ok');
          await writeEach(held.t, 8, 'INVALID_ARGUMENT');
        });

        it('store-files-v1: State.PrefetchPayload confirms a range of a store file by its digest, and refuses alike', async () => {
          const k = 22; // the boundary both live workers reached in e2 (the tests above)
          const { t } = await both(METHODS.capture, sc(k, 'e2'), { checkpointId: 'ck-pre', agentId: 'a-walk' }, 'ok');
          const data = t.attachment!;
          const path = join(store, 'ck-pre.flysess');
          writeFileSync(path, Buffer.concat([Buffer.from('xyz'), data]));
          const digest = createHash('sha256').update(data).digest('hex');
          const ref = { digest, byteLength: String(data.length), file: { path, offset: '3' } };
          const prefetch = (payload: unknown, expected: Expected, agentId: unknown = 'a-walk') =>
            both(METHODS.prefetchPayload, sc(k, 'e2'), { agentId, payload } as Params, expected);
          const matched = async (payload: unknown, agentId?: unknown): Promise<boolean> =>
            ((await prefetch(payload, 'ok', agentId)).t.reply as unknown as { result: { matched: boolean } }).result
              .matched;
          expect(await matched(ref)).toBe(true);
          expect(await matched({ ...ref, digest: 'f'.repeat(64) })).toBe(false);
          expect(await matched({ ...ref, file: { path, offset: '2' } })).toBe(false);
          expect(await matched(null)).toBe(false);
          expect(await matched(ref, null)).toBe(true);
          await prefetch({ ...ref, extra: 1 }, 'INVALID_ARGUMENT');
          await prefetch({ ...ref, file: { path: '', offset: '3' } }, 'INVALID_ARGUMENT');
          await prefetch({ ...ref, file: { path, offset: '3', x: 1 } }, 'INVALID_ARGUMENT');
          await prefetch({ ...ref, byteLength: 'many' }, 'INVALID_ARGUMENT');
          await prefetch(ref, 'INVALID_ARGUMENT', 7);
          await prefetch({ ...ref, file: { path, offset: '4' } }, 'BUFFER_INVALID');
          await prefetch({ ...ref, file: { path: '/etc/passwd', offset: '0' } }, 'INVALID_ARGUMENT');
          await prefetch({ ...ref, file: { path: join(store, 'missing.flysess'), offset: '0' } }, 'INVALID_ARGUMENT');
          await both(METHODS.acknowledge, null, { requestIds: [t.requestId] }, 'ok');
        });

        it('Shutdown replies {stopping: true} and the process exits 0', async () => {
          await both(METHODS.shutdown, null, { reason: 'done' }, 'ok');
          const [te, re] = await Promise.all([ts.exited, rs.exited]);
          expect(re).toEqual({ code: 0, signal: null });
          expect(te).toEqual({ code: 0, signal: null });
        });
      },
    );

describe.skipIf(rustWorkerSkip !== null)('Rust worker process: TCP, signals, orphan guard, bad flags', () => {
  beforeAll(() => ensureRustWorker(), 1_500_000);

  it('listens on TCP host:0, announces the bound port, and answers Hello (with the run secret)', async () => {
    // A plaintext TCP worker is bound to a session and holds the run's secret (docs/security.md).
    const token = 'c'.repeat(64);
    const tokenFile = join(mkdtempSync(join(tmpdir(), 'detsim-secret-')), 'token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const secret = ['--session', SESSION, '--token-file', tokenFile];
    const proc = spawn(RUST_WORKER, ['--listen', '127.0.0.1:0', '--role', 'agent', '--worker-id', 'w-tcp', ...secret], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
      proc.once('exit', (code, signal) => res({ code, signal })),
    );
    const line = await new Promise<string>((res) => createInterface({ input: proc.stdout! }).once('line', res));
    const listen = (JSON.parse(line) as { listen: string }).listen;
    expect(listen).toMatch(/^127\.0\.0\.1:[1-9][0-9]*$/);
    const client = await WorkerClient.connect(listen, { processExit: exited, label: 'w-tcp', token });
    const hello = await client.hello({ sessionId: SESSION, workerId: 'w-tcp', role: 'agent' });
    expect(hello.runtime).toMatch(/^detsim-rs\//);
    client.close();
    proc.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
  });

  it('exits 0 when its stdin pipe (the launcher) closes, and removes its socket file', async () => {
    const w = await spawnAgentWorker('rust', 'w-orphan');
    const path = (JSON.parse(w.readyLine) as { listen: string }).listen.slice('unix:'.length);
    expect(existsSync(path)).toBe(true);
    w.proc.stdin!.end();
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(path)).toBe(false);
  });

  it('refuses bad flags with one line naming the flag, exit 2', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((res) => {
        const p = spawn(RUST_WORKER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
        let stderr = '';
        p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
        p.once('exit', (code) => res({ code, stderr }));
      });
    expect(await run(['--listen', 'unix:rel.sock', '--role', 'agent', '--worker-id', 'w'])).toEqual({
      code: 2,
      stderr:
        'detsim: [struct_invalid_field] --listen: unix socket path "rel.sock" must be absolute (unix:/abs/path)\n',
    });
    expect(await run(['--listen', 'unix:/tmp/x.sock', '--role', 'agent', '--worker-id', 'Bad'])).toEqual({
      code: 2,
      stderr: 'detsim: [struct_invalid_id] --worker-id "Bad" is not an Id\n',
    });
    expect(await run(['--listen', 'unix:/tmp/x.sock', '--role', 'environment', '--worker-id', 'w'])).toMatchObject({
      code: 2,
    });
    expect(await run(['--bogus'])).toEqual({ code: 2, stderr: "detsim worker: Unknown option '--bogus'\n" });
  });

  it('refuses a non-loopback listen address word for word as the TypeScript worker, exit 2', async () => {
    const run = (command: string, args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((res) => {
        const p = spawn(command, [...args, '--listen', '0.0.0.0:0', '--role', 'agent', '--worker-id', 'w'], {
          cwd: REPO_ROOT,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stderr = '';
        p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
        p.once('exit', (code) => res({ code, stderr }));
      });
    const rust = await run(RUST_WORKER, []);
    expect(rust).toEqual({
      code: 2,
      stderr:
        'detsim: [perm_listen_not_local] --listen: "0.0.0.0" is not a loopback address; without TLS a worker listens only on unix:/abs/path or a loopback host (127.0.0.0/8, ::1, localhost); any other host needs TLS and a bearer token (--tls-dir)\n',
    });
    expect(await run(process.execPath, ['--import', 'tsx', 'workers/main.ts'])).toEqual(rust);
  });
});
