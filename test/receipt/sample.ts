// A small, realistic receipt (2 agents, 2 steps) shaped like detsim's run directory files, for
// the unit tests of canonicalisation, hashing and diagnosis. Not produced by the code under test.
import type { Receipt } from '../../coordinator/receipt/receipt.js';

const D = (c: string) => c.repeat(64);

function step(k: number, wall: string, order: string[]) {
  return {
    behaviour: {
      scope: { sessionId: 's1', epoch: 'e0', step: String(k) },
      agents: [
        {
          agentId: 'a0',
          profileDigest: D('a'),
          ticksAdvanced: '16',
          brainTicks: String(16 * (k + 1)),
          remainder: { numerator: '2', denominator: '3' },
          decision: { move: k % 2 === 0 ? 'north' : 'east' },
          decisionDigest: D('b'),
          committedStep: String(k + 1),
        },
        {
          agentId: 'a1',
          profileDigest: D('a'),
          ticksAdvanced: '16',
          brainTicks: String(16 * (k + 1)),
          remainder: { numerator: '2', denominator: '3' },
          decision: { move: 'south', gain: 0.25 },
          decisionDigest: D('c'),
          committedStep: String(k + 1),
        },
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
      format: 'detsim-run-v1',
      sessionId: 's1',
      masterSeed: '42',
      seedDerivation: 'seed-derivation-v1',
      steps: 2,
      stepDuration: { numerator: '50000000', denominator: '3' },
      epoch: 'e0',
      dispatch: 'concurrent',
      protocol: { major: 1, minor: 0, contractDigest: D('8') },
      environment: {
        environmentId: 'env',
        model: 'forage',
        modelVersion: '1',
        profileDigest: D('9'),
        params: { width: 8, food: 0.5 },
        seed: 123,
        workerId: 'worker-env',
      },
      agents: [
        {
          agentId: 'a0',
          portId: 'a0',
          model: 'walker',
          modelVersion: '1',
          plasticityVersion: '0',
          profileDigest: D('a'),
          datasetDigest: D('0'),
          tickDuration: { numerator: '1000000', denominator: '1' },
          params: {},
          seed: -5,
          workerId: 'worker-0',
        },
        {
          agentId: 'a1',
          portId: 'a1',
          model: 'walker',
          modelVersion: '1',
          plasticityVersion: '0',
          profileDigest: D('a'),
          datasetDigest: D('0'),
          tickDuration: { numerator: '1000000', denominator: '1' },
          params: { explore: 2 },
          seed: 77,
          workerId: 'worker-0',
        },
      ],
      workers: [
        {
          workerId: 'worker-env',
          role: 'environment',
          agentIds: [],
          runtime: 'detsim-ts/v20',
          buildDigest: D('5'),
          capabilities: ['agent-step-v1'],
        },
        {
          workerId: 'worker-0',
          role: 'agent',
          agentIds: ['a0', 'a1'],
          runtime: `detsim-ts/v${variant.pid ?? 20}`,
          buildDigest: D('5'),
          capabilities: ['agent-step-v1'],
        },
      ],
      agentsPerWorker: 4,
      transport: 'unix',
      deadlines: { startupMs: 15000, stepMs: 5000, captureMs: 30000 },
      seedCollisions: [],
    },
    steps: [step(0, variant.wall ?? '1000', order), step(1, variant.wall ?? '2000', order)],
    summary: {
      format: 'detsim-summary-v1',
      sessionId: 's1',
      status: 'completed',
      stepsPlanned: 2,
      stepsDone: 2,
      epoch: 'e0',
      behaviourDigest: D('7'),
      behaviourDigestAlgorithm: 'sha256',
      failure: null,
      wallTimeMs: Number(variant.wall ?? '3000'),
    },
    finalStateDigests: null,
    // Physical (coordinator/receipt/platform.ts): where the run was finished.
    platformFingerprint: {
      format: 'detsim-platform-v1',
      os: {
        platform: 'linux',
        type: 'Linux',
        release: '6.1.0-28-amd64',
        version: '#1 SMP',
        arch: 'x64',
        machine: 'x86_64',
      },
      cpu: { model: 'Example CPU', cores: 2, flags: ['avx2', 'fma', 'sse4_2'] },
      node: { version: `v${variant.pid ?? 20}.0.0`, v8: '11.3', execArgv: [], nodeOptions: null },
      detsim: { version: '0.1.0', gitCommit: 'f'.repeat(40) },
      rust: null,
      python: null,
      workers: [{ workerId: 'worker-0', role: 'agent', runtime: 'detsim-ts/v20', buildDigest: D('5') }],
    },
  } as unknown as Receipt;
}
