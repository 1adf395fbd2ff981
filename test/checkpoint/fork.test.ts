// `detsim fork <run-dir> --checkpoint ID` through the built CLI with real workers: a new run directory
// from a committed checkpoint, its lineage in run.json, the parent untouched. A fork that changes
// nothing is the same run as its parent (DIFF=0, the fork named by diff); one that runs on further is
// the longer run; what a fork cannot change (seeds, the composition, a param the model does not
// accept on restore; params it does accept: fork-params.test.ts), an uncommitted,
// missing or corrupt checkpoint and an existing --out are each one line, and leave nothing behind.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { CLI_MAIN, detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { snapshotDir } from '../dir-snapshot.js';
import { readRun, tmpOut } from '../coordinator/helpers.js';

const EXAMPLE = 'examples/forage-walkers.yaml';

let work: string;
let runs: string;
let parent: string;

/** The parent: 300 steps, a checkpoint every 100 (keep 2: ckpt-e1-100 is rotated out), trace segments of 64 steps. */
beforeAll(() => {
  work = tmpOut('detsim-fork-');
  runs = join(work, 'runs');
  const r = detsimCli(
    [
      'run',
      EXAMPLE,
      '--steps',
      '300',
      '--checkpoint-every',
      '100',
      '--keep',
      '2',
      '--segment-steps',
      '64',
      '--out',
      runs,
    ],
    110_000,
  );
  expect(r.status, r.stderr).toBe(0);
  parent = join(runs, 'forage-walkers-1');
}, 120_000);

const storeRecord = (dir: string, id: string) =>
  (
    parseStrict(readFileSync(join(dir, 'store', 'manifest.json'))) as {
      generations: { checkpointId: string; envelopeDigest: string }[];
    }
  ).generations.find((g) => g.checkpointId === id)!;

describe('detsim fork (CLI)', () => {
  it('a fork with no overrides is the same run as its parent (DIFF=0); run.json records its lineage; the parent is untouched', () => {
    const before = snapshotDir(parent);
    // Boundary 200 lies inside a trace segment (64 steps each): the fork cuts that segment.
    const r = detsimCli(['fork', parent, '--checkpoint', 'ckpt-e1-200'], 110_000);
    expect(r.status, r.stderr).toBe(0);
    const fork = `${parent}-fork-1`;
    expect(r.stdout).toContain(`run directory    ${fork}\n`);
    expect(r.stdout).toContain(`forked from      ${parent} at ckpt-e1-200 (boundary 200) into epoch e2\n`);
    expect(readRun(fork).run.fork).toEqual({
      parent: 'forage-walkers-1',
      checkpoint: {
        id: 'ckpt-e1-200',
        envelopeDigest: storeRecord(parent, 'ckpt-e1-200').envelopeDigest,
        boundary: '200',
      },
      overrides: [],
    });
    expect(readRun(fork).summary).toMatchObject({ status: 'completed', stepsDone: 300 });
    expect(snapshotDir(parent)).toEqual(before);
    const diff = detsimCli(['diff', parent, fork]);
    expect(diff.status, diff.stdout).toBe(0);
    expect(diff.stdout).toMatch(/^DIFF=0: the same run/);
    expect(diff.stdout).toContain(`fork: ${fork} is a fork of ${parent} at checkpoint ckpt-e1-200 (boundary 200;`);
    // The fork's own files hold: its ledger chain and its store.
    expect(detsimCli(['ledger', 'verify', fork]).status).toBe(0);
    // Its ledger opens with the trace index digest the parent's ledger recorded at that capture: the
    // fork's resume checks the copied segments' bytes against it instead of re-hashing every kept step.
    const ledgerOf = (dir: string) =>
      readFileSync(join(dir, 'ledger.jsonl'), 'utf8')
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as { event: string; checkpointId?: string; detail: Record<string, string> });
    const captured = ledgerOf(parent).find((e) => e.event === 'captured' && e.checkpointId === 'ckpt-e1-200');
    expect(captured?.detail.traceIndex).toMatch(/^[0-9a-f]{64}$/);
    expect(ledgerOf(fork)[0]).toMatchObject({
      event: 'run',
      detail: { forkOf: 'forage-walkers-1', checkpointId: 'ckpt-e1-200', traceIndex: captured!.detail.traceIndex },
    });
    expect(detsimCli(['store', 'verify', join(fork, 'store')]).status).toBe(0);
  }, 120_000);

  it('--set steps=N runs the fork on to N: the run of N steps, not its parent (diff names run.steps)', () => {
    const fork = join(work, 'longer');
    const r = detsimCli(['fork', parent, '--checkpoint', 'ckpt-e1-300', '--set', 'steps=400', '--out', fork], 110_000);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('with steps=400');
    const { run, summary } = readRun(fork);
    expect(summary).toMatchObject({ status: 'completed', stepsDone: 400 });
    expect(run.steps).toBe(400);
    expect((run.fork as { overrides: unknown }).overrides).toEqual([{ path: 'steps', value: 400 }]);
    const whole = detsimCli(['run', EXAMPLE, '--steps', '400', '--out', join(work, 'whole')], 110_000);
    expect(whole.status, whole.stderr).toBe(0);
    const same = detsimCli(['diff', fork, join(work, 'whole', 'forage-walkers-1')]);
    expect(same.status, same.stdout).toBe(0);
    const diff = detsimCli(['diff', parent, fork]);
    expect(diff.status).toBe(1);
    expect(diff.stdout).toContain('first divergence at composition: run.steps: ');
  }, 240_000);

  it('what a fork cannot change is refused by name (struct_fork_override), before anything is written', () => {
    const before = readdirSync(runs).sort();
    const fork = (...args: string[]) => detsimCli(['fork', parent, '--checkpoint', 'ckpt-e1-200', ...args]);
    // A param the model does not accept on restore (forage takes a new `food` only): named, with what it takes.
    expectCliRefusal(
      fork('--set', 'environment.params.width=30', '--out', join(work, 'refused')),
      'struct_fork_override',
      '--set environment.params.width: a fork from checkpoint ckpt-e1-200 cannot change it: model forage-v1 does not accept a change of width when it restores a state (it accepts: food)',
    );
    expect(existsSync(join(work, 'refused'))).toBe(false);
    expectCliRefusal(
      fork('--set', 'agents[0].params.strict=false'),
      'struct_fork_override',
      "--set agents[0].params.strict: a fork from checkpoint ckpt-e1-200 cannot change it: it is the worker's strict mode",
    );
    expectCliRefusal(
      fork('--set', 'agents.params.explore=2'),
      'struct_fork_override',
      '--set agents.params.explore: a fork cannot change it: a fork sets the params of one participant',
    );
    expectCliRefusal(
      fork('--set', 'masterSeed="7"'),
      'struct_fork_override',
      '--set masterSeed: a fork cannot change it: the seeds',
    );
    expectCliRefusal(
      fork('--set', 'agents.count=4'),
      'struct_fork_override',
      "--set agents.count: a fork cannot change it: a fork keeps the parent's composition",
    );
    expectCliRefusal(fork('--set', 'steps=150'), 'struct_fork_override', 'steps: 150 is before the boundary 200');
    expectCliRefusal(fork('--set', 'deadlines.stepMs=0'), 'struct_invalid_field', 'deadlines.stepMs:');
    expectCliRefusal(fork('--out', parent), 'perm_fork_target_exists', `--out ${parent}: exists`);
    expect(readdirSync(runs).sort()).toEqual(before);
  }, 120_000);

  it('a missing, uncommitted or corrupt checkpoint is refused by name, and a refused resume leaves no fork behind', () => {
    const copy = join(work, 'copy');
    cpSync(parent, join(copy, 'p'), { recursive: true });
    const p = join(copy, 'p');
    // Rotated out (keep 2): no longer committed.
    expectCliRefusal(
      detsimCli(['fork', p, '--checkpoint', 'ckpt-e1-100']),
      'ident_checkpoint_unknown',
      'checkpoint ckpt-e1-100 is not committed',
    );
    // A generation file the manifest does not list (a save that never committed) is never a candidate.
    cpSync(join(p, 'store', 'ckpt-e1-200.flysess'), join(p, 'store', 'tmp-ckpt-e1-250.flysess'));
    expectCliRefusal(
      detsimCli(['fork', p, '--checkpoint', 'ckpt-e1-250']),
      'ident_checkpoint_unknown',
      'checkpoint ckpt-e1-250 is not committed',
    );
    const file = join(p, 'store', 'ckpt-e1-300.flysess');
    const bytes = readFileSync(file);
    bytes[4000] = bytes[4000]! ^ 1;
    writeFileSync(file, bytes);
    const corrupt = detsimCli(['fork', p, '--checkpoint', 'ckpt-e1-300']);
    expect(corrupt.status).toBe(1);
    expect(corrupt.stderr.trim()).toMatch(/^detsim: \[audit_[a-z_]+\] checkpoint refused: ckpt-e1-300: /);
    expect(corrupt.stderr.trim().split('\n')).toHaveLength(1);
    // Refused by the resume inside the fork (launcher slurm, no allocation): the assembled fork goes again.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLURM_')));
    const slurm = spawnSync(
      process.execPath,
      [CLI_MAIN, 'fork', p, '--checkpoint', 'ckpt-e1-200', '--launcher', 'slurm'],
      {
        encoding: 'utf8',
        env,
      },
    );
    expectCliRefusal(slurm, 'perm_slurm_no_allocation', 'launcher:');
    expect(readdirSync(copy)).toEqual(['p']);
    // The parent copied without its store/ (as a colleague copies a run to replay it): said so, not "committed none".
    rmSync(join(p, 'store'), { recursive: true });
    const gone = expectCliRefusal(
      detsimCli(['fork', p, '--checkpoint', 'ckpt-e1-200']),
      'ident_checkpoint_unknown',
      'checkpoint ckpt-e1-200:',
    );
    expect(gone).toContain(
      "store: missing, though the run's ledger records committed checkpoints (the last ckpt-e1-300): was the run copied without its store/?",
    );
    expect(readdirSync(copy)).toEqual(['p']);
  }, 120_000);

  it("a parent's damaged or missing trace file is refused naming the parent's file (not the fork's copy), nothing left", () => {
    const copy = join(work, 'damaged-parent');
    cpSync(parent, join(copy, 'p'), { recursive: true });
    const p = join(copy, 'p');
    const segment = join(p, 'trace', '000001.jsonl.gz');
    const bytes = readFileSync(segment);
    bytes[bytes.length >> 1] = bytes[bytes.length >> 1]! ^ 0xff;
    writeFileSync(segment, bytes);
    expectCliRefusal(
      detsimCli(['fork', p, '--checkpoint', 'ckpt-e1-200', '--out', join(copy, 'f1')]),
      'audit_trace_segment_tampered',
      `${segment}: segment 1 (steps from 64) of the parent differs from the SHA-256 its trace index records`,
    );
    cpSync(join(parent, 'trace', '000001.jsonl.gz'), segment);
    rmSync(join(p, 'trace', '000000.repro.gz'));
    expectCliRefusal(
      detsimCli(['fork', p, '--checkpoint', 'ckpt-e1-200', '--out', join(copy, 'f2')]),
      'audit_trace_segment_missing',
      `${join(p, 'trace', '000000.repro.gz')}: segment 0's repro file of the parent, listed in its trace index, is missing`,
    );
    expect(readdirSync(copy)).toEqual(['p']);
  }, 120_000);
});
