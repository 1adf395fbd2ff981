// A small, realistic receipt (2 agents, 2 steps) shaped like detsim's run directory files, for
// the unit tests of canonicalisation, hashing and diagnosis. Not produced by the code under test.
import type { Receipt } from '../../coordinator/receipt/receipt.js';

const D = (c: string) => c.repeat(64);

function step(k: number, wall: string, order: string[]) {
  return {
    behaviour: {
      scope: { sessionId: 's1', epoch: 'e0', step: String(k) },
      agents: [
        { agentId: 'a0', profileDigest: D('a'), ticksAdvanced: '16', brainTicks: String(16 * (k + 1)), remainder: { numerator: '2', denominator: '3' }, decision: { move: k % 2 === 0 ? 'north' : 'east' }, decisionDigest: D('b'), committedStep: String(k + 1) },
        { agentId: 'a1', profileDigest: D('a'), ticksAdvanced: '16', brainTicks: String(16 * (k + 1)), remainder: { numerator: '2', denominator: '3' }, decision: { move: 'south', gain: 0.25 }, decisionDigest: D('c'), committedStep: String(k + 1) },
      ],
      batchId: `batch-e0-${k}`,
      controlDigest: D('d'),
      acknowledgedBoundary: String(k + 1),
      observationDigest: D('e'),
      worldDigest: D('f'),
      rewards: [{ agentId: 'a1', eventId: `ev-e0-${k}`, ruleId: 'food', value: 1.5 }],
      eventIds: [`ev-e0-${k}`],
      publishedBoundary: String(k + 1),
    },
    operational: {
      wallTimeNs: wall,
      prepareRequestIds: [{ agentId: 'a0', requestId: `req-${k * 2}` }],
      commitRequestIds: [{ agentId: 'a0', requestId: `req-${k * 2 + 1}` }],
      advanceRequestId: `req-${100 + k}`,
      completionOrder: { prepare: order, commit: order },
      pids: [{ workerId: 'worker-0', pid: 4242 }],
    },
  };
}

export function sampleReceipt(variant: { wall?: string; pid?: number; order?: string[] } = {}): Receipt {
  const order = variant.order ?? ['worker-0', 'worker-1'];
  return {
    receiptVersion: 'detsim-receipt-v1',
    evidence_class: 'simulated',
    measure_source: null,
    measure_ts: null,
    generated_at: '2026-11-29T16:00:00.000Z',
    run: {
      sessionId: 's1',
      masterSeed: '42',
      derivation: 'seed-derivation-v1',
      steps: 2,
      stepDuration: { numerator: '50000000', denominator: '3' },
      environment: { environmentId: 'env', model: 'forage', params: { width: 8, height: 8 }, seed: 123, modelVersion: '1', profileDigest: D('9') },
      agents: [
        { agentId: 'a0', model: 'walker', params: {}, seed: -5, port: 'a0', worker: 'worker-0' },
        { agentId: 'a1', model: 'walker', params: {}, seed: 77, port: 'a1', worker: 'worker-0' },
      ],
      workers: [{ workerId: 'worker-0', agents: ['a0', 'a1'], pid: variant.pid ?? 4242, socket: '/tmp/d/w0.sock' }],
      startedAt: '2026-11-29T15:59:59.000Z',
    },
    steps: [step(0, variant.wall ?? '1000', order), step(1, variant.wall ?? '2000', order)],
    summary: { sessionId: 's1', steps: 2, behaviourDigest: D('7'), wallTimeNs: variant.wall ?? '3000' },
    finalStateDigests: null,
  } as unknown as Receipt;
}
