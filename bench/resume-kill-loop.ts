// The resume SIGKILL loop: `detsim run --checkpoint-every 2` is killed with SIGKILL at a seeded
// random moment after its first committed checkpoint; then `detsim store verify` must pass and
// `detsim resume` must finish, and its rebased behaviour must equal an uninterrupted reference run
// (traces and summary digest). Usage:
//   node --import tsx bench/resume-kill-loop.ts [--iterations N] [--seed S] [--config examples/lif-pair.yaml] [--kill-resume]
// (--kill-resume: each iteration also SIGKILLs the first resume and resumes again, into e3).
// The CI test (test/checkpoint/kill-loop.test.ts) runs 2 iterations through runResumeKillLoop.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseStrict } from '../core/formats/canonical-json.js';
import { Xorshift32 } from '../core/formats/xorshift.js';
import {
  behaviourDigest,
  compareBehaviours,
  describeDifference,
  EpochRebase,
  type TraceBehaviour,
} from '../coordinator/trace/trace.js';
import { readTraceSync } from '../coordinator/trace/trace-store.js';
import { flagValue, reportLoop, startedAsScript } from './lib/loop-report.js';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..');
const CLI = ['--import', 'tsx', join(ROOT, 'coordinator', 'cli', 'main.ts')];

export interface ResumeKillLoopOptions {
  iterations: number;
  seed?: number;
  config?: string;
  /** Steps of the uninterrupted reference run (the resumed runs stop at or before it). */
  referenceSteps?: number;
  maxDelayMs?: number;
  /** Also SIGKILL the first resume after its first committed checkpoint, then resume again (epoch e3). */
  killResume?: boolean;
  log?: (line: string) => void;
}

export interface ResumeKillIteration {
  delayMs: number;
  killed: boolean;
  /** The checkpoint resume restored and the boundary it continued to. */
  restored: string;
  resumedTo: number;
  storeVerified: boolean;
  resumed: boolean;
  equal: boolean;
  problem?: string;
}

function cli(args: string[]) {
  return spawnSync(process.execPath, [...CLI, ...args], { encoding: 'utf8', timeout: 300_000, cwd: ROOT });
}

function readTraces(runDir: string): TraceBehaviour[] {
  return [...readTraceSync(runDir)].map((t) => t.behaviour);
}

function committed(runDir: string): boolean {
  const p = join(runDir, 'ledger.jsonl');
  return existsSync(p) && readFileSync(p, 'utf8').includes('"event":"committed"');
}

function highWater(runDir: string): { id: string; boundary: number } {
  const m = parseStrict(readFileSync(join(runDir, 'store', 'manifest.json'))) as {
    highWater: string;
    generations: { checkpointId: string; boundary: string }[];
  };
  return { id: m.highWater, boundary: Number(m.generations.find((g) => g.checkpointId === m.highWater)!.boundary) };
}

/** Run a CLI child and SIGKILL it `delayMs` after `ready()` first holds. */
async function killAfter(args: string[], ready: () => boolean, delayMs: number): Promise<boolean> {
  const child = spawn(process.execPath, [...CLI, ...args], { stdio: 'ignore', cwd: ROOT });
  let exited = false;
  const done = new Promise<void>((r) => child.once('exit', () => ((exited = true), r())));
  const started = Date.now();
  while (!exited && !ready() && Date.now() - started < 180_000) await new Promise((r) => setTimeout(r, 25));
  await new Promise((r) => setTimeout(r, delayMs));
  const killed = !exited;
  child.kill('SIGKILL');
  await done;
  return killed;
}

async function killedRun(config: string, out: string, delayMs: number): Promise<{ runDir: string; killed: boolean }> {
  const name = readFileSync(config, 'utf8').match(/^sessionId:\s*(\S+)/m)![1]!;
  const runDir = join(out, `${name}-1`);
  const killed = await killAfter(
    ['run', config, '--steps', '100000', '--checkpoint-every', '2', '--out', out],
    () => committed(runDir),
    delayMs,
  );
  return { runDir, killed };
}

export async function runResumeKillLoop(
  opts: ResumeKillLoopOptions,
): Promise<{ reference: string; iterations: ResumeKillIteration[] }> {
  const config = opts.config ?? join(ROOT, 'examples', 'lif-pair.yaml');
  const rng = new Xorshift32(opts.seed ?? 20261129);
  const log = opts.log ?? (() => undefined);
  const refSteps = opts.referenceSteps ?? 40;
  const base = mkdtempSync(join(tmpdir(), 'detsim-resume-kill-'));
  // The uninterrupted reference, re-run longer whenever a kill happened later than it reaches.
  let refDir = '';
  let reference: TraceBehaviour[] = [];
  const ensureReference = (steps: number) => {
    if (reference.length >= steps) return;
    const ref = cli(['run', config, '--steps', String(steps), '--out', join(base, `reference-${steps}`)]);
    if (ref.status !== 0) throw new Error(`reference run failed: ${ref.stderr}`);
    refDir = ref.stdout
      .split('\n')[0]!
      .replace(/^run directory\s+/, '')
      .trim();
    reference = readTraces(refDir);
  };
  ensureReference(refSteps);
  const out: ResumeKillIteration[] = [];
  for (let i = 0; i < opts.iterations; i++) {
    const delayMs = Math.floor(rng.nextF64() * (opts.maxDelayMs ?? 1500));
    const { runDir, killed } = await killedRun(config, join(base, `kill-${i}`), delayMs);
    const it: ResumeKillIteration = {
      delayMs,
      killed,
      restored: '',
      resumedTo: 0,
      storeVerified: false,
      resumed: false,
      equal: false,
    };
    if (opts.killResume) {
      // Kill the first resume too, once it committed a checkpoint in e2; the next resume goes to e3.
      const e2 = () => readFileSync(join(runDir, 'ledger.jsonl'), 'utf8').includes('"epoch":"e2","event":"committed"');
      await killAfter(['resume', runDir, '--steps', '100000'], e2, delayMs);
    }
    it.storeVerified = cli(['store', 'verify', join(runDir, 'store')]).status === 0;
    const hw = highWater(runDir);
    it.restored = hw.id;
    it.resumedTo = hw.boundary + 2;
    ensureReference(Math.max(refSteps, it.resumedTo));
    const r = cli(['resume', runDir, '--checkpoint', hw.id, '--steps', String(it.resumedTo)]);
    it.resumed = r.status === 0;
    if (!it.resumed) it.problem = r.stderr.trim().split('\n').slice(-2).join(' | ');
    else {
      const got = readTraces(runDir);
      const diff = compareBehaviours(reference.slice(0, it.resumedTo), got);
      const digest = (parseStrict(readFileSync(join(runDir, 'summary.json'))) as { behaviourDigest: string })
        .behaviourDigest;
      const want = behaviourDigest(
        reference
          .slice(0, it.resumedTo)
          .map((b) => (b.scope.epoch === 'e1' ? b : new EpochRebase(b.scope.epoch, 'e1').apply(b))),
      );
      it.equal = diff === null && digest === want;
      if (!it.equal) it.problem = diff ? describeDifference(diff) : `summary digest ${digest} ≠ reference ${want}`;
    }
    log(
      `iteration ${i + 1}: killed ${killed} after +${delayMs} ms, restored ${it.restored} → ${it.resumedTo}, store verify ${it.storeVerified ? 'ok' : 'FAILED'}, resume ${it.resumed ? 'ok' : 'FAILED'}, equal ${it.equal}${it.problem ? ` (${it.problem})` : ''}`,
    );
    out.push(it);
  }
  return { reference: refDir, iterations: out };
}

if (startedAsScript(import.meta.url)) {
  await reportLoop(
    'resume-kill-loop',
    async () =>
      (
        await runResumeKillLoop({
          iterations: Number(flagValue('--iterations') ?? 20),
          seed: Number(flagValue('--seed') ?? 20261129),
          config: flagValue('--config'),
          killResume: process.argv.includes('--kill-resume'),
          log: (l) => process.stderr.write(`${l}\n`),
        })
      ).iterations,
    { failed: (i) => !i.storeVerified || !i.resumed || !i.equal },
  );
}
