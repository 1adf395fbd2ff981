// Restore faithfulness of the built-in models through real worker processes of each language
// (issue #29): a TypeScript, Python and Rust agent worker each run `walker` and `lif` from their
// seeds to step K, capture them, and run on to K+N; a fresh worker of the same language stages and
// activates those captures and, fed the same inputs, must reply the same prepared decisions (ticks
// included) at every step and re-capture the same model state at K+N. The same for `forage` on a
// TypeScript and a Python environment worker (the Rust worker hosts no environment). The model state
// at K must differ from the one at 0, so a restore that re-initializes from the seed cannot pass.
// The control: the K capture with its model state swapped for the boundary-0 one (the seed's state,
// what a restore that re-initializes from the seed installs; the rest of the payload and its digest
// are consistent) fails the same check for every model, naming the step. Not the coordinator's
// checkpoint and resume (test/checkpoint/, test/cross-lang/worker-checkpoint.test.ts,
// python-run.test.ts), and not a model's own unit check (test/workers/restore-faithful.test.ts,
// workers/python/tests/test_restore_faithful.py, crates-bridge/worker/src/models.rs).
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { METHODS, type CaptureResult, type WorkerClient } from '../../core/protocol/index.js';
import type { Role } from '../../core/protocol/index.js';
import { decodeState, encodeState } from '../../workers/state-codec.js';
import { SESSION, STEP_60HZ, launchWorker, resultOf, scope } from '../workers/harness.js';
import { ensurePythonWorker, pythonWorkerSkip } from './python-worker.js';
import { commandOf, ensureRustWorker, rustWorkerSkip, stopAllWorkers, type Runtime } from './rust-worker.js';

afterAll(stopAllWorkers);

const K = 12;
const N = 12;

/** Observation at boundary k: food offsets that vary, and now and then none. */
function obsAt(k: number): Record<string, number> {
  if (k % 7 === 3) return { x: 0, y: 0 };
  return { foodDx: ((k * 7) % 9) - 4, foodDy: ((k * 5) % 7) - 3, score: k, x: k % 5, y: k % 4 };
}

const AGENTS = [
  { agentId: 'a-walker', model: 'walker', params: { explore: 3 }, seed: -424242 },
  { agentId: 'a-lif', model: 'lif', params: { neurons: 200 }, seed: 777 },
].map((a) => ({ ...a, stepDuration: STEP_60HZ, observation: obsAt(0) }));
const IDS = AGENTS.map((a) => ({ agentId: a.agentId }));

const PORTS = [
  { portId: 'p0', agentId: 'a' },
  { portId: 'p1', agentId: 'b' },
  { portId: 'p2', agentId: 'c' },
];
const WORLD = {
  environmentId: 'world',
  model: 'forage',
  params: { width: 7, height: 5, food: 6 },
  seed: 31337,
  stepDuration: STEP_60HZ,
  ports: PORTS,
};
const MOVES = ['north', 'east', 'south', 'west', 'stay'];

async function start(runtime: Runtime, role: Role, workerId: string): Promise<WorkerClient> {
  const { command, args } = commandOf(runtime);
  const w = await launchWorker(command, args, { role, workerId });
  await w.client.hello({ sessionId: SESSION, workerId, role });
  return w.client;
}

interface Captured {
  result: CaptureResult;
  payload: Buffer;
}

async function capture(c: WorkerClient, k: number, epoch: string, agentId: string | null): Promise<Captured> {
  const r = await c.call(METHODS.capture, scope(k, epoch), { checkpointId: `ck-${k}`, agentId });
  const result = resultOf<CaptureResult>(r);
  resultOf(await c.call(METHODS.acknowledge, null, { requestIds: [r.requestId] }));
  return { result, payload: r.attachment! };
}

/** The model's own captured state in a payload, as state-codec bytes. */
const modelState = (payload: Buffer): Buffer => encodeState((decodeState(payload) as { state: unknown }).state);

/**
 * The control's payload: `atK` with its model state replaced by `at0`'s (the seed's state), everything
 * else (scope, tick accumulator, observation, identity) as captured at K; its digest and length are its own.
 */
function seedStateAt(atK: Captured, at0: Captured): Captured {
  const payload = encodeState({
    ...(decodeState(atK.payload) as Record<string, unknown>),
    state: (decodeState(at0.payload) as { state: unknown }).state,
  });
  return {
    result: {
      ...atK.result,
      payload: { digest: createHash('sha256').update(payload).digest('hex'), byteLength: String(payload.length) },
    },
    payload,
  };
}

async function restore(c: WorkerClient, cap: Captured, epoch: string): Promise<void> {
  const { checkpointId, agentId, compatibilityDigest, payload } = cap.result;
  const staged = resultOf<{ restoreToken: string }>(
    await c.callUnchecked(
      METHODS.stageRestore,
      scope(K, epoch),
      { checkpointId, agentId, sourceScope: scope(K, 'e1'), compatibilityDigest, payload },
      { attachment: cap.payload },
    ),
  );
  resultOf(await c.call(METHODS.activateRestore, scope(K, epoch), { restoreToken: staged.restoreToken, agentId }));
}

/** One step of both agents; each agent's prepared reply (decision, ticks, accumulator) as canonical JSON. */
async function stepAgents(c: WorkerClient, k: number, epoch: string): Promise<Record<string, string>> {
  const p = await c.call(METHODS.agentPrepare, scope(k, epoch), { agents: IDS });
  const prepared = resultOf(p).agents;
  resultOf(
    await c.call(METHODS.agentCommit, scope(k, epoch), {
      agents: IDS.map(({ agentId }) => ({
        agentId,
        preparedRequestId: p.requestId,
        observation: obsAt(k + 1),
        rewards: [{ eventId: `r-${k}-${agentId}`, ruleId: 'r', value: (k % 4) * 0.25 }],
      })),
    }),
  );
  return Object.fromEntries(prepared.map((d) => [d.agentId, canonicalize(d)]));
}

/** One world step; the whole Advance result (observations, rewards, event ids, world digest) as canonical JSON. */
async function stepWorld(c: WorkerClient, k: number, epoch: string): Promise<Record<string, string>> {
  const r = await c.call(METHODS.environmentAdvance, scope(k, epoch), {
    batchId: `batch-${k}`,
    actions: PORTS.map((p, i) => ({ ...p, action: { move: MOVES[(k * 7 + i * 3) % 5]! } })),
  });
  return { world: canonicalize(resultOf(r)) };
}

type Step = (c: WorkerClient, k: number, epoch: string) => Promise<Record<string, string>>;

/** Steps K..K+N-1 of a worker at `epoch`, by participant. */
async function continueFrom(c: WorkerClient, epoch: string, step: Step): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (let k = K; k < K + N; k++)
    for (const [id, r] of Object.entries(await step(c, k, epoch))) (out[id] ??= []).push(r);
  return out;
}

/** The first step at which `got` differs from `want`, named, or null. */
function divergence(want: string[], got: string[]): string | null {
  for (let i = 0; i < want.length; i++)
    if (got[i] !== want[i]) return `step ${K + i}: ${got[i]} restored, ${want[i]} uninterrupted`;
  return null;
}

interface Participant {
  id: string;
  at0: Captured;
  atK: Captured;
  /** Model state captured at K+N by the uninterrupted worker. */
  end: Buffer;
  expected: string[];
}

/** The uninterrupted worker: boundary-0 and K captures, then the outputs to K+N and the model state there. */
async function uninterrupted(c: WorkerClient, ids: (string | null)[], step: Step): Promise<Participant[]> {
  const at0 = await Promise.all(ids.map((id) => capture(c, 0, 'e1', id)));
  for (let k = 0; k < K; k++) await step(c, k, 'e1');
  const atK: Captured[] = [];
  for (const id of ids) atK.push(await capture(c, K, 'e1', id));
  const expected = await continueFrom(c, 'e1', step);
  const out: Participant[] = [];
  for (const [i, id] of ids.entries()) {
    const end = modelState((await capture(c, K + N, 'e1', id)).payload);
    out.push({ id: id ?? 'world', at0: at0[i]!, atK: atK[i]!, end, expected: expected[id ?? 'world']! });
  }
  return out;
}

/** A fresh worker restores `payloads` at K and continues: per participant, the divergence and the re-capture. */
async function restored(
  c: WorkerClient,
  parts: Participant[],
  payloads: Captured[],
  step: Step,
): Promise<{ id: string; divergence: string | null; sameEnd: boolean }[]> {
  for (const cap of payloads) await restore(c, cap, 'e2');
  const got = await continueFrom(c, 'e2', step);
  const out = [];
  for (const p of parts) {
    const end = modelState((await capture(c, K + N, 'e2', p.id === 'world' ? null : p.id)).payload);
    out.push({ id: p.id, divergence: divergence(p.expected, got[p.id]!), sameEnd: end.equals(p.end) });
  }
  return out;
}

const RUNTIMES: { runtime: Runtime; skip: string | null; ensure: () => unknown; world: boolean }[] = [
  { runtime: 'typescript', skip: null, ensure: () => undefined, world: true },
  { runtime: 'python', skip: pythonWorkerSkip, ensure: ensurePythonWorker, world: true },
  // The Rust worker hosts agents only (workers/README.md).
  { runtime: 'rust', skip: rustWorkerSkip, ensure: ensureRustWorker, world: false },
];

for (const { runtime, skip, ensure, world } of RUNTIMES) {
  describe.skipIf(skip !== null)(
    `built-ins restored by a ${runtime} worker continue as the uninterrupted worker`,
    () => {
      beforeAll(() => void ensure(), 1_500_000);

      const cases: { name: string; role: Role; ids: (string | null)[]; step: Step }[] = [
        { name: 'walker and lif', role: 'agent', ids: IDS.map((a) => a.agentId), step: stepAgents },
      ];
      if (world) cases.push({ name: 'forage', role: 'environment', ids: [null], step: stepWorld });
      for (const { name, role, ids, step } of cases) {
        it(`${name}: the same replies at steps ${K}..${K + N - 1} and the same model state at ${K + N} after a restore at ${K}; the control (the seed's state restored at ${K}) diverges at a named step`, async () => {
          const init = role === 'agent' ? METHODS.agentInitialize : METHODS.environmentInitialize;
          const a = await start(runtime, role, 'w-a');
          resultOf(await a.callUnchecked(init, scope(0), role === 'agent' ? { agents: AGENTS } : WORLD));
          const parts = await uninterrupted(a, ids, step);
          for (const p of parts)
            expect(
              modelState(p.atK.payload).equals(modelState(p.at0.payload)),
              `${p.id}: state at ${K} is the initial one`,
            ).toBe(false);

          const b = await start(runtime, role, 'w-b');
          const faithful = await restored(
            b,
            parts,
            parts.map((p) => p.atK),
            step,
          );
          expect(faithful.map((r) => r.id)).toEqual(parts.map((p) => p.id));
          for (const r of faithful) {
            expect(r.divergence, r.id).toBeNull();
            expect(r.sameEnd, `${r.id}: the model state re-captured at ${K + N} differs`).toBe(true);
          }

          const c = await start(runtime, role, 'w-c');
          const control = await restored(
            c,
            parts,
            parts.map((p) => seedStateAt(p.atK, p.at0)),
            step,
          );
          for (const r of control) {
            expect(r.divergence, `${r.id}: the seed's state restored at ${K} went unnoticed`).toMatch(
              /^step \d+: .+ restored, .+ uninterrupted$/,
            );
            const at = Number(/^step (\d+)/.exec(r.divergence!)![1]);
            expect(at).toBeGreaterThanOrEqual(K);
            expect(at).toBeLessThan(K + N);
            expect(r.sameEnd).toBe(false);
          }
        }, 120_000);
      }
    },
  );
}
