// Lockstep runs end to end with real worker processes over gRPC on Unix sockets: two runs of each
// example are identical, the three dispatch orders give identical traces, a nondeterministic agent
// is caught, and the run directory holds what it promises. Few steps each: correctness only.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfigText, resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { canonicalize, sha256Hex } from '../../core/formats/canonical-json.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import { runSession } from '../../coordinator/session/run.js';
import { compareBehaviours, describeDifference } from '../../coordinator/trace/trace.js';
import { traceFormatOf } from '../../coordinator/trace/trace-store.js';
import { builtWorkersFor, childPids, fourWorkerExample, loadPlan, readRun, tmpOut } from './helpers.js';

const behaviourLines = (dir: string) => readRun(dir).traces.map((t) => canonicalize(t.behaviour));
/** Real worker processes, the built ones (helpers.ts builtWorkersFor: not tsx from source on each start). */
const built = (plan: RunPlan) => ({ commandFor: builtWorkersFor(plan) });

describe('lockstep: forage-walkers (16 walkers, 4 agent workers)', () => {
  const out = tmpOut();
  // Worker processes: the runs are told apart by their pids, and tests below drop replies in transport.
  const plan: RunPlan = fourWorkerExample(['transport: unix']);
  let first: Awaited<ReturnType<typeof runSession>>;

  it('[SEED-7, LOCK-4, LOCK-8, LOCK-17] runs and writes run.json, the trace (segments by default), run.log and summary.json', async () => {
    first = await runSession(plan, { outDir: out, steps: 4, hooks: built(plan) });
    expect(first.runDir).toBe(`${out}/forage-walkers-1`);
    expect(first.steps).toBe(4);
    const r = readRun(first.runDir);
    expect(traceFormatOf(first.runDir)).toBe('segments');
    expect(r.traces).toHaveLength(4);
    expect(r.summary).toMatchObject({ status: 'completed', stepsDone: 4, behaviourDigest: first.behaviourDigest });
    // The digest is SHA-256 over the canonical behaviour lines in step order (recomputed here).
    expect(sha256Hex(r.traces.map((t) => `${canonicalize(t.behaviour)}\n`).join(''))).toBe(first.behaviourDigest);
    expect(r.run).toMatchObject({
      sessionId: 'forage-walkers',
      masterSeed: '20261129',
      seedDerivation: 'seed-derivation-v1',
      epoch: 'e1',
    });
    const agents = r.run.agents as { agentId: string; seed: number; modelVersion: string }[];
    expect(agents).toHaveLength(16);
    expect(agents[0]).toMatchObject({ agentId: 'walker-00', seed: plan.agents[0]!.seed, modelVersion: 'walker-v1' });
    expect((r.run.environment as { seed: number }).seed).toBe(plan.environment.seed);
    expect((r.run.protocol as { contractDigest: string }).contractDigest).toMatch(/^[0-9a-f]{64}$/);
    expect(r.log).toContain('"run finished"');
    // Per-step structure: scope, batch id, boundaries, agents sorted by id, 60 Hz / 1 ms ticks.
    const b = r.traces.map((t) => t.behaviour);
    expect(b.map((x) => x.batchId)).toEqual(['batch-e1-0', 'batch-e1-1', 'batch-e1-2', 'batch-e1-3']);
    expect(b.map((x) => x.acknowledgedBoundary)).toEqual(['1', '2', '3', '4']);
    expect(b.map((x) => x.agents[0]!.ticksAdvanced)).toEqual(['16', '17', '17', '16']);
    expect(b[2]!.agents[0]!.remainder).toEqual({ numerator: '0', denominator: '1' });
    for (const x of b) expect(x.agents.map((a) => a.agentId)).toEqual([...x.agents.map((a) => a.agentId)].sort());
    expect(childPids()).toEqual([]);
  }, 120_000);

  it('[LOCK-15, LOCK-16] a second run gives identical behaviour traces and digest, different operational data', async () => {
    const second = await runSession(plan, { outDir: out, steps: 4, hooks: built(plan) });
    expect(second.runDir).toBe(`${out}/forage-walkers-2`);
    expect(second.behaviourDigest).toBe(first.behaviourDigest);
    expect(behaviourLines(second.runDir)).toEqual(behaviourLines(first.runDir));
    const pids = (dir: string) => readRun(dir).traces[0]!.operational.pids.map((p) => p.pid);
    expect(pids(second.runDir)).not.toEqual(pids(first.runDir));
  }, 120_000);

  it('[LOCK-10, LOCK-14] Prepare and Commit replies dropped in transport are re-sent under the same request id: same behaviour, no second tick', async () => {
    let fleet: Fleet | undefined;
    const r = await runSession(plan, {
      outDir: out,
      steps: 4,
      hooks: {
        ...built(plan),
        onLaunched: (f) => (fleet = f),
        beforePhase: (step, phase) => {
          if (step === 1n && phase === 'prepare') fleet!.agents[1]!.client.faults.dropNextReply('Agent.Prepare');
          if (step === 2n && phase === 'commit') fleet!.agents[3]!.client.faults.dropNextReply('Agent.Commit');
        },
      },
    });
    const { log, traces } = readRun(r.runDir);
    expect(log.match(/reply dropped; re-sending the same request/g)).toHaveLength(2);
    // The retry reused the original request id, and the worker answered from its cache.
    expect(r.behaviourDigest).toBe(first.behaviourDigest);
    expect(traces.map((t) => canonicalize(t.behaviour))).toEqual(behaviourLines(first.runDir));
  }, 120_000);

  it('[LOCK-3, LOCK-16] sequential, concurrent and reversed dispatch give identical traces', async () => {
    // Three agent workers (6 walkers) keep this cheap while every order still differs.
    const small = resolveConfig({
      ...(parseConfigText(readFileSync('examples/forage-walkers.yaml', 'utf8'), 'x') as object),
      agents: { count: 6, prefix: 'walker-', model: 'walker' },
      workers: { agentsPerWorker: 2 },
    });
    small.deadlines.startupMs = 60_000;
    const digests: string[] = [];
    const lines: string[][] = [];
    for (const dispatch of ['sequential', 'concurrent', 'reversed'] as const) {
      const r = await runSession(small, { outDir: out, steps: 3, dispatch, hooks: built(small) });
      digests.push(r.behaviourDigest);
      lines.push(behaviourLines(r.runDir));
      const order = readRun(r.runDir).traces[0]!.operational.completionOrder.prepare;
      if (dispatch === 'sequential') expect(order).toEqual(['worker-0', 'worker-1', 'worker-2']);
      if (dispatch === 'reversed') expect(order).toEqual(['worker-2', 'worker-1', 'worker-0']);
    }
    expect(new Set(digests).size).toBe(1);
    expect(lines[1]).toEqual(lines[0]);
    expect(lines[2]).toEqual(lines[0]);
  }, 240_000);
});

describe('lockstep: lif-pair', () => {
  it('[LOCK-15, LOCK-19] two runs give identical behaviour traces and digest (the second over TCP instead of Unix sockets)', async () => {
    const out = tmpOut();
    const plan = loadPlan('examples/lif-pair.yaml');
    const a = await runSession(plan, { outDir: out, steps: 3, hooks: built(plan) });
    const tcp = { ...plan, transport: 'tcp' as const };
    const b = await runSession(tcp, { outDir: out, steps: 3, hooks: built(tcp) });
    expect(readRun(b.runDir).log).toMatch(/"listen":"127\.0\.0\.1:[0-9]+"/);
    expect(b.behaviourDigest).toBe(a.behaviourDigest);
    expect(behaviourLines(b.runDir)).toEqual(behaviourLines(a.runDir));
    expect(readRun(a.runDir).run.agents).toMatchObject([
      { agentId: 'lif-a', modelVersion: 'lif-v1' },
      { agentId: 'lif-b', modelVersion: 'lif-v1' },
    ]);
  }, 180_000);
});

describe('lockstep: an injected nondeterministic agent', () => {
  it('[DIFF-4] makes two runs differ, and the comparison names the step and field', async () => {
    const out = tmpOut();
    const plan = loadPlan('test/coordinator/fixtures/pid-walkers.yaml');
    const a = await runSession(plan, { outDir: out });
    const b = await runSession(plan, { outDir: out });
    expect(b.behaviourDigest).not.toBe(a.behaviourDigest);
    const diff = compareBehaviours(
      readRun(a.runDir).traces.map((t) => t.behaviour),
      readRun(b.runDir).traces.map((t) => t.behaviour),
    );
    expect(diff).not.toBeNull();
    expect(diff!.path).toMatch(/^agents\[[01]\]\.decision\.move$/);
    expect(describeDifference(diff!)).toMatch(/^step [0-9]+: /);
  }, 180_000);
});
