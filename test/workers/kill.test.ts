// A worker process killed mid-call: the pending call fails promptly as 'process-exited' naming the
// signal (not a hang, not a bare stream error), and later calls fail the same way.
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS } from '../../core/protocol/index.js';
import { STEP_60HZ, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

describe('worker killed mid-step', () => {
  it('fails the in-flight Prepare as process-exited (SIGKILL), mutation unknown', async () => {
    const w = await spawnWorker('agent', 'w-kill');
    const agents = [
      {
        agentId: 'big',
        model: 'lif',
        params: { neurons: 6_000_000 },
        seed: 5,
        stepDuration: STEP_60HZ,
        observation: {},
      },
    ];
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents }, { deadlineMs: 120_000 }));
    const pending = w.client.call(
      METHODS.agentPrepare,
      scope(0),
      { agents: [{ agentId: 'big' }] },
      { deadlineMs: 120_000 },
    );
    setTimeout(() => w.proc.kill('SIGKILL'), 20);
    const err = await pending.then(
      () => undefined,
      (e: unknown) => e as { kind: string; mutation: string; message: string },
    );
    expect(err).toMatchObject({ kind: 'process-exited', mutation: 'unknown' });
    expect(err!.message).toMatch(/SIGKILL/);
    expect(err!.message).toMatch(/Agent\.Prepare/);
    await expect(w.client.call(METHODS.status, null, {})).rejects.toMatchObject({ kind: 'process-exited' });
  });
});
