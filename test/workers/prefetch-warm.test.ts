// The restore prefetch (store-files-v1) on a real TypeScript worker: a live agent's model restore
// runs while its payload is prefetched (the coordinator would still be verifying the file), and the
// StageRestore of that very range takes the restored state instead of restoring again — one model
// restore in all, before the stage — and the activated agent steps on from the captured state.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS } from '../../core/protocol/index.js';
import { REPO_ROOT, STEP_60HZ, resultOf, scope, spawnWorker, stopAll } from './harness.js';

const MODEL = join(REPO_ROOT, 'test/workers/fixtures/restore-counter-model.ts');
const store = mkdtempSync(join(tmpdir(), 'detsim-prefetch-warm-'));
afterAll(async () => {
  await stopAll();
  rmSync(store, { recursive: true, force: true });
});

describe('the restore prefetch (store-files-v1) warms the model restore', () => {
  it('the model restores during the prefetch and the stage of the same range does not restore again', async () => {
    const countFile = join(store, 'restores.txt');
    writeFileSync(countFile, '');
    const restores = (): number => readFileSync(countFile, 'utf8').split('\n').filter(Boolean).length;
    const w = await spawnWorker('agent', 'w-warm', ['--model', MODEL, '--store-dir', store]);
    const agent = { agentId: 'u', model: MODEL, params: { countFile }, seed: 5, stepDuration: STEP_60HZ };
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents: [{ ...agent, observation: {} }] }));
    for (let k = 0; k < 3; k++) {
      const p = await w.client.call(METHODS.agentPrepare, scope(k), { agents: [{ agentId: 'u' }] });
      resultOf(
        await w.client.call(METHODS.agentCommit, scope(k), {
          agents: [{ agentId: 'u', preparedRequestId: p.requestId, observation: {}, rewards: [] }],
        }),
      );
    }
    const cap = await w.client.call(METHODS.capture, scope(3), { checkpointId: 'c3', agentId: 'u' });
    const captured = resultOf<{ compatibilityDigest: string; payload: { digest: string; byteLength: string } }>(cap);
    const file = join(store, 'c3.flysess');
    writeFileSync(file, Buffer.concat([Buffer.alloc(16, 0x5a), cap.attachment!]));
    const payload = { ...captured.payload, file: { path: file, offset: '16' } };

    const pre = await w.client.call(METHODS.prefetchPayload, scope(3), { agentId: 'u', payload });
    expect(resultOf<{ matched: boolean }>(pre).matched).toBe(true);
    expect(restores()).toBe(1);
    const stage = {
      checkpointId: 'c3',
      agentId: 'u',
      sourceScope: scope(3),
      compatibilityDigest: captured.compatibilityDigest,
      payload,
    };
    const token = resultOf<{ restoreToken: string }>(
      await w.client.call(METHODS.stageRestore, scope(3, 'e2'), stage),
    ).restoreToken;
    expect(restores()).toBe(1);
    resultOf(await w.client.call(METHODS.activateRestore, scope(3, 'e2'), { restoreToken: token, agentId: 'u' }));
    const p = await w.client.call(METHODS.agentPrepare, scope(3, 'e2'), { agents: [{ agentId: 'u' }] });
    // Three commits before the capture: n = 3, odd → east.
    expect(resultOf<{ agents: { decision: { move: string } }[] }>(p).agents[0]!.decision.move).toBe('east');
    await w.stop();
  });
});
