// Unit tests (no workers) for the one running behaviour hash as a checkpoint carries it
// (HashedBehaviour, a group stepped on its own): its SHA-256 state continues from a recorded prefix
// exactly as if never interrupted, rebases later epochs onto the first, detects a changed step, and
// is the state of the digest summary.json reports (BehaviourDigest, node:crypto).
import { describe, expect, it } from 'vitest';
import { HashedBehaviour } from '../../coordinator/checkpoint/group.js';
import { Sha256Stream } from '../../coordinator/trace/sha256-state.js';
import { batchIdFor, behaviourDigest, type TraceBehaviour } from '../../coordinator/trace/trace.js';

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
describe('the behaviour digest state a checkpoint carries', () => {
  it('continues from a recorded prefix exactly, rebases later epochs, and detects a changed step', () => {
    const full = new HashedBehaviour('e1');
    for (let k = 0; k < 4; k++) full.add(behaviour(k));
    const head = new HashedBehaviour('e1');
    head.add(behaviour(0));
    head.add(behaviour(1));
    const resumed = new HashedBehaviour('e1', head.prefix());
    resumed.add(behaviour(2, 'e2'));
    resumed.add(behaviour(3, 'e2'));
    expect(resumed.prefix()).toEqual(full.prefix());
    expect(full.prefix().steps).toBe('4');
    const changed = new HashedBehaviour('e1', head.prefix());
    changed.add(behaviour(2, 'e2', 'south'));
    changed.add(behaviour(3, 'e2'));
    expect(changed.prefix().state).not.toEqual(full.prefix().state);
  });

  it('is the state of the digest summary.json reports over the same steps', () => {
    const steps = [0, 1, 2, 3, 4].map((k) => behaviour(k));
    const hashed = new HashedBehaviour('e1');
    for (const b of steps) hashed.add(b);
    expect(Sha256Stream.from(hashed.prefix().state).digest()).toBe(behaviourDigest(steps));
    expect(Sha256Stream.from(new HashedBehaviour('e1').prefix().state).digest()).toBe(behaviourDigest([]));
    // A control: one step fewer is another digest.
    expect(Sha256Stream.from(hashed.prefix().state).digest()).not.toBe(behaviourDigest(steps.slice(0, 4)));
  });
});
