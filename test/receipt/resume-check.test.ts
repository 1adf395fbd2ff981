// `detsim replay --resume-at K`: a run checkpointed at K, interrupted, resumed with fresh workers in
// a new epoch has the uninterrupted run's ReproHash after the epoch rebase — and the comparison can
// fail: without the rebase, and with one changed decision after the resume.
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { diagnose } from '../../coordinator/diff0/diagnosis.js';
import { hydrateReceipt, readReceipt } from '../../coordinator/receipt/receipt.js';
import { reproHash } from '../../coordinator/receipt/reprohash.js';
import { rebasedReceipt } from '../../coordinator/diff0/resume-check.js';
import { parseStrict } from '../../core/formats/canonical-json.js';

const CONFIG = join('test', 'receipt', 'fixtures', 'tiny-walkers.yaml');

type Steps = { behaviour: { scope: { epoch: string }; agents: { decision: { move: string } }[] } }[];

describe('replay --resume-at', () => {
  it(
    '[STORE-20] kill at K, resume into a new epoch: same ReproHash as the uninterrupted run after the rebase; the check can fail',
    { timeout: 240_000 },
    () => {
      const out = mkdtempSync(join(tmpdir(), 'detsim-resume-'));
      const r = spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          'coordinator/cli/main.ts',
          'replay',
          CONFIG,
          '--steps',
          '5',
          '--resume-at',
          '2',
          '--out',
          out,
          '--json',
        ],
        { encoding: 'utf8', timeout: 230_000 },
      );
      expect(r.status, r.stdout + r.stderr).toBe(0);
      const report = parseStrict(r.stdout.trim()) as {
        checks: { check: string; status: string; detail: { checkpointId?: string } }[];
        resume: { uninterruptedDir: string; resumedDir: string };
      };
      const check = report.checks.find((c) => c.check === 'resume')!;
      expect(check).toMatchObject({ status: 'pass', detail: { checkpointId: 'ckpt-e1-2', resumeAt: 2, steps: 5 } });

      // receipt.json binds its trace by digest: the steps are read back through the trace reader.
      const read = (dir: string) => hydrateReceipt(dir, readReceipt(join(dir, 'receipt.json')));
      const u = read(report.resume.uninterruptedDir);
      const resumed = read(report.resume.resumedDir);
      expect((resumed.steps as unknown as Steps).map((s) => s.behaviour.scope.epoch)).toEqual([
        'e1',
        'e1',
        'e2',
        'e2',
        'e2',
      ]);
      expect(reproHash(rebasedReceipt(resumed)).reproHash).toBe(reproHash(u).reproHash);
      // receipt.json of the resumed run (detsim resume / writeReceipt) stores that rebased hash.
      expect(resumed.reproHash).toBe(u.reproHash);
      // Without the rebase the epoch-derived fields differ, so the hashes differ.
      expect(reproHash(resumed).reproHash).not.toBe(reproHash(u).reproHash);
      // One changed decision after the resume is caught and located.
      const tampered = structuredClone(resumed) as unknown as { steps: Steps };
      const d0 = tampered.steps[3]!.behaviour.agents[0]!.decision;
      d0.move = d0.move === 'north' ? 'south' : 'north';
      const div = diagnose(u, rebasedReceipt(tampered as never));
      expect(div).toMatchObject({
        part: 'step',
        step: '3',
        path: 'steps[3].behaviour.agents[agentId=w-0].decision.move',
        agentId: 'w-0',
      });
    },
  );
});
