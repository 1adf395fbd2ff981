// The long-run bench (issue #16 "Traces and receipts"): a 16-walker run (examples/forage-walkers.yaml)
// for N steps with a segmented trace and checkpoints, reporting the coordinator's RSS and heap
// over time (they must stay flat), the trace and receipt bytes on disk (per agent-step, per step),
// and the time of `detsim resume` from the last checkpoint before the end (which reads no earlier
// segment; its receipt hashes the segments' repro files, no step walked again, and is timed apart). Usage:
//   node --v8-pool-size=0 --import tsx bench/long-run.ts [--steps 1000000] [--segment-steps 4096] [--checkpoint-every K]
//     [--out DIR] [--samples 20] [--config FILE (a 16-walker config, e.g. one on Rust workers)]
// The short version is test/trace/trace-store.test.ts. NOT a CI test: it runs for a long time.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CheckpointRun } from '../coordinator/checkpoint/run-checkpoints.js';
import { writeReceipt } from '../coordinator/receipt/receipt.js';
import { runSession } from '../coordinator/session/run.js';
import { readTraceIndex, traceBytesOnDisk } from '../coordinator/trace/trace-store.js';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..');
const DEFAULT_CONFIG = join(ROOT, 'examples', 'forage-walkers.yaml');
const AGENTS = 16;

interface Sample {
  step: number;
  elapsedS: number;
  rssMiB: number;
  heapMiB: number;
}

const sampleLine = (s: Sample) =>
  `${String(s.step).padEnd(11)} ${String(s.elapsedS).padEnd(10)} ${String(s.rssMiB).padEnd(8)} ${s.heapMiB}`;
const mib = (b: number) => Math.round((b / 2 ** 20) * 10) / 10;

function parse() {
  const { values } = parseArgs({
    options: {
      steps: { type: 'string', default: '1000000' },
      'segment-steps': { type: 'string', default: '4096' },
      'checkpoint-every': { type: 'string' },
      out: { type: 'string' },
      samples: { type: 'string', default: '20' },
      config: { type: 'string', default: DEFAULT_CONFIG },
    },
  });
  const steps = Number(values.steps);
  const every = Number(values['checkpoint-every'] ?? Math.max(1, Math.floor(steps / 10)));
  return {
    steps,
    every,
    segmentSteps: Number(values['segment-steps']),
    out: values.out ?? mkdtempSync(join(tmpdir(), 'detsim-long-run-')),
    samples: Number(values.samples),
    config: values.config,
  };
}

async function main(): Promise<void> {
  const o = parse();
  const samples: Sample[] = [];
  const sampleEvery = Math.max(1, Math.floor(o.steps / o.samples));
  const take = (step: number, elapsedMs: number) => {
    const m = process.memoryUsage();
    const s = { step, elapsedS: Math.round(elapsedMs / 100) / 10, rssMiB: mib(m.rss), heapMiB: mib(m.heapUsed) };
    samples.push(s);
    // Printed as taken: a run stopped early still leaves its memory curve in the log.
    console.log(sampleLine(s));
  };
  console.log(
    `long-run: ${o.steps} steps, ${AGENTS} walkers, segments of ${o.segmentSteps}, checkpoint every ${o.every}`,
  );
  console.log('step        elapsed_s  rss_MiB  heap_MiB');
  const started = Date.now();
  const r = await runSession(o.config, {
    outDir: o.out,
    steps: o.steps,
    segmentSteps: o.segmentSteps,
    pipeline: true,
    logLevel: 'warn',
    extension: new CheckpointRun({ every: o.every, keep: 2 }),
    onWarning: () => undefined,
    onProgress: (p) => {
      if (p.step % sampleEvery === 0 || p.step === p.steps) take(p.step, p.elapsedMs);
    },
  });
  const runS = (Date.now() - started) / 1000;
  const traceBytes = traceBytesOnDisk(r.runDir);
  const receiptBytes = readFileSync(join(r.runDir, 'receipt.json')).length;
  const runJsonBytes = readFileSync(join(r.runDir, 'run.json')).length;
  console.log(
    `run: ${r.runDir} in ${runS.toFixed(1)} s (${(o.steps / runS).toFixed(0)} steps/s), ReproHash ${r.reproHash}`,
  );
  const rss = samples.map((x) => x.rssMiB);
  console.log(`coordinator RSS over the run: min ${Math.min(...rss)} MiB, max ${Math.max(...rss)} MiB`);
  const segments = readTraceIndex(r.runDir).length;
  console.log(
    `\ntrace:   ${traceBytes} bytes in ${segments} segments = ${(traceBytes / (o.steps * AGENTS)).toFixed(1)} B/agent-step`,
  );
  console.log(
    `receipt: ${receiptBytes} bytes (run.json it carries: ${runJsonBytes}) = ${((receiptBytes - runJsonBytes) / o.steps).toFixed(3)} B/step beyond run.json`,
  );

  // Resume from the last checkpoint before the end, to the end (the stepping after it is counted).
  const boundary = o.steps - o.every;
  const ckpt = `ckpt-e1-${boundary}`;
  const t0 = Date.now();
  const res = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      join(ROOT, 'coordinator', 'cli', 'main.ts'),
      'resume',
      r.runDir,
      '--checkpoint',
      ckpt,
      '--json',
    ],
    { encoding: 'utf8' },
  );
  const resumeS = (Date.now() - t0) / 1000;
  if (res.status !== 0) throw new Error(`resume failed: ${res.stderr}`);
  const t1 = Date.now();
  writeReceipt(r.runDir);
  const receiptS = (Date.now() - t1) / 1000;
  console.log(
    `resume from ${ckpt}: ${resumeS.toFixed(1)} s in all (${o.every} steps stepped again; includes writing the receipt, which hashes every step's repro text from the segments' repro files: ${receiptS.toFixed(1)} s when timed alone)`,
  );
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${mib(totalmem())} MiB, node ${process.version}`,
  );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
