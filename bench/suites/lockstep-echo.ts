// The lockstep suite's transport limits: a raw echo driven with the same messages and the same
// dependent round trips per step as a lockstep run, over the transport a row uses — the socket
// wire to echo processes (unix rows, as detsim's own worker processes speak it) or plain
// worker_threads postMessage to echo threads (thread rows). Rate, per-step times and CPU, measured like the runs. NOT a worker, NOT a run.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Worker } from 'node:worker_threads';
import { connect } from 'node:net';
import { canonicalBytes } from '../../core/formats/canonical-json.js';
import { DEFAULT_MAX_MESSAGE_BYTES, SocketReader, socketMessageHead } from '../../core/protocol/index.js';
import { cpuBetween, cpuSnapshot, type CpuSpent } from '../lib/cpu.js';

/** The transports that have an echo: the inline ceiling has no transport to echo over. */
export type EchoTransport = 'unix' | 'thread';

export interface EchoMeasure {
  /** Agent-steps/s over the steps after the warm-up. */
  rate: number;
  /** Wall time of each step after the warm-up, ns. */
  stepNs: number[];
  cpu: CpuSpent;
}

/** One echo peer: a round trip of one body, its process id (none for a thread) and how to stop it. */
interface EchoPeer {
  pid: number | null;
  roundTrip(body: Buffer): Promise<unknown>;
  close(): Promise<void>;
}

/** Replies come back in order on one stream or port, so a FIFO of waiters pairs them. */
function fifo(): { wait(send: () => void): Promise<unknown>; deliver(reply: unknown): void } {
  const waiting: ((reply: unknown) => void)[] = [];
  return {
    wait: (send) =>
      new Promise((res) => {
        waiting.push(res);
        send();
      }),
    deliver: (reply) => waiting.shift()?.(reply),
  };
}

async function startSocketEcho(dir: string, i: number): Promise<EchoPeer> {
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
  const socket = connect(listen.slice('unix:'.length));
  await new Promise<void>((res, rej) => {
    socket.once('connect', res);
    socket.once('error', rej);
  });
  const reader = new SocketReader({ maxBodyBytes: DEFAULT_MAX_MESSAGE_BYTES, maxAttachmentBytes: 0 });
  const replies = fifo();
  socket.on('data', (chunk: Buffer) => {
    for (const m of reader.push(chunk)) replies.deliver(m);
  });
  socket.on('error', () => undefined); // ended by the kill below
  return {
    pid: child.pid ?? null,
    roundTrip: (body) => replies.wait(() => socket.write(socketMessageHead(body, 0))),
    close: async () => {
      socket.destroy();
      child.kill('SIGKILL');
    },
  };
}

/** An echo thread: every message posted to it comes straight back (structured clone, as postMessage does). */
const THREAD_ECHO = `const { parentPort } = require('node:worker_threads');
parentPort.on('message', (m) => parentPort.postMessage(m));`;

async function startThreadEcho(): Promise<EchoPeer> {
  const worker = new Worker(THREAD_ECHO, { eval: true });
  await new Promise<void>((res, rej) => {
    worker.once('online', res);
    worker.once('error', rej);
  });
  const replies = fifo();
  worker.on('message', (m) => replies.deliver(m));
  return {
    pid: null,
    roundTrip: (body) => replies.wait(() => worker.postMessage(body)),
    close: async () => void (await worker.terminate()),
  };
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

function advanceBody(all: string[], k: number): Buffer {
  return canonicalBytes({
    method: 'Environment.Advance',
    requestId: `req-${k + 2}`,
    scope: { sessionId: 'bench', epoch: 'e1', step: String(k) },
    params: {
      batchId: `batch-e1-${k}`,
      actions: all.map((agentId) => ({ agentId, portId: agentId, action: { move: 'north' } })),
    },
  });
}

/** walker ids grouped as the run packs them: ceil(agents / processes) per worker. */
function agentGroups(agents: number, processes: number): string[][] {
  const perWorker = Math.ceil(agents / processes);
  return Array.from({ length: processes }, (_, p) =>
    Array.from({ length: Math.min(perWorker, agents - p * perWorker) }, (_, j) => `walker-${p * perWorker + j}`),
  ).filter((g) => g.length > 0);
}

/**
 * The same messages and dependent round trips per step as a lockstep run: the P Prepares of step
 * k are awaited, then 1 Advance round trip (peer 0 stands for the environment worker), then the P
 * Commits. Pipelined (the opt-in run mode): each peer's Prepare(k+1) goes out right behind its
 * Commit(k) (none after the last step) and only the Commit replies are awaited before the next Advance.
 */
async function driveEcho(
  peers: EchoPeer[],
  agents: number,
  processes: number,
  steps: number,
  warmup: number,
  pipelined: boolean,
): Promise<EchoMeasure> {
  const groups = agentGroups(agents, processes);
  const all = groups.flat();
  const workerPids = peers.flatMap((p) => (p.pid === null ? [] : [p.pid]));
  const agentPeer = (p: number): EchoPeer => peers[p + 1]!;
  const ends: bigint[] = [];
  let cpuStart = cpuSnapshot(workerPids);
  let prepares = groups.map((g, p) => agentPeer(p).roundTrip(stepBodies(g, 0).prepare));
  for (let k = 0; k < steps; k++) {
    if (!pipelined && k > 0) prepares = groups.map((g, p) => agentPeer(p).roundTrip(stepBodies(g, k).prepare));
    await Promise.all(prepares);
    await peers[0]!.roundTrip(advanceBody(all, k));
    const commits: Promise<unknown>[] = [];
    prepares = [];
    groups.forEach((g, p) => {
      commits.push(agentPeer(p).roundTrip(stepBodies(g, k).commit));
      if (pipelined && k + 1 < steps) prepares.push(agentPeer(p).roundTrip(stepBodies(g, k + 1).prepare));
    });
    await Promise.all(commits);
    ends.push(process.hrtime.bigint());
    if (k === warmup - 1) cpuStart = cpuSnapshot(workerPids);
  }
  const cpu = cpuBetween(cpuStart, cpuSnapshot(workerPids));
  const stepNs = ends.slice(warmup).map((t, i) => Number(t - ends[warmup + i - 1]!));
  const ns = Number(ends[steps - 1]! - ends[warmup - 1]!);
  return { rate: ((steps - warmup) * agents * 1e9) / ns, stepNs, cpu };
}

/** The echo limit of a row: P agent peers and one environment peer over the row's transport. */
export async function measureEcho(
  agents: number,
  processes: number,
  steps: number,
  warmup: number,
  pipelined = false,
  transport: EchoTransport = 'unix',
): Promise<EchoMeasure> {
  if (warmup < 1 || warmup >= steps) throw new Error(`echo needs 1 <= warmup < steps (got ${warmup} of ${steps})`);
  const dir = mkdtempSync('/tmp/ds-echo-');
  const peers: EchoPeer[] = [];
  try {
    const started = await Promise.allSettled(
      Array.from({ length: processes + 1 }, (_, i) =>
        transport === 'unix' ? startSocketEcho(dir, i) : startThreadEcho(),
      ),
    );
    for (const s of started) if (s.status === 'fulfilled') peers.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    return await driveEcho(peers, agents, processes, steps, warmup, pipelined);
  } finally {
    await Promise.all(peers.map((p) => p.close()));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What each echo is, as the limit's name in the receipt. */
export function echoName(transport: EchoTransport, pipelined: boolean): string {
  const what = transport === 'unix' ? 'raw socket-wire echo' : 'raw worker_threads postMessage echo';
  return `${what}, same ${pipelined ? 'pipelined ' : ''}messages per step`;
}
