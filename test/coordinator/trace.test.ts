// Trace behaviour digest and EpochRebase: the digest against hand-written canonical lines and
// literal SHA-256 values (computed outside the code under test), epoch-derived fields rewritten,
// anything else that differs reported with its step and field path, a malformed epoch-derived
// field refused.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import {
  EpochRebase,
  behaviourDigest,
  behaviourStepDigest,
  canonicalBehaviour,
  compareBehaviours,
  normalizeBehaviour,
  type TraceBehaviour,
} from '../../coordinator/trace/trace.js';

const D = (c: string) => c.repeat(64);

function step(epoch: string, k: number, over: Partial<TraceBehaviour> = {}): TraceBehaviour {
  return {
    scope: { sessionId: 's', epoch, step: String(k) },
    agents: [
      {
        agentId: 'b',
        profileDigest: D('1'),
        ticksAdvanced: '17',
        brainTicks: String(17 * (k + 1)),
        remainder: { numerator: '0', denominator: '1' },
        decision: { move: 'n' },
        decisionDigest: D('2'),
        committedStep: String(k + 1),
      },
      {
        agentId: 'a',
        profileDigest: D('1'),
        ticksAdvanced: '16',
        brainTicks: String(16 * (k + 1)),
        remainder: { numerator: '2', denominator: '3' },
        decision: { move: 'e' },
        decisionDigest: D('3'),
        committedStep: String(k + 1),
      },
    ],
    batchId: `batch-${epoch}-${k}`,
    controlDigest: D('4'),
    acknowledgedBoundary: String(k + 1),
    observationDigest: D('5'),
    worldDigest: D('6'),
    rewards: [{ agentId: 'a', eventId: `eat-${epoch}-${k}`, ruleId: 'food', value: 1 }],
    eventIds: [`eat-${epoch}-${k}`],
    publishedBoundary: String(k + 1),
    ...over,
  };
}

/**
 * step('e1', k) as RFC 8785 text, written by hand (keys sorted, agents by id, numbers as JCS
 * writes them): the digest tests compare with these bytes, not with the project's canonicalizer.
 */
const handLine = (k: number): string =>
  `{"acknowledgedBoundary":"${k + 1}","agents":[` +
  `{"agentId":"a","brainTicks":"${16 * (k + 1)}","committedStep":"${k + 1}","decision":{"move":"e"},"decisionDigest":"${D('3')}","profileDigest":"${D('1')}","remainder":{"denominator":"3","numerator":"2"},"ticksAdvanced":"16"},` +
  `{"agentId":"b","brainTicks":"${17 * (k + 1)}","committedStep":"${k + 1}","decision":{"move":"n"},"decisionDigest":"${D('2')}","profileDigest":"${D('1')}","remainder":{"denominator":"1","numerator":"0"},"ticksAdvanced":"17"}],` +
  `"batchId":"batch-e1-${k}","controlDigest":"${D('4')}","eventIds":["eat-e1-${k}"],"observationDigest":"${D('5')}","publishedBoundary":"${k + 1}",` +
  `"rewards":[{"agentId":"a","eventId":"eat-e1-${k}","ruleId":"food","value":1}],"scope":{"epoch":"e1","sessionId":"s","step":"${k}"},"worldDigest":"${D('6')}"}`;

// SHA-256 of the hand-written lines, computed with sha256sum (and python hashlib) outside detsim:
// step 0's line alone, and steps 0 and 1 each followed by "\n", in order and swapped.
const STEP0_DIGEST = '56d2c5c0cf0c506f1fdfcfe41b0782cebcad58f6c6986c689a58f045cb04caad';
const STEPS_0_1_DIGEST = 'd0d53839a9111d3c182634941de2e0f4c4133163b00062046f42425d511f99c3';
const STEPS_1_0_DIGEST = '75d2afd7457443667803e217069e3acc5f336adb074c7fe35f15e9223bf0b42d';

describe('behaviour digest', () => {
  it('the hand-written lines hash to the literal digests (node:crypto, no detsim code)', () => {
    const sha = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
    expect(sha(handLine(0))).toBe(STEP0_DIGEST);
    expect(sha(`${handLine(0)}\n${handLine(1)}\n`)).toBe(STEPS_0_1_DIGEST);
    expect(sha(`${handLine(1)}\n${handLine(0)}\n`)).toBe(STEPS_1_0_DIGEST);
  });

  it('[LOCK-17] is SHA-256 over the canonical normalized behaviour lines, in step order: the literal digests', () => {
    const steps = [step('e1', 0), step('e1', 1)];
    expect(canonicalBehaviour(steps[0]!)).toBe(handLine(0));
    expect(behaviourStepDigest(steps[0]!)).toBe(STEP0_DIGEST);
    expect(behaviourDigest(steps)).toBe(STEPS_0_1_DIGEST);
    expect(behaviourDigest([steps[1]!, steps[0]!])).toBe(STEPS_1_0_DIGEST);
  });

  it('[LOCK-17] does not depend on the order agents were listed in', () => {
    const s = step('e1', 0);
    expect(behaviourDigest([{ ...s, agents: [...s.agents].reverse() }])).toBe(behaviourDigest([s]));
  });
});

describe('EpochRebase', () => {
  it('[LOCK-18] rewrites scope.epoch, batchId and epoch-token event ids (also in rewards)', () => {
    const r = new EpochRebase('e2', 'e1').apply(step('e2', 5));
    expect(r).toEqual(step('e1', 5));
  });

  it('leaves an event id without the epoch token alone', () => {
    const s = step('e2', 1, { eventIds: ['food-e20-1'], rewards: [] });
    expect(new EpochRebase('e2', 'e1').apply(s).eventIds).toEqual(['food-e20-1']);
  });

  it('[LOCK-18] refuses a batch id that is not batch-<epoch>-<step>', () => {
    expect(() => new EpochRebase('e2', 'e1').apply(step('e2', 3, { batchId: 'batch-e2-4' }))).toThrow(/batchId/);
  });

  it('[LOCK-18] a resumed sequence compares equal to the uninterrupted one after the rebase', () => {
    const uninterrupted = [0, 1, 2, 3].map((k) => step('e1', k));
    const resumed = [step('e1', 0), step('e1', 1), step('e2', 2), step('e2', 3)];
    expect(compareBehaviours(uninterrupted, resumed)).toBeNull();
  });

  it('[LOCK-18] any other difference fails and names step and field', () => {
    const uninterrupted = [0, 1, 2].map((k) => step('e1', k));
    const resumed = [step('e1', 0), step('e2', 1), step('e2', 2, { worldDigest: D('7') })];
    const d = compareBehaviours(uninterrupted, resumed);
    expect(d).toMatchObject({ step: '2', path: 'worldDigest', expected: D('6'), actual: D('7') });
  });

  it('a decision difference names the agent entry', () => {
    const a = [step('e1', 0)];
    const b = [step('e1', 0)];
    b[0]!.agents[0]!.decision = { move: 's' };
    expect(compareBehaviours(a, b)?.path).toBe('agents[1].decision.move');
  });

  it('a missing step is a difference', () => {
    expect(compareBehaviours([step('e1', 0), step('e1', 1)], [step('e1', 0)])?.path).toBe('(steps)');
  });
});

describe('traceLine', () => {
  it('equals canonicalize of the whole trace with the behaviour normalized', async () => {
    const { canonicalBehaviour, traceLine } = await import('../../coordinator/trace/trace.js');
    const behaviour = step('e1', 3);
    const operational = {
      wallTimeNs: '12',
      prepareRequestIds: [{ agentId: 'a', requestId: 'req-2' }],
      commitRequestIds: [],
      advanceRequestId: 'req-4',
      completionOrder: { prepare: ['w1', 'w0'], commit: [] },
      pids: [{ workerId: 'w0', pid: 7 }],
    };
    expect(traceLine(canonicalBehaviour(behaviour), operational)).toBe(
      canonicalize({ behaviour: normalizeBehaviour(behaviour), operational }),
    );
  });
});
