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
import { RunFailure } from '../../coordinator/session/run-failure.js';
import { resolveConfig } from '../../coordinator/config.js';
import { DurableFs, errnoError } from '../../coordinator/store/durable-fs.js';
import { verifyLedger } from '../../coordinator/store/ledger.js';
import { CheckpointStore } from '../../coordinator/store/store.js';
import { LIF, tmpDir } from './harness.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import type { RunExtensionContext } from '../../coordinator/session/run.js';
import { indexDigestOf, readTraceIndex } from '../../coordinator/trace/trace-store.js';
import { METHODS } from '../../core/protocol/index.js';

describe('run with --checkpoint-every', () => {
  it('[STORE-5] ENOSPC on one generation: that capture is Failed and reported, the others commit, the run completes', async () => {
    const fs = new DurableFs({
      before(op) {
        if (op.kind === 'write' && op.path.includes('ckpt-e1-2')) throw errnoError('ENOSPC', op);
      },
    });
    // settleEach: a capture every step is never refused for a busy writer on a loaded machine (seen once).
    const ext = new CheckpointRun({ every: 1, keep: 2, fs, settleEach: true });
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

  it('a model that cannot give its state fails the run at the first boundary, naming agent, step and path; nothing is committed', async () => {
    const ext = new CheckpointRun({ every: 2, keep: 2 });
    const plan = resolveConfig(
      {
        sessionId: 'map-state',
        masterSeed: '5',
        steps: 6,
        stepHz: 60,
        environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: 4 } },
        agents: [
          { id: 'walk-a', model: 'walker' },
          { id: 'mapper', model: './map-state-agent.ts' },
        ],
        workers: { transport: 'inline' },
      },
      { baseDir: join(import.meta.dirname, 'fixtures') },
    );
    const outDir = tmpDir();
    const failure = await runSession(plan, { outDir, extension: ext, logLevel: 'error' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(RunFailure);
    const f = failure as RunFailure;
    expect(f).toMatchObject({ kind: 'error-reply', phase: 'capture', step: '2', agentIds: ['mapper'] });
    expect(f.reason).toBe('audit_participant_refused');
    expect(f.detail).toMatch(/^agent mapper: capture state cannot be encoded: state \$\.seen: Map is not plain data; /);
    expect(ext.result.committed).toEqual([]);
    expect(ext.result.refused).toEqual([expect.objectContaining({ boundary: '2' })]);
    const summary = parseStrict(readFileSync(join(f.runDir!, 'summary.json'))) as { status: string; stepsDone: number };
    expect(summary).toMatchObject({ status: 'failed', stepsDone: 2 });
  }, 180_000);
});

/** A CheckpointRun whose trace sync is slowed (and optionally failed at one boundary), logging when it starts and ends. */
class WatchedSync extends CheckpointRun {
  constructor(
    every: number,
    readonly events: string[],
    private readonly failAt?: number,
  ) {
    super({ every, keep: 3 });
  }

  override async started(ctx: RunExtensionContext): Promise<void> {
    const traces = ctx.traces;
    let syncs = 0;
    const sync = async (): Promise<void> => {
      const n = ++syncs;
      this.events.push(`sync-start ${n}`);
      await new Promise((r) => setTimeout(r, 150));
      if (n === this.failAt) throw new Error(`the trace disk went away at sync ${n}`);
      await traces.sync();
      this.events.push(`sync-done ${n}`);
    };
    // Everything else goes to the session's own writer, methods bound to it.
    const watched = new Proxy(traces, { get: (target, key) => (key === 'sync' ? sync : bound(target, key)) });
    await super.started({ ...ctx, traces: watched });
  }
}

function bound(target: object, key: string | symbol): unknown {
  const v = Reflect.get(target, key) as unknown;
  return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
}

/** Log every State.Capture sent to the fleet's workers (environment and agents). */
function logCaptures(fleet: Fleet, events: string[]): void {
  for (const w of [fleet.environment, ...fleet.agents]) {
    const call = w.client.call.bind(w.client);
    w.client.call = ((method, scope, params, options) => {
      if (method === METHODS.capture) events.push(`capture ${w.plan.workerId}`);
      return call(method, scope, params, options);
    }) as typeof w.client.call;
  }
}

/** The lif pair inline for `steps`, checkpointed by `ext`, every State.Capture logged into its events. */
function watchedRun(ext: WatchedSync, steps: number): ReturnType<typeof runSession> {
  return runSession(
    { ...LIF(16), transport: 'inline' },
    {
      outDir: tmpDir(),
      steps,
      extension: ext,
      logLevel: 'error',
      hooks: { onLaunched: (f) => logCaptures(f, ext.events) },
    },
  );
}

describe('the writer full at a boundary', () => {
  it("[STORE-9] a capture is refused BUSY while two saves are in flight, but the run's last boundary waits for them: its checkpoint is always taken", async () => {
    // Every save takes 400 ms (its temp file's fsync is held): boundaries 1 and 2 fill the writer's
    // two slots, 3 and 4 find it full (refused, the run keeps stepping), the last one, 5, waits.
    const fs = new DurableFs({
      reached: async (step) => {
        if (step === 'generation-temp-synced') await new Promise((r) => setTimeout(r, 400));
      },
    });
    const ext = new CheckpointRun({ every: 1, keep: 5, fs });
    await runSession(
      { ...LIF(16), transport: 'inline' },
      { outDir: tmpDir(), steps: 5, extension: ext, logLevel: 'error' },
    );
    const rep = ext.result;
    expect(rep.refused.map((r) => [r.boundary, r.reason])).toEqual([
      ['3', 'size_writer_queue_full'],
      ['4', 'size_writer_queue_full'],
    ]);
    expect(rep.captured).toEqual(['ckpt-e1-1', 'ckpt-e1-2', 'ckpt-e1-5']);
    expect(rep.committed).toEqual(['ckpt-e1-1', 'ckpt-e1-2', 'ckpt-e1-5']);
    expect(rep.highWater).toBe('ckpt-e1-5');
  }, 180_000);
});

describe('a capture and the trace sync it needs', () => {
  it('the trace syncs while the participants are asked, and the checkpoint is built after it: every capture commits and records the synced index', async () => {
    const events: string[] = [];
    const ext = new WatchedSync(2, events);
    const r = await watchedRun(ext, 4);
    const asked = ['capture worker-env', 'capture worker-0', 'capture worker-1'];
    // Each boundary: the sync starts, every participant is asked while it is still running, then it ends.
    expect(events).toEqual(['sync-start 1', ...asked, 'sync-done 1', 'sync-start 2', ...asked, 'sync-done 2']);
    expect(ext.result.committed).toEqual(['ckpt-e1-2', 'ckpt-e1-4']);
    // The captured events record the index as synced at their boundary (2 and then 4 steps of trace).
    const captured = readFileSync(join(r.runDir, 'ledger.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.includes('"event":"captured"'))
      .map((l) => (JSON.parse(l) as { detail: { traceIndex: string } }).detail.traceIndex);
    const index = readTraceIndex(r.runDir);
    expect(captured).toEqual([indexDigestOf(index.slice(0, 1)), indexDigestOf(index.slice(0, 2))]);
    expect((await verifyLedger(r.runDir)).ok).toBe(true);
  }, 180_000);

  it('a trace that cannot be synced fails the run, though its capture was already asked', async () => {
    const events: string[] = [];
    const ext = new WatchedSync(2, events, 2);
    const run = watchedRun(ext, 6);
    await expect(run).rejects.toThrow(/the trace disk went away at sync 2/);
    expect(events.slice(0, 6)).toEqual([
      'sync-start 1',
      'capture worker-env',
      'capture worker-0',
      'capture worker-1',
      'sync-done 1',
      'sync-start 2',
    ]);
    expect(events).toContain('capture worker-1');
    expect(ext.result.committed).toEqual(['ckpt-e1-2']);
    expect(ext.result.captured).toEqual(['ckpt-e1-2']);
  }, 180_000);
});
