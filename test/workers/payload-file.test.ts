// Payload ranges of store files (store-files-v1) are confined to the run's store (issue 11 item 3),
// for the TypeScript and the Rust worker alike, over real gRPC: a worker reads a StageRestore payload only from a regular file under
// the directory it was launched with (`--store-dir`), after resolving symlinks and `..`; without
// that flag it reads none; byteLength is bounded by the file before anything is allocated; and no
// refusal carries a digest of what was read, a size, or whether a file outside the store exists.
// Not the attachment path (capture-restore.test.ts) and not the coordinator's restore.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METHODS, type CallReply, type CaptureResult, type WorkerClient } from '../../core/protocol/index.js';
import { PAYLOAD_FILE_REFUSALS } from '../../workers/payload-file.js';
import {
  commandOf,
  ensureRustWorker,
  rustWorkerSkip,
  spawnAgentWorker,
  type Runtime,
} from '../cross-lang/rust-worker.js';
import { REPO_ROOT, SESSION, STEP_60HZ, errorOf, resultOf, scope, stopAll } from './harness.js';

afterAll(stopAll);

const K = 3;
const AGENT = {
  agentId: 'a-walk',
  model: 'walker',
  params: { explore: 3 },
  seed: 4242,
  stepDuration: STEP_60HZ,
  observation: { x: 1, y: 2, foodDx: -3, foodDy: 1, score: 0 },
};
/** Bytes before the payload in the store file, as in a FLYSESS1 envelope. */
const OFFSET = 40;

async function started(
  runtime: Runtime,
  workerId: string,
  extra: string[] = [],
): Promise<{ client: WorkerClient; pid: number }> {
  const w = await spawnAgentWorker(runtime, workerId, extra);
  await w.client.hello({ sessionId: SESSION, workerId, role: 'agent' });
  return { client: w.client, pid: w.proc.pid! };
}

/** A walker stepped to K and captured there: the payload bytes and the StageRestore params for them. */
async function capturedWalker(runtime: Runtime): Promise<{ payload: Buffer; params: Record<string, unknown> }> {
  const { client } = await started(runtime, 'w-src');
  resultOf(await client.call(METHODS.agentInitialize, scope(0), { agents: [AGENT] }));
  for (let k = 0; k < K; k++) {
    const p = await client.call(METHODS.agentPrepare, scope(k), { agents: [{ agentId: AGENT.agentId }] });
    resultOf(p);
    resultOf(
      await client.call(METHODS.agentCommit, scope(k), {
        agents: [
          { agentId: AGENT.agentId, preparedRequestId: p.requestId, observation: AGENT.observation, rewards: [] },
        ],
      }),
    );
  }
  const r = await client.call(METHODS.capture, scope(K), { checkpointId: 'ck-3', agentId: AGENT.agentId });
  const cap = resultOf<CaptureResult>(r);
  return {
    payload: r.attachment!,
    params: {
      checkpointId: cap.checkpointId,
      agentId: cap.agentId,
      sourceScope: scope(K),
      compatibilityDigest: cap.compatibilityDigest,
      payload: cap.payload,
    },
  };
}

/** Peak virtual memory of a process in KiB: a large allocation shows here even if never touched. */
function vmPeakKiB(pid: number): number {
  const m = /^VmPeak:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

for (const runtime of ['typescript', 'rust'] as const) {
  describe.skipIf(runtime === 'rust' && rustWorkerSkip !== null)(
    `store-files-v1 reads payload ranges from the run's store only (${runtime} worker)`,
    () => {
      let root: string;
      let store: string;
      let src: { payload: Buffer; params: Record<string, unknown> };
      let goodFile: string;

      beforeAll(async () => {
        if (runtime === 'rust') ensureRustWorker();
        root = mkdtempSync(join(tmpdir(), 'detsim-payload-confine-'));
        store = join(root, 'run', 'store');
        mkdirSync(join(store, 'generations'), { recursive: true });
        src = await capturedWalker(runtime);
        goodFile = join(store, 'generations', 'ckpt-e1-3.flysess');
        writeFileSync(goodFile, Buffer.concat([Buffer.alloc(OFFSET, 7), src.payload, Buffer.alloc(9, 7)]));
      }, 1_500_000);
      afterAll(() => rmSync(root, { recursive: true, force: true }));

      /** StageRestore on `client` of the captured walker's params with this payload.file (and byteLength). */
      const stage = (client: WorkerClient, file: Record<string, unknown>, byteLength?: string): Promise<CallReply> => {
        const payload = {
          ...(src.params.payload as Record<string, unknown>),
          file,
          ...(byteLength ? { byteLength } : {}),
        };
        return client.callUnchecked(METHODS.stageRestore, scope(K, 'e2'), { ...src.params, payload });
      };
      const refusedWith = (r: CallReply) => {
        const e = errorOf(r);
        // Nothing the worker read may come back: no digest but the request's own, no byte counts.
        expect(e.message).not.toMatch(/[0-9a-f]{64}/);
        expect(e.message).not.toMatch(/\d+ bytes/);
        return { code: e.code, message: e.message };
      };
      const OUTSIDE = { code: 'INVALID_ARGUMENT', message: PAYLOAD_FILE_REFUSALS.outside };

      it('refuses /etc/passwd, a 0600 file outside the store, a symlink out of the store, a `..` escape, a missing file and a directory, all alike', async () => {
        const { client } = await started(runtime, 'w-confined', ['--store-dir', store]);
        const secret = join(root, 'secret.bin');
        writeFileSync(secret, Buffer.concat([Buffer.alloc(OFFSET, 7), src.payload]));
        chmodSync(secret, 0o600);
        symlinkSync(secret, join(store, 'generations', 'link.flysess'));
        const escapes = [
          { path: '/etc/passwd', offset: '0' },
          { path: secret, offset: String(OFFSET) }, // the right bytes, in the wrong place
          { path: join(store, 'generations', 'link.flysess'), offset: String(OFFSET) },
          { path: join(store, 'generations', '..', '..', 'secret.bin'), offset: '0' },
          { path: `${store}/../../secret.bin`, offset: String(OFFSET) },
          { path: join(store, 'generations', 'missing.flysess'), offset: '0' },
          { path: join(store, 'generations'), offset: '0' },
          { path: store, offset: '0' },
        ];
        for (const file of escapes) expect(refusedWith(await stage(client, file)), file.path).toEqual(OUTSIDE);
        // The store's own file still stages: the refusals above left nothing staged.
        resultOf(await stage(client, { path: goodFile, offset: String(OFFSET) }));
      });

      it('bounds byteLength by the file before allocating (a 3 GiB claim is refused, nothing that size is mapped) and never echoes what it read', async () => {
        const { client, pid } = await started(runtime, 'w-bounds', ['--store-dir', store]);
        const before = vmPeakKiB(pid);
        const past = { code: 'BUFFER_INVALID', message: PAYLOAD_FILE_REFUSALS.pastEnd };
        expect(
          refusedWith(await stage(client, { path: goodFile, offset: String(OFFSET) }, String(3 * 1024 ** 3))),
        ).toEqual(past);
        expect(refusedWith(await stage(client, { path: goodFile, offset: '18446744073709551615' }))).toEqual(past);
        expect(refusedWith(await stage(client, { path: goodFile, offset: String(OFFSET + 10) }))).toEqual(past);
        expect(vmPeakKiB(pid) - before).toBeLessThan(512 * 1024);
        // A range whose bytes differ: only the check and the payload's name, not the digest of what was read.
        expect(refusedWith(await stage(client, { path: goodFile, offset: String(OFFSET + 1) }))).toEqual({
          code: 'BUFFER_INVALID',
          message: 'params.payload.digest: the payload digest check failed for payload agent-a-walk',
        });
        const token = resultOf<{ restoreToken: string }>(
          await stage(client, { path: goodFile, offset: String(OFFSET) }),
        ).restoreToken;
        resultOf(
          await client.call(METHODS.activateRestore, scope(K, 'e2'), { restoreToken: token, agentId: AGENT.agentId }),
        );
      });

      it('a relative --store-dir is refused at start: one line naming the flag, exit 2, nothing listens', () => {
        const { command, args } = commandOf(runtime);
        const r = spawnSync(
          command,
          [
            ...args,
            '--listen',
            `unix:${join(root, 'never.sock')}`,
            '--role',
            'agent',
            '--worker-id',
            'w-rel',
            '--store-dir',
            'runs/x/store',
          ],
          { cwd: REPO_ROOT, encoding: 'utf8' },
        );
        expect(r.status).toBe(2);
        expect(r.stderr.trim().split('\n')).toEqual([
          'detsim: [struct_invalid_field] --store-dir "runs/x/store" is not an absolute path',
        ]);
        expect(r.stdout).toBe('');
      });

      it("a worker started without --store-dir reads no payload file, not even the store's", async () => {
        const { client } = await started(runtime, 'w-nostore');
        expect(refusedWith(await stage(client, { path: goodFile, offset: String(OFFSET) }))).toEqual({
          code: 'UNSUPPORTED',
          message: PAYLOAD_FILE_REFUSALS.noStore,
        });
        expect(refusedWith(await stage(client, { path: '/etc/passwd', offset: '0' }))).toEqual({
          code: 'UNSUPPORTED',
          message: PAYLOAD_FILE_REFUSALS.noStore,
        });
        // The attachment path is untouched.
        const params = { ...src.params };
        resultOf(await client.callUnchecked(METHODS.stageRestore, scope(K, 'e2'), params, { attachment: src.payload }));
      });
    },
  );
}
