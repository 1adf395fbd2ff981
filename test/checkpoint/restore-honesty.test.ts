// Would a restore that drops agent state be caught? A user model whose restore ignores its payload
// (test/checkpoint/fixtures/restore-twin.ts, params.restore "drop") must FAIL the resume check of
// `detsim replay --resume-at K` (red, naming the first diverging step and agent), while its honest
// twin (the same model, restore "honest") passes the same check. And checkpoints are reproducible:
// two independent runs of one config write byte-identical generation files at the same boundary.
// Real worker processes, real files; not a test of the capture protocol's refusals (refusals.test.ts).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { resumeCheck } from '../../coordinator/diff0/resume-check.js';
import { runSession } from '../../coordinator/session/run.js';
import { loadPlan } from '../coordinator/helpers.js';
import { tmpDir } from './harness.js';

const FIXTURES = join('test', 'checkpoint', 'fixtures');
const HONEST = join(FIXTURES, 'restore-honest.yaml');
const DROP = join(FIXTURES, 'restore-drop.yaml');

interface ReplayJson {
  checks: { check: string; status: string; reason: string; detail: { checkpointId?: string; diagnosis?: string } }[];
  divergence: { step?: string; agentId?: string; path?: string } | null;
}

describe('restore that drops agent state', () => {
  it('the honest twin passes the resume check at K=2', { timeout: 240_000 }, async () => {
    const r = await resumeCheck(loadPlan(HONEST), 2, { outDir: tmpDir('detsim-twin-honest-'), steps: 6 });
    expect(r.check).toMatchObject({
      check: 'resume',
      status: 'pass',
      reason: 'audit_replay_stable',
      detail: { checkpointId: 'ckpt-e1-2' },
    });
    expect(r.divergence).toBeNull();
  });

  it(
    'detsim replay --resume-at 2 is red for the model whose restore ignores its payload, naming step 2 and the agent',
    { timeout: 240_000 },
    () => {
      const out = tmpDir('detsim-twin-drop-');
      const r = spawnSync(
        process.execPath,
        ['--import', 'tsx', 'coordinator/cli/main.ts', 'replay', DROP, '--resume-at', '2', '--out', out, '--json'],
        { encoding: 'utf8', timeout: 230_000 },
      );
      expect(r.status, r.stderr).toBe(1);
      const report = parseStrict(r.stdout.trim()) as unknown as ReplayJson;
      // Plain replays of the drop model agree: only the restore is wrong, and only the resume check sees it.
      expect(report.checks.find((c) => c.check === 'replay')).toMatchObject({ status: 'pass' });
      const resume = report.checks.find((c) => c.check === 'resume')!;
      expect(resume).toMatchObject({
        status: 'fail',
        reason: 'audit_repro_hash_mismatch',
        detail: { checkpointId: 'ckpt-e1-2' },
      });
      // Steps 0 and 1 ran before the checkpoint; step 2 is the first one after the restore.
      expect(report.divergence).toMatchObject({ step: '2', agentId: 't-0' });
      expect(report.divergence!.path).toMatch(/^steps\[2\]\.behaviour\.agents\[agentId=t-0\]\.decision/);
      expect(resume.detail.diagnosis).toMatch(/step 2/);
    },
  );
});

describe('checkpoint bytes are reproducible', () => {
  it(
    'two independent runs of one config write byte-identical generation files at each boundary',
    { timeout: 240_000 },
    async () => {
      const plan = loadPlan(HONEST);
      const files = await Promise.all(
        ['a', 'b'].map(async (label) => {
          const result = await runSession(plan, {
            outDir: tmpDir(`detsim-ckpt-bytes-${label}-`),
            steps: 4,
            onWarning: () => undefined,
            logLevel: 'warn',
            extension: new CheckpointRun({ every: 2, keep: 3 }),
          });
          return ['ckpt-e1-2', 'ckpt-e1-4'].map((id) => readFileSync(join(result.runDir, 'store', `${id}.flysess`)));
        }),
      );
      const [a, b] = files as [Buffer[], Buffer[]];
      for (const i of [0, 1]) {
        expect(a[i]!.byteLength).toBeGreaterThan(0);
        expect(a[i]!.equals(b[i]!), `ckpt-e1-${2 * (i + 1)}.flysess differs between two runs`).toBe(true);
      }
      // The two boundaries differ from each other: equal files would prove nothing.
      expect(a[0]!.equals(a[1]!)).toBe(false);
    },
  );
});
