// Bench suite `receipts`: what the ReproHash costs per step at N = 16, beside the step itself.
// One real 16-walker run (4 agent processes, gRPC on Unix sockets); then its receipt is built,
// sealed (ReproHash over the canonical split) and written, timed, and divided by the steps.
// NOT a test of the receipt (test/receipt/ is): only the cost, as a fraction of a step.
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { buildReceipt, readRunFiles, sealReceipt, writeReceipt } from '../../coordinator/receipt/receipt.js';
import { runSession } from '../../coordinator/session/run.js';
import { measure } from '../lib/measure.js';
import { withLimit, type BenchSuite, type Figure } from '../lib/suite.js';
import { walkerBenchPlan } from '../lib/walkers.js';
import { readRunTraces } from './lockstep-read.js';

const AGENTS = 16;
const PROCESSES = 4;

/** One real 16-walker run; returns its directory and the wall time per step after the warm-up. */
async function walkerRun(outDir: string, steps: number, warmup: number): Promise<{ runDir: string; stepUs: number }> {
  const plan = walkerBenchPlan('bench-receipts', AGENTS, PROCESSES, steps);
  const r = await runSession(plan, { outDir, onWarning: () => undefined });
  const walls = readRunTraces(r.runDir).map((t) => BigInt(t.operational.wallTimeNs));
  const ns = Number(walls[steps - 1]! - walls[warmup - 1]!);
  return { runDir: r.runDir, stepUs: ns / 1000 / (steps - warmup) };
}

export const receipts: BenchSuite = {
  name: 'receipts',
  description:
    "ReproHash cost per step at N = 16 (seal a real 16-walker run's receipt: canonical split + hash) beside the wall time of one lockstep step of the same run",
  async run(ctx) {
    const steps = ctx.quick ? 80 : 1000;
    const warmup = Math.floor(steps / 4);
    const out = mkdtempSync(join(ctx.tmpDir, 'receipts-'));
    try {
      ctx.log(`receipts: one run of ${AGENTS} walkers in ${PROCESSES} agent processes, ${steps} steps`);
      const { runDir, stepUs } = await walkerRun(out, steps, warmup);
      const files = readRunFiles(runDir);
      const unsealed = buildReceipt(files, undefined, 'bench');
      // seal = the ReproHash alone; write = read the run's files + build + seal + canonical text + durable write.
      const rates = await measure(
        {
          seal: () => sealReceipt(unsealed),
          write: () => writeReceipt(runDir, { generatedAt: 'bench' }),
        },
        ctx.quick ? { timeMs: 600, iterations: 2, rounds: 2 } : { timeMs: 8000, iterations: 10, rounds: 3 },
      );
      const sealed = sealReceipt(unsealed).receipt;
      const receiptBytes = Buffer.byteLength(canonicalize(sealed));
      const perStep = (ms: number): number => (ms * 1000) / steps;
      const limit = {
        name: `wall time of one lockstep step of the same run (${AGENTS} walkers, ${PROCESSES} agent processes, trace wallTimeNs)`,
        value: stepUs,
      };
      const figures: Figure[] = [
        withLimit(
          {
            id: 'reprohash.per-step',
            name: `sealReceipt (ReproHash) of a ${steps}-step, ${AGENTS}-walker receipt, per step`,
            value: perStep(rates.seal!.meanMs),
            unit: 'µs/step',
            higherIsBetter: false,
            rmePercent: rates.seal!.rmePercent,
            samples: rates.seal!.samples,
          },
          limit,
        ),
        withLimit(
          {
            id: 'receipt.write.per-step',
            name: 'writeReceipt (read run files, build, seal, canonical text, durable write), per step',
            value: perStep(rates.write!.meanMs),
            unit: 'µs/step',
            higherIsBetter: false,
            rmePercent: rates.write!.rmePercent,
            samples: rates.write!.samples,
          },
          limit,
        ),
      ];
      ctx.log(
        `receipts: step ${stepUs.toFixed(0)} µs; ReproHash ${figures[0]!.value.toFixed(1)} µs/step (${(100 * figures[0]!.ratio!).toFixed(1)}% of a step)`,
      );
      return {
        figures,
        details: {
          agents: AGENTS,
          processes: PROCESSES,
          steps,
          warmup,
          stepUs,
          receiptBytes,
          sealMs: rates.seal!.meanMs,
          writeMs: rates.write!.meanMs,
        },
      };
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  },
};
