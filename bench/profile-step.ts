// Profile of the lockstep step path (issue 13 part 3): runs real sessions (runSession: walkers on
// forage, real worker processes on Unix sockets (the socket wire), a real run directory) and prints
// agent-steps/s (from trace wallTimeNs after a warm-up, median of --runs) with the CPU time per
// step of the main thread of the coordinator and of each worker process (/proc: GC and compiler
// helper threads left out, they inflate under load), and with --profile a
// self-time summary by function of the coordinator and of every worker (V8 --cpu-prof). A developer
// tool for finding where a step's time goes; NOT a bench suite (no limit, no receipt) and NOT a test.
//
//   node --import tsx bench/profile-step.ts                      # 16/16, 16/4, 1/1: rates only
//   node --import tsx bench/profile-step.ts --agents 16 --per-worker 4 --steps 2000 --runs 3
//   node --import tsx bench/profile-step.ts --agents 16 --per-worker 16 --profile /tmp/prof
//   node --import tsx bench/profile-step.ts --summarize /tmp/prof          # summarize again, no run
//   node --import tsx bench/profile-step.ts --inline [--profile DIR]      # no transport: detsim's own work
//   node --import tsx bench/profile-step.ts --transport thread --agents 16 --dist   # worker threads
//   node --import tsx bench/profile-step.ts --agents 16 --dist --environment-transport inline  # as a run's default
//   (every run also prints where a step's wall time goes between the two halves of the lockstep
//   chain, and with --transport thread the CPU per step of each of this process's busy threads:
//   V8's profiler charges a thread's time off the CPU to the function it was in, so a thread woken
//   by postMessage that takes the sender's core shows up as the sender's "postMessage")
//   (add --dist to time the compiled coordinator and workers of `npm run build`; --profile always does;
//   --dist-dir DIR times another build, e.g. an older commit's, for an A/B run under the same load)
//
// --profile DIR (after `npm run build`) re-runs this script once as a child on dist/ under
// `node --cpu-prof` (profiles in DIR/coordinator) with DETSIM_WORKER_NODE_ARGS set so every TypeScript worker writes its own
// profile to DIR/workers (coordinator/launch/launcher.ts passes those flags on), then summarizes both.
// The machine is shared: run each measurement 2-3 times and read the median.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { resolveConfig, type RunPlan } from '../coordinator/config.js';
import type { Fleet } from '../coordinator/launch/launcher.js';
import * as lockstepSource from '../coordinator/session/lockstep.js';
import * as traceStoreSource from '../coordinator/trace/trace-store.js';
import * as traceSource from '../coordinator/trace/trace.js';
import type { Scope } from '../core/formats/scalars.js';
import * as protocolSource from '../core/protocol/index.js';
import type { Params, PrintedParams } from '../core/protocol/index.js';
import * as runtimeSource from '../workers/runtime.js';
import { runSession as runFromSource } from '../coordinator/session/run.js';
import { readRunTraces } from './suites/lockstep-read.js';
import { threadRunNs, threadsBetween } from './lib/cpu.js';

interface Config {
  agents: number;
  perWorker: number;
}

interface Args {
  configs: Config[];
  steps: number;
  warmup: number;
  runs: number;
  profile?: string;
  summarize?: string;
  top: number;
  /** Run the compiled coordinator (dist/, so are its workers): real line numbers in profiles. */
  dist: boolean;
  /** The dist/ directory to run (another build, e.g. of an older commit, for an A/B comparison). */
  distDir: string;
  /** Write the monotonic window of the measured steps (µs) here, for the profile summary. */
  window?: string;
  /** No processes, no transport: the hosts in this process, messages still encoded and checked. */
  inline: boolean;
  /** The workers' transport: `unix` (processes on Unix sockets, the default here) or `thread`. */
  transport: 'unix' | 'thread';
  /** The environment in the coordinator's thread (`inline`) or on a worker of its own (the default here). */
  environmentTransport: 'inline' | 'workers';
}

const DEFAULT_CONFIGS: Config[] = [
  { agents: 16, perWorker: 16 },
  { agents: 16, perWorker: 4 },
  { agents: 1, perWorker: 1 },
];

function parseArgs(argv: string[]): Args {
  const flag = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const num = (name: string, dflt: number): number => Number(flag(name) ?? dflt);
  const agents = flag('--agents');
  const configs = agents
    ? [{ agents: Number(agents), perWorker: num('--per-worker', Number(agents)) }]
    : DEFAULT_CONFIGS;
  return {
    configs,
    steps: num('--steps', 2000),
    warmup: num('--warmup', 200),
    runs: num('--runs', 1),
    profile: flag('--profile'),
    summarize: flag('--summarize'),
    top: num('--top', 25),
    dist: argv.includes('--dist') || flag('--dist-dir') !== undefined,
    distDir: flag('--dist-dir') ?? fileURLToPath(new URL('../dist', import.meta.url)),
    window: flag('--window'),
    inline: argv.includes('--inline'),
    transport: flag('--transport') === 'thread' ? 'thread' : 'unix',
    environmentTransport: flag('--environment-transport') === 'inline' ? 'inline' : 'workers',
  };
}

function planFor(
  c: Config,
  steps: number,
  transport: Args['transport'],
  envTransport: Args['environmentTransport'],
): RunPlan {
  const side = Math.max(8, Math.ceil(Math.sqrt(c.agents * 4)));
  return resolveConfig({
    sessionId: `profile-${c.agents}-${c.perWorker}`,
    masterSeed: '1',
    steps,
    stepHz: 60,
    // The environment on a worker of its own unless --environment-transport inline (a local run's default for forage).
    environment: {
      id: 'forage',
      model: 'forage',
      params: { width: side, height: side, food: c.agents },
      transport: envTransport,
    },
    agents: { count: c.agents, prefix: 'walker-', model: 'walker' },
    workers: { agentsPerWorker: c.perWorker, transport },
    deadlines: { startupMs: 30_000, stepMs: 10_000 },
  });
}

/**
 * The same lockstep and per-step session work (trace line, behaviour digest, trace segment append) with
 * every worker's runtime in this process: each message is still encoded, decoded and checked on both
 * sides exactly as over gRPC (client.ts's encode/decode/readReply, the worker runtime's handle), only
 * the transport is gone. The cost of detsim's own work alone, one thread.
 */
async function measureInline(plan: RunPlan, c: Config, args: Args): Promise<Measured> {
  const { Lockstep, SegmentedTraceWriter, BehaviourDigest, canonicalBehaviour, traceLine } = {
    ...(await load('coordinator/session/lockstep.js', lockstepSource, args)),
    ...(await load('coordinator/trace/trace-store.js', traceStoreSource, args)),
    ...(await load('coordinator/trace/trace.js', traceSource, args)),
  };
  const { decodeBody, readReply, replyBody, requestText } = await load('core/protocol/index.js', protocolSource, args);
  const { WorkerRuntime } = await load('workers/runtime.js', runtimeSource, args);
  let nextId = 1;
  const workerOf = (w: RunPlan['workers'][number]) => {
    const runtime = new WorkerRuntime({ role: w.role, workerId: w.workerId, sessionId: plan.sessionId });
    const stream = { introduced: true };
    const call = async (
      method: string,
      scope: Scope | null,
      params: Params | PrintedParams,
      o: { requestId?: string } = {},
    ) => {
      const requestId = o.requestId ?? `req-${nextId++}`;
      const out = await runtime.handle(requestText(method, params, requestId, scope), undefined, stream);
      return { requestId, reply: readReply(decodeBody(replyBody(out.body))) };
    };
    return { plan: w, client: { call } };
  };
  const workers = plan.workers.map(workerOf);
  const fleet = {
    environment: workers.find((w) => w.plan.role === 'environment')!,
    agents: workers.filter((w) => w.plan.role === 'agent'),
    pids: () => workers.map((w, i) => ({ workerId: w.plan.workerId, pid: i + 1 })),
  } as unknown as Fleet;
  const out = mkdtempSync(join(tmpdir(), 'profile-step-'));
  try {
    const startedAt = process.hrtime.bigint();
    const logger = pino({ level: 'info' }, { write: () => undefined });
    const lockstep = new Lockstep(plan, fleet, { dispatch: 'concurrent', epoch: 'e1', startedAt, logger });
    await lockstep.initialize();
    const traces = new SegmentedTraceWriter(out);
    const digest = new BehaviourDigest();
    let t0 = 0n;
    let cpu0 = 0;
    for (let k = 0; k < args.steps; k++) {
      if (k === args.warmup) {
        t0 = process.hrtime.bigint();
        cpu0 = procCpuSeconds(process.pid);
        if (args.window) writeFileSync(args.window, JSON.stringify({ startUs: Number(t0 / 1000n), endUs: 0 }));
      }
      // The session loop's per-step work (session.ts stepLoop).
      const trace = await lockstep.step();
      const behaviourText = canonicalBehaviour(trace.behaviour);
      const appended = traces.appendLine(traceLine(behaviourText, trace.operational), behaviourText);
      if (appended) await appended;
      digest.addCanonical(behaviourText);
    }
    const t1 = process.hrtime.bigint();
    const cpu1 = procCpuSeconds(process.pid);
    await traces.close();
    if (args.window)
      writeFileSync(args.window, JSON.stringify({ startUs: Number(t0 / 1000n), endUs: Number(t1 / 1000n) }));
    const n = args.steps - args.warmup;
    return {
      rate: (n * c.agents * 1e9) / Number(t1 - t0),
      coordinatorUs: ((cpu1 - cpu0) * 1e6) / n,
      workersUs: [],
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** A module from source (as imported above) or, with --dist, its compiled twin under dist/ (or --dist-dir). */
async function load<M>(path: string, source: M, args: Args): Promise<M> {
  return args.dist ? ((await import(pathToFileURL(join(args.distDir, path)).href)) as M) : source;
}

/** One run's figures: agent-steps/s, and CPU µs per lockstep step of the coordinator and of each worker. */
interface Measured {
  rate: number;
  coordinatorUs: number;
  workersUs: { workerId: string; us: number }[];
  /** Wall µs per step from Advance(k) going out to Commit(k) going out, and from there to Advance(k+1). */
  chain?: { advanceUs: number; commitUs: number };
  /** With threads: CPU µs per step of each busy thread of this process (worker, sealing, V8 and libuv threads). */
  threadsUs?: { main: boolean; name: string; tid: number; us: number }[];
}

/**
 * The lockstep chain's two halves, from the phase hooks: Advance(k) out → Commit(k) out is the
 * environment's round trip and the evaluation; Commit(k) out → Advance(k+1) out is the agents'
 * round trip, the trace, the wait for the pipelined Prepare(k+1) and the next batch.
 */
class ChainClock {
  private advanceAt = 0n;
  private commitAt = 0n;
  private advanceNs = 0n;
  private commitNs = 0n;
  private steps = 0;

  constructor(private readonly from: number) {}

  readonly beforePhase = (step: bigint, phase: string): void => {
    const now = process.hrtime.bigint();
    if (step < BigInt(this.from)) return;
    if (phase === 'advance') {
      if (this.commitAt > 0n) this.commitNs += now - this.commitAt;
      this.advanceAt = now;
    } else if (phase === 'commit' && this.advanceAt > 0n) {
      this.advanceNs += now - this.advanceAt;
      this.commitAt = now;
      this.steps += 1;
    }
  };

  perStep(): { advanceUs: number; commitUs: number } {
    const n = Math.max(1, this.steps);
    return {
      advanceUs: Number(this.advanceNs) / n / 1000,
      commitUs: Number(this.commitNs) / Math.max(1, n - 1) / 1000,
    };
  }
}

/** CPU seconds (user + system) the main thread of a process has used so far, from /proc (ticks of 10 ms). */
function procCpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * One real run: agent-steps/s between the end of the warm-up and the last step (trace wall times),
 * and the CPU time each process spent per step over the same steps (no profiler involved).
 */
async function measure(c: Config, args: Args): Promise<Measured> {
  const { steps, warmup } = args;
  const { runSession } = await load('coordinator/session/run.js', { runSession: runFromSource }, args);
  const plan = planFor(c, steps, args.transport, args.environmentTransport);
  if (args.inline) return measureInline(plan, c, args);
  const out = mkdtempSync(join(tmpdir(), 'profile-step-'));
  try {
    const window: number[] = [];
    const cpu: { coordinator: number; workers: number[]; threads: Map<number, number> }[] = [];
    const chain = new ChainClock(warmup);
    let pids: { workerId: string; pid: number }[] = [];
    const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);
    const onProgress = ({ step }: { step: number }): void => {
      if (step !== warmup && step !== steps) return;
      window.push(nowUs());
      cpu.push({
        coordinator: procCpuSeconds(process.pid),
        workers: pids.map((p) => procCpuSeconds(p.pid)),
        threads: threadRunNs(),
      });
    };
    const r = await runSession(plan, {
      outDir: out,
      onWarning: () => undefined,
      onProgress,
      hooks: { onLaunched: (f) => (pids = f.pids()), beforePhase: chain.beforePhase },
    });
    if (args.window) writeFileSync(args.window, JSON.stringify({ startUs: window[0], endUs: window[1] }));
    const walls = readRunTraces(r.runDir).map((t) => BigInt(t.operational.wallTimeNs));
    const ns = Number(walls[steps - 1]! - walls[warmup - 1]!);
    const perStepUs = (seconds: number): number => (seconds * 1e6) / (steps - warmup);
    const threads = threadsBetween(cpu[0]!.threads, cpu[1]!.threads).filter((t) => t.ns > 0);
    return {
      rate: ((steps - warmup) * c.agents * 1e9) / ns,
      coordinatorUs: perStepUs(cpu[1]!.coordinator - cpu[0]!.coordinator),
      workersUs: pids
        .filter((p) => p.pid !== process.pid)
        .map((p) => ({
          workerId: p.workerId,
          us: perStepUs(cpu[1]!.workers[pids.indexOf(p)]! - cpu[0]!.workers[pids.indexOf(p)]!),
        })),
      chain: chain.perStep(),
      ...(args.transport === 'thread'
        ? { threadsUs: threads.map((t) => ({ main: t.main, name: t.name, tid: t.tid, us: perStepUs(t.ns / 1e9) })) }
        : {}),
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function rates(args: Args): Promise<void> {
  for (const c of args.configs) {
    const got: Measured[] = [];
    for (let i = 0; i < args.runs; i++) got.push(await measure(c, args));
    const m = median(got.map((g) => g.rate));
    const perStepUs = (c.agents * 1e6) / m;
    const us = (xs: number[]): string => `${Math.round(median(xs))}`;
    const workers = got[0]!.workersUs.map(({ workerId }, w) => `${workerId} ${us(got.map((g) => g.workersUs[w]!.us))}`);
    const kind = args.inline ? 'inline hosts' : args.transport === 'thread' ? 'agent threads' : 'processes';
    const chain = got[0]!.chain
      ? `\n  wall µs per step (median): Advance out → Commit out ${us(got.map((g) => g.chain!.advanceUs))}, ` +
        `Commit out → next Advance out ${us(got.map((g) => g.chain!.commitUs))}`
      : '';
    const threads = got[0]!.threadsUs
      ? `\n  CPU µs per step of this process's busy threads (first run, busiest first; * the main thread): ` +
        got[0]!.threadsUs
          .filter((t) => t.us >= 1)
          .map((t) => `${Math.round(t.us)}${t.main ? '*' : ''} (${t.name} ${t.tid})`)
          .join(', ')
      : '';
    console.log(
      `${c.agents} walkers / ${c.agents / c.perWorker} ${kind}: ` +
        `${Math.round(m)} agent-steps/s ` +
        `(median of ${got.map((g) => Math.round(g.rate)).join(', ')}; ${perStepUs.toFixed(0)} µs per lockstep step)\n` +
        `  CPU µs per step (median): coordinator ${us(got.map((g) => g.coordinatorUs))}` +
        (workers.length > 0 ? `; ${workers.join(', ')}` : '') +
        chain +
        threads,
    );
  }
}

// ---- .cpuprofile summary ---------------------------------------------------------------------

interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
  }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The measured steps' window on the monotonic clock (µs), as the profiled run wrote it. */
interface Window {
  startUs: number;
  endUs: number;
}

/**
 * Self time in ms by function (name and file:line), from the samples taken inside `window` (V8's
 * profile clock is the monotonic clock process.hrtime reads, shared by every process).
 */
function selfTimes(p: CpuProfile, window: Window | undefined): { total: number; byFn: Map<string, number> } {
  const label = new Map<number, string>();
  for (const n of p.nodes) {
    const f = n.callFrame;
    const file = f.url.replace(/^.*\/(node_modules\/|wt\/[^/]+\/|main\/)/, '$1');
    label.set(n.id, f.url ? `${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}` : f.functionName);
  }
  const byFn = new Map<string, number>();
  let total = 0;
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (window && (t < window.startUs || t > window.endUs)) continue;
    const ms = (p.timeDeltas[i] ?? 0) / 1000;
    const key = label.get(p.samples[i]!)!;
    byFn.set(key, (byFn.get(key) ?? 0) + ms);
    total += ms;
  }
  return { total, byFn };
}

/**
 * Where a function comes from: detsim's own code, grpc-js (and protobufjs under it), Node's own
 * JavaScript, V8 builtins and natives without a file (JSON, hashing, writes), garbage collection, or
 * "(program)": native work with no JavaScript on the stack (libuv, the HTTP/2 session, the profiler).
 */
function originOf(label: string): string {
  if (label === '(program)' || label === '(garbage collector)') return label;
  if (/(^| )(node_modules\/)?@grpc\/|protobufjs|Frame\$/.test(label)) return 'grpc-js';
  if (/ (dist|coordinator|core|workers|bench)\/|wt\/[^/]+\//.test(label)) return 'detsim';
  if (/ node:/.test(label)) return 'node';
  return 'natives';
}

function summarizeDir(dir: string, title: string, top: number, window: Window | undefined): void {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  } catch {
    return;
  }
  for (const f of files.sort()) {
    const { total, byFn } = selfTimes(JSON.parse(readFileSync(join(dir, f), 'utf8')) as CpuProfile, window);
    const idle = byFn.get('(idle)') ?? 0;
    if (total - idle < 50) continue; // a module-loader thread, idle while stepping
    console.log(`\n## ${title} ${f}: ${total.toFixed(0)} ms sampled, ${(total - idle).toFixed(0)} ms busy`);
    const rows = [...byFn.entries()].filter(([k]) => k !== '(idle)').sort((a, b) => b[1] - a[1]);
    const byOrigin = new Map<string, number>();
    for (const [k, ms] of rows) byOrigin.set(originOf(k), (byOrigin.get(originOf(k)) ?? 0) + ms);
    const origins = [...byOrigin.entries()].sort((a, b) => b[1] - a[1]);
    console.log(
      `by origin: ${origins.map(([o, ms]) => `${o} ${((100 * ms) / (total - idle)).toFixed(0)}%`).join(', ')}`,
    );
    for (const [k, ms] of rows.slice(0, top))
      console.log(`${ms.toFixed(1).padStart(9)} ms ${((100 * ms) / (total - idle)).toFixed(1).padStart(5)}%  ${k}`);
  }
}

function summarize(dir: string, top: number): void {
  let window: Window | undefined;
  try {
    window = JSON.parse(readFileSync(join(dir, 'window.json'), 'utf8')) as Window;
    console.log(`samples of the measured steps only: ${((window.endUs - window.startUs) / 1000).toFixed(0)} ms`);
  } catch {
    window = undefined;
  }
  summarizeDir(join(dir, 'coordinator'), 'coordinator', top, window);
  summarizeDir(join(dir, 'workers'), 'worker', top, window);
}

/** Run this script once more under --cpu-prof (coordinator and workers), then summarize. */
function profile(args: Args, dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'coordinator'), { recursive: true });
  mkdirSync(join(dir, 'workers'), { recursive: true });
  const c = args.configs[0]!;
  const child = spawnSync(
    process.execPath,
    [
      '--cpu-prof',
      `--cpu-prof-dir=${join(dir, 'coordinator')}`,
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
      ...['--agents', String(c.agents), '--per-worker', String(c.perWorker)],
      ...['--steps', String(args.steps), '--warmup', String(args.warmup)],
      ...['--dist', '--window', join(dir, 'window.json')],
      ...(args.inline ? ['--inline'] : []),
      ...['--transport', args.transport, '--environment-transport', args.environmentTransport],
    ],
    {
      stdio: 'inherit',
      env: { ...process.env, DETSIM_WORKER_NODE_ARGS: `--cpu-prof --cpu-prof-dir=${join(dir, 'workers')}` },
    },
  );
  if (child.status !== 0) throw new Error(`profiled run exited ${child.status}`);
  summarize(dir, args.top);
}

const args = parseArgs(process.argv.slice(2));
if (args.summarize) summarize(args.summarize, args.top);
else if (args.profile) profile(args, args.profile);
else await rates(args);
