// Replies of an inline worker (a runtime in the coordinator's own thread) cross as values, not as
// text (link.ts ReplyValue, runtime.ts valueReplies). They must still be snapshots checked as
// printing checks them: a model that changes its returned decision after the reply leaves the
// trace as it was on a worker thread (the same behaviour digest), and such a reply really crossed
// as a value. Real runs, real workers. The copy itself: test/formats/canonical-copy.test.ts.
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveConfig, type RunPlan, type Transport } from '../../coordinator/config.js';
import { runSession } from '../../coordinator/session/run.js';
import { WorkerRuntime } from '../../workers/runtime.js';
import { isReplyValue } from '../../core/protocol/link.js';
import { readRun, tmpOut } from './helpers.js';

const FIXTURES = resolve('test', 'coordinator', 'fixtures');

function plan(transport: Transport): RunPlan {
  return resolveConfig(
    {
      sessionId: 'inline-values',
      masterSeed: '11',
      steps: 8,
      stepHz: 60,
      environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: 4 } },
      agents: [
        { id: 'walk-a', model: 'walker' },
        { id: 'reuse-b', model: './reused-decision.ts', actionFields: ['move'] },
      ],
      workers: { agentsPerWorker: 2, transport },
      deadlines: { startupMs: 60_000, stepMs: 30_000 },
    },
    { baseDir: FIXTURES },
  );
}

async function decisionsOn(transport: Transport) {
  const result = await runSession(plan(transport), { outDir: tmpOut('detsim-inline-values-') });
  const run = readRun(result.runDir);
  const decisions = run.traces.map((t) => t.behaviour.agents.find((a) => a.agentId === 'reuse-b')!.decision);
  return { decisions, behaviourDigest: run.summary.behaviourDigest };
}

describe('inline replies cross as values, as snapshots', () => {
  it('a decision changed by its model after the reply is traced as Prepare returned it, as on a thread', async () => {
    const inline = await decisionsOn('inline');
    const thread = await decisionsOn('thread');
    expect(inline.decisions).toHaveLength(8);
    expect(inline.decisions.every((d) => (d as { phase: string }).phase === 'prepared')).toBe(true);
    expect(inline.decisions).toEqual(thread.decisions);
    expect(inline.behaviourDigest).toBe(thread.behaviourDigest);
  }, 180_000);

  it('a result that is plain data crosses as a value; one that is not crosses as the text error reply it always was', async () => {
    const runtime = new WorkerRuntime({ role: 'agent', workerId: 'worker-0', sessionId: 's' });
    const valueStream = { introduced: false, printedHere: true as const, valueReplies: true as const };
    const hello = (requestId: string) =>
      JSON.stringify({
        method: 'Worker.Hello',
        params: {
          contractDigest: '0'.repeat(64),
          expectedWorkerId: 'worker-0',
          role: 'agent',
          sessionId: 's',
          supportedMajors: [1],
        },
        requestId,
        scope: null,
      });
    // A refused Hello (wrong contract digest) is an error: always text.
    const refused = await runtime.handle(hello('req-1'), undefined, valueStream);
    expect(typeof refused.body).toBe('string');
    expect(refused.body as string).toMatch(/"type":"error"/);
    const status = await runtime.handle(
      JSON.stringify({ method: 'Worker.Status', params: {}, requestId: 'req-2', scope: null }),
      undefined,
      { ...valueStream, introduced: true },
    );
    expect(isReplyValue(status.body)).toBe(true);
    // The same request on a text stream gives the text of that very value.
    const text = await runtime.handle(
      JSON.stringify({ method: 'Worker.Status', params: {}, requestId: 'req-3', scope: null }),
      undefined,
      { introduced: true, printedHere: true },
    );
    expect(typeof text.body).toBe('string');
    const envelope = (status.body as { envelope: Record<string, unknown> }).envelope;
    expect(JSON.parse(text.body as string)).toEqual({ ...envelope, requestId: 'req-3' });
  });
});
