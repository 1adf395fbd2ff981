// The recovery kill loop: runs one config many times with `--max-restarts` (the library's
// CheckpointRun + recoveryWith, as `detsim run --checkpoint-every K --max-restarts N` builds them),
// each time SIGKILLing workers (or terminating worker threads) at seeded random steps and phases;
// every run must recover from every kill and end with the ReproHash and behaviour digest of an
// uninterrupted reference run (DIFF=0). It reports the recoveries and the verdict. Usage:
//   node --import tsx bench/recover-kill-loop.ts [--iterations N] [--seed S] [--kills K] [--transport unix|thread]
// The short version runs in CI (test/checkpoint/recovery.test.ts) through runRecoverKillLoop; the
// same file's killAtSteps is how the tests kill a worker by pid at a chosen step. NOT a timing bench.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type RunPlan, type Transport } from '../coordinator/config.js';
import { recoveryWith } from '../coordinator/checkpoint/recovery.js';
import { CheckpointRun } from '../coordinator/checkpoint/run-checkpoints.js';
import type { Fleet } from '../coordinator/launch/launcher.js';
import type { RunPhase } from '../coordinator/session/run-failure.js';
import { runSession, type RunOptions, type RunResult } from '../coordinator/session/run.js';
import { Xorshift32 } from '../core/formats/xorshift.js';
import { flagValue, reportLoop, startedAsScript } from './lib/loop-report.js';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..');

/** Kill the worker at `worker` (0 = environment, i = agent worker i-1) just before `phase` of `step`. */
export interface Kill {
  step: number;
  worker: number;
  phase: Extract<RunPhase, 'advance' | 'commit'>;
}

/** Kill one worker the hard way: SIGKILL its process by pid, or terminate its thread. */
function killWorker(fleet: Fleet, index: number): void {
  const w = fleet.all()[index]!;
  if (w.instance.kind === 'process') process.kill(w.instance.pid, 'SIGKILL');
  else w.instance.kill();
}

/**
 * Run `plan` for `steps` with checkpoints every `every` steps and `maxRestarts`, killing a worker at
 * each of `kills` (each once, in the fleet live at that moment). Progress lines go to `log`.
 */
export async function killAtSteps(
  plan: RunPlan,
  opts: {
    steps: number;
    every: number;
    maxRestarts: number;
    kills: Kill[];
    outDir: string;
    log?: (l: string) => void;
    /** The trace's segment size (default DEFAULT_SEGMENT_STEPS). */
    trace?: Pick<RunOptions, 'segmentSteps'>;
  },
): Promise<RunResult> {
  const log = opts.log ?? (() => undefined);
  const checkpoints = new CheckpointRun({ every: opts.every, onEvent: log });
  checkpoints.recovery = recoveryWith({ maxRestarts: opts.maxRestarts, onEvent: log })(checkpoints);
  const pending = [...opts.kills];
  let fleet: Fleet | undefined;
  return runSession(plan, {
    steps: opts.steps,
    outDir: opts.outDir,
    extension: checkpoints,
    ...opts.trace,
    hooks: {
      onLaunched: (f) => (fleet = f),
      beforePhase: (step, phase) => {
        const i = pending.findIndex((k) => BigInt(k.step) === step && k.phase === phase);
        if (i < 0) return;
        const [kill] = pending.splice(i, 1);
        log(`killing ${fleet!.all()[kill!.worker]!.plan.workerId} before ${phase} of step ${step}`);
        killWorker(fleet!, kill!.worker);
      },
    },
  });
}

export interface RecoverKillLoopOptions {
  iterations: number;
  seed?: number;
  config?: string;
  transport?: Transport;
  steps?: number;
  every?: number;
  /** Kills per run (each a recovery; maxRestarts is this many). */
  kills?: number;
  log?: (line: string) => void;
}

export interface RecoverKillIteration {
  kills: Kill[];
  recoveries: number;
  reproHash: string;
  /** DIFF=0: the ReproHash and behaviour digest equal the uninterrupted run's. */
  equal: boolean;
  problem?: string;
}

/**
 * Seeded kills at distinct steps after the first checkpoint, each on a random worker and phase;
 * never in the last two steps (an environment killed before the last Commit is never asked again).
 */
function drawKills(rng: Xorshift32, count: number, steps: number, every: number, workers: number): Kill[] {
  const chosen = new Set<number>();
  while (chosen.size < count) chosen.add(every + 1 + (rng.nextUint() % (steps - every - 2)));
  return [...chosen]
    .sort((a, b) => a - b)
    .map((step) => ({
      step,
      worker: rng.nextUint() % workers,
      phase: rng.nextUint() % 2 === 0 ? ('advance' as const) : ('commit' as const),
    }));
}

export async function runRecoverKillLoop(
  opts: RecoverKillLoopOptions,
): Promise<{ reference: RunResult; iterations: RecoverKillIteration[] }> {
  const loaded = loadConfig(opts.config ?? join(ROOT, 'examples', 'lif-pair.yaml'));
  const plan = opts.transport ? { ...loaded, transport: opts.transport } : loaded;
  const steps = opts.steps ?? 60;
  const every = opts.every ?? 5;
  const kills = opts.kills ?? 2;
  const rng = new Xorshift32(opts.seed ?? 20261201);
  const log = opts.log ?? (() => undefined);
  const base = mkdtempSync(join(tmpdir(), 'detsim-recover-kill-'));
  const reference = await runSession(plan, { steps, outDir: join(base, 'reference') });
  const out: RecoverKillIteration[] = [];
  for (let i = 0; i < opts.iterations; i++) {
    const drawn = drawKills(rng, kills, steps, every, plan.workers.length);
    const it: RecoverKillIteration = { kills: drawn, recoveries: 0, reproHash: '', equal: false };
    try {
      const r = await killAtSteps(plan, {
        steps,
        every,
        maxRestarts: kills,
        kills: drawn,
        outDir: join(base, `kill-${i}`),
        log,
      });
      it.reproHash = r.reproHash;
      it.recoveries = (
        JSON.parse(readFileSync(join(r.runDir, 'summary.json'), 'utf8')) as { recoveries: number }
      ).recoveries;
      it.equal = r.reproHash === reference.reproHash && r.behaviourDigest === reference.behaviourDigest;
      if (!it.equal) it.problem = `ReproHash ${r.reproHash} ≠ reference ${reference.reproHash}`;
    } catch (e) {
      it.problem = e instanceof Error ? e.message : String(e);
    }
    const at = drawn.map((k) => `${k.step}/${k.phase}/w${k.worker}`).join(' ');
    log(
      `iteration ${i + 1}: kills ${at}; recoveries ${it.recoveries}; ${it.equal ? 'DIFF=0' : `DIFF≠0 (${it.problem})`}`,
    );
    out.push(it);
  }
  return { reference, iterations: out };
}

if (startedAsScript(import.meta.url)) {
  const run = await runRecoverKillLoop({
    iterations: Number(flagValue('--iterations') ?? 20),
    seed: Number(flagValue('--seed') ?? 20261201),
    kills: Number(flagValue('--kills') ?? 3),
    config: flagValue('--config'),
    transport: flagValue('--transport') as Transport | undefined,
    log: (l) => process.stderr.write(`${l}\n`),
  });
  await reportLoop('recover-kill-loop', async () => run.iterations, {
    failed: (i) => !i.equal || i.recoveries !== i.kills.length,
    facts: (its) => [`${its.reduce((n, i) => n + i.recoveries, 0)} recoveries`],
    passNote: 'DIFF=0',
  });
}
