// Divergence diagnosis on receipts built by hand: names the first step, the field path, both
// values and the agent; never blames a physical field.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { describeDivergence, diagnose, diagnoseRunDirs } from '../../coordinator/diff0/diagnosis.js';
import { sampleReceipt } from './sample.js';

type Mutable = {
  steps: { behaviour: { agents: { agentId: string; decision: Record<string, unknown> }[]; worldDigest: string } }[];
  run: { masterSeed: string };
};

describe('divergence diagnosis', () => {
  it('equal ReproCores (physical fields differing) give no divergence', () => {
    expect(
      diagnose(sampleReceipt(), sampleReceipt({ wall: '77', pid: 9, order: ['worker-1', 'worker-0'] })),
    ).toBeNull();
  });

  it('[DIFF-4] names the first diverging step, the field path, both values and the agent', () => {
    const b = sampleReceipt() as unknown as Mutable;
    b.steps[1]!.behaviour.agents[1]!.decision.move = 'west';
    b.steps[1]!.behaviour.worldDigest = '0'.repeat(64); // a later field of the same step
    const d = diagnose(sampleReceipt(), b)!;
    expect(d).toEqual({
      part: 'step',
      step: '1',
      path: 'steps[1].behaviour.agents[agentId=a1].decision.move',
      agentId: 'a1',
      left: 'south',
      right: 'west',
    });
    expect(describeDivergence(d)).toBe(
      'first divergence at step 1 (agent a1): steps[1].behaviour.agents[agentId=a1].decision.move: run A "south", run B "west"',
    );
  });

  it('[DIFF-4] the earliest step wins, whatever the order of the trace lines', () => {
    const b = sampleReceipt() as unknown as Mutable;
    b.steps[0]!.behaviour.agents[0]!.decision.move = 'up';
    b.steps[1]!.behaviour.agents[1]!.decision.move = 'down';
    b.steps.reverse();
    const d = diagnose(sampleReceipt(), b)!;
    expect(d.step).toBe('0');
    expect(d.agentId).toBe('a0');
    expect(d.left).toBe('north');
  });

  it('a composition difference is reported before any step, and a missing step by count', () => {
    const b = sampleReceipt() as unknown as Mutable;
    b.run.masterSeed = '43';
    b.steps[0]!.behaviour.agents[0]!.decision.move = 'up';
    expect(diagnose(sampleReceipt(), b)).toMatchObject({
      part: 'composition',
      path: 'run.masterSeed',
      left: '42',
      right: '43',
    });
    const c = sampleReceipt() as unknown as Mutable;
    c.steps.pop();
    expect(diagnose(sampleReceipt(), c)).toMatchObject({ part: 'steps-count', step: '1', left: 2, right: 1 });
  });
});

describe('diagnosis of two run directories (trace.jsonl files)', () => {
  function writeRunDir(r: ReturnType<typeof sampleReceipt>): string {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-diag-'));
    writeFileSync(join(dir, 'run.json'), `${canonicalize(r.run)}\n`);
    writeFileSync(join(dir, 'trace.jsonl'), r.steps.map((s) => `${canonicalize(s)}\n`).join(''));
    writeFileSync(join(dir, 'summary.json'), `${canonicalize(r.summary)}\n`);
    return dir;
  }

  it('[DIFF-4] reads both run directories and names the first diverging step, field, agent and values', () => {
    const a = writeRunDir(sampleReceipt());
    const changed = sampleReceipt() as unknown as Mutable;
    changed.steps[0]!.behaviour.agents[1]!.decision.move = 'north';
    const b = writeRunDir(changed as never);
    expect(diagnoseRunDirs(a, b)).toEqual({
      part: 'step',
      step: '0',
      path: 'steps[0].behaviour.agents[agentId=a1].decision.move',
      agentId: 'a1',
      left: 'south',
      right: 'north',
    });
    expect(diagnoseRunDirs(a, writeRunDir(sampleReceipt({ wall: '1', pid: 2 })))).toBeNull();
  });
});
