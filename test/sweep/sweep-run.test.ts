// `detsim sweep` end to end through the built CLI with real workers: a 2 × 3 grid with 2 replicates
// (12 runs, two coordinator processes at once) is interrupted with a real SIGINT to the runner's
// process group (what a terminal's Ctrl-C sends) while runs are in flight, ends with one line and
// exit 130, and the same command again continues it — done runs skipped (checked by their
// receipts), stopped ones resumed from their checkpoints — to the very runs an uninterrupted sweep
// gives (every ReproHash equal), each of which is the plain `detsim run` with the same overrides.
// Also: status/summary tables against the run files, an edited sweep file starting a new sweep
// directory, a run directory holding another run refused, and the sweep report.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { CLI_MAIN } from '../cli-refusal.js';

const BASE = `sessionId: sweep-test
masterSeed: "7"
steps: 500
stepHz: 60
environment:
  id: forage
  model: forage
  params: { width: 12, height: 12, food: 6 }
agents:
  count: 2
  prefix: w-
  model: walker
workers:
  agentsPerWorker: 2
  transport: thread
`;
const SWEEP = `name: food
base: base.yaml
replicates: 2
grid:
  agents.count: [2, 3]
  environment.params.food: [3, 6, 9]
checkpointEvery: 50
`;

function study(): string {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-sweep-'));
  writeFileSync(join(dir, 'base.yaml'), BASE);
  writeFileSync(join(dir, 'food.yaml'), SWEEP);
  return dir;
}

const cli = (cwd: string, args: string[]) =>
  spawnSync(process.execPath, [join(process.cwd(), CLI_MAIN), ...args], { cwd, encoding: 'utf8', timeout: 300_000 });

const readJson = (path: string) => parseStrict(readFileSync(path)) as Record<string, unknown>;

/** Each run directory's receipt ReproHash, by run name. */
function reproHashes(sweepDir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(sweepDir).sort())
    if (existsSync(join(sweepDir, name, 'receipt.json')))
      out[name] = readJson(join(sweepDir, name, 'receipt.json')).reproHash as string;
  return out;
}

/** Whether some run is in flight with a committed checkpoint, after at least two runs finished. */
function midSweep(sweepDir: string): boolean {
  if (!existsSync(sweepDir)) return false;
  const runs = readdirSync(sweepDir).filter((n) => /^[0-9]{2}-/.test(n));
  const done = runs.filter((n) => existsSync(join(sweepDir, n, 'receipt.json')));
  const inFlight = runs.filter(
    (n) => !existsSync(join(sweepDir, n, 'summary.json')) && existsSync(join(sweepDir, n, 'store', 'manifest.json')),
  );
  return done.length >= 2 && inFlight.length >= 1;
}

/** Start the sweep in its own process group, SIGINT the group once `midSweep`, return exit code and output. */
async function interruptedSweep(cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(process.cwd(), CLI_MAIN), 'sweep', 'food.yaml', '--parallel', '2'], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((res) => child.once('exit', (c) => res(c)));
  const sweepDir = join(cwd, 'sweeps', 'food-1');
  const deadline = Date.now() + 120_000;
  while (!midSweep(sweepDir) && child.exitCode === null && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  expect(child.exitCode, `the sweep ended before it could be interrupted: ${stdout}${stderr}`).toBeNull();
  process.kill(-child.pid!, 'SIGINT');
  const code = await exited;
  await new Promise((r) => setTimeout(r, 50));
  return { code, stdout, stderr };
}

describe('detsim sweep (CLI, real workers)', { timeout: 600_000 }, () => {
  it('[SEED-13] a 2 × 3 grid with 2 replicates, interrupted and continued, gives the runs an uninterrupted sweep gives, each the plain run with its seed', async () => {
    const a = study();
    const cut = await interruptedSweep(a);
    expect(cut.code, cut.stderr).toBe(130);
    const last = cut.stderr.trim().split('\n').pop()!;
    expect(last).toMatch(
      /^detsim: the sweep was interrupted with ([0-9]+) of 12 runs done; run `detsim sweep food\.yaml` again to continue$/,
    );
    const doneAtCut = Number(/with ([0-9]+) of/.exec(last)![1]);
    expect(doneAtCut).toBeGreaterThanOrEqual(2);
    expect(doneAtCut).toBeLessThan(12);
    expect(cut.stdout).toMatch(/^interrupted /m);
    const sweepDir = join(a, 'sweeps', 'food-1');
    // No run left locked or running: every coordinator stopped.
    for (const n of readdirSync(sweepDir)) expect(existsSync(join(sweepDir, n, 'run.lock')), n).toBe(false);

    const status = cli(a, ['sweep', 'status', 'sweeps/food-1', '--json']);
    expect(status.status, status.stderr).toBe(0);
    const rows = JSON.parse(status.stdout) as { run: string; status: string; note: string | null }[];
    expect(rows.filter((r) => r.status === 'done')).toHaveLength(doneAtCut);
    const stopped = rows.filter((r) => r.status === 'stopped');
    expect(stopped.length).toBeGreaterThanOrEqual(1);
    expect(stopped.some((r) => /^resumes from ckpt-e1-[0-9]+ \(step [0-9]+\)$/.test(r.note ?? ''))).toBe(true);

    // A report of the stopped sweep draws the runs that started and leaves out the ones that did not.
    const started = readdirSync(sweepDir).filter((n) => existsSync(join(sweepDir, n, 'run.json'))).length;
    const partial = cli(a, ['report', 'sweeps/food-1', '--out', 'partial.html']);
    expect(partial.status, partial.stderr).toBe(0);
    expect(partial.stdout).toContain(
      `sweep: ${started} runs of the 12 planned (${12 - started} without a run directory), ${doneAtCut} DIFF=0 against their receipts`,
    );

    const again = cli(a, ['sweep', 'food.yaml', '--parallel', '2']);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/^sweep sweeps\/food-1: 12 runs \(continued\), at most 2 at once$/m);
    expect(again.stdout.match(/^skipped /gm)).toHaveLength(doneAtCut);
    expect(again.stdout).toMatch(/^resumed /m);
    expect(again.stdout).toMatch(/^sweep sweeps\/food-1: 12 of 12 runs done in /m);

    // The same sweep, uninterrupted, elsewhere: every run the same run.
    const b = study();
    const whole = cli(b, ['sweep', 'food.yaml', '--parallel', '2']);
    expect(whole.status, whole.stderr).toBe(0);
    const got = reproHashes(sweepDir);
    expect(Object.keys(got)).toHaveLength(12);
    expect(got).toEqual(reproHashes(join(b, 'sweeps', 'food-1')));
    // Distinct replicates and points: 12 different runs.
    expect(new Set(Object.values(got)).size).toBe(12);

    // A sweep run is the plain run with its overrides and master seed.
    const index = readJson(join(sweepDir, 'sweep.json')) as {
      runs: { dir: string; masterSeed: string; overrides: Record<string, number> }[];
    };
    const r7 = index.runs[7]!;
    const plain = cli(a, [
      'run',
      'base.yaml',
      ...Object.entries(r7.overrides).flatMap(([p, v]) => ['--set', `${p}=${v}`]),
      '--master-seed',
      r7.masterSeed,
      '--out',
      'plain',
      '--json',
    ]);
    expect(plain.status, plain.stderr).toBe(0);
    expect((JSON.parse(plain.stdout) as { reproHash: string }).reproHash).toBe(got[r7.dir]);

    checkTables(a, sweepDir);
    checkReport(a);

    // The same command once more: nothing to do, nothing changed.
    const third = cli(a, ['sweep', 'food.yaml']);
    expect(third.status, third.stderr).toBe(0);
    expect(third.stdout.match(/^skipped /gm)).toHaveLength(12);
    expect(reproHashes(sweepDir)).toEqual(got);
  });

  it('an edited sweep file is a new sweep directory; a run directory holding another run is refused by name', () => {
    const a = study();
    writeFileSync(join(a, 'food.yaml'), SWEEP.replace('[2, 3]', '[2]').replace('[3, 6, 9]', '[3]'));
    writeFileSync(join(a, 'base.yaml'), BASE.replace('steps: 500', 'steps: 60'));
    const first = cli(a, ['sweep', 'food.yaml']);
    expect(first.status, first.stderr).toBe(0);
    writeFileSync(join(a, 'food.yaml'), SWEEP.replace('[2, 3]', '[2]').replace('[3, 6, 9]', '[3, 4]'));
    const second = cli(a, ['sweep', 'food.yaml']);
    expect(second.status, second.stderr).toBe(0);
    expect(readdirSync(join(a, 'sweeps')).sort()).toEqual(['food-1', 'food-2']);
    // Run 1 of food-2 made to hold run 0's files: the task refuses it, naming the directory.
    const d2 = join(a, 'sweeps', 'food-2');
    const runs = readdirSync(d2)
      .filter((n) => /^[0-9]{2}-/.test(n))
      .sort();
    spawnSync('rm', ['-rf', join(d2, runs[1]!)]);
    spawnSync('cp', ['-a', join(d2, runs[0]!), join(d2, runs[1]!)]);
    const refused = cli(a, ['sweep', 'task', 'sweeps/food-2', '1']);
    expect(refused.status).toBe(2);
    expect(refused.stderr.trim()).toMatch(
      /^detsim: \[struct_sweep_mismatch\] \S+01-count=2-food=3-r1: holds another run/,
    );
    // A done run whose trace was changed: status says damaged, naming the check; the sweep refuses to go on.
    const seg = join(
      a,
      'sweeps',
      'food-1',
      readdirSync(join(a, 'sweeps', 'food-1')).find((n) => n.startsWith('00-'))!,
      'trace',
      '000000.jsonl.gz',
    );
    writeFileSync(seg, Buffer.concat([readFileSync(seg), Buffer.from([0])]));
    const st = JSON.parse(cli(a, ['sweep', 'status', 'sweeps/food-1', '--json']).stdout) as {
      status: string;
      note: string;
    }[];
    expect(st[0]!.status).toBe('damaged');
    expect(st[0]!.note).toMatch(/^\[audit_trace_/);
    writeFileSync(join(a, 'food.yaml'), SWEEP.replace('[2, 3]', '[2]').replace('[3, 6, 9]', '[3]'));
    const damaged = cli(a, ['sweep', 'food.yaml']);
    expect(damaged.status).toBe(1); // a file that failed verification
    expect(damaged.stderr.trim()).toMatch(/^detsim: \[audit_trace_\S+\] .*000000\.jsonl\.gz/);
    // The base config edited: continuing is refused, naming the change.
    writeFileSync(join(a, 'base.yaml'), BASE.replace('steps: 500', 'steps: 61'));
    const edited = cli(a, ['sweep', 'task', 'sweeps/food-2', '0']);
    expect(edited.status).toBe(2);
    expect(edited.stderr.trim()).toMatch(
      /^detsim: \[struct_sweep_mismatch\] \S+food-2: the sweep file \S+food\.yaml \(or its base config, or a model of its own\) changed/,
    );
  });
});

describe('detsim sweep: a masterSeed grid, and a sweep file that moved', { timeout: 600_000 }, () => {
  it('a grid over masterSeed reads back done and continues as done; moved with its base, it continues', () => {
    const a = study();
    writeFileSync(
      join(a, 'seeds.yaml'),
      'base: base.yaml\nreplicates: 2\ngrid:\n  masterSeed: ["1", "2"]\n  steps: [30]\n',
    );
    const first = cli(a, ['sweep', 'seeds.yaml']);
    expect(first.status, first.stderr).toBe(0);
    const status = () =>
      (JSON.parse(cli(a, ['sweep', 'status', 'sweeps/seeds-1', '--json']).stdout) as { status: string }[]).map(
        (r) => r.status,
      );
    expect(status()).toEqual(['done', 'done', 'done', 'done']);
    const again = cli(a, ['sweep', 'seeds.yaml']);
    expect(again.status, again.stderr).toBe(0);
    // One run gone, the sweep file moved into a folder of its own (its base named from there).
    const dir = join(a, 'sweeps', 'seeds-1');
    const gone = readdirSync(dir).find((n) => n.startsWith('01-'))!;
    spawnSync('rm', ['-rf', join(dir, gone)]);
    mkdirSync(join(a, 'defs'));
    writeFileSync(
      join(a, 'defs', 'seeds.yaml'),
      readFileSync(join(a, 'seeds.yaml'), 'utf8').replace('base: base.yaml', 'base: ../base.yaml'),
    );
    rmSync(join(a, 'seeds.yaml'));
    const moved = cli(a, ['sweep', 'defs/seeds.yaml', '--out', 'sweeps']);
    expect(moved.status, moved.stdout + moved.stderr).toBe(0);
    expect(moved.stdout + moved.stderr).toContain('(continued)');
    expect(status()).toEqual(['done', 'done', 'done', 'done']);
    expect(readJson(join(dir, 'sweep.json')).sweepFile).toBe(join(a, 'defs', 'seeds.yaml'));
  });
});

describe('detsim sweep: a run that fails', { timeout: 600_000 }, () => {
  it('its line names why (the refusal, not the run directory line after it); the sweep exits 1', () => {
    const a = study();
    writeFileSync(
      join(a, 'boom.mjs'),
      `export default { kind: 'agent', modelVersion: 'boom-v1', initialize: () => ({}),
  prepare(s, ctx) { if (Number(ctx.step) === 5) throw new Error('boom at 5'); return { move: 'north' }; },
  commit() {}, capture: () => ({}), restore: () => ({}) };\n`,
    );
    writeFileSync(join(a, 'boom.yaml'), BASE.replace('model: walker', 'model: ./boom.mjs'));
    writeFileSync(join(a, 'fails.yaml'), 'base: boom.yaml\ngrid:\n  steps: [20]\n');
    const r = cli(a, ['sweep', 'fails.yaml']);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(
      /^failed {6}00-steps=20-r0 {2}seed \d+ {2}\[audit_model_error\] run failed: worker worker-0 .* prepare failed: boom at 5/m,
    );
  });
});

/** status and summary, JSON and CSV, against the run directories' own files. */
function checkTables(cwd: string, sweepDir: string): void {
  const rows = JSON.parse(cli(cwd, ['sweep', 'status', 'sweeps/food-1', '--json']).stdout) as {
    run: string;
    status: string;
    stepsDone: number;
    rewardTotal: number;
    reproHash: string;
    masterSeed: string;
  }[];
  expect(rows).toHaveLength(12);
  for (const r of rows) {
    const summary = readJson(join(sweepDir, r.run, 'summary.json')) as {
      stepsDone: number;
      rewards: { total: number };
    };
    expect(r).toMatchObject({ status: 'done', stepsDone: 500, rewardTotal: summary.rewards.total });
    expect(r.reproHash).toBe(readJson(join(sweepDir, r.run, 'receipt.json')).reproHash);
    expect(r.masterSeed).toBe(readJson(join(sweepDir, r.run, 'run.json')).masterSeed);
  }
  const csv = cli(cwd, ['sweep', 'status', 'sweeps/food-1', '--csv']).stdout.trim().split('\n');
  expect(csv[0]).toBe(
    'run,agents.count,environment.params.food,replicate,masterSeed,status,stepsDone,steps,rewardTotal,reproHash',
  );
  expect(csv).toHaveLength(13);
  expect(csv[1]!.split(',').slice(0, 3)).toEqual([rows[0]!.run, '2', '3']);
  const summary = JSON.parse(cli(cwd, ['sweep', 'summary', 'sweeps/food-1', '--json']).stdout) as {
    overrides: Record<string, number>;
    done: number;
    rewardMean: number;
    distinctReproHashes: number;
  }[];
  expect(summary).toHaveLength(6);
  for (const s of summary) {
    const mine = rows.filter((r) =>
      r.run.includes(`count=${s.overrides['agents.count']}-food=${s.overrides['environment.params.food']}-`),
    );
    expect(mine).toHaveLength(2);
    expect(s).toMatchObject({ done: 2, distinctReproHashes: 2 });
    expect(s.rewardMean).toBeCloseTo((mine[0]!.rewardTotal + mine[1]!.rewardTotal) / 2, 9);
  }
}

/** The sweep's report: one page, every run DIFF=0 against its receipt. */
function checkReport(cwd: string): void {
  const r = cli(cwd, ['report', 'sweeps/food-1', '--out', 'food.html']);
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/12 runs, 12 DIFF=0 against their receipts/);
}
