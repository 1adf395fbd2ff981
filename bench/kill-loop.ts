// The SIGKILL loop: a child process writes checkpoints continuously (writer queue + store + ledger)
// and is killed at seeded random moments; after each kill the store must verify and the ledger's
// chain must hold. Usage: node --import tsx bench/kill-loop.ts [--iterations N] [--seed S] [--dir D]
// (the CI test runs a few iterations through runKillLoop). Not a throughput benchmark.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Xorshift32 } from '../core/formats/xorshift.js';
import { Ledger, ledgerEventOfWriter, verifyLedger } from '../coordinator/store/ledger.js';
import { CheckpointStore } from '../coordinator/store/store.js';
import { CheckpointWriter, WriterBusyError } from '../coordinator/store/writer.js';
import { makeCheckpoint } from '../test/store/helpers.js';
import { flagValue, reportLoop, startedAsScript } from './lib/loop-report.js';

const SELF = fileURLToPath(import.meta.url);

export interface KillLoopOptions {
  readonly runDir: string;
  readonly iterations: number;
  readonly seed?: number;
  /** Agent payload size per checkpoint (default 256 KiB). */
  readonly payloadBytes?: number;
  readonly minDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly log?: (line: string) => void;
}

export interface KillIteration {
  readonly delayMs: number;
  /** Outcomes the child reported before it died. */
  readonly committedSeen: number;
  readonly highWater: string | null;
  readonly generations: number;
  readonly ledgerLines: number;
}

/** Child: checkpoint forever, printing `ready` once and `committed <id>` per acknowledged save. */
async function child(runDir: string, payloadBytes: number): Promise<void> {
  const store = await CheckpointStore.open(join(runDir, 'checkpoints'), { create: true, keep: 3 });
  const ledger = await Ledger.open(runDir);
  const writer = new CheckpointWriter(store, {
    onEvent: (e) => ledger.append(ledgerEventOfWriter(e)).then(() => undefined),
  });
  let next = Math.max(0, ...store.generations().map((g) => Number(g.boundary))) + 1;
  await ledger.append({ event: 'run', sessionId: 'demo', epoch: 'e1', detail: { resumedAt: String(next) } });
  process.stdout.write('ready\n');
  for (;;) {
    let reservation;
    try {
      reservation = writer.reserve();
    } catch (e) {
      if (!(e instanceof WriterBusyError)) throw e;
      await new Promise((r) => setTimeout(r, 1)); // BUSY: keep "stepping", try again later
      continue;
    }
    const n = next++;
    const c = makeCheckpoint(`ckpt-${n}`, n, { payloadBytes });
    const ticket = writer.submit(reservation, { identity: c.identity, envelope: c.encoded, replaceable: n % 2 === 0 });
    void ledger.append({
      event: 'captured',
      checkpointId: c.identity.checkpointId,
      boundary: c.identity.boundary,
      epoch: 'e1',
    });
    void ticket.wait().then((o) => {
      if (o.kind === 'Committed') process.stdout.write(`committed ${o.checkpointId}\n`);
    });
  }
}

function spawnChild(
  runDir: string,
  payloadBytes: number,
): { ready: Promise<void>; committed: () => number[]; kill: () => Promise<void> } {
  const proc = spawn(process.execPath, ['--import', 'tsx', SELF, '--child', runDir, String(payloadBytes)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let resolveReady!: () => void;
  let rejectReady!: (e: Error) => void;
  const ready = new Promise<void>((res, rej) => ((resolveReady = res), (rejectReady = rej)));
  proc.stdout.on('data', (d) => {
    out += d;
    if (out.includes('ready\n')) resolveReady();
  });
  proc.stderr.on('data', (d) => (err += d));
  const closed = new Promise<void>((res) => proc.on('close', () => res()));
  proc.on('close', (code, signal) =>
    rejectReady(new Error(`kill-loop child exited early (code ${code}, signal ${signal}): ${err.trim()}`)),
  );
  return {
    ready,
    committed: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('committed '))
        .map((l) => Number(l.slice('committed ckpt-'.length))),
    kill: async () => {
      proc.kill('SIGKILL');
      await closed;
      if (err.trim()) throw new Error(`kill-loop child wrote to stderr: ${err.trim()}`);
    },
  };
}

/** Run the loop; throws at the first iteration whose store or ledger does not verify. */
export async function runKillLoop(options: KillLoopOptions): Promise<KillIteration[]> {
  const rng = new Xorshift32(options.seed ?? 0x5eed);
  const min = options.minDelayMs ?? 50;
  const max = options.maxDelayMs ?? 600;
  const payloadBytes = options.payloadBytes ?? 256 * 1024;
  const results: KillIteration[] = [];
  for (let i = 0; i < options.iterations; i++) {
    const delayMs = min + Math.floor(rng.nextF64() * (max - min));
    const proc = spawnChild(options.runDir, payloadBytes);
    await proc.ready;
    await new Promise((r) => setTimeout(r, delayMs));
    await proc.kill();
    const store = await CheckpointStore.open(join(options.runDir, 'checkpoints'), { keep: 3 });
    const report = await store.verify();
    const bad = report.generations.filter((g) => !g.ok);
    if (bad.length > 0)
      throw new Error(
        `iteration ${i}: store verify failed: ${bad.map((g) => `${g.checkpointId} ${g.check}: ${g.message}`).join('; ')}`,
      );
    // Durability: every save acknowledged as Committed before the kill is still committed.
    const acked = proc.committed();
    const newestAcked = Math.max(0, ...acked);
    const hw = store.highWater();
    if (newestAcked > 0 && (hw === null || Number(hw.boundary) < newestAcked)) {
      throw new Error(
        `iteration ${i}: ckpt-${newestAcked} was acknowledged as committed but the store's high-water is ${hw?.checkpointId ?? 'none'}`,
      );
    }
    const ledger = await verifyLedger(options.runDir);
    if (!ledger.ok)
      throw new Error(
        `iteration ${i}: ledger verify failed at line ${ledger.problem!.line}: ${ledger.problem!.message}`,
      );
    const it: KillIteration = {
      delayMs,
      committedSeen: acked.length,
      highWater: store.highWater()?.checkpointId ?? null,
      generations: store.generations().length,
      ledgerLines: ledger.lines,
    };
    options.log?.(
      `iteration ${i + 1}/${options.iterations}: killed after ${delayMs} ms, ${it.committedSeen} commits acknowledged, high-water ${it.highWater}, ${it.generations} generations verified, ledger ${it.ledgerLines} lines intact`,
    );
    results.push(it);
  }
  return results;
}

const args = process.argv.slice(2);
if (startedAsScript(import.meta.url)) {
  if (args[0] === '--child') {
    await child(args[1]!, Number(args[2]));
  } else {
    const keep = flagValue('--dir');
    const runDir = keep ?? (await mkdtemp(join(tmpdir(), 'detsim-kill-loop-')));
    const iterations = Number(flagValue('--iterations') ?? 50);
    const seed = Number(flagValue('--seed') ?? 0x5eed);
    // runKillLoop throws at the first kill after which the store or ledger does not verify.
    await reportLoop(
      'kill-loop',
      () => runKillLoop({ runDir, iterations, seed, log: (l) => process.stdout.write(`${l}\n`) }),
      {
        unit: 'SIGKILLs',
        failed: () => false,
        facts: (its) => [`${its.reduce((a, r) => a + r.committedSeen, 0)} commits acknowledged`],
        passNote: 'store and ledger verified after every kill',
      },
    );
    if (keep === undefined) await rm(runDir, { recursive: true, force: true });
  }
}
