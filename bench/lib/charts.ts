// The bench charts: one SVG per suite of a results receipt (lockstep: agent-steps/s against agents,
// one line per transport and worker count beside its raw echo; soak: MiB against agent-steps; every
// other suite: figure ÷ limit bars with the values in MB/s, steps/s... as text). NOT the SVG
// primitives (svg.ts) and never a measurement.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Receipt, SuiteReceipt } from './receipt.js';
import type { Figure } from './suite.js';
import { barChart, lineChart, type LineSeries } from './svg.js';

export interface Chart {
  suite: string;
  svg: string;
}

function num(x: number): string {
  return x.toLocaleString('en-US', { maximumFractionDigits: Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2 });
}

function subtitle(r: Receipt): string {
  const m = r.machine;
  return `${r.measure_ts}${r.quick ? ' (--quick)' : ''} · ${m.cpuModel}, ${m.cores} cores, Node ${m.node} · load ${m.loadAverage.join(' ')}`;
}

interface LockstepRowLike {
  agents: number;
  processes: number;
  /** Absent in receipts from before the transport rows: those were all unix. */
  transport?: string;
  pipeline?: boolean;
  /** e.g. n16.p4; a side row ends in .phase-d (older receipts: .pipelined, the opt-in mode then). */
  label?: string;
  agentStepsPerSec: number;
  echoAgentStepsPerSec: number | null;
}

/** A row beside the main grid: the Phase-D-exact row (or, in older receipts, the opt-in pipelined one). */
const sideRow = (x: LockstepRowLike): boolean => /\.(phase-d|pipelined)$/.test(x.label ?? '');

/** One line per transport and worker count (side rows left out), dashed: its echo. */
function lockstepChart(s: SuiteReceipt, r: Receipt): string {
  const rows = ((s.details?.rows as LockstepRowLike[] | undefined) ?? []).filter((x) => !sideRow(x));
  const key = (x: LockstepRowLike): string => `${x.transport ?? 'unix'} ${x.transport === 'inline' ? 0 : x.processes}`;
  const keys = [...new Set(rows.map(key))].sort();
  const series: LineSeries[] = [];
  keys.forEach((k, i) => {
    const mine = rows.filter((x) => key(x) === k);
    const [transport, p] = [mine[0]!.transport ?? 'unix', mine[0]!.processes];
    const noun = transport === 'thread' ? 'thread' : 'process';
    const where =
      transport === 'inline'
        ? 'inline (no transport)'
        : `${p} agent ${noun}${p > 1 ? (noun === 'thread' ? 's' : 'es') : ''}`;
    series.push({ name: `detsim, ${where}`, points: mine.map((x) => [x.agents, x.agentStepsPerSec]), color: i });
    const echoed = mine.filter((x) => x.echoAgentStepsPerSec !== null);
    if (echoed.length > 0)
      series.push({
        name: `raw ${transport === 'thread' ? 'postMessage' : 'grpc-js'} echo, ${where}`,
        points: echoed.map((x) => [x.agents, x.echoAgentStepsPerSec!]),
        color: i,
        dashed: true,
      });
  });
  return lineChart({
    title: 'lockstep: walker agent-steps/s against agents (dashed: raw echo limit, same messages, same transport)',
    subtitle: subtitle(r),
    xLabel: 'agents (N)',
    yLabel: 'agent-steps/s',
    series,
  });
}

interface MemorySampleLike {
  step: number;
  coordinatorRss: number;
  coordinatorHeapUsed: number;
  workersRss: number;
}

function soakChart(s: SuiteReceipt, r: Receipt): string {
  const samples = (s.details?.samples as MemorySampleLike[] | undefined) ?? [];
  const agents = Number(s.details?.agents ?? 1);
  const MiB = 1024 * 1024;
  const pick = (f: (x: MemorySampleLike) => number): [number, number][] =>
    samples.map((x) => [x.step * agents, f(x) / MiB]);
  const verdicts = Object.entries((s.details?.verdicts as Record<string, string> | undefined) ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return lineChart({
    title: `soak: memory over the run (${verdicts || 'no verdict'})`,
    subtitle: subtitle(r),
    xLabel: 'agent-steps',
    yLabel: 'MiB',
    series: [
      { name: 'workers RSS (sum)', points: pick((x) => x.workersRss) },
      { name: 'coordinator RSS', points: pick((x) => x.coordinatorRss) },
      { name: 'coordinator heapUsed', points: pick((x) => x.coordinatorHeapUsed) },
    ],
  });
}

/** Bars of figure ÷ limit; a figure without a limit gets a row with its value only. */
function ratioChart(s: SuiteReceipt, r: Receipt): string {
  const rows = (s.figures as Figure[]).map((f) => ({
    label: f.name.length > 62 ? `${f.name.slice(0, 60)}…` : f.name,
    value: f.ratio,
    text: f.limit
      ? `${f.ratio!.toFixed(2)}× (${num(f.value)} vs ${num(f.limit.value)} ${f.unit})`
      : `${num(f.value)} ${f.unit} (no limit)`,
  }));
  const skipped = typeof s.details?.skipped === 'string' ? ` — skipped: ${s.details.skipped}` : '';
  return barChart({
    title: `${s.name}: figure ÷ limit, same run${skipped}`.slice(0, 140),
    subtitle: subtitle(r),
    xLabel: 'figure ÷ limit (for times and sizes, lower is better; for rates, higher)',
    barLegend: 'detsim ÷ limit (or ÷ peer) measured in the same run',
    reference: { value: 1, label: '1× = the limit' },
    rows: rows.length ? rows : [{ label: '(no figures)', value: null, text: skipped || 'no figures' }],
  });
}

export function chartsFor(r: Receipt): Chart[] {
  return r.suites.map((s) => ({
    suite: s.name,
    svg: s.name === 'lockstep' ? lockstepChart(s, r) : s.name === 'soak' ? soakChart(s, r) : ratioChart(s, r),
  }));
}

/** Write `<receipt name>.<suite>.svg` next to the receipt (or into `dir`); returns the paths. */
export function writeCharts(receiptPath: string, dir?: string): string[] {
  const r = JSON.parse(readFileSync(receiptPath, 'utf8')) as Receipt;
  const outDir = dir ?? join(receiptPath, '..');
  mkdirSync(outDir, { recursive: true });
  const stem = basename(receiptPath).replace(/\.json$/, '');
  return chartsFor(r).map((c) => {
    const p = join(outDir, dir ? `${c.suite}.svg` : `${stem}.${c.suite}.svg`);
    writeFileSync(p, c.svg);
    return p;
  });
}
