// `runSession` with periodic checkpoints (the RunExtension behind `detsim run --checkpoint-every`):
// rotation keeps the newest N, the ledger records captured/queued/committed, and an injected write
// error (ENOSPC through the store's file layer) fails that capture only: it is reported as not
// durable, the last committed generation stays intact, and the run carries on (policy continue).
// Workers inline (workers.transport: inline): the writer and the policy are the coordinator's.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { runSession } from '../../coordinator/session/run.js';
import { DurableFs, errnoError } from '../../coordinator/store/durable-fs.js';
import { verifyLedger } from '../../coordinator/store/ledger.js';
import { CheckpointStore } from '../../coordinator/store/store.js';
import { LIF, tmpDir } from './harness.js';

describe('run with --checkpoint-every', () => {
  it('[STORE-5] ENOSPC on one generation: that capture is Failed and reported, the others commit, the run completes', async () => {
    const fs = new DurableFs({
      before(op) {
        if (op.kind === 'write' && op.path.includes('ckpt-e1-2')) throw errnoError('ENOSPC', op);
      },
    });
    const ext = new CheckpointRun({ every: 1, keep: 2, fs });
    const r = await runSession(
      { ...LIF(16), transport: 'inline' },
      { outDir: tmpDir(), steps: 4, extension: ext, logLevel: 'error' },
    );
    const rep = ext.result;
    expect(rep.captured).toEqual(['ckpt-e1-1', 'ckpt-e1-2', 'ckpt-e1-3', 'ckpt-e1-4']);
    expect(rep.committed).toEqual(['ckpt-e1-1', 'ckpt-e1-3', 'ckpt-e1-4']);
    expect(rep.notDurable).toHaveLength(1);
    expect(rep.notDurable[0]).toMatchObject({ checkpointId: 'ckpt-e1-2', outcome: 'Failed' });
    expect(rep.notDurable[0]!.reason).toMatch(/ENOSPC/);
    expect(r.steps).toBe(4);
    const summary = parseStrict(readFileSync(join(r.runDir, 'summary.json'))) as unknown as {
      status: string;
      checkpoints: typeof rep;
    };
    expect(summary.status).toBe('completed');
    expect(summary.checkpoints.notDurable[0]!.checkpointId).toBe('ckpt-e1-2');
    // keep 2: rotation left the newest two; every listed generation verifies.
    const store = await CheckpointStore.open(join(r.runDir, 'store'));
    expect(store.generations().map((g) => g.checkpointId)).toEqual(['ckpt-e1-3', 'ckpt-e1-4']);
    expect((await store.verify()).ok).toBe(true);
    const ledger = readFileSync(join(r.runDir, 'ledger.jsonl'), 'utf8');
    expect(ledger).toMatch(/"checkpointId":"ckpt-e1-2".*"event":"failed"/);
    expect((ledger.match(/"event":"committed"/g) ?? []).length).toBe(3);
    expect((await verifyLedger(r.runDir)).ok).toBe(true);
  }, 180_000);
});
