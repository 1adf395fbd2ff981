// Unit tests (no workers) for how resume keeps trace.jsonl consistent: splitting at the checkpoint
// boundary (a torn last line is abandoned, a gap or mid-file damage is refused), and the behaviour
// hash chain, which continues from a checkpoint's recorded value exactly as if never interrupted
// and rebases later epochs onto the first.
import { describe, expect, it } from 'vitest';
import { BEHAVIOUR_CHAIN_GENESIS, RollingBehaviour } from '../../coordinator/checkpoint/group.js';
import { splitTrace } from '../../coordinator/checkpoint/resume.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { batchIdFor, type TraceBehaviour } from '../../coordinator/trace/trace.js';

function behaviour(step: number, epoch = 'e1', move = 'north'): TraceBehaviour {
  return {
    scope: { sessionId: 's', epoch, step: String(step) },
    agents: [
      {
        agentId: 'a',
        profileDigest: '0'.repeat(64),
        ticksAdvanced: '16',
        brainTicks: String(16 * (step + 1)),
        remainder: { numerator: '0', denominator: '1' },
        decision: { move },
        decisionDigest: '1'.repeat(64),
        committedStep: String(step + 1),
      },
    ],
    batchId: batchIdFor(epoch, step),
    controlDigest: '2'.repeat(64),
    acknowledgedBoundary: String(step + 1),
    observationDigest: '3'.repeat(64),
    worldDigest: '4'.repeat(64),
    rewards: [],
    eventIds: [],
    publishedBoundary: String(step + 1),
  };
}
const line = (b: TraceBehaviour) => canonicalize({ behaviour: b, operational: { wallTimeNs: '1' } });

describe('splitTrace', () => {
  it('keeps steps before k, abandons later ones and a torn last line', () => {
    const text = [0, 1, 2, 3].map((k) => line(behaviour(k))).join('\n') + '\n{"behaviour":{"sco';
    const s = splitTrace(text, 2n, 'trace.jsonl');
    expect(s.kept).toHaveLength(2);
    expect(s.abandonedSteps).toEqual([2n, 3n]);
    expect(s.abandoned).toHaveLength(3);
  });

  it('refuses a trace missing steps before the boundary, or damaged before its last line', () => {
    const gap = [0, 2].map((k) => line(behaviour(k))).join('\n');
    expect(() => splitTrace(gap, 3n, 'trace.jsonl')).toThrow(/line 2 is step 2, expected step 1/);
    const short = line(behaviour(0));
    expect(() => splitTrace(short, 2n, 'trace.jsonl')).toThrow(DetsimError);
    const damaged = [line(behaviour(0)), '{oops', line(behaviour(1))].join('\n');
    expect(() => splitTrace(damaged, 2n, 'trace.jsonl')).toThrow(/line 2 is not a trace line/);
  });
});

describe('behaviour chain', () => {
  it('continues from a recorded prefix exactly, rebases later epochs, and detects a changed step', () => {
    const full = new RollingBehaviour('e1');
    for (let k = 0; k < 4; k++) full.add(behaviour(k));
    const head = new RollingBehaviour('e1');
    head.add(behaviour(0));
    head.add(behaviour(1));
    const resumed = new RollingBehaviour('e1', head.prefix());
    resumed.add(behaviour(2, 'e2'));
    resumed.add(behaviour(3, 'e2'));
    expect(resumed.prefix()).toEqual(full.prefix());
    expect(new RollingBehaviour('e1').prefix().digest).toBe(BEHAVIOUR_CHAIN_GENESIS);
    const changed = new RollingBehaviour('e1', head.prefix());
    changed.add(behaviour(2, 'e2', 'south'));
    changed.add(behaviour(3, 'e2'));
    expect(changed.prefix().digest).not.toBe(full.prefix().digest);
  });
});
