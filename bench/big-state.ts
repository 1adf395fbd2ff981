// Big-state checkpoint script (issue 16): a group of `ballast` agents (bench/models/ballast.ts)
// whose states add up to --total (default 0.25 GiB) with no payload above --max-payload, captured
// (co-located workers write into the envelope file; with --streamed they are taken as lacking
// store-files-v1 for the capture and send their payloads through the coordinator), committed durably, verified and restored on real
// worker processes, then stepped once more. With --runtime python or rust the agents are the
// built-in lif on workers of that language instead (12 bytes of state per neuron). Prints each phase's time, MB/s, the
// coordinator's peak RSS, and the ratios against a raw write + fsync / read + SHA-256 of the same
// byte count on the same disk. A developer script with no limit and no receipt: NOT a bench suite
// and NOT a test (the same path at CI size is test/checkpoint/big-capture.test.ts).
//
//   node --import tsx bench/big-state.ts                                   # a quick run (0.25 GiB)
//   node --import tsx bench/big-state.ts --total 5GiB --max-payload 2.5GiB # the big case: > 4 GiB in
//         total, one payload > 2 GiB (the workers hold ~2.3× the state in RAM; the disk needs ~2.5×)
//   node --import tsx bench/big-state.ts --runtime python [--streamed]    # Python (or Rust) workers
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statfsSync } from 'node:fs';
import { writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { captureGroup } from '../coordinator/checkpoint/capture.js';
import { openCheckpointing, storeDirOf } from '../coordinator/checkpoint/checkpointing.js';
import { CheckpointGroup } from '../coordinator/checkpoint/group.js';
import { restoreGroup } from '../coordinator/checkpoint/restore.js';
import { parseConfigText, resolveConfig } from '../coordinator/config.js';
import { launchFleet } from '../coordinator/launch/launcher.js';
import { Lockstep } from '../coordinator/session/lockstep.js';
import { CAPABILITIES } from '../core/protocol/index.js';
import { MAX_BALLAST_BYTES } from './models/ballast.js';

/** "5GiB", "2.5GiB", "64MiB", "4096" → bytes. */
function bytesOf(text: string): number {
  const m = /^([0-9.]+)\s*(GiB|MiB|KiB|B)?$/.exec(text);
  if (!m) throw new Error(`not a size: ${JSON.stringify(text)} (e.g. 5GiB, 2.5GiB, 64MiB)`);
  const unit = { GiB: 2 ** 30, MiB: 2 ** 20, KiB: 2 ** 10, B: 1 }[m[2] ?? 'B']!;
  return Math.floor(Number(m[1]) * unit);
}

/** Payload sizes: as many --max-payload agents as fit, then the remainder (at least one agent). */
function agentSizes(total: number, maxPayload: number): number[] {
  const sizes: number[] = [];
  for (let left = total; left > 0; left -= maxPayload) sizes.push(Math.min(left, maxPayload));
  return sizes;
}

const { values } = parseArgs({
  options: {
    total: { type: 'string', default: '0.25GiB' },
    'max-payload': { type: 'string', default: '0.125GiB' },
    dir: { type: 'string' },
    runtime: { type: 'string', default: 'typescript' },
    streamed: { type: 'boolean', default: false },
  },
});
const runtime = values.runtime!;
if (!['typescript', 'python', 'rust'].includes(runtime)) {
  console.log(`--runtime ${JSON.stringify(runtime)}: one of typescript, python, rust`);
  process.exit(2);
}
/** The built-in lif holds a f32 baseline and a f64 membrane per neuron. */
const LIF_BYTES_PER_NEURON = 12;
const total = bytesOf(values.total!);
const maxPayload = Math.min(bytesOf(values['max-payload']!), MAX_BALLAST_BYTES);
const sizes = agentSizes(total, maxPayload);
const base = values.dir ?? tmpdir();
const GiB = (n: number): string => `${(n / 2 ** 30).toFixed(2)} GiB`;
const free = (() => {
  const s = statfsSync(base);
  return s.bavail * s.bsize;
})();
// The committed envelope, a raw-baseline file of the same size, and slack.
if (free < total * 2.5) {
  console.log(`not enough disk under ${base}: ${GiB(free)} free, want ${GiB(total * 2.5)}`);
  process.exit(2);
}

let peakRss = 0;
const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 20);
const seconds: Record<string, number> = {};
const peaks: Record<string, number> = {};
const phase = async <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
  peakRss = process.memoryUsage().rss;
  const t = performance.now();
  const out = await fn();
  const s = (performance.now() - t) / 1000;
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  seconds[name] = s;
  peaks[name] = peakRss;
  console.log(
    `${name.padEnd(26)} ${s.toFixed(1).padStart(7)} s  ${(total / 1e6 / s).toFixed(0).padStart(6)} MB/s  coordinator peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB`,
  );
  return out;
};

/** The raw limits on the same disk: write + fsync, then read + SHA-256, of `total` bytes in 8 MiB blocks. */
function rawBaseline(dir: string): void {
  const path = join(dir, 'raw-baseline.bin');
  const block = Buffer.alloc(8 * 2 ** 20, 0x5a);
  let t = performance.now();
  const w = openSync(path, 'w');
  for (let at = 0; at < total; at += block.byteLength) writeSync(w, block, 0, Math.min(block.byteLength, total - at));
  fsyncSync(w);
  closeSync(w);
  seconds['raw write + fsync'] = (performance.now() - t) / 1000;
  t = performance.now();
  const r = openSync(path, 'r');
  const hash = createHash('sha256');
  for (let n; (n = readSync(r, block, 0, block.byteLength, null)) > 0;) hash.update(block.subarray(0, n));
  closeSync(r);
  hash.digest();
  seconds['raw read + SHA-256'] = (performance.now() - t) / 1000;
  rmSync(path);
  for (const k of ['raw write + fsync', 'raw read + SHA-256'])
    console.log(
      `${k.padEnd(26)} ${seconds[k]!.toFixed(1).padStart(7)} s  ${(total / 1e6 / seconds[k]!).toFixed(0).padStart(6)} MB/s`,
    );
}

const cfg = parseConfigText(readFileSync('examples/lif-pair.yaml', 'utf8'), 'lif-pair.yaml') as Record<string, any>;
const model = resolve('bench/models/ballast.ts');
cfg.agents = sizes.map((bytes, i) =>
  runtime === 'typescript'
    ? { id: `ballast-${i}`, model, params: { bytes }, actionFields: ['move'] }
    : {
        id: `lif-${i}`,
        model: 'lif',
        params: { neurons: Math.ceil(bytes / LIF_BYTES_PER_NEURON) },
        actionFields: ['move'],
      },
);
cfg.workers = { ...cfg.workers, runtime, transport: 'unix' }; // worker processes, as the figures were measured
cfg.deadlines = { startupMs: 600_000, stepMs: 3_600_000, captureMs: 3_600_000 };
const plan = resolveConfig(cfg, { baseDir: process.cwd() });
const runDir = mkdtempSync(join(base, 'detsim-big-state-'));
const logger = pino({ level: 'silent' });
console.log(
  `${sizes.length} ${runtime === 'typescript' ? 'ballast' : 'lif'} agents of ${sizes.map(GiB).join(', ')} = ${GiB(total)} of state on ${runtime} workers, payloads ${values.streamed ? 'streamed through the coordinator' : 'written into the envelope file'}; run dir ${runDir}`,
);
const fleet = await launchFleet(plan, { logger, storeDir: storeDirOf(runDir) });
// --streamed: the workers keep their store, but for the capture they are taken as lacking
// store-files-v1, so their capture payloads travel through the coordinator; the restore reads the
// file as usual (the capability is given back before it).
const offered = new Map(fleet.all().map((w) => [w, w.hello.capabilities]));
if (values.streamed)
  for (const w of fleet.all()) w.hello.capabilities = w.hello.capabilities.filter((c) => c !== CAPABILITIES.storeFiles);
let failed = false;
const step = async <T>(name: string, fn: () => Promise<T> | T): Promise<T | undefined> => {
  if (failed) return undefined;
  try {
    return await phase(name, fn);
  } catch (e) {
    failed = true;
    console.log(`${name}: FAILED: ${(e as Error).message}`);
    return undefined;
  }
};
try {
  rawBaseline(runDir);
  const lockstep = new Lockstep(plan, fleet, {
    dispatch: 'concurrent',
    epoch: 'e1',
    startedAt: process.hrtime.bigint(),
    logger,
  });
  await step('initialize', () => lockstep.initialize());
  const ck = await openCheckpointing(runDir, { maxQueuedBytes: 1024 * 1024 * 1024 });
  const group = new CheckpointGroup({ plan, fleet, lockstep, logger, writer: ck.writer, ledger: ck.ledger });
  await step('step', () => group.step());
  const rec = await step('capture', () => captureGroup(group, { checkpointId: 'ckpt-e1-1' }));
  const outcome = rec && (await step('commit (durable)', () => rec.ticket.wait()));
  if (rec && outcome) {
    console.log(`outcome ${outcome.kind}; envelope ${GiB(rec.byteLength)}`);
    if (outcome.kind !== 'Committed') failed = true;
    seconds['capture → durable'] = seconds.capture! + seconds['commit (durable)']!;
  }
  const report = await step('verify', () => ck.store.verify());
  if (report && !report.ok) {
    // A refused generation is not a verify time: no ratio for it, and the check that failed is named.
    delete seconds.verify;
    for (const g of report.generations.filter((x) => !x.ok))
      console.log(`verify: FAILED: ${g.checkpointId}: ${g.check} [${g.reason}] ${g.message}`);
    failed = true;
  }
  for (const [w, capabilities] of offered) w.hello.capabilities = capabilities;
  await step('restore', () => restoreGroup(group, { store: ck.store }, { epoch: 'e2' }));
  if (!failed) group.resume();
  await step('step after restore', () => group.step());
  await ck.writer.drain();
  const ratio = (limit: string, ours: string): string =>
    seconds[ours] === undefined ? 'not measured' : `${(seconds[limit]! / seconds[ours]!).toFixed(2)}×`;
  console.log(`capture → durable vs raw write + fsync: ${ratio('raw write + fsync', 'capture → durable')}`);
  console.log(`verify vs raw read + SHA-256: ${ratio('raw read + SHA-256', 'verify')}`);
  console.log(`restore vs raw read + SHA-256: ${ratio('raw read + SHA-256', 'restore')}`);
  const peak = Math.max(...Object.values(peaks));
  console.log(`coordinator peak RSS over all phases: ${(peak / 2 ** 20).toFixed(0)} MiB (state ${GiB(total)})`);
} finally {
  clearInterval(sampler);
  if (failed) process.exitCode = 1;
  await fleet.shutdown('run-complete', 5000);
  rmSync(runDir, { recursive: true, force: true });
}
