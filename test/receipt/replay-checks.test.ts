// The replay checks on fixed receipts (no processes): each check passes on good evidence and
// fails on the injected fault it exists to catch.
import { describe, expect, it } from 'vitest';
import { FIELD_TABLE, type FieldRule } from '../../coordinator/receipt/fields.js';
import { planFromRunRecord, replayChecks, sensitivityProbes } from '../../coordinator/diff0/replay.js';
import { deriveSeed } from '../../core/formats/seed.js';
import { sampleReceipt } from './sample.js';

const statusOf = (checks: { check: string; status: string }[]) =>
  Object.fromEntries(checks.map((c) => [c.check, c.status]));

describe('replay checks', () => {
  it('[D4, DIFF-3] two runs whose ReproCore agrees and whose physical fields differ: all green', () => {
    const r = replayChecks(
      's1',
      [sampleReceipt(), sampleReceipt({ wall: '5555', pid: 31, order: ['worker-1', 'worker-0'] })],
      null,
    );
    expect(statusOf(r.checks)).toEqual({
      replay: 'pass',
      sensitivity: 'pass',
      'physical-diff': 'pass',
      'field-table': 'pass',
      honesty: 'pass',
    });
    expect(r.stable).toBe(true);
    for (const c of r.checks) expect(c.reason.length).toBeGreaterThan(0);
  });

  it('[DIFF-3] the physical-diff check fails when stripping is disabled', () => {
    const r = replayChecks('s1', [sampleReceipt(), sampleReceipt({ wall: '5555' })], null, { stripPhysical: false });
    expect(r.checks.find((c) => c.check === 'physical-diff')).toMatchObject({
      status: 'fail',
      reason: 'audit_no_physical_diff',
      action: 'block',
      layer: 'L8',
    });
    // …and without stripping the wall times reach the hash: the runs "differ" (a false red).
    expect(r.checks.find((c) => c.check === 'replay')!.status).toBe('fail');
  });

  it('[DIFF-3] the physical-diff check fails when the physical fields did not differ', () => {
    const r = replayChecks('s1', [sampleReceipt(), sampleReceipt()], null);
    expect(r.checks.find((c) => c.check === 'physical-diff')!.status).toBe('fail');
  });

  it('[DIFF-4] a diverging run fails replay with a diagnosis naming the step, field and agent', () => {
    const b = sampleReceipt() as unknown as { steps: { behaviour: { agents: { decision: { move: string } }[] } }[] };
    b.steps[1]!.behaviour.agents[0]!.decision.move = 'west';
    const r = replayChecks('s1', [sampleReceipt(), b as never], null);
    const c = r.checks.find((x) => x.check === 'replay')!;
    expect(c).toMatchObject({ status: 'fail', reason: 'audit_repro_hash_mismatch' });
    expect((c.detail as { diagnosis: string }).diagnosis).toBe(
      'first divergence at step 1 (agent a0): steps[1].behaviour.agents[agentId=a0].decision.move: first run "east", run 2 "west"',
    );
  });

  it('[D5] a table that strips the ReproCore (a vacuous DIFF=0) fails the sensitivity self-check', () => {
    const vacuous: FieldRule[] = FIELD_TABLE.map((r) =>
      r.path === 'steps' || r.path === 'run' ? { ...r, cls: 'physical', subtree: true } : r,
    );
    const probes = sensitivityProbes(sampleReceipt(), { table: vacuous });
    expect(probes.map((p) => p.field)).toEqual([
      'steps.0.behaviour.agents.0.decision.move',
      'run.masterSeed',
      'steps.1.behaviour.worldDigest',
    ]);
    expect(probes.every((p) => p.before === p.after)).toBe(true);
    const r = replayChecks('s1', [sampleReceipt(), sampleReceipt({ wall: '1' })], null, { table: vacuous });
    expect(r.checks.find((c) => c.check === 'sensitivity')).toMatchObject({
      status: 'fail',
      reason: 'audit_sensitivity_failed',
    });
    expect(r.checks.find((c) => c.check === 'replay')!.status).toBe('pass'); // the trap: "stable" but proves nothing
  });

  it('[D1] an unclassified field is a warning, not a silent drop', () => {
    const b = sampleReceipt() as unknown as { run: Record<string, unknown> };
    b.run.colour = 'red';
    const r = replayChecks('s1', [sampleReceipt(), b as never], null);
    expect(r.checks.find((c) => c.check === 'field-table')).toMatchObject({
      status: 'warn',
      reason: 'meta_unclassified_field',
      action: 'advise',
      detail: { unknown: [{ path: 'run.colour', count: 1 }] },
    });
  });

  it('a recorded run.json rebuilds its plan and refuses a seed that does not match the derivation', () => {
    const run = structuredClone(sampleReceipt().run) as {
      agents: { agentId: string; seed: number }[];
      environment: { seed: number; params: unknown };
      masterSeed: string;
    };
    run.environment.params = { width: 8, food: 1 }; // the sample's fractional food exercises precision, forage refuses it
    for (const a of run.agents) a.seed = deriveSeed(run.masterSeed, a.agentId);
    run.environment.seed = deriveSeed(run.masterSeed, 'env');
    const plan = planFromRunRecord(run);
    expect(plan.agents.map((a) => [a.agentId, a.portId, a.seed])).toEqual(
      run.agents.map((a) => [a.agentId, a.agentId, a.seed]),
    );
    expect(plan.stepDuration.toJSON()).toEqual({ numerator: '50000000', denominator: '3' });
    run.agents[1]!.seed += 1;
    expect(() => planFromRunRecord(run)).toThrow(expect.objectContaining({ reason: 'ident_seed_mismatch' }));
  });
});
