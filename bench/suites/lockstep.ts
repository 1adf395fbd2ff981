// Bench suite `lockstep`: real lockstep runs (walker agents on forage through runSession) for N
// agents in P agent workers on a transport (unix: worker processes on the socket wire; thread: worker_threads;
// inline: no transport, the ceiling), each beside the limit measured in the same run — a raw echo
// with the same messages per step over the same transport. Per row: agent-steps/s, p50/p99 step
// latency, CPU per agent-step (coordinator thread, bench process, all processes), peak RSS.
// Numbers only; correctness lives in test/coordinator. NOT a test.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../coordinator/config.js';
import { runSession } from '../../coordinator/session/run.js';
import { cpuBetween, cpuSnapshot, otherProcesses, type CpuSnapshot, type CpuSpent } from '../lib/cpu.js';
import { percentile } from '../lib/measure.js';
import type { BenchSuite, Figure } from '../lib/suite.js';
import { withLimit } from '../lib/suite.js';
import { placement, transportPlan, type BenchTransport } from '../lib/transports.js';
import { echoName, measureEcho, type EchoMeasure, type EchoTransport } from './lockstep-echo.js';
import { readRunTraces } from './lockstep-read.js';

/** One row of the suite: where N walkers run. */
export interface LockstepRowSpec {
  /** The figure id's stem in the receipt, e.g. "n16.p4", "n16.thread4", "n16.inline". */
  label: string;
  agents: number;
  /** Agent workers: processes (unix) or threads (thread); 1 for inline. */
  processes: number;
  transport: BenchTransport;
  /** Pipelined (Prepare(k+1) behind Commit(k); the product's default) or lockstep-v1 Phase D exactly. */
  pipeline: boolean;
}

/** A row of the table; the label says where the agents run. */
export function rowSpec(
  agents: number,
  processes: number,
  transport: BenchTransport,
  pipeline = true,
): LockstepRowSpec {
  const where = transport === 'unix' ? `p${processes}` : transport === 'thread' ? `thread${processes}` : 'inline';
  return {
    label: `n${agents}.${where}${pipeline ? '' : '.phase-d'}`,
    agents,
    processes: transport === 'inline' ? 1 : processes,
    transport,
    pipeline,
  };
}

/** Every N × P with P ≤ N, on one transport. */
function grid(agents: number[], processes: number[], transport: BenchTransport): LockstepRowSpec[] {
  const rows = agents.flatMap((n) => processes.filter((p) => p <= n).map((p) => rowSpec(n, p, transport)));
  return rows.filter((r, i) => rows.findIndex((x) => x.label === r.label) === i); // inline ignores P
}

export const FULL_ROWS: readonly LockstepRowSpec[] = [
  ...grid([1, 4, 16, 60], [1, 2, 4, 8], 'unix'),
  rowSpec(16, 4, 'unix', false),
  ...grid([1, 4, 16, 60], [1, 4], 'thread'),
  ...[1, 4, 16, 60].map((n) => rowSpec(n, 1, 'inline')),
];

export const QUICK_ROWS: readonly LockstepRowSpec[] = [
  rowSpec(1, 1, 'unix'),
  rowSpec(16, 4, 'unix'),
  rowSpec(16, 4, 'unix', false),
  rowSpec(1, 1, 'thread'),
  rowSpec(16, 4, 'thread'),
  rowSpec(1, 1, 'inline'),
  rowSpec(16, 1, 'inline'),
];

/** CPU time per agent-step, µs, split by where it was spent (see bench/lib/cpu.ts). */
export interface CpuPerAgentStep {
  /** The coordinator's main thread alone (null without /proc schedstat). */
  coordinatorThread: number | null;
  /** The whole bench process (process.cpuUsage): with the thread transport, the worker threads too. */
  process: number;
  /** The worker processes (unix transport; 0 for thread and inline). */
  workerProcesses: number;
  /** process + workerProcesses: everything the run cost the machine. */
  all: number;
}

export interface StepFigures {
  agentStepsPerSec: number;
  p50StepMs: number;
  p99StepMs: number;
  cpuUsPerAgentStep: CpuPerAgentStep;
}

export interface LockstepRow extends LockstepRowSpec, StepFigures {
  steps: number;
  warmup: number;
  stepsPerSec: number;
  /** The echo over the same transport (null inline: nothing to echo over). */
  echo: StepFigures | null;
  /** Kept beside `echo` for older readers of the receipt (charts); null inline. */
  echoAgentStepsPerSec: number | null;
  /** echo / lockstep (1.0 = at the transport limit); null inline. */
  slowdown: number | null;
  coordinatorPeakRssMiB: number;
  workersPeakRssMiB: number;
}

/** A row this build cannot run, and why (e.g. "transport not available in this build …"). */
export interface SkippedRow extends LockstepRowSpec {
  reason: string;
}

export interface LockstepBenchOptions {
  rows?: readonly LockstepRowSpec[];
  steps?: number;
  warmup?: number;
  tmpDir?: string;
  log?: (line: string) => void;
}

/** A measured run or echo: the rate, each step's wall time after the warm-up, CPU over those steps. */
export interface LockstepMeasure extends EchoMeasure {
  workersRss: number;
}

const MiB = 1024 * 1024;

function vmHwmBytes(pid: number): number {
  try {
    const m = /VmHWM:\s+([0-9]+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * One real lockstep run on a transport. The rate and per-step times come from the trace's
 * wallTimeNs after the warm-up steps; CPU is sampled when the warm-up's last step and the run's
 * last step are committed (onProgress), so it covers the same steps.
 */
export async function measureLockstep(
  agents: number,
  processes: number,
  steps: number,
  warmup: number,
  tmp = tmpdir(),
  pipeline = true,
  transport: BenchTransport = 'unix',
): Promise<LockstepMeasure> {
  const t = transportPlan(transport);
  if (!t.available) throw new Error(t.reason);
  const perWorker = Math.ceil(agents / processes);
  const side = Math.max(8, Math.ceil(Math.sqrt(agents * 4)));
  const plan = resolveConfig({
    sessionId: `bench-${agents}-${processes}`,
    masterSeed: '1',
    steps,
    stepHz: 60,
    environment: {
      id: 'forage',
      model: 'forage',
      params: { width: side, height: side, food: Math.max(1, agents) },
      ...t.setup.environment,
    },
    agents: { count: agents, prefix: 'walker-', model: 'walker' },
    workers: { agentsPerWorker: perWorker, ...t.setup.workers },
    deadlines: { startupMs: 30_000, stepMs: 10_000 },
  });
  const out = mkdtempSync(join(tmp, 'lockstep-'));
  let pids: number[] = [];
  let workersRss = 0;
  let cpuStart: CpuSnapshot | null = null;
  let cpuEnd: CpuSnapshot | null = null;
  try {
    const r = await runSession(plan, {
      ...t.setup.runOptions,
      outDir: out,
      pipeline,
      onWarning: () => undefined,
      onProgress: (p) => {
        if (p.step === warmup) cpuStart = cpuSnapshot(pids);
        if (p.step === steps) cpuEnd = cpuSnapshot(pids);
      },
      hooks: {
        ...t.setup.runOptions.hooks, // the inline transport starts its workers through a hook
        onLaunched: (f) => (pids = f.pids().map((p) => p.pid)),
        beforePhase: (step, phase) => {
          if (step === BigInt(steps - 1) && phase === 'commit')
            workersRss = otherProcesses(pids).reduce((s, p) => s + vmHwmBytes(p), 0);
        },
      },
    });
    if (!cpuStart || !cpuEnd) throw new Error('the run reported no progress at the warm-up or the last step');
    const walls = readRunTraces(r.runDir).map((tr) => BigInt(tr.operational.wallTimeNs));
    const stepNs = walls.slice(warmup).map((w, i) => Number(w - walls[warmup + i - 1]!));
    const ns = Number(walls[steps - 1]! - walls[warmup - 1]!);
    return { rate: ((steps - warmup) * agents * 1e9) / ns, stepNs, cpu: cpuBetween(cpuStart, cpuEnd), workersRss };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const round = (x: number, digits = 0): number => Number(x.toFixed(digits));

function perAgentStep(cpu: CpuSpent, agentSteps: number): CpuPerAgentStep {
  const us = (ns: number): number => round(ns / 1000 / agentSteps, 2);
  return {
    coordinatorThread: cpu.coordinatorThreadNs === null ? null : us(cpu.coordinatorThreadNs),
    process: us(cpu.processNs),
    workerProcesses: us(cpu.workerProcessesNs),
    all: us(cpu.allNs),
  };
}

function stepFigures(m: EchoMeasure, agents: number): StepFigures {
  return {
    agentStepsPerSec: Math.round(m.rate),
    p50StepMs: round(percentile(m.stepNs, 50) / 1e6, 3),
    p99StepMs: round(percentile(m.stepNs, 99) / 1e6, 3),
    cpuUsPerAgentStep: perAgentStep(m.cpu, m.stepNs.length * agents),
  };
}

/** The raw echo a row's messages are compared with: the agents' transport (none inline). */
function echoTransport(t: BenchTransport): EchoTransport | null {
  return t === 'inline' ? null : t === 'unix' ? 'unix' : 'thread';
}

async function measureRow(spec: LockstepRowSpec, steps: number, warmup: number, tmp?: string): Promise<LockstepRow> {
  const { agents, processes, transport, pipeline } = spec;
  const run = await measureLockstep(agents, processes, steps, warmup, tmp, pipeline, transport);
  const echoOver = echoTransport(transport);
  const echo =
    echoOver === null
      ? null
      : stepFigures(await measureEcho(agents, processes, steps, warmup, pipeline, echoOver), agents);
  const mine = stepFigures(run, agents);
  return {
    ...spec,
    ...mine,
    steps,
    warmup,
    stepsPerSec: Math.round(run.rate / agents),
    echo,
    echoAgentStepsPerSec: echo?.agentStepsPerSec ?? null,
    slowdown: echo ? round(echo.agentStepsPerSec / mine.agentStepsPerSec, 2) : null,
    coordinatorPeakRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
    workersPeakRssMiB: Math.round(run.workersRss / MiB),
  };
}

/** Run every row whose transport this build has; the others come back skipped with the reason. */
export async function benchLockstep(
  opts: LockstepBenchOptions = {},
): Promise<{ rows: LockstepRow[]; skipped: SkippedRow[] }> {
  const specs = opts.rows ?? FULL_ROWS;
  const steps = opts.steps ?? 400;
  const warmup = opts.warmup ?? 100;
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const rows: LockstepRow[] = [];
  const skipped: SkippedRow[] = [];
  for (const spec of specs) {
    const t = transportPlan(spec.transport);
    if (!t.available) {
      log(`lockstep ${spec.label}: skipped, ${t.reason}`);
      skipped.push({ ...spec, reason: t.reason });
      continue;
    }
    const row = await measureRow(spec, steps, warmup, opts.tmpDir);
    const echo = row.echo ? ` (echo ${row.echo.agentStepsPerSec}, ×${row.slowdown})` : '';
    const c = row.cpuUsPerAgentStep.coordinatorThread;
    log(
      `lockstep ${row.label}: ${row.agentStepsPerSec} agent-steps/s${echo}, ` +
        `step p50 ${row.p50StepMs} ms p99 ${row.p99StepMs} ms, coordinator ${c} µs/agent-step`,
    );
    rows.push(row);
  }
  return { rows, skipped };
}

const cell = (x: string | number | null | undefined): string => (x === null || x === undefined ? '—' : String(x));

export function lockstepTable(rows: LockstepRow[], skipped: SkippedRow[] = []): string {
  const columns = [
    'row',
    'agents',
    'where',
    'agent-steps/s',
    'echo agent-steps/s',
    'echo ÷ lockstep',
    'step p50 ms',
    'step p99 ms',
    'echo p50 ms',
    'echo p99 ms',
    'coordinator thread µs/agent-step',
    'bench process µs/agent-step',
    'worker processes µs/agent-step',
    'all µs/agent-step',
    'coordinator peak RSS MiB',
    'workers peak RSS MiB (sum)',
  ];
  const line = (cells: (string | number | null | undefined)[]): string => `| ${cells.map(cell).join(' | ')} |`;
  const head = [line(columns), line(columns.map((_, i) => (i === 0 || i === 2 ? '---' : '---:')))];
  const body = rows.map((r) => {
    const c = r.cpuUsPerAgentStep;
    return line([
      r.label,
      r.agents,
      placement(r.transport, r.processes),
      r.agentStepsPerSec,
      r.echo?.agentStepsPerSec,
      r.slowdown,
      r.p50StepMs,
      r.p99StepMs,
      r.echo?.p50StepMs,
      r.echo?.p99StepMs,
      c.coordinatorThread,
      c.process,
      c.workerProcesses,
      c.all,
      r.coordinatorPeakRssMiB,
      r.workersPeakRssMiB,
    ]);
  });
  const skips = skipped.map((s) =>
    line([s.label, s.agents, placement(s.transport, s.processes), `skipped: ${s.reason}`]),
  );
  return [...head, ...body, ...skips].join('\n');
}

function rowName(r: LockstepRowSpec): string {
  const pipe = r.pipeline
    ? ''
    : ', lockstep-v1 Phase D exactly (pipeline: false; the next Prepare after every Commit reply)';
  return `${r.agents} walker${r.agents === 1 ? '' : 's'}, ${placement(r.transport, r.processes)}${pipe}`;
}

/** A figure of a row beside the same measure of its echo (no limit inline). */
function pairFigure(
  r: LockstepRow,
  suffix: string,
  what: string,
  unit: string,
  higherIsBetter: boolean,
  pick: (f: StepFigures) => number | null,
): Figure | null {
  const value = pick(r);
  if (value === null) return null;
  const limit = r.echo ? pick(r.echo) : null;
  return withLimit(
    {
      id: `lockstep.${r.label}${suffix}`,
      name: `${rowName(r)}${what}`,
      value,
      unit,
      higherIsBetter,
      samples: r.steps - r.warmup,
    },
    limit === null || echoTransport(r.transport) === null
      ? null
      : { name: echoName(echoTransport(r.transport)!, r.pipeline), value: limit },
  );
}

/**
 * Per row: agent-steps/s, p50 and p99 step latency, CPU per agent-step of the coordinator thread,
 * of the bench process and of all processes — each beside its echo. Per row with an inline row at
 * the same N (pipelined, as the product runs; not the Phase-D-exact row): its agent-steps/s beside that inline ceiling.
 */
export function lockstepFigures(rows: LockstepRow[]): Figure[] {
  const figures: Figure[] = [];
  for (const r of rows) {
    const pairs = [
      pairFigure(r, '', '', 'agent-steps/s', true, (f) => f.agentStepsPerSec),
      pairFigure(r, '.p50', ': p50 step latency', 'ms/step', false, (f) => f.p50StepMs),
      pairFigure(r, '.p99', ': p99 step latency', 'ms/step', false, (f) => f.p99StepMs),
      pairFigure(
        r,
        '.cpu.coordinator',
        ': coordinator thread CPU',
        'µs/agent-step',
        false,
        (f) => f.cpuUsPerAgentStep.coordinatorThread,
      ),
      pairFigure(
        r,
        '.cpu.process',
        ': bench process CPU (all its threads)',
        'µs/agent-step',
        false,
        (f) => f.cpuUsPerAgentStep.process,
      ),
      pairFigure(
        r,
        '.cpu.all',
        ': CPU of every process of the run',
        'µs/agent-step',
        false,
        (f) => f.cpuUsPerAgentStep.all,
      ),
    ];
    figures.push(...pairs.filter((f): f is Figure => f !== null));
    const ceiling = rows.find((x) => x.transport === 'inline' && x.agents === r.agents);
    if (r.transport !== 'inline' && r.pipeline && ceiling)
      figures.push(
        withLimit(
          {
            id: `lockstep.${r.label}.vs-inline`,
            name: `${rowName(r)} beside the inline ceiling`,
            value: r.agentStepsPerSec,
            unit: 'agent-steps/s',
            higherIsBetter: true,
            samples: r.steps - r.warmup,
          },
          {
            name: `inline ceiling, ${r.agents} walker${r.agents === 1 ? '' : 's'} (no transport)`,
            value: ceiling.agentStepsPerSec,
          },
        ),
      );
  }
  return figures;
}

function rssFigures(rows: LockstepRow[]): Figure[] {
  const peak = rows.reduce((m, r) => Math.max(m, r.workersPeakRssMiB), 0);
  return [
    withLimit(
      {
        id: 'lockstep.rss.workers',
        name: "peak RSS of one run's worker processes (sum, largest config)",
        value: peak,
        unit: 'MiB',
        higherIsBetter: false,
      },
      null,
    ),
    withLimit(
      {
        id: 'lockstep.rss.coordinator',
        name: 'peak RSS of the coordinator (bench process)',
        value: Math.round(process.resourceUsage().maxRSS / 1024),
        unit: 'MiB',
        higherIsBetter: false,
      },
      null,
    ),
  ];
}

/** The harness entry (`npm run bench -- lockstep [--quick]`). */
export const lockstep: BenchSuite = {
  name: 'lockstep',
  description:
    'real lockstep runs (walker on forage) per transport — unix worker processes (the socket wire), worker threads, ' +
    'inline ceiling — beside a raw echo with the same messages per step over the same transport: ' +
    'agent-steps/s, p50/p99 step latency, CPU per agent-step, peak RSS',
  async run(ctx) {
    const { rows, skipped } = await benchLockstep({
      rows: ctx.quick ? QUICK_ROWS : FULL_ROWS,
      steps: ctx.quick ? 120 : 600,
      warmup: ctx.quick ? 30 : 150,
      tmpDir: ctx.tmpDir,
      log: ctx.log,
    });
    return {
      figures: [...lockstepFigures(rows), ...rssFigures(rows)],
      details: { rows, skippedRows: skipped, table: lockstepTable(rows, skipped) },
    };
  },
};

// Direct use: node --import tsx bench/suites/lockstep.ts [unix|thread|inline] [N,N,...] [P,P,...]
if (import.meta.url === `file://${process.argv[1]}`) {
  const transport = (process.argv[2] ?? 'unix') as BenchTransport;
  const agents = process.argv[3]?.split(',').map(Number) ?? [1, 16];
  const processes = process.argv[4]?.split(',').map(Number) ?? [1, 4];
  const { rows, skipped } = await benchLockstep({ rows: grid(agents, processes, transport) });
  process.stdout.write(`${lockstepTable(rows, skipped)}\n`);
}
