// Bench suite `lockstep`: agent-steps/s of real lockstep runs (walker agents on forage, real worker
// processes over gRPC on Unix sockets) for N agents in P processes, beside the transport limit
// measured in the same run: a raw grpc-js stream echo with the same messages per step. Plus peak
// RSS. Numbers only; correctness lives in test/coordinator. NOT a test.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { resolveConfig } from '../../coordinator/config.js';
import { canonicalBytes } from '../../core/formats/canonical-json.js';
import { channelOptions, workerServiceDefinition, type Frame } from '../../core/protocol/index.js';
import { runSession } from '../../coordinator/run.js';
import type { BenchSuite, Figure } from '../lib/suite.js';
import { withLimit } from '../lib/suite.js';
import { readRunTraces } from './lockstep-read.js';

export interface LockstepRow {
  agents: number;
  processes: number;
  steps: number;
  agentStepsPerSec: number;
  stepsPerSec: number;
  /** The raw echo with the same messages per step: the transport limit in agent-steps/s. */
  echoAgentStepsPerSec: number;
  /** echo / lockstep (1.0 = at the transport limit). */
  slowdown: number;
  coordinatorPeakRssMiB: number;
  workersPeakRssMiB: number;
}

export interface LockstepBenchOptions {
  agents?: number[];
  processes?: number[];
  steps?: number;
  warmup?: number;
  tmpDir?: string;
  log?: (line: string) => void;
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

/** One real lockstep run; rate measured from trace wallTimeNs after the warm-up steps. */
export async function measureLockstep(
  agents: number,
  processes: number,
  steps: number,
  warmup: number,
  tmp = tmpdir(),
  pipeline = false,
): Promise<{ rate: number; workersRss: number }> {
  const perWorker = Math.ceil(agents / processes);
  const side = Math.max(8, Math.ceil(Math.sqrt(agents * 4)));
  const plan = resolveConfig({
    sessionId: `bench-${agents}-${processes}`,
    masterSeed: '1',
    steps,
    stepHz: 60,
    environment: { id: 'forage', model: 'forage', params: { width: side, height: side, food: Math.max(1, agents) } },
    agents: { count: agents, prefix: 'walker-', model: 'walker' },
    workers: { agentsPerWorker: perWorker },
    deadlines: { startupMs: 30_000, stepMs: 10_000 },
  });
  const out = mkdtempSync(join(tmp, 'lockstep-'));
  let pids: number[] = [];
  let workersRss = 0;
  try {
    const r = await runSession(plan, {
      outDir: out,
      pipeline,
      onWarning: () => undefined,
      hooks: {
        onLaunched: (f) => (pids = f.pids().map((p) => p.pid)),
        beforePhase: (step, phase) => {
          if (step === BigInt(steps - 1) && phase === 'commit')
            workersRss = pids.reduce((s, p) => s + vmHwmBytes(p), 0);
        },
      },
    });
    const walls = readRunTraces(r.runDir).map((t) => BigInt(t.operational.wallTimeNs));
    const ns = Number(walls[steps - 1]! - walls[warmup - 1]!);
    return { rate: ((steps - warmup) * agents * 1e9) / ns, workersRss };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

interface EchoPeer {
  child: ChildProcess;
  client: grpc.Client;
  stream: grpc.ClientDuplexStream<Frame, Frame>;
  waiting: ((f: Frame) => void)[];
}

async function startEcho(dir: string, i: number): Promise<EchoPeer> {
  const listen = `unix:${join(dir, `e${i}.sock`)}`;
  const child = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), new URL('./echo-worker.ts', import.meta.url).pathname, '--listen', listen],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  await new Promise<void>((res, rej) => {
    createInterface({ input: child.stdout! }).once('line', () => res());
    child.once('exit', (c) => rej(new Error(`echo worker exited ${c}`)));
  });
  const Ctor = grpc.makeGenericClientConstructor(workerServiceDefinition(), 'Worker');
  const client = new Ctor(listen, grpc.credentials.createInsecure(), channelOptions());
  const stream = (client as unknown as { Session(): grpc.ClientDuplexStream<Frame, Frame> }).Session();
  const peer: EchoPeer = { child, client, stream, waiting: [] };
  stream.on('data', (f: Frame) => peer.waiting.shift()?.(f));
  stream.on('error', () => undefined); // ended by the kill below
  return peer;
}

function roundTrip(peer: EchoPeer, body: Buffer): Promise<Frame> {
  return new Promise((res) => {
    peer.waiting.push(res);
    peer.stream.write({ body });
  });
}

/** Bodies shaped like the real requests of one step for a worker hosting `ids`. */
function stepBodies(ids: string[], k: number): { prepare: Buffer; commit: Buffer } {
  const scope = { sessionId: 'bench', epoch: 'e1', step: String(k) };
  const prepare = canonicalBytes({
    method: 'Agent.Prepare',
    requestId: `req-${2 * k + 3}`,
    scope,
    params: { agents: ids.map((agentId) => ({ agentId })) },
  });
  const commit = canonicalBytes({
    method: 'Agent.Commit',
    requestId: `req-${2 * k + 4}`,
    scope,
    params: {
      agents: ids.map((agentId) => ({
        agentId,
        preparedRequestId: `req-${2 * k + 3}`,
        observation: { foodDx: -3, foodDy: 2, score: 1, x: 5, y: 7 },
        rewards: [],
      })),
    },
  });
  return { prepare, commit };
}

/**
 * The same messages and dependent round trips per step as a lockstep run, over a raw echo: the P
 * Prepares of step k are awaited, then 1 Advance round trip, then the P Commits. Pipelined (the
 * opt-in run mode): each peer's Prepare(k+1) goes out right behind its Commit(k) (none after the
 * last step) and only the Commit replies are awaited before the next Advance.
 */
export async function measureEcho(
  agents: number,
  processes: number,
  steps: number,
  warmup: number,
  pipelined = false,
): Promise<number> {
  const dir = mkdtempSync('/tmp/ds-echo-');
  const peers = await Promise.all(Array.from({ length: processes + 1 }, (_, i) => startEcho(dir, i)));
  try {
    const perWorker = Math.ceil(agents / processes);
    const groups = Array.from({ length: processes }, (_, p) =>
      Array.from({ length: Math.min(perWorker, agents - p * perWorker) }, (_, j) => `walker-${p * perWorker + j}`),
    ).filter((g) => g.length > 0);
    const all = groups.flat();
    let t0 = 0n;
    let prepares = groups.map((g, p) => roundTrip(peers[p + 1]!, stepBodies(g, 0).prepare));
    for (let k = 0; k < steps; k++) {
      if (k === warmup) t0 = process.hrtime.bigint();
      if (!pipelined && k > 0) prepares = groups.map((g, p) => roundTrip(peers[p + 1]!, stepBodies(g, k).prepare));
      await Promise.all(prepares);
      const advance = canonicalBytes({
        method: 'Environment.Advance',
        requestId: `req-${k + 2}`,
        scope: { sessionId: 'bench', epoch: 'e1', step: String(k) },
        params: {
          batchId: `batch-e1-${k}`,
          actions: all.map((agentId) => ({ agentId, portId: agentId, action: { move: 'north' } })),
        },
      });
      await roundTrip(peers[0]!, advance);
      const commits: Promise<Frame>[] = [];
      prepares = [];
      groups.forEach((g, p) => {
        commits.push(roundTrip(peers[p + 1]!, stepBodies(g, k).commit));
        if (pipelined && k + 1 < steps) prepares.push(roundTrip(peers[p + 1]!, stepBodies(g, k + 1).prepare));
      });
      await Promise.all(commits);
    }
    const ns = Number(process.hrtime.bigint() - t0);
    return ((steps - warmup) * agents * 1e9) / ns;
  } finally {
    for (const p of peers) {
      p.stream.end();
      p.client.close();
      p.child.kill('SIGKILL');
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchLockstep(opts: LockstepBenchOptions = {}): Promise<LockstepRow[]> {
  const agentsList = opts.agents ?? [1, 4, 16, 60];
  const processList = opts.processes ?? [1, 2, 4, 8];
  const steps = opts.steps ?? 400;
  const warmup = opts.warmup ?? 100;
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const rows: LockstepRow[] = [];
  for (const agents of agentsList) {
    for (const processes of processList) {
      if (processes > agents) continue;
      const { rate, workersRss } = await measureLockstep(agents, processes, steps, warmup, opts.tmpDir);
      const echo = await measureEcho(agents, processes, steps, warmup);
      const row: LockstepRow = {
        agents,
        processes,
        steps,
        agentStepsPerSec: Math.round(rate),
        stepsPerSec: Math.round(rate / agents),
        echoAgentStepsPerSec: Math.round(echo),
        slowdown: Number((echo / rate).toFixed(2)),
        coordinatorPeakRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
        workersPeakRssMiB: Math.round(workersRss / MiB),
      };
      log(
        `lockstep N=${agents} P=${processes}: ${row.agentStepsPerSec} agent-steps/s (echo ${row.echoAgentStepsPerSec}, ×${row.slowdown})`,
      );
      rows.push(row);
    }
  }
  return rows;
}

export function lockstepTable(rows: LockstepRow[]): string {
  const head =
    '| agents | processes | agent-steps/s | steps/s | raw echo agent-steps/s | echo ÷ lockstep | coordinator peak RSS MiB | workers peak RSS MiB (sum) |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |';
  return [
    head,
    ...rows.map(
      (r) =>
        `| ${r.agents} | ${r.processes} | ${r.agentStepsPerSec} | ${r.stepsPerSec} | ${r.echoAgentStepsPerSec} | ${r.slowdown} | ${r.coordinatorPeakRssMiB} | ${r.workersPeakRssMiB} |`,
    ),
  ].join('\n');
}

/** The harness entry (`npm run bench -- lockstep [--quick]`). */
export const lockstep: BenchSuite = {
  name: 'lockstep',
  description:
    'agent-steps/s of real lockstep runs (walker on forage, worker processes over gRPC/Unix sockets) beside a raw grpc-js stream echo with the same messages per step; peak RSS',
  async run(ctx) {
    const rows = await benchLockstep(
      ctx.quick
        ? { agents: [1, 16], processes: [1, 4], steps: 120, warmup: 30, tmpDir: ctx.tmpDir, log: ctx.log }
        : {
            agents: [1, 4, 16, 60],
            processes: [1, 2, 4, 8],
            steps: 600,
            warmup: 150,
            tmpDir: ctx.tmpDir,
            log: ctx.log,
          },
    );
    const figures: Figure[] = [];
    for (const r of rows) {
      figures.push(
        withLimit(
          {
            id: `lockstep.n${r.agents}.p${r.processes}`,
            name: `${r.agents} walkers in ${r.processes} agent process${r.processes > 1 ? 'es' : ''}`,
            value: r.agentStepsPerSec,
            unit: 'agent-steps/s',
            higherIsBetter: true,
            samples: r.steps,
          },
          { name: 'raw grpc-js stream echo, same messages per step', value: r.echoAgentStepsPerSec },
        ),
      );
    }
    // The opt-in pipelined mode (outside lockstep-v1 Phase D) at 16 walkers / 4 processes, beside its own echo.
    const n = 16;
    const p = 4;
    const steps = ctx.quick ? 120 : 600;
    const warmup = ctx.quick ? 30 : 150;
    const piped = await measureLockstep(n, p, steps, warmup, ctx.tmpDir, true);
    const pipedEcho = await measureEcho(n, p, steps, warmup, true);
    ctx.log(
      `lockstep N=${n} P=${p} pipelined: ${Math.round(piped.rate)} agent-steps/s (echo ${Math.round(pipedEcho)})`,
    );
    figures.push(
      withLimit(
        {
          id: `lockstep.n${n}.p${p}.pipelined`,
          name: `${n} walkers in ${p} agent processes, opt-in pipeline (Prepare(k+1) behind Commit(k); relaxes Phase D)`,
          value: Math.round(piped.rate),
          unit: 'agent-steps/s',
          higherIsBetter: true,
          samples: steps,
        },
        { name: 'raw grpc-js stream echo, same pipelined messages per step', value: Math.round(pipedEcho) },
      ),
    );
    const peak = rows.reduce((m, r) => Math.max(m, r.workersPeakRssMiB), 0);
    figures.push(
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
    );
    figures.push(
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
    );
    return { figures, details: { rows, table: lockstepTable(rows) } };
  },
};

// Direct use: node --import tsx bench/suites/lockstep.ts [N,N,...] [P,P,...]
if (import.meta.url === `file://${process.argv[1]}`) {
  const agents = process.argv[2]?.split(',').map(Number);
  const processes = process.argv[3]?.split(',').map(Number);
  const rows = await benchLockstep({ agents, processes });
  process.stdout.write(`${lockstepTable(rows)}\n`);
}
