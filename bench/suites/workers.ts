// Bench suite `workers`: agent-steps/s of the walker and lif agents on Rust workers
// (crates-bridge/worker) beside the same configuration on TypeScript workers, measured in the
// same run (alternating repeats, median). Also records that both runs gave the same behaviour
// digest. Numbers only; correctness lives in test/cross-lang/worker*.test.ts. NOT a test.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig, type WorkerRuntimeName } from '../../coordinator/config.js';
import { RUST_WORKER_BUILD_COMMAND, rustWorkerPath } from '../../coordinator/launcher.js';
import { runSession } from '../../coordinator/run.js';
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

const CASES: WorkersCase[] = [
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
    workers: { agentsPerWorker: c.agentsPerWorker, runtime },
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

export const workers: BenchSuite = {
  name: 'workers',
  description:
    'agent-steps/s of walker and lif on Rust workers (crates-bridge/worker) beside TypeScript workers, same configuration, same run (alternating repeats, median)',
  async run(ctx) {
    if (!existsSync(rustWorkerPath())) {
      // Not measured, and said so (the other suites still run): the bench never builds.
      const skipped = `the Rust worker is missing (${rustWorkerPath()}); build it once with: ${RUST_WORKER_BUILD_COMMAND}`;
      ctx.log(`workers: skipped: ${skipped}`);
      return { figures: [], details: { skipped } };
    }
    const repeats = ctx.quick ? 1 : 3;
    const figures: Figure[] = [];
    const rows: WorkersRow[] = [];
    for (const c of CASES) {
      const steps = ctx.quick ? 60 : c.model === 'lif' ? 300 : 600;
      const warmup = Math.floor(steps / 4);
      const by: Record<'typescript' | 'rust', number[]> = { typescript: [], rust: [] };
      const digests = new Set<string>();
      for (let i = 0; i < repeats; i++) {
        // Alternate the order so load bursts on a shared machine hit both runtimes.
        for (const runtime of (i % 2 === 0 ? ['typescript', 'rust'] : ['rust', 'typescript']) as (
          'typescript' | 'rust'
        )[]) {
          const row = await measureWorkers(c, runtime, steps, warmup, ctx.tmpDir);
          ctx.log(`workers ${c.id} ${runtime}: ${row.agentStepsPerSec} agent-steps/s`);
          rows.push(row);
          by[runtime].push(row.agentStepsPerSec);
          digests.add(row.behaviourDigest);
        }
      }
      const note =
        digests.size === 1 ? 'same behaviourDigest on both runtimes' : `BEHAVIOUR DIFFERS: ${digests.size} digests`;
      figures.push(
        withLimit(
          {
            id: `workers.${c.id}.rust`,
            name: `${c.name} on Rust workers`,
            value: median(by.rust),
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
    return { figures, details: { rows, cases: CASES, repeats } };
  },
};
