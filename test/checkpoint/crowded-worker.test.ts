// A worker that hosts more agents than it caches lifecycle replies (LIFECYCLE_REPLY_LIMIT = 16):
// 20 walkers in one agent worker checkpoint every 2 steps, and `detsim resume` restores them, on
// the TypeScript and the Rust worker (co-located: walkers' small payloads come in the Capture
// replies, capture-hold-from-v1). Before the coordinator released Initialize replies and counted
// slots, the 16th agent's Capture was refused BUSY and no checkpoint was ever committed.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { committedIds, detsim, summary } from './cli.js';
import { tmpDir } from './harness.js';
import { ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';

const AGENTS = 20;
const STEPS = 6;

function crowdedConfig(dir: string, runtime: 'typescript' | 'rust'): string {
  const path = join(dir, `crowded-${runtime}.yaml`);
  writeFileSync(
    path,
    [
      'sessionId: crowded',
      'masterSeed: "20261201"',
      `steps: ${STEPS}`,
      'stepHz: 60',
      'environment: { id: forage, model: forage, params: { width: 24, height: 24, food: 24 } }',
      `agents: { count: ${AGENTS}, prefix: walker-, model: walker }`,
      `workers: { agentsPerWorker: ${AGENTS}, transport: unix, runtime: ${runtime} }`,
      'deadlines: { startupMs: 60000, stepMs: 20000 }',
      '',
    ].join('\n'),
  );
  return path;
}

describe.each(['typescript', 'rust'] as const)('a worker hosting %s agents beyond its reply cache', (runtime) => {
  beforeAll(() => {
    if (runtime === 'rust' && !rustWorkerSkip) ensureRustWorker();
  }, 600_000);

  it.skipIf(runtime === 'rust' && rustWorkerSkip !== null)(
    `${AGENTS} agents in one ${runtime} worker: every checkpoint commits, and resume reaches the uninterrupted digest`,
    () => {
      const out = tmpDir('detsim-crowded-');
      const config = crowdedConfig(out, runtime);
      // Each capture settles before the run steps on: at a checkpoint every 2 steps the writer's two
      // slots may otherwise still be busy (a capture refused BUSY, by design), and this test is
      // about the reply cache, not the writer's back-pressure.
      const run = detsim(['run', config, '--checkpoint-every', '2', '--checkpoint-wait', '--out', join(out, 'ckpt')]);
      expect(run.status, run.stderr).toBe(0);
      const runDir = join(out, 'ckpt', 'crowded-1');
      expect(run.stdout).not.toMatch(/not taken/);
      expect(committedIds(runDir)).toEqual(['ckpt-e1-2', 'ckpt-e1-4', 'ckpt-e1-6']);
      const uninterrupted = summary(runDir).behaviourDigest;

      const resumed = detsim(['resume', runDir, '--checkpoint', 'ckpt-e1-2']);
      expect(resumed.status, resumed.stderr).toBe(0);
      expect(resumed.stdout).toMatch(/restored\s+ckpt-e1-2 at boundary 2 into epoch e2/);
      expect(summary(runDir).behaviourDigest).toBe(uninterrupted);
    },
    300_000,
  );
});
