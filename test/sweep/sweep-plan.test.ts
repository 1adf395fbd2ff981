// Sweep files and the runs they mean, without running any: the replicate master seeds against
// Python's hashlib reading of the spec text (docs/spec/seed-derivation.md), the grid's product and
// order, run directory names, and the refusals of a bad sweep file — one line naming the field,
// exit 2, nothing written.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planSweep, readSweepFile, runIdOf } from '../../coordinator/sweep/sweep-file.js';
import { replicateSeed } from '../../coordinator/sweep/replicate-seed.js';
import { arrayRanges } from '../../coordinator/sweep/array-script.js';
import { statusTable, summaryTable } from '../../coordinator/sweep/status.js';
import { CLI_MAIN } from '../cli-refusal.js';

const BASE = resolve('examples/forage-walkers.yaml');

/** A sweep file in a fresh directory. */
function sweepFile(text: string): { dir: string; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-sweep-plan-'));
  const file = join(dir, 'food.yaml');
  writeFileSync(file, text);
  return { dir, file };
}

/** What Python's hashlib says replicate r of base is, read from the spec's words. */
function pythonSeed(base: string, r: number): string {
  const code = `import hashlib,sys
d=hashlib.sha256(("detsim/sweep-replicate-seed-v1\\n%s\\n%d\\n" % (sys.argv[1], int(sys.argv[2]))).encode()).digest()
print(int.from_bytes(d[:8], "big"))`;
  const r2 = spawnSync('python3', ['-c', code, base, String(r)], { encoding: 'utf8' });
  expect(r2.status, r2.stderr).toBe(0);
  return r2.stdout.trim();
}

describe('sweep-replicate-seed-v1', () => {
  it('[SEED-12] each replicate master seed is SHA-256 of the spec material, first 8 bytes big-endian, as Python computes it', () => {
    for (const [base, r] of [
      ['20261129', 0],
      ['20261129', 1],
      ['0', 0],
      ['18446744073709551615', 7],
    ] as const)
      expect(replicateSeed(base, r), `${base} r${r}`).toBe(pythonSeed(base, r));
  });

  it('[SEED-12] replicates of one point get distinct seeds, replicate 0 is derived too, and the same file gives the same seeds', () => {
    const { file } = sweepFile(`base: ${BASE}\nreplicates: 5\n`);
    const a = planSweep(readSweepFile(file));
    const b = planSweep(readSweepFile(file));
    const seeds = a.runs.map((r) => r.masterSeed);
    expect(new Set(seeds).size).toBe(5);
    expect(seeds).not.toContain('20261129');
    expect(b.runs.map((r) => r.masterSeed)).toEqual(seeds);
    expect(a.planDigest).toBe(b.planDigest);
  });
});

describe('sweep planning', () => {
  it('the runs are the grid product times the replicates, in order, each resolved with its overrides', () => {
    const { file } = sweepFile(
      `base: ${BASE}\nreplicates: 2\ngrid:\n  environment.params.food: [12, 24, 48]\n  agents.count: [4, 8]\n`,
    );
    const p = planSweep(readSweepFile(file));
    expect(p.spec.name).toBe('food');
    expect(p.runs).toHaveLength(12);
    expect(p.runs.map((r) => r.id).slice(0, 4)).toEqual([
      '00-food=12-count=4-r0',
      '01-food=12-count=4-r1',
      '02-food=12-count=8-r0',
      '03-food=12-count=8-r1',
    ]);
    const r5 = p.runs[5]!;
    expect(r5.point).toEqual({ 'environment.params.food': 24, 'agents.count': 4 });
    expect(r5.plan.environment.params).toMatchObject({ food: 24 });
    expect(r5.plan.agents).toHaveLength(4);
    expect(r5.plan.masterSeed).toBe(r5.masterSeed);
    // Replicates share seeds across grid points (common random numbers): only the parameter differs.
    expect(p.runs[0]!.masterSeed).toBe(p.runs[2]!.masterSeed);
    expect(p.runs[0]!.masterSeed).not.toBe(p.runs[1]!.masterSeed);
    // Default checkpoints: a tenth of the steps.
    expect(r5.checkpointEvery).toBe(60);
  });

  it('a grid over masterSeed derives each replicate from that point seed', () => {
    const { file } = sweepFile(`base: ${BASE}\nreplicates: 2\ngrid:\n  masterSeed: ["1", "2"]\n`);
    const p = planSweep(readSweepFile(file));
    expect(p.runs.map((r) => r.masterSeed)).toEqual([
      replicateSeed('1', 0),
      replicateSeed('1', 1),
      replicateSeed('2', 0),
      replicateSeed('2', 1),
    ]);
  });

  it('a job array lists the runs not done as Slurm ranges', () => {
    expect(arrayRanges([0, 1, 2, 5, 7, 8])).toBe('0-2,5,7-8');
    expect(arrayRanges([3])).toBe('3');
  });

  it('run directory names keep only safe characters', () => {
    expect(runIdOf(3, 3, { 'agents[0].params.mode': 'a/b c' }, 1)).toBe('003-mode=a_b_c-r1');
  });
});

describe('sweep tables', () => {
  it('a grid path named like a column of the table (steps) is headed set.<path>; others keep their path', () => {
    const row = {
      run: 'r0',
      overrides: { steps: 200, 'environment.params.food': 6 },
      replicate: 0,
      masterSeed: '1',
      status: 'done',
      stepsDone: 200,
      steps: 200,
      rewardTotal: 1,
      reproHash: 'x',
    };
    expect(statusTable([row as never]).header).toEqual([
      'run',
      'set.steps',
      'environment.params.food',
      'replicate',
      'masterSeed',
      'status',
      'stepsDone',
      'steps',
      'rewardTotal',
      'reproHash',
    ]);
    const sum = { overrides: { done: 1 }, done: 1, replicates: 1, rewardMin: 0, rewardMean: 0, rewardMax: 0 };
    expect(summaryTable([{ ...sum, distinctReproHashes: 1 } as never]).header[0]).toBe('set.done');
  });
});

describe('bad sweep files (CLI)', () => {
  const cases: [string, string, string, RegExp][] = [
    [
      'an empty grid list',
      `base: ${BASE}\ngrid:\n  environment.params.food: []\n`,
      'struct_sweep_empty',
      /grid\.environment\.params\.food: an empty list makes a sweep of zero runs/,
    ],
    [
      'replicates: 0',
      `base: ${BASE}\nreplicates: 0\n`,
      'struct_sweep_empty',
      /replicates: 0 is not a whole number ≥ 1/,
    ],
    [
      'a path the config does not have',
      `base: ${BASE}\ngrid:\n  environment.parms.food: [1]\n`,
      'struct_override_path',
      /grid environment\.parms\.food/,
    ],
    ['a value the schema refuses', `base: ${BASE}\ngrid:\n  agents.count: [4, -1]\n`, 'struct_', /agents\.count/],
    [
      'a non-scalar value',
      `base: ${BASE}\ngrid:\n  environment.params.food: [[1]]\n`,
      'struct_sweep_file',
      /grid values are scalars/,
    ],
    ['an unknown field', `base: ${BASE}\nreplicate: 2\n`, 'struct_sweep_file', /replicate: unknown field/],
    ['no base', `replicates: 2\n`, 'struct_sweep_file', /base: missing/],
  ];
  for (const [what, text, reason, message] of cases)
    it(`${what}: one line naming it, exit 2, no sweep directory`, () => {
      const { dir, file } = sweepFile(text);
      const out = join(dir, 'sweeps');
      const r = spawnSync(process.execPath, [CLI_MAIN, 'sweep', file, '--out', out], { encoding: 'utf8' });
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^detsim: \\[${reason}`));
      expect(lines[0]).toMatch(message);
      expect(r.status).toBe(2);
      expect(r.stdout).toBe('');
      expect(existsSync(out)).toBe(false);
      expect(readdirSync(dir)).toEqual(['food.yaml']);
    });

  it('a mistyped command (sweep stauts <dir>) is named as such, not as too many arguments for run', () => {
    const r = spawnSync(process.execPath, [CLI_MAIN, 'sweep', 'stauts', 'sweeps/food-1'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      'detsim: [struct_usage] unknown sweep command "stauts": the commands are run, status, summary, submit and task (detsim sweep <sweep-file> runs one)\n',
    );
  });
});
