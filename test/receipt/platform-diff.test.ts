// "Same ReproHash on two machines" shown, not assumed, over real runs through the built CLI: a run
// from this checkout and one of the same config from another checkout (a copy of the package that
// is a git repository of its own, another commit) under another Node flag set (`--stack-size`,
// NODE_OPTIONS) have the same ReproHash and behaviour digest and fingerprints that differ in
// exactly the commit and the Node flags; `detsim diff` exits 0 and shows both, side by side, and
// `--json` carries them. A DIFF≠0 still names its first divergence first; runs of different configs
// show no fingerprints; a resumed run's receipt carries the fingerprint of the process that
// finished it; editing a receipt's platformFingerprint leaves its ReproHash as it was (physical),
// editing its composition does not. Workers of every language report their versions.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../coordinator/config.js';
import { fingerprintDifferences, type PlatformFingerprint } from '../../coordinator/receipt/platform.js';
import { hydrateReceipt, readReceipt, sealReceipt, writeReceipt } from '../../coordinator/receipt/receipt.js';
import { detsim } from '../checkpoint/cli.js';
import { tmpDir } from '../checkpoint/harness.js';
import { editTrace, traceLinesOf } from '../trace-read.js';
import { REPO_ROOT } from '../workers/harness.js';
import { ensurePythonWorker, pythonWorkerSkip } from '../cross-lang/python-worker.js';
import { cargo } from '../cross-lang/rust-cli.js';
import { ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';

const EXAMPLE = join(REPO_ROOT, 'examples/forage-walkers.yaml');
const OTHER_FLAGS = { args: ['--stack-size=2000'], nodeOptions: '--max-semi-space-size=32' };

type ReceiptJson = {
  reproHash: string;
  platformFingerprint: PlatformFingerprint;
  summary: { behaviourDigest: string };
};
const receiptOf = (runDir: string): ReceiptJson =>
  JSON.parse(readFileSync(join(runDir, 'receipt.json'), 'utf8')) as ReceiptJson;

/** The environment of a CLI child: this one's, with NODE_OPTIONS as given (unset when undefined). */
function envWith(nodeOptions: string | undefined): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  if (nodeOptions !== undefined) env.NODE_OPTIONS = nodeOptions;
  return env;
}

/** `detsim …` from a package root (this checkout or a copy), with Node flags and NODE_OPTIONS. */
function detsimAt(root: string, args: string[], flags: { args?: string[]; nodeOptions?: string } = {}) {
  return spawnSync(process.execPath, [...(flags.args ?? []), join(root, 'dist/coordinator/cli/main.js'), ...args], {
    cwd: root,
    env: envWith(flags.nodeOptions),
    encoding: 'utf8',
    timeout: 240_000,
  });
}

/** Another checkout: the built package copied (node_modules linked), made a git repository with a commit of its own. */
function otherCheckout(): string {
  const root = join(tmpDir('detsim-fp-checkout-'), 'detsim');
  mkdirSync(root);
  for (const part of ['dist', 'proto', 'package.json'])
    cpSync(join(REPO_ROOT, part), join(root, part), { recursive: true });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'));
  const git = (...args: string[]) =>
    spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.org', ...args], { cwd: root });
  expect(git('init', '-q').status).toBe(0);
  expect(git('add', 'package.json').status).toBe(0);
  expect(git('commit', '-q', '-m', 'another checkout').status).toBe(0);
  return root;
}

/** Run the example for `steps` steps; returns the run directory `detsim run` printed. */
function run(root: string, out: string, steps: number, flags: { args?: string[]; nodeOptions?: string } = {}) {
  const r = detsimAt(root, ['run', EXAMPLE, '--steps', String(steps), '--out', out], flags);
  expect(r.status, r.stderr).toBe(0);
  return { dir: /^run directory\s+(\S+)$/m.exec(r.stdout)![1]!, repro: /^repro hash\s+(\S+)$/m.exec(r.stdout)![1]! };
}

describe('platform fingerprints of two runs of one config', () => {
  it('another checkout under another Node flag set: same ReproHash, fingerprints differ in exactly those fields; diff shows both', () => {
    const out = tmpDir('detsim-fp-runs-');
    const here = run(REPO_ROOT, out, 4);
    const there = run(otherCheckout(), out, 4, OTHER_FLAGS);
    expect(there.repro).toBe(here.repro);
    const [a, b] = [receiptOf(here.dir), receiptOf(there.dir)];
    expect(b.reproHash).toBe(a.reproHash);
    expect(b.summary.behaviourDigest).toBe(a.summary.behaviourDigest);
    const differences = fingerprintDifferences(a.platformFingerprint, b.platformFingerprint);
    expect(differences.map((d) => d.path)).toEqual(['detsim.gitCommit', 'node.execArgv', 'node.nodeOptions']);
    expect(a.platformFingerprint.node).toMatchObject({ execArgv: [], nodeOptions: null });
    expect(b.platformFingerprint.node).toMatchObject({
      execArgv: OTHER_FLAGS.args,
      nodeOptions: OTHER_FLAGS.nodeOptions,
    });
    expect(b.platformFingerprint.detsim.gitCommit).toMatch(/^[0-9a-f]{40}$/);

    const diff = detsim(['diff', here.dir, there.dir]);
    expect(diff.status, diff.stderr).toBe(0);
    const lines = diff.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`DIFF=0: the same run (ReproHash ${a.reproHash}, 4 steps)`);
    expect(lines[1]).toBe(
      `platform: the fingerprints differ in 3 fields (physical: outside the ReproHash); a = ${here.dir}, b = ${there.dir}`,
    );
    expect(lines[2]).toMatch(/^ {2}field +a +b$/);
    for (const [i, d] of differences.entries())
      expect(lines[3 + i]!.split(/\s{2,}/).filter(Boolean)).toEqual([d.path, d.left, d.right]);
    expect(lines).toHaveLength(3 + differences.length);
    expect(lines[5]).toContain('"--max-semi-space-size=32"');

    const json = JSON.parse(detsim(['diff', here.dir, there.dir, '--json']).stdout) as Record<string, any>;
    expect(json.same).toBe(true);
    expect(json.left.platformFingerprint).toEqual(a.platformFingerprint);
    expect(json.right.platformFingerprint).toEqual(b.platformFingerprint);
    expect(json.platform).toEqual({ same: false, differences, missing: [] });

    const self = detsim(['diff', here.dir, here.dir]);
    expect(self.status).toBe(0);
    // The example's workers: the environment's and one agent worker per spare core (the default layout).
    const workers = loadConfig(EXAMPLE).workers.length;
    expect(self.stdout).toMatch(
      new RegExp(
        `^platform: the same fingerprint for both runs \\(the same machine and software, as far as it records\\): .*node v\\d+.*, ${workers} workers$`,
        'm',
      ),
    );

    // A DIFF≠0 names its first divergence first, then the fingerprints.
    const changed = join(out, 'changed');
    cpSync(there.dir, changed, { recursive: true });
    editTrace(changed, (l) => l.map((x, i) => (i === 2 ? x.replace(/"move":"[a-z]+"/, '"move":"nowhere"') : x)));
    expect(traceLinesOf(changed)[2]).toContain('"move":"nowhere"');
    writeReceipt(changed, { platform: b.platformFingerprint });
    const red = detsim(['diff', here.dir, changed]);
    expect(red.status).toBe(1);
    const redLines = red.stdout.trimEnd().split('\n');
    expect(redLines[0]).toMatch(/^DIFF≠0: ReproHash [0-9a-f]{16} \(/);
    expect(redLines[1]).toMatch(/^first divergence at step 2 .*"nowhere"$/);
    expect(redLines[2]).toMatch(/^platform: the fingerprints differ in 3 fields/);
    rmSync(join(changed, 'receipt.json'));
    expect(detsim(['diff', here.dir, changed]).stdout).toContain(
      `platform: ${changed} recorded no platform fingerprint (no receipt.json, or one from before receipts carried it)`,
    );

    // Another config (another step count): no fingerprints shown, none compared.
    const shorter = run(REPO_ROOT, out, 3);
    const other = detsim(['diff', here.dir, shorter.dir]);
    expect(other.status).toBe(1);
    expect(other.stdout).not.toContain('platform:');
    expect(JSON.parse(detsim(['diff', here.dir, shorter.dir, '--json']).stdout).platform).toBeNull();
  }, 240_000);

  it('a resumed run carries the fingerprint of the process that finished it, with the same ReproHash', () => {
    const out = tmpDir('detsim-fp-resume-');
    const ckpt = detsimAt(REPO_ROOT, ['run', EXAMPLE, '--steps', '4', '--checkpoint-every', '2', '--out', out]);
    expect(ckpt.status, ckpt.stderr).toBe(0);
    const dir = /^run directory\s+(\S+)$/m.exec(ckpt.stdout)![1]!;
    const first = { dir: join(out, 'as-run'), repro: receiptOf(dir).reproHash };
    cpSync(dir, first.dir, { recursive: true });
    // Back to the checkpoint at step 2 and on to 4 again, in a new epoch, under another flag set.
    const r = detsimAt(REPO_ROOT, ['resume', dir, '--checkpoint', 'ckpt-e1-2'], OTHER_FLAGS);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/into epoch e2/);
    const resumed = receiptOf(dir);
    expect(resumed.reproHash).toBe(first.repro);
    expect(resumed.platformFingerprint.node).toMatchObject({
      execArgv: OTHER_FLAGS.args,
      nodeOptions: OTHER_FLAGS.nodeOptions,
    });
    expect(receiptOf(first.dir).platformFingerprint.node).toMatchObject({ execArgv: [], nodeOptions: null });
    const diff = detsim(['diff', first.dir, dir]);
    expect(diff.status, diff.stderr).toBe(0);
    expect(diff.stdout).toMatch(/^platform: the fingerprints differ in 2 fields/m);
    expect(diff.stdout).toMatch(/^ {2}node\.nodeOptions +null +"--max-semi-space-size=32"$/m);
  }, 240_000);

  it('a receipt keeps its ReproHash when its platformFingerprint is edited, not when its composition is', () => {
    const { dir, repro } = run(REPO_ROOT, tmpDir('detsim-fp-edit-'), 3);
    const file = readReceipt(join(dir, 'receipt.json'));
    const sealed = (r: typeof file) => sealReceipt(hydrateReceipt(dir, r)).reproHash;
    expect(sealed(file)).toBe(repro);
    const edited = structuredClone(file) as unknown as { platformFingerprint: PlatformFingerprint };
    edited.platformFingerprint.os.release = 'another kernel';
    edited.platformFingerprint.cpu.flags = [];
    edited.platformFingerprint.node.nodeOptions = '--edited';
    edited.platformFingerprint.workers = [];
    expect(sealed(edited as unknown as typeof file)).toBe(repro);
    const seed = structuredClone(file) as unknown as { run: { masterSeed: string } };
    seed.run.masterSeed = '1';
    expect(sealed(seed as unknown as typeof file)).not.toBe(repro);
    // The edited file on disk: `detsim diff` against the original shows exactly the edited fields.
    const copy = join(dirname(dir), 'edited');
    cpSync(dir, copy, { recursive: true });
    writeFileSync(join(copy, 'receipt.json'), JSON.stringify(edited));
    const diff = detsim(['diff', dir, copy]);
    expect(diff.status, diff.stderr).toBe(0);
    expect(diff.stdout).toMatch(/^platform: the fingerprints differ in \d+ fields/m);
    for (const path of ['os.release', 'cpu.flags', 'node.nodeOptions', 'workers[worker-0].runtime'])
      expect(diff.stdout).toMatch(new RegExp(`^ {2}${path.replace(/[.[\]]/g, '\\$&')} `, 'm'));
  }, 240_000);
});

describe.skipIf(pythonWorkerSkip !== null || rustWorkerSkip !== null)('the workers of every language', () => {
  it('name their Node, rustc and Python versions in the fingerprint, as those tools report them', () => {
    ensureRustWorker();
    const python = ensurePythonWorker();
    const out = tmpDir('detsim-fp-mixed-');
    const r = detsim(['run', join(REPO_ROOT, 'examples/mixed-python.yaml'), '--steps', '2', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    const dir = /^run directory\s+(\S+)$/m.exec(r.stdout)![1]!;
    const f = receiptOf(dir).platformFingerprint;
    const rustc = spawnSync(join(dirname(cargo!), 'rustc'), ['--version'], { encoding: 'utf8' });
    expect(f.rust).toEqual([rustc.stdout.split(' ')[1]]);
    const py = spawnSync(python, ['-c', 'import platform; print(platform.python_version())'], { encoding: 'utf8' });
    expect(f.python).toEqual([py.stdout.trim()]);
    const runJson = JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')) as {
      workers: { workerId: string; runtime: string; buildDigest: string }[];
    };
    const hellos = runJson.workers.map(({ workerId, runtime, buildDigest }) => ({ workerId, runtime, buildDigest }));
    expect(f.workers.map(({ workerId, runtime, buildDigest }) => ({ workerId, runtime, buildDigest }))).toEqual(
      hellos.sort((x, y) => (x.workerId < y.workerId ? -1 : 1)),
    );
    expect(f.workers.map((w) => w.runtime.split('/')[0]).sort()).toEqual(
      ['detsim-py', 'detsim-py', 'detsim-rs', 'detsim-ts'].sort(),
    );
    expect(f.node.version).toBe(process.version);
  }, 240_000);
});
