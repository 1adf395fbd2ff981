// Bench suite `workers`: agent-steps/s of the walker and lif agents on Rust workers
// (crates-bridge/worker) and on Python workers (workers/python) beside the same configuration on
// TypeScript workers, measured in the same run (rotating order, median). Also records whether every
// runtime gave the same behaviour digest. A runtime that is not available is skipped with its reason.
// Numbers only, never a gate; correctness lives in test/cross-lang/worker*.test.ts. NOT a test.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveConfig, type WorkerRuntimeName } from '../../coordinator/config.js';
import {
  RUST_WORKER_BUILD_COMMAND,
  pythonInterpreter,
  pythonWorkerInstallCommand,
  rustWorkerPath,
} from '../../coordinator/launch/launcher.js';
import { runSession } from '../../coordinator/session/run.js';
import type { BenchSuite, Figure } from '../lib/suite.js';
import { withLimit } from '../lib/suite.js';
import { readRunTraces } from './lockstep-read.js';

export interface WorkersCase {
  id: string;
  name: string;
  model: 'walker' | 'lif';
  agents: number;
  agentsPerWorker: number;
  params: Record<string, unknown>;
}

export interface WorkersRow {
  id: string;
  runtime: WorkerRuntimeName;
  agentStepsPerSec: number;
  behaviourDigest: string;
}

/** The measured cases (exported so the suite's test measures the same walker case). */
export const CASES: WorkersCase[] = [
  {
    id: 'walker',
    name: '16 walkers in 4 agent processes',
    model: 'walker',
    agents: 16,
    agentsPerWorker: 4,
    params: {},
  },
  {
    id: 'lif',
    name: '2 lif agents (1000 neurons) in 2 agent processes',
    model: 'lif',
    agents: 2,
    agentsPerWorker: 1,
    params: { neurons: 1000 },
  },
];

/** One run of a case on one runtime; the rate from trace wall times after the warm-up steps. */
export async function measureWorkers(
  c: WorkersCase,
  runtime: WorkerRuntimeName,
  steps: number,
  warmup: number,
  tmp = tmpdir(),
): Promise<WorkersRow> {
  const plan = resolveConfig({
    sessionId: `bench-workers-${c.id}`,
    masterSeed: '1',
    steps,
    stepHz: 60,
    environment: { id: 'forage', model: 'forage', params: { width: 16, height: 16, food: 12 } },
    agents: { count: c.agents, prefix: `${c.model}-`, model: c.model, params: c.params, actionFields: ['move'] },
    workers: { agentsPerWorker: c.agentsPerWorker, runtime, transport: 'unix' }, // every runtime a process
    deadlines: { startupMs: 60_000, stepMs: 30_000 },
  });
  const out = mkdtempSync(join(tmp, 'workers-'));
  try {
    const r = await runSession(plan, { outDir: out, onWarning: () => undefined });
    const walls = readRunTraces(r.runDir).map((t) => BigInt(t.operational.wallTimeNs));
    const ns = Number(walls[steps - 1]! - walls[warmup - 1]!);
    return {
      id: c.id,
      runtime,
      agentStepsPerSec: Math.round(((steps - warmup) * c.agents * 1e9) / ns),
      behaviourDigest: r.behaviourDigest,
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

type Measured = 'typescript' | 'rust' | 'python';
const OTHERS: readonly Exclude<Measured, 'typescript'>[] = ['rust', 'python'];
const LABEL: Record<Measured, string> = { typescript: 'TypeScript', rust: 'Rust', python: 'Python' };
const VENV_PYTHON = fileURLToPath(new URL('../../workers/python/.venv/bin/python', import.meta.url));

/** Why the Rust worker cannot be measured, or null. The bench never builds it. */
function rustSkip(): string | null {
  return existsSync(rustWorkerPath())
    ? null
    : `the Rust worker is missing (${rustWorkerPath()}); build it once with: ${RUST_WORKER_BUILD_COMMAND}`;
}

/**
 * Why Python workers cannot be measured, or null. The interpreter is $DETSIM_PYTHON, else the
 * workers/python/.venv one scripts/test-python.sh makes, else python3; when it can import
 * detsim_worker it is exported as DETSIM_PYTHON so the launcher runs the same one.
 */
function pythonSkip(): string | null {
  const python = process.env.DETSIM_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : pythonInterpreter());
  const probe = spawnSync(python, ['-c', 'import detsim_worker'], { stdio: 'ignore', timeout: 30_000 });
  if (probe.error)
    return `no Python interpreter (${python} cannot be run); set DETSIM_PYTHON or run scripts/test-python.sh`;
  if (probe.status !== 0)
    return `${python} cannot import detsim_worker; install it with: ${pythonWorkerInstallCommand(python)}`;
  process.env.DETSIM_PYTHON = python;
  return null;
}

/** A rotation of the runtimes per repeat, so load bursts on a shared machine hit each of them. */
const rotated = <T>(xs: readonly T[], i: number): T[] => xs.map((_, j) => xs[(i + j) % xs.length]!);

export const workers: BenchSuite = {
  name: 'workers',
  description:
    'agent-steps/s of walker and lif on Rust workers (crates-bridge/worker) and Python workers (workers/python) beside TypeScript workers, same configuration, same run (rotating order, median)',
  async run(ctx) {
    const skips: Partial<Record<Measured, string>> = {};
    const reasons = { rust: rustSkip(), python: pythonSkip() };
    for (const r of OTHERS) if (reasons[r] !== null) skips[r] = reasons[r];
    for (const [r, why] of Object.entries(skips)) ctx.log(`workers: ${r} skipped: ${why}`);
    const others = OTHERS.filter((r) => reasons[r] === null);
    if (others.length === 0) {
      // Not measured, and said so (the other suites still run): the bench never builds nor installs.
      const skipped = OTHERS.map((r) => `${LABEL[r]}: ${skips[r]}`).join('; ');
      return { figures: [], details: { skipped } };
    }
    const runtimes: Measured[] = ['typescript', ...others];
    const repeats = ctx.quick ? 1 : 3;
    const figures: Figure[] = [];
    const rows: WorkersRow[] = [];
    for (const c of CASES) {
      const steps = ctx.quick ? 60 : c.model === 'lif' ? 300 : 600;
      const warmup = Math.floor(steps / 4);
      const by: Record<Measured, number[]> = { typescript: [], rust: [], python: [] };
      const digests = new Set<string>();
      for (let i = 0; i < repeats; i++) {
        for (const runtime of rotated(runtimes, i)) {
          const row = await measureWorkers(c, runtime, steps, warmup, ctx.tmpDir);
          ctx.log(`workers ${c.id} ${runtime}: ${row.agentStepsPerSec} agent-steps/s`);
          rows.push(row);
          by[runtime].push(row.agentStepsPerSec);
          digests.add(row.behaviourDigest);
        }
      }
      const note =
        digests.size === 1 ? 'same behaviourDigest on every runtime' : `BEHAVIOUR DIFFERS: ${digests.size} digests`;
      for (const runtime of others)
        figures.push(
          withLimit(
            {
              id: `workers.${c.id}.${runtime}`,
              name: `${c.name} on ${LABEL[runtime]} workers`,
              value: median(by[runtime]),
              unit: 'agent-steps/s',
              higherIsBetter: true,
              samples: repeats,
              note,
            },
            { name: 'the same configuration on TypeScript workers', value: median(by.typescript) },
          ),
        );
      figures.push(
        withLimit(
          {
            id: `workers.${c.id}.typescript`,
            name: `${c.name} on TypeScript workers`,
            value: median(by.typescript),
            unit: 'agent-steps/s',
            higherIsBetter: true,
            samples: repeats,
          },
          null,
        ),
      );
    }
    return { figures, details: { rows, cases: CASES, repeats, runtimesSkipped: skips } };
  },
};
