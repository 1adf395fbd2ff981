// The lockstep's checks on Prepare replies keep refusing what they refused before their fast
// paths (a remainder or a decision digest is remembered across steps; a check's message is built
// only when it fails): the real worker runtimes answer in this process, and a reply is altered
// after a few good steps. Not the transport (lockstep.test.ts runs real processes over gRPC).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { resolveConfig, type RunPlan } from '../../coordinator/config.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import { Lockstep } from '../../coordinator/session/lockstep.js';
import { RunFailure } from '../../coordinator/session/run-failure.js';
import type { Scope } from '../../core/formats/scalars.js';
import {
  decodeBody,
  readReply,
  replyBody,
  requestText,
  type Params,
  type PrintedParams,
  type Reply,
} from '../../core/protocol/index.js';
import { WorkerRuntime } from '../../workers/runtime.js';

type Tamper = (method: string, step: string, reply: Reply) => void;

/** A fleet whose workers are real runtimes in this process; `tamper` may alter a decoded reply. */
function inProcessFleet(plan: RunPlan, tamper: Tamper): Fleet {
  let nextId = 1;
  const workers = plan.workers.map((w) => {
    const runtime = new WorkerRuntime({ role: w.role, workerId: w.workerId, sessionId: plan.sessionId });
    const stream = { introduced: true };
    const call = async (
      method: string,
      scope: Scope | null,
      params: Params | PrintedParams,
      o: { requestId?: string } = {},
    ) => {
      const requestId = o.requestId ?? `req-${nextId++}`;
      const out = await runtime.handle(requestText(method, params, requestId, scope), undefined, stream);
      const reply = readReply(decodeBody(replyBody(out.body)));
      tamper(method, scope?.step ?? '', reply);
      return { requestId, reply };
    };
    return { plan: w, client: { call } };
  });
  return {
    environment: workers.find((w) => w.plan.role === 'environment')!,
    agents: workers.filter((w) => w.plan.role === 'agent'),
    pids: () => [],
  } as unknown as Fleet;
}

/** Step until the lockstep fails; the failure (a RunFailure) or undefined after `steps` good steps. */
async function failureOf(tamper: Tamper, steps = 8): Promise<RunFailure | undefined> {
  const plan = resolveConfig({
    sessionId: 'checks',
    masterSeed: '1',
    steps,
    stepHz: 60,
    environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: 2 } },
    agents: { count: 2, prefix: 'walker-', model: 'walker' },
    workers: { agentsPerWorker: 2 },
  });
  const logger = pino({ level: 'silent' });
  const lockstep = new Lockstep(plan, inProcessFleet(plan, tamper), {
    dispatch: 'concurrent',
    epoch: 'e1',
    startedAt: process.hrtime.bigint(),
    logger,
  });
  await lockstep.initialize();
  try {
    for (let k = 0; k < steps; k++) await lockstep.step();
  } catch (e) {
    if (e instanceof RunFailure) return e;
    throw e;
  }
  return undefined;
}

/** Alter the first agent's prepared decision at step 5, after good steps made its values familiar. */
const atStep5 =
  (alter: (entry: Record<string, unknown>) => void): Tamper =>
  (method, step, reply) => {
    if (method !== 'Agent.Prepare' || step !== '5' || reply.type !== 'result') return;
    alter((reply.result.agents as Record<string, unknown>[])[0]!);
  };

describe('lockstep Prepare checks after familiar values', () => {
  it('an untouched run passes', async () => {
    expect(await failureOf(() => undefined)).toBeUndefined();
  });

  it('a remainder that is not reduced, or carries an extra field beside a familiar pair, is a protocol failure naming it', async () => {
    const notReduced = await failureOf(atStep5((e) => (e.remainder = { denominator: '4', numerator: '2' })));
    expect(notReduced).toMatchObject({ kind: 'protocol', step: '5', phase: 'prepare' });
    expect(notReduced!.detail).toMatch(/walker-0\.remainder: 2\/4 is not reduced/);
    const extra = await failureOf(
      atStep5((e) => (e.remainder = { ...(e.remainder as object), extra: '1' } as Record<string, unknown>)),
    );
    expect(extra).toMatchObject({ kind: 'protocol', step: '5', phase: 'prepare' });
    expect(extra!.detail).toMatch(/walker-0\.remainder: unknown field "extra"/);
  });

  it('[LOCK-4] a bad tick count and a decision that is not an object are named', async () => {
    const ticks = await failureOf(atStep5((e) => (e.brainTicks = '01')));
    expect(ticks!.detail).toMatch(/walker-0\.brainTicks: "01" is not a U64/);
    const decision = await failureOf(atStep5((e) => (e.decision = ['north'])));
    expect(decision!.detail).toMatch(/walker-0: decision is not an object/);
  });
});
