// The seal's fast path for a step's repro text (coordinator/receipt/step-repro-fast.ts, and the
// trace line split of coordinator/trace/trace-seal-thread.ts) held to the general walk (stepRepro):
// on trace steps with random changes — fields it cannot handle, unknown and physical fields, numbers
// to rewrite, lists to reorder, ties, an epoch to rebase — it either gives exactly the general text
// (and the step has no unknown field) or declines. Also: the sealed repro file of such a segment.
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fastStepReproText } from '../../coordinator/receipt/step-repro-fast.js';
import { stepRepro } from '../../coordinator/receipt/step-repro.js';
import { genesisHashes, lineRest, sealSegment } from '../../coordinator/trace/trace-seal-thread.js';

type Json = Record<string, unknown>;

function agent(id: string, move: unknown): Json {
  return {
    agentId: id,
    brainTicks: '32',
    committedStep: '2',
    decision: { move },
    decisionDigest: 'd'.repeat(64),
    profileDigest: 'p'.repeat(64),
    remainder: { denominator: '3', numerator: '2000000' },
    ticksAdvanced: '16',
  };
}

/** A trace step as the lockstep writes it: canonical key order, agents and rewards sorted. */
function baseStep(epoch = 'e1'): { behaviour: Json; operational: Json } {
  const ids = ['walker-00', 'walker-01', 'walker-02'];
  return {
    behaviour: {
      acknowledgedBoundary: '2',
      agents: ids.map((id, i) => agent(id, ['north', 'stay', 'west'][i])),
      batchId: `batch-${epoch}-1`,
      controlDigest: 'c'.repeat(64),
      eventIds: ['eat-1-walker-01'],
      observationDigest: 'o'.repeat(64),
      publishedBoundary: '2',
      rewards: [{ agentId: 'walker-01', eventId: 'eat-1-walker-01', ruleId: 'eat', value: 1 }],
      scope: { epoch, sessionId: 's', step: '1' },
      worldDigest: 'w'.repeat(64),
    },
    operational: {
      advanceRequestId: 'req-3',
      commitRequestIds: ids.map((agentId) => ({ agentId, requestId: 'req-2' })),
      completionOrder: { commit: ['worker-0'], prepare: ['worker-0'] },
      pids: [{ pid: 7, workerId: 'worker-0' }],
      prepareRequestIds: ids.map((agentId) => ({ agentId, requestId: 'req-1' })),
      wallTimeNs: '123',
    },
  };
}

type Step = ReturnType<typeof baseStep> & Json;
const b = (s: Step) => s.behaviour as Json & { agents: Json[]; rewards: Json[]; scope: Json };
const op = (s: Step) => s.operational as Json & { prepareRequestIds: Json[] };

/** Changes a step may get, each one the fast path must either get right or decline. */
const CHANGES: Record<string, (s: Step) => void> = {
  fractionInDecision: (s) => (b(s).agents[0]!.decision = { move: 0.25 }),
  fractionInReward: (s) => (b(s).rewards[0]!.value = 1.5),
  fractionInOpaque: (s) => (b(s).worldDigest = 2.5),
  fractionInRemainder: (s) => (b(s).agents[1]!.remainder = { denominator: 3, numerator: 0.1 }),
  fractionInBoundary: (s) => (b(s).acknowledgedBoundary = 2.5),
  fractionInTicks: (s) => (b(s).agents[2]!.ticksAdvanced = -0.0000000001),
  integerInBoundary: (s) => (b(s).publishedBoundary = 2),
  bigIntegerInDecision: (s) => (b(s).agents[0]!.decision = { n: 123456789, m: -4 }),
  agentsOutOfOrder: (s) => b(s).agents.reverse(),
  agentsTie: (s) => (b(s).agents[1]!.agentId = 'walker-00'),
  agentsNumericIds: (s) => b(s).agents.forEach((a, i) => (a.agentId = String(9 + i))),
  agentsMixedIds: (s) => ['9', '10', '1a'].forEach((id, i) => (b(s).agents[i]!.agentId = id)),
  rewardsByText: (s) =>
    (b(s).rewards = [
      { agentId: 'walker-01', eventId: 'a', ruleId: 'eat', value: 1 },
      { agentId: 'walker-01', eventId: 'a!', ruleId: 'eat', value: 1 },
    ]),
  rewardsOutOfOrder: (s) =>
    (b(s).rewards = [
      { agentId: 'walker-02', eventId: 'e', ruleId: 'eat', value: 1 },
      { agentId: 'walker-01', eventId: 'e', ruleId: 'eat', value: 1 },
    ]),
  decisionListSorted: (s) => (b(s).agents[0]!.decision = { plan: [{ seq: 1 }, { seq: 2 }] }),
  decisionListUnsorted: (s) => (b(s).agents[0]!.decision = { plan: [{ seq: 2 }, { seq: 1 }] }),
  decisionListTie: (s) =>
    (b(s).agents[0]!.decision = {
      plan: [
        { step: '1', x: 'b' },
        { step: '1', x: 'a' },
      ],
    }),
  decisionIntegerKeys: (s) => (b(s).agents[0]!.decision = { b: 1, 1: 2 }),
  decisionNested: (s) => (b(s).agents[2]!.decision = [[1, [2, { ts: 'now' }]], null, true]),
  decisionDeep: (s) => {
    let v: unknown = 1;
    for (let i = 0; i < 100; i++) v = [v];
    b(s).agents[0]!.decision = v;
  },
  decisionNull: (s) => (b(s).agents[0]!.decision = null),
  decisionLoneSurrogate: (s) => (b(s).agents[0]!.decision = { move: '\ud800' }),
  decisionBackslashUd: (s) => (b(s).agents[0]!.decision = { move: '\\ud83d' }),
  decisionEscapes: (s) => (b(s).agents[0]!.decision = { move: 'a"b\\c\n\u0001é😀' }),
  unknownInBehaviour: (s) => (b(s).extra = 1),
  physicalNameInBehaviour: (s) => (b(s).ts = 'now'),
  unknownInAgent: (s) => (b(s).agents[2]!.mood = 'ok'),
  unknownInScope: (s) => (b(s).scope.shard = '0'),
  scopeStepObject: (s) => (b(s).scope.step = { k: 1 }),
  missingBatchId: (s) => delete b(s).batchId,
  missingAgentField: (s) => delete b(s).agents[0]!.brainTicks,
  eventIdObjects: (s) => (b(s).eventIds = [{ agentId: 'x' }]),
  behaviourNotObject: (s) => (s.behaviour = [] as unknown as Json),
  unknownInOperational: (s) => (op(s).host = 'h'),
  physicalNameInOperational: (s) => (op(s).pid = 3),
  operationalTieWithSurrogate: (s) =>
    (op(s).prepareRequestIds = [
      { agentId: 'a', requestId: '\ud800' },
      { agentId: 'a', requestId: 'x' },
    ]),
  operationalOutOfOrder: (s) => op(s).prepareRequestIds.reverse(),
  operationalWallTimeObject: (s) => (op(s).wallTimeNs = { s: 1 }),
  operationalMissing: (s) => delete (s as Json).operational,
  operationalNull: (s) => ((s as Json).operational = null),
  extraTopLevel: (s) => ((s as Json).note = 'x'),
  physicalTopLevel: (s) => ((s as Json).ts = 'now'),
};

/** Canonical text when there is one, else JSON.stringify's (a line the general path may refuse). */
function textOf(v: unknown): string {
  const keysSorted = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(keysSorted)
      : x !== null && typeof x === 'object'
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, keysSorted((x as Json)[k])]),
          )
        : x;
  return JSON.stringify(keysSorted(v));
}

/** The general path exactly as the seal took it before the fast path; a refusal as `throws`. */
function general(line: string, behaviourText: string): { text: string; unknown: number } | 'throws' {
  try {
    const r = stepRepro({ ...(JSON.parse(line) as object), behaviour: JSON.parse(behaviourText) as unknown });
    return { text: r.text, unknown: r.unknownFields.length };
  } catch {
    return 'throws';
  }
}

/** The fast path as the sealing thread takes it (with the behaviour's text), checked against the one without. */
function fast(line: string, behaviourText: string): string | undefined {
  const withText = fastStepReproText(
    lineRest(line, behaviourText),
    JSON.parse(behaviourText),
    undefined,
    behaviourText,
  );
  expect(withText).toBe(fastStepReproText(lineRest(line, behaviourText), JSON.parse(behaviourText)));
  return withText;
}

/** A step with the named changes: its trace line and its behaviour text (rebased to `e0` when asked). */
function variant(names: readonly string[], rebase: boolean): { line: string; behaviourText: string } {
  const step = baseStep() as Step;
  for (const n of names) CHANGES[n]!(step);
  const line = textOf(step);
  if (!rebase) return { line, behaviourText: textOf(step.behaviour) };
  const rebased = JSON.parse(textOf(step.behaviour)) as Json;
  if (rebased.scope !== null && typeof rebased.scope === 'object') (rebased.scope as Json).epoch = 'e0';
  return { line, behaviourText: textOf(rebased) };
}

describe('fastStepReproText', () => {
  it('takes the usual trace step, with exactly the general text', () => {
    const { line, behaviourText } = variant([], false);
    const text = fast(line, behaviourText);
    expect(text).toBeDefined();
    expect(text).toBe((general(line, behaviourText) as { text: string }).text);
  });

  it('on steps with random changes: the general text, or it declines', () => {
    const seen = { fast: 0, declined: 0 };
    fc.assert(
      fc.property(fc.subarray(Object.keys(CHANGES), { maxLength: 4 }), fc.boolean(), (names, rebase) => {
        const { line, behaviourText } = variant(names, rebase);
        const g = general(line, behaviourText);
        const f = fast(line, behaviourText);
        if (f === undefined) return void seen.declined++;
        seen.fast++;
        expect(g).not.toBe('throws');
        expect(f).toBe((g as { text: string }).text);
        expect((g as { unknown: number }).unknown).toBe(0);
      }),
      { numRuns: 600 },
    );
    expect(seen.fast).toBeGreaterThan(50);
    expect(seen.declined).toBeGreaterThan(50);
  });

  it('each change on its own: the general text or a decline, and the harmless ones are taken', () => {
    const taken: string[] = [];
    for (const name of Object.keys(CHANGES)) {
      const { line, behaviourText } = variant([name], false);
      const f = fast(line, behaviourText);
      if (f === undefined) continue;
      taken.push(name);
      expect(f, name).toBe((general(line, behaviourText) as { text: string }).text);
    }
    // Not vacuous: changes the walk leaves alone go fast, the ones it rewrites do not.
    expect(taken).toEqual(
      expect.arrayContaining(['bigIntegerInDecision', 'fractionInOpaque', 'agentsNumericIds', 'decisionListSorted']),
    );
    for (const n of ['fractionInDecision', 'fractionInBoundary', 'fractionInTicks', 'integerInBoundary'])
      expect(taken.includes(n), n).toBe(n === 'integerInBoundary');
    expect(taken).not.toContain('rewardsByText');
  });
});

describe('lineRest', () => {
  it('the split of the usual line is the line parsed, and any other line is parsed whole', () => {
    const step = baseStep();
    const behaviourText = textOf(step.behaviour);
    const tricky = { ...step.behaviour, batchId: ',"operational":{}}' };
    const lines = [
      textOf(step),
      textOf({ ...step, note: 1 }),
      textOf({ behaviour: step.behaviour }),
      textOf({ behaviour: tricky, operational: step.operational }),
      '[1,2]',
      '"ab"',
    ];
    for (const line of lines) {
      const parsed = JSON.parse(line) as object;
      const expected = { ...parsed, behaviour: 0 };
      for (const bt of [behaviourText, textOf(tricky)]) {
        let got: unknown;
        try {
          got = { ...lineRest(line, bt), behaviour: 0 };
        } catch {
          got = 'throws';
        }
        expect(got, line).toEqual(expected);
      }
    }
    expect(() => lineRest(`{"behaviour":${behaviourText},"operational":{"a":1}}}`, behaviourText)).toThrow();
  });
});

describe('the sealed repro file', () => {
  it('is the general texts of every step, with the unknown fields tallied', () => {
    const names = Object.keys(CHANGES).filter((n) => !/Surrogate|NotObject/.test(n));
    const steps = names.map((n, i) => variant([n], i % 3 === 0));
    const input = {
      text: steps.map((s) => `${s.line}\n`).join(''),
      behaviour: steps.map((s) => `${s.behaviourText}\n`).join(''),
      from: genesisHashes(),
      repro: true,
    };
    const out = sealSegment(input);
    const expected = steps.map((s) => stepRepro({ ...JSON.parse(s.line), behaviour: JSON.parse(s.behaviourText) }));
    expect(gunzipSync(out.repro!.gz).toString('utf8')).toBe(expected.map((r) => r.text).join(','));
    const counts = new Map<string, number>();
    for (const r of expected) for (const u of r.unknownFields) counts.set(u.path, (counts.get(u.path) ?? 0) + u.count);
    expect(out.repro!.unknownFields).toEqual(
      [...counts].sort(([x], [y]) => (x < y ? -1 : 1)).map(([path, count]) => ({ path, count })),
    );
    expect(out.repro!.unknownFields.length).toBeGreaterThan(3);
  });
});
