// Checkpoints across languages through the real coordinator: a run with worker-0 on Rust and
// worker-1 on TypeScript, checkpointed every 2 steps and SIGKILLed after ckpt-e1-2 commits, is
// resumed with the runtimes swapped (worker-0's Rust-captured agents restore into TypeScript,
// worker-1's into Rust); the continued run has the all-TypeScript run's behaviour and digest.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText, resolveConfig } from '../../coordinator/config.js';
import { resumeRun } from '../../coordinator/checkpoint/resume.js';
import { defaultWorkerCommand } from '../../coordinator/launch/launcher.js';
import { runSession } from '../../coordinator/session/run.js';
import { canonicalBehaviour, compareBehaviours } from '../../coordinator/trace/trace.js';
import { committedIds, runAndKill, summary, traces } from '../checkpoint/cli.js';
import { readRun, tmpOut } from '../coordinator/helpers.js';
import { REPO_ROOT } from '../workers/harness.js';
import { commandOf, ensureRustWorker, rustWorkerSkip } from './rust-worker.js';

const M = 8;

/** Hello runtimes per worker as logged by the launcher ("worker ready"), in log order. */
function helloRuntimes(runDir: string): { workerId: string; runtime: string }[] {
  return readFileSync(join(runDir, 'run.log'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"worker ready"'))
    .map((l) => {
      const o = JSON.parse(l) as { workerId: string; hello: { runtime: string } };
      return { workerId: o.workerId, runtime: o.hello.runtime.split('/')[0]! };
    });
}

describe.skipIf(rustWorkerSkip !== null)('checkpoints restore across languages', () => {
  beforeAll(() => ensureRustWorker(), 1_500_000);

  it(`Rust-captured agents restore into TypeScript workers and the reverse; the resumed run to ${M} matches the TypeScript run`, async () => {
    const dir = tmpOut('detsim-xck-');
    const cfg = parseConfigText(
      readFileSync(join(REPO_ROOT, 'examples/mixed-walkers.yaml'), 'utf8'),
      'mixed-walkers.yaml',
    ) as Record<string, any>;
    const mixed = { ...cfg, workers: { ...cfg.workers, runtime: ['rust', 'typescript'] } };
    const mixedFile = join(dir, 'mixed.json');
    writeFileSync(mixedFile, JSON.stringify(mixed));
    const tsPlan = resolveConfig(
      { ...cfg, workers: { ...cfg.workers, runtime: 'typescript' } },
      { baseDir: REPO_ROOT },
    );
    const plain = await runSession(tsPlan, { outDir: join(dir, 'a'), steps: M, onWarning: () => undefined });

    const bDir = join(dir, 'b', 'mixed-walkers-1');
    const { killed } = await runAndKill(
      // --keep: a fast run may commit past ckpt-e1-2 before the kill lands; it must still be listed.
      ['run', mixedFile, '--steps', '400', '--checkpoint-every', '2', '--keep', '100', '--out', join(dir, 'b')],
      bDir,
      (d) => committedIds(d).includes('ckpt-e1-2'),
    );
    expect(killed).toBe(true);
    expect(helloRuntimes(bDir)).toEqual(
      expect.arrayContaining([
        { workerId: 'worker-0', runtime: 'detsim-rs' },
        { workerId: 'worker-1', runtime: 'detsim-ts' },
      ]),
    );

    // Resume with the agent runtimes swapped.
    const ts = defaultWorkerCommand();
    const rust = commandOf('rust');
    const logBefore = readFileSync(join(bDir, 'run.log'), 'utf8').length;
    const r = await resumeRun(bDir, {
      checkpointId: 'ckpt-e1-2',
      steps: M,
      commandFor: (w) => (w.workerId === 'worker-0' ? ts : w.workerId === 'worker-1' ? rust : undefined),
    });
    expect(r).toMatchObject({ checkpointId: 'ckpt-e1-2', boundary: 2, steps: M });
    const resumedLog = readRun(bDir).log.slice(logBefore);
    const resumedHellos = resumedLog
      .split('\n')
      .filter((l) => l.includes('"worker ready"'))
      .map((l) => JSON.parse(l) as { workerId: string; hello: { runtime: string } });
    expect(resumedHellos.map((h) => [h.workerId, h.hello.runtime.split('/')[0]]).sort()).toEqual([
      ['worker-0', 'detsim-ts'],
      ['worker-1', 'detsim-rs'],
      ['worker-env', 'detsim-ts'],
    ]);

    const expected = traces(plain.runDir).map((t) => t.behaviour);
    const actual = traces(bDir).map((t) => t.behaviour);
    expect(actual).toHaveLength(M);
    expect(actual.slice(2).every((x) => x.scope.epoch === 'e2')).toBe(true);
    expect(compareBehaviours(expected, actual)).toBeNull();
    expect(summary(bDir).behaviourDigest).toBe(plain.behaviourDigest);
    // The comparison can fail: a tampered resumed step is caught.
    const tampered = actual.map((x) => structuredClone(x));
    tampered[M - 1]!.controlDigest = '0'.repeat(64);
    expect(compareBehaviours(expected, tampered)).not.toBeNull();
    expect(canonicalBehaviour(actual[2]!)).not.toBe(canonicalBehaviour(expected[2]!));
  }, 300_000);
});
