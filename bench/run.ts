// `npm run bench [suite...] [--quick]`: runs the named suites (all by default), prints a table and
// writes the receipt bench/results/<timestamp>.json. The harness only: suites live in bench/suites/.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeCharts } from './lib/charts.js';
import {
  commandLine,
  gitInfo,
  machineInfo,
  table,
  writeReceipt,
  type Receipt,
  type SuiteReceipt,
} from './lib/receipt.js';
import { SUITES } from './suites/index.js';

const USAGE = `usage: npm run bench -- [suite...] [--quick] [--out <dir>]\n       npm run bench -- --chart <receipt.json> [--chart-dir <dir>]\nsuites: ${SUITES.map((s) => s.name).join(', ')}`;

function parseArgs(argv: string[]): {
  names: string[];
  quick: boolean;
  out: string;
  chart?: string;
  chartDir?: string;
} {
  const names: string[] = [];
  let quick = false;
  let chart: string | undefined;
  let chartDir: string | undefined;
  let out = fileURLToPath(new URL('./results/', import.meta.url));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') quick = true;
    else if (a === '--out') {
      const next = argv[++i];
      if (!next) throw new UsageError('--out needs a directory');
      out = next;
    } else if (a === '--chart' || a === '--chart-dir') {
      const next = argv[++i];
      if (!next) throw new UsageError(`${a} needs a ${a === '--chart' ? 'receipt file' : 'directory'}`);
      if (a === '--chart') chart = next;
      else chartDir = next;
    } else if (a === '--help' || a === '-h') throw new UsageError('', 0);
    else if (a.startsWith('-')) throw new UsageError(`unknown option ${a}`);
    else names.push(a);
  }
  for (const n of names)
    if (!SUITES.some((s) => s.name === n)) throw new UsageError(`unknown suite ${JSON.stringify(n)}`);
  if (chartDir && !chart) throw new UsageError('--chart-dir needs --chart <receipt.json>');
  return { names, quick, out, chart, chartDir };
}

class UsageError extends Error {
  constructor(
    message: string,
    readonly code = 2,
  ) {
    super(message);
  }
}

async function main(): Promise<void> {
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    if (e.message) process.stderr.write(`bench: ${e.message}\n`);
    process.stderr.write(`${USAGE}\n`);
    process.exitCode = e.code;
    return;
  }
  if (args.chart) {
    // Charts only, from an existing receipt: no suite runs.
    for (const p of writeCharts(args.chart, args.chartDir)) process.stdout.write(`chart: ${p}\n`);
    return;
  }
  const selected = args.names.length ? SUITES.filter((s) => args.names.includes(s.name)) : [...SUITES];
  const receipt: Receipt = {
    evidence_class: 'measured',
    measure_source: commandLine(),
    measure_ts: new Date().toISOString(),
    machine: machineInfo(),
    git: gitInfo(process.cwd()),
    quick: args.quick,
    suites: [],
  };
  const tmp = mkdtempSync(join(tmpdir(), 'detsim-bench-'));
  try {
    for (const suite of selected) {
      const started = performance.now();
      const result = await suite.run({ quick: args.quick, tmpDir: tmp, log: (m) => process.stderr.write(`${m}\n`) });
      const done: SuiteReceipt = {
        name: suite.name,
        description: suite.description,
        seconds: Math.round(performance.now() - started) / 1000,
        ...result,
      };
      receipt.suites.push(done);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  const path = writeReceipt(args.out, receipt);
  const m = receipt.machine;
  process.stdout.write(`${table(receipt.suites)}\n\n`);
  process.stdout.write(
    `${m.cpuModel}, ${m.cores} cores, ${(m.memoryBytes / 2 ** 30).toFixed(1)} GiB, Node ${m.node}, ${m.os.split(' (')[0]}; load ${m.loadAverage.join(' ')}${args.quick ? '; --quick' : ''}\n`,
  );
  process.stdout.write(`receipt: ${path}\n`);
  for (const p of writeCharts(path)) process.stdout.write(`chart: ${p}\n`);
}

await main();
