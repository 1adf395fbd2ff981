// What `detsim resume` checks before anything starts, and what a refusal leaves: run.json edited
// (masterSeed, one agent seed, a model version) is refused naming the field with no worker
// spawned; a store manifest whose boundary disagrees with the generation, or a boundary beyond the
// run's recorded steps, is refused naming what is wrong (never a flag the user did not pass); a run
// that never committed a checkpoint is told so; a resume refused after its workers started leaves
// run.log (and every other file) byte for byte as it was; and a disk too full for the trace cut
// refuses the resume as the I/O failure it is, changing nothing; a disk that fills after the
// restore is an I/O failure too, with the trace cut whole (a real full tmpfs); a run of an older
// detsim (one trace.jsonl) is refused by name.
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resumeRun } from '../../coordinator/checkpoint/resume.js';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { runSession } from '../../coordinator/session/run.js';
import { loadPlan } from '../coordinator/helpers.js';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { BehaviourDigest, EpochRebase } from '../../coordinator/trace/trace.js';
import { snapshotDir } from '../dir-snapshot.js';
import { fullDiskUnavailable, mountSmallDisk, PAGE, type SmallDisk } from '../full-disk.js';
import { asOlderRun, traceLinesOf } from '../trace-read.js';
import { committedIds, detsim, runAndKill, summary, traces } from './cli.js';
import { tmpDir } from './harness.js';
import { REPO_ROOT } from '../workers/harness.js';

const T = 300_000;
let base: string;
let out: string;

/** A copy of the checkpointed run with one JSON file of it edited. */
function copyWith(name: string, file: string, edit: (v: Record<string, any>) => void): string {
  const dir = join(out, name);
  cpSync(base, dir, { recursive: true });
  const text = readFileSync(join(dir, file), 'utf8');
  const v = parseStrict(text) as Record<string, any>;
  edit(v);
  // Same form as the original: run.json ends with a newline, the store manifest is canonical bytes only.
  writeFileSync(join(dir, file), `${canonicalize(v)}${text.endsWith('\n') ? '\n' : ''}`);
  return dir;
}

/** The one stderr line of a refused resume; the run directory must be unchanged. */
function refusedLine(dir: string, args: string[] = []): { status: number | null; line: string } {
  const before = snapshotDir(dir);
  const r = detsim(['resume', dir, ...args]);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  expect(snapshotDir(dir)).toEqual(before);
  return { status: r.status, line: r.stderr.trim().split('\n').at(-1)! };
}

beforeAll(() => {
  out = tmpDir('detsim-resume-checks-');
  const r = detsim(['run', 'examples/lif-pair.yaml', '--steps', '6', '--checkpoint-every', '2', '--out', out]);
  expect(r.status, r.stderr).toBe(0);
  base = join(out, 'lif-pair-1');
}, T);

describe('resume checks run.json against the checkpoint before any worker starts', () => {
  it(
    'an edited masterSeed, agent seed or model version is refused naming the field; no worker is spawned, nothing changes',
    async () => {
      const seeded = copyWith('master-seed', 'run.json', (r) => (r.masterSeed = '8'));
      const spawned: string[] = [];
      const before = snapshotDir(seeded);
      const e = await resumeRun(seeded, { commandFor: (w) => void spawned.push(w.workerId) }).then(
        () => null,
        (x: unknown) => x,
      );
      expect(e).toMatchObject({ reason: 'ident_seed_mismatch', field: 'masterSeed' });
      expect(spawned).toEqual([]);
      expect(snapshotDir(seeded)).toEqual(before);
      const cli = refusedLine(seeded);
      expect(cli.status).toBe(1);
      expect(cli.line).toMatch(
        /^detsim: \[ident_seed_mismatch\] checkpoint refused: .*run\.json: masterSeed "8" does not derive the seeds run\.json records/,
      );

      const agentSeed = copyWith('agent-seed', 'run.json', (r) => (r.agents[1].seed = 5));
      const a = refusedLine(agentSeed);
      expect(a.status).toBe(1);
      expect(a.line).toMatch(
        /^detsim: \[ident_seed_mismatch\] .*agents\[1\]\.seed \(lif-b\) is 5, but seed-derivation-v1 of masterSeed "7" gives /,
      );

      const version = copyWith('model-version', 'run.json', (r) => (r.agents[0].modelVersion = 'lif-v0'));
      const v = refusedLine(version);
      expect(v.status).toBe(1);
      expect(v.line).toMatch(
        /^detsim: \[ident_compatibility_mismatch\] checkpoint refused: compatibility content differs: .*run\.json's composition/,
      );
    },
    T,
  );

  it(
    'a boundary that does not fit is refused naming the manifest or run.json, never a flag that was not passed',
    () => {
      const edited = copyWith(
        'manifest-boundary',
        'store/manifest.json',
        (m) => (m.generations.at(-1).boundary = '300'),
      );
      const m = refusedLine(edited);
      expect(m.status).toBe(1);
      expect(m.line).not.toMatch(/--steps/);
      expect(m.line).toMatch(
        /^detsim: \[audit_generation_record\] .*record\.boundary: the envelope manifest implies boundary "6", .*store\/manifest\.json records "300"$/,
      );

      const shorter = copyWith('run-steps', 'run.json', (r) => (r.steps = 3));
      const s = refusedLine(shorter);
      expect(s.status).toBe(2);
      expect(s.line).toMatch(
        /^detsim: \[struct_run_record\] checkpoint ckpt-e1-6 is at boundary 6 \(.*store\/manifest\.json\), beyond the run's total of 3 steps \(.*run\.json steps\); pass --steps N with N ≥ 6/,
      );
      const flag = refusedLine(shorter, ['--steps', '5']);
      expect(flag.line).toMatch(
        /^detsim: \[struct_run_record\] --steps 5 is before the boundary 6 of checkpoint ckpt-e1-6$/,
      );
    },
    T,
  );

  it(
    'a run that never committed a checkpoint is told so; a copy without its store is told that; a run without a store keeps the hint',
    () => {
      const r = detsim([
        'run',
        'examples/lif-pair.yaml',
        '--steps',
        '2',
        '--checkpoint-every',
        '1000',
        '--out',
        join(out, 'never'),
      ]);
      expect(r.status, r.stderr).toBe(0);
      const never = refusedLine(join(out, 'never', 'lif-pair-1'));
      expect(never.status).toBe(2);
      expect(never.line).toMatch(
        /^detsim: \[ident_store_empty\] .*store: no checkpoint was committed yet \(the run checkpoints every 1000 steps and it stopped before its first checkpoint was committed\)/,
      );
      expect(never.line).not.toMatch(/run with --checkpoint-every/);

      // Copied without store/ (as a colleague copies a run to replay it): the ledger still lists commits.
      const copied = join(out, 'copied-without-store');
      cpSync(base, copied, { recursive: true });
      rmSync(join(copied, 'store'), { recursive: true });
      const gone = refusedLine(copied);
      expect(gone.status).toBe(2);
      expect(gone.line).toMatch(
        /^detsim: \[struct_run_record\] .*store: missing, though the run's ledger records committed checkpoints \(the last ckpt-e1-6\): was the run copied without its store\/\? Copy it with store\/ to resume \(replay and diff need no store\)$/,
      );

      const plain = join(out, 'no-store');
      cpSync(base, plain, { recursive: true });
      for (const f of ['store', 'ledger.jsonl', 'ledger.head.json']) rmSync(join(plain, f), { recursive: true });
      const none = refusedLine(plain);
      expect(none.status).toBe(2);
      expect(none.line).toMatch(
        /^detsim: \[struct_run_record\] .*store: no checkpoint store \(run with --checkpoint-every K to make a run resumable\)$/,
      );
    },
    T,
  );

  it(
    'a resume refused after its workers started leaves run.log and every other file untouched',
    async () => {
      // A user model whose restore throws: everything before the workers passes (the trace, the
      // checkpoint, run.json), the workers start, and the restore is refused by the participant.
      const r = await runSession(loadPlan(join('test', 'checkpoint', 'fixtures', 'restore-refuse.yaml')), {
        outDir: join(out, 'restore-refuse'),
        steps: 6,
        extension: new CheckpointRun({ every: 2, keep: 3 }),
        onWarning: () => undefined,
        logLevel: 'warn',
      });
      const before = snapshotDir(r.runDir);
      const spawned: string[] = [];
      const e = await resumeRun(r.runDir, {
        checkpointId: 'ckpt-e1-4',
        logLevel: 'error',
        commandFor: (w) => void spawned.push(w.workerId),
      }).then(
        () => null,
        (x: unknown) => x as { reason: string; message: string },
      );
      expect(spawned.length).toBeGreaterThan(0);
      expect(e?.reason).toBe('audit_participant_refused');
      expect(e?.message).toContain('this model refuses every restore');
      expect(snapshotDir(r.runDir)).toEqual(before);
    },
    T,
  );
});

describe('a resume that runs completed steps again', () => {
  it(
    'with a model that restores lossily: the changed ReproHash is said (audit_repro_hash_mismatch, exit 1)',
    () => {
      const lab = join(out, 'lossy-lab');
      mkdirSync(join(lab, 'node_modules'), { recursive: true });
      symlinkSync(REPO_ROOT, join(lab, 'node_modules', 'detsim'));
      // Deterministic from its seed, but restore starts the generator over: after a restore it draws otherwise.
      writeFileSync(
        join(lab, 'forgetful.mjs'),
        `import { defineAgentModel, Xorshift32 } from 'detsim/sdk';
export default defineAgentModel({
  modelVersion: 'forgetful-v1',
  initialize: ({ seed }) => ({ rng: new Xorshift32(seed || 1) }),
  prepare: (s) => ({ move: ['north', 'south', 'east', 'west'][s.rng.nextUint() % 4] }),
  commit: () => {},
  capture: () => ({}),
  restore: () => ({ rng: new Xorshift32(12345) }),
});
`,
      );
      writeFileSync(
        join(lab, 'study.yaml'),
        'sessionId: forgetful\nmasterSeed: "9"\nsteps: 40\nenvironment: { id: forage, model: forage, params: { width: 8, height: 8, food: 4 } }\nagents: { count: 2, prefix: a-, model: ./forgetful.mjs }\n',
      );
      const run = detsim(['run', join(lab, 'study.yaml'), '--checkpoint-every', '10', '--out', join(lab, 'runs')]);
      expect(run.status, run.stderr).toBe(0);
      const dir = join(lab, 'runs', 'forgetful-1');
      const before = JSON.parse(readFileSync(join(dir, 'receipt.json'), 'utf8')).reproHash as string;
      const again = detsim(['resume', dir, '--checkpoint', 'ckpt-e1-20']);
      expect(again.status).toBe(1);
      const after = JSON.parse(readFileSync(join(dir, 'receipt.json'), 'utf8')).reproHash as string;
      expect(after).not.toBe(before);
      expect(again.stderr.trim().split('\n').at(-1)).toBe(
        `detsim: [audit_repro_hash_mismatch] the run's ReproHash changed: its receipt.json recorded ${before} for these 40 steps before this resume, and the steps run again from ckpt-e1-20 give ${after}: the model is not deterministic across a restore (\`detsim replay ${dir} --resume-at 20\` names the first divergence)`,
      );
      // Control: the built-in models restore exactly, and a resume of the same steps keeps the ReproHash.
      const exact = join(out, 'exact-again');
      cpSync(base, exact, { recursive: true });
      const ok = detsim(['resume', exact, '--checkpoint', 'ckpt-e1-2']);
      expect(ok.status, ok.stderr).toBe(0);
    },
    T,
  );
});

describe('a run whose resume was killed', () => {
  it(
    'diff and report say the resume did not end (struct_invalid_receipt, exit 2), not that the trace was tampered',
    async () => {
      const dir = join(out, 'killed-resume');
      cpSync(base, dir, { recursive: true });
      // Killed once the resume committed a checkpoint of its own: its trace has moved on past the receipt's.
      const { killed } = await runAndKill(
        ['resume', dir, '--checkpoint', 'ckpt-e1-4', '--steps', '100000', '--checkpoint-every', '2'],
        dir,
        (d) => committedIds(d).some((id) => id.startsWith('ckpt-e2-')),
        300,
      );
      expect(killed).toBe(true);
      const said = `detsim: [struct_invalid_receipt] ${join(dir, 'receipt.json')}: is the receipt of the run before its last resume, which no longer binds its trace: a resume of it into epoch e2 did not end (killed?): \`detsim resume ${dir}\` finishes it`;
      for (const args of [
        ['diff', dir, base],
        ['report', dir],
        ['trace', 'export', dir, '--out', join(out, 'k.csv')],
      ]) {
        const r = detsim(args);
        expect(r.status, args.join(' ')).toBe(2);
        expect(r.stderr.trim(), args.join(' ')).toBe(said);
      }
    },
    T,
  );
});

describe('a run whose resume failed', () => {
  it(
    'diff says that resume failed, where, and that resume tries again (not "killed?")',
    () => {
      const lab = join(out, 'flaky-lab');
      mkdirSync(lab, { recursive: true });
      // Fails only once restored, at step 30: the run completes, its resume from step 20 fails.
      writeFileSync(
        join(lab, 'flaky.mjs'),
        `export default {
  kind: 'agent', modelVersion: 'flaky-v1',
  initialize: ({ seed }) => ({ rng: (seed >>> 0) || 1, restored: false }),
  prepare(s, ctx) {
    if (s.restored && Number(ctx.step) === 30) throw new Error('restored, it fails at 30');
    s.rng = (s.rng * 1103515245 + 12345) >>> 0;
    return { move: ['north', 'south', 'east', 'west'][s.rng % 4] };
  },
  commit() {},
  capture: (s) => ({ rng: s.rng }),
  restore: (d) => ({ rng: d.rng, restored: true }),
};
`,
      );
      writeFileSync(
        join(lab, 'study.yaml'),
        'sessionId: flaky\nmasterSeed: "9"\nsteps: 40\nenvironment: { id: forage, model: forage, params: { width: 8, height: 8, food: 4 } }\nagents: { count: 1, prefix: a-, model: ./flaky.mjs }\n',
      );
      const run = detsim(['run', join(lab, 'study.yaml'), '--checkpoint-every', '10', '--out', join(lab, 'runs')]);
      expect(run.status, run.stderr).toBe(0);
      const dir = join(lab, 'runs', 'flaky-1');
      const copy = join(lab, 'copy');
      cpSync(dir, copy, { recursive: true });
      const resumed = detsim(['resume', dir, '--checkpoint', 'ckpt-e1-20']);
      expect(resumed.status).toBe(1);
      expect(resumed.stderr).toContain('[audit_model_error] resume failed:');
      const r = detsim(['diff', copy, dir]);
      expect(r.status).toBe(2);
      expect(r.stderr.trim()).toBe(
        `detsim: [struct_invalid_receipt] ${join(dir, 'receipt.json')}: is the receipt of the run before its last resume, which no longer binds its trace: its last resume, into epoch e2, failed at step 30 (summary.json says why): \`detsim resume ${dir}\` tries again from its last checkpoint`,
      );
    },
    T,
  );
});

describe('a store without its manifest', () => {
  it(
    'resume and fork say the store is damaged (audit_store_manifest_missing, exit 1), not that nothing was committed',
    () => {
      const dir = join(out, 'no-manifest');
      cpSync(base, dir, { recursive: true });
      rmSync(join(dir, 'store', 'manifest.json'));
      const said =
        `${join(dir, 'store', 'manifest.json')}: missing, though the run's ledger records committed checkpoints (the last ckpt-e1-6) ` +
        `and 3 generation file(s) remain beside it: the store is damaged (\`detsim store verify ${dir}\` names what is there)`;
      expect(refusedLine(dir)).toEqual({ status: 1, line: `detsim: [audit_store_manifest_missing] ${said}` });
      const fork = detsim(['fork', dir, '--checkpoint', 'ckpt-e1-4', '--out', join(out, 'no-manifest-fork')]);
      expect(fork.status).toBe(1);
      expect(fork.stderr.trim()).toBe(`detsim: [audit_store_manifest_missing] ${said}`);
    },
    T,
  );
});

describe('a resume from an earlier checkpoint abandons the later ones', () => {
  it(
    'after one that committed none, a plain resume continues from it (not the abandoned high-water mark); the abandoned are refused by name',
    () => {
      const dir = join(out, 'abandon');
      cpSync(base, dir, { recursive: true });
      const reproOf = (stdout: string) => /repro hash +([0-9a-f]{16})/.exec(stdout)?.[1];
      const original = JSON.parse(readFileSync(join(base, 'receipt.json'), 'utf8')).reproHash as string;
      // Back to ckpt-e1-2 and only to step 3: the next checkpoint (4) is never reached, ckpt-e1-6 stays high-water.
      const back = detsim(['resume', dir, '--checkpoint', 'ckpt-e1-2', '--steps', '3']);
      expect(back.status, back.stderr).toBe(0);
      expect(back.stdout).toMatch(/restored +ckpt-e1-2 at boundary 2 into epoch e2 \(4 later steps abandoned\)/);
      const why =
        'belongs to steps a resume from ckpt-e1-2 (into epoch e2) abandoned: their trace is in trace/abandoned-e2-*, ' +
        "not this run's; use a checkpoint of its current history (ckpt-e1-2)";
      expect(refusedLine(dir, ['--checkpoint', 'ckpt-e1-6'])).toEqual({
        status: 2,
        line: `detsim: [ident_checkpoint_unknown] checkpoint ckpt-e1-6 ${why}`,
      });
      const fork = detsim(['fork', dir, '--checkpoint', 'ckpt-e1-4', '--out', join(out, 'abandon-fork')]);
      expect(fork.status).toBe(2);
      expect(fork.stderr.trim()).toBe(`detsim: [ident_checkpoint_unknown] checkpoint ckpt-e1-4 ${why}`);
      // The plain resume: from ckpt-e1-2, the last checkpoint of the run's history, to the run's 6 steps.
      const plain = detsim(['resume', dir]);
      expect(plain.status, plain.stderr).toBe(0);
      expect(plain.stdout).toMatch(/restored +ckpt-e1-2 at boundary 2 into epoch e3 \(1 later steps abandoned\)/);
      expect(reproOf(plain.stdout)).toBe(original);
    },
    T,
  );
});

describe('a run of an older detsim', () => {
  it('one trace.jsonl: refused by name before any worker starts, nothing changed', () => {
    const dir = join(out, 'older');
    cpSync(base, dir, { recursive: true });
    asOlderRun(dir);
    const r = refusedLine(dir);
    expect(r.status).toBe(2);
    expect(r.line).toMatch(
      /^detsim: \[struct_legacy_run\] .*\/older\/trace\.jsonl: a run of an older detsim \(one trace\.jsonl\); this detsim resumes only trace\/ segments \(verify, diff and replay still read it\)$/,
    );
    // The control: the same run as written is resumed.
    const control = join(out, 'not-older');
    cpSync(base, control, { recursive: true });
    const c = detsim(['resume', control]);
    expect(c.status, c.stderr).toBe(0);
  });
});

/**
 * The newest committed checkpoint before the run's last step (its trace must be cut to resume from
 * it): read from the store, as a capture every 2 steps may be refused (writer busy) on a loaded machine.
 */
function beforeTheEnd(runDir: string): string {
  const manifest = parseStrict(readFileSync(join(runDir, 'store', 'manifest.json'))) as {
    generations: { checkpointId: string; boundary: string }[];
  };
  const [, ...older] = [...manifest.generations].sort((a, b) => Number(b.boundary) - Number(a.boundary));
  expect(older.length, 'the store keeps a checkpoint before the last').toBeGreaterThan(0);
  return older[0]!.checkpointId;
}

describe.skipIf(fullDiskUnavailable !== null)('resume on a full disk', () => {
  let disk: SmallDisk;
  /** A run of 40 steps checkpointed every 2: its trace index (20 segments) is over two pages. */
  let longBase: string;
  beforeAll(() => {
    const r = detsim([
      'run',
      'examples/lif-pair.yaml',
      '--steps',
      '40',
      '--checkpoint-every',
      '2',
      '--out',
      join(out, 'long'),
    ]);
    expect(r.status, r.stderr).toBe(0);
    longBase = join(out, 'long', 'lif-pair-1');
  }, T);
  afterAll(() => disk?.unmount());

  it(
    'no room for the trace cut: refused as the I/O failure it is, before any worker, nothing changed',
    () => {
      disk = mountSmallDisk(1024 * 1024);
      const dir = join(disk.dir, 'run');
      cpSync(longBase, dir, { recursive: true });
      expect(readFileSync(join(dir, 'trace', 'index.jsonl')).byteLength).toBeGreaterThan(2 * PAGE);
      // Two pages free: room for run.lock, not for the cut's new index.
      disk.fillLeaving(2 * PAGE);
      const r = refusedLine(dir, ['--checkpoint', beforeTheEnd(dir)]);
      expect(r.status).toBe(1);
      expect(r.line).toMatch(
        /^detsim: \[size_no_space\] cannot write .*\/trace\/[^ ]*: no space left on the device \(ENOSPC\); resume refused before any worker started; nothing in the run directory changed$/,
      );
    },
    T,
  );

  it(
    'the disk fills after the restore: an I/O failure, the trace cut whole, summary.json replaced (never stale) and agreeing with the trace',
    () => {
      disk?.unmount();
      disk = mountSmallDisk(1024 * 1024);
      const dir = join(disk.dir, 'run');
      cpSync(base, dir, { recursive: true });
      const original = traceLinesOf(dir);
      // Room for the lock and the trace cut, then a few steps more.
      disk.fillLeaving(8 * PAGE);
      const r = detsim(['resume', dir, '--checkpoint', 'ckpt-e1-4', '--steps', '400', '--checkpoint-every', '0']);
      expect(r.status).toBe(1);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      const line = r.stderr.trim().split('\n').at(-1)!;
      expect(line).toMatch(
        /^detsim: \[size_no_space\] resume failed: the run could not write its files at step [0-9]+, phase [a-z-]+: cannot write .*\/run\/(trace\/[0-9]{6}\.(jsonl|repro)\.gz|trace\/index\.jsonl|run\.log): no space left on the device \(ENOSPC\)/,
      );
      expect(line).not.toMatch(/broke the protocol/);
      // The cut happened whole: steps 0..3 as they were, the killed run's 4 and 5 only in the segment set aside.
      const aside = readdirSync(join(dir, 'trace')).filter((f) => /^abandoned-e2-[0-9]{6}\.jsonl\.gz$/.test(f));
      expect(aside.length).toBe(1);
      expect(gunzipSync(readFileSync(join(dir, 'trace', aside[0]!))).toString('utf8')).toBe(
        `${original.slice(4, 6).join('\n')}\n`,
      );
      const kept = traces(dir);
      expect(kept.map((t) => t.behaviour.scope.step)).toEqual(kept.map((_, i) => String(i)));
      expect(traceLinesOf(dir).slice(0, 4)).toEqual(original.slice(0, 4));
      expect(kept.slice(4).every((t) => t.behaviour.scope.epoch === 'e2')).toBe(true);
      // The killed run's summary.json no longer describes the directory: it is replaced (the room it
      // held is enough), never left stale.
      expect(summary(dir)).toMatchObject({
        status: 'failed',
        stepsDone: kept.length,
        failure: { kind: 'io' },
        resume: { checkpointId: 'ckpt-e1-4', abandonedLines: 2 },
      });
      expect(line).not.toMatch(/summary\.json was not written/);
      const digest = new BehaviourDigest();
      for (const t of kept)
        digest.add(
          t.behaviour.scope.epoch === 'e1'
            ? t.behaviour
            : new EpochRebase(t.behaviour.scope.epoch, 'e1').apply(t.behaviour),
        );
      expect(summary(dir).behaviourDigest).toBe(digest.digest());
    },
    T,
  );
});
