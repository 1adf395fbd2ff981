// Big-state checkpoint script (issue 16): a lif group whose states add up to --gib GiB (default
// 4.5: > 4 GiB in total, and with --agents 2 one payload > 2 GiB), captured (co-located TypeScript
// workers write into the envelope file), committed, verified and restored on real worker
// processes, with the coordinator's peak RSS sampled beside each phase. A developer script with
// no limit and no receipt: NOT a bench suite and NOT a test (the bounded-memory checks at CI size
// are test/checkpoint/capture-file.test.ts).
//
//   node --import tsx bench/big-state.ts --gib 0.25            # a quick run of the same path
//   node --import tsx bench/big-state.ts --gib 4.5 --agents 2  # the big case (needs ~3× the state in RAM
//                                                              # across the workers, and the disk: see df)
import { createHash } from 'node:crypto';
import { statfsSync } from 'node:fs';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { captureGroup } from '../coordinator/checkpoint/capture.js';
import { openCheckpointing, storeDirOf } from '../coordinator/checkpoint/checkpointing.js';
import { CheckpointGroup } from '../coordinator/checkpoint/group.js';
import { restoreGroup } from '../coordinator/checkpoint/restore.js';
import { parseConfigText, resolveConfig } from '../coordinator/config.js';
import { launchFleet } from '../coordinator/launcher.js';
import { Lockstep } from '../coordinator/lockstep.js';

const BYTES_PER_NEURON = 12;
const { values } = parseArgs({
  options: {
    gib: { type: 'string', default: '4.5' },
    agents: { type: 'string', default: '2' },
    dir: { type: 'string' },
  },
});
const gib = Number(values.gib);
const agents = Number(values.agents);
const stateBytes = gib * 2 ** 30;
const neurons = Math.ceil(stateBytes / agents / BYTES_PER_NEURON);
const base = values.dir ?? tmpdir();
const free = (() => {
  const s = statfsSync(base);
  return s.bavail * s.bsize;
})();
// The envelope, its temp and the raw state in the workers' memory: ask for 2.5× the state on disk.
if (free < stateBytes * 2.5) {
  console.log(
    `not enough disk under ${base}: ${(free / 2 ** 30).toFixed(1)} GiB free, want ${(stateBytes * 2.5) / 2 ** 30} GiB`,
  );
  process.exit(2);
}

/** The restore limit: read the file sequentially (8 MiB reads, no size limit) and SHA-256 it once. */
async function rawReadSha256(path: string): Promise<number> {
  const t = performance.now();
  const fh = await open(path, 'r');
  try {
    const hash = createHash('sha256');
    const buf = Buffer.allocUnsafe(8 * 1024 * 1024);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
    }
    hash.digest();
  } finally {
    await fh.close();
  }
  return (performance.now() - t) / 1000;
}

let peakRss = 0;
const seconds: Record<string, number> = {};
const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 50);
const phase = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
  peakRss = process.memoryUsage().rss;
  const t = performance.now();
  const out = await fn();
  const s = (performance.now() - t) / 1000;
  seconds[name] = s;
  console.log(
    `${name.padEnd(22)} ${s.toFixed(1).padStart(7)} s  ${(stateBytes / 1e6 / s).toFixed(0).padStart(6)} MB/s  coordinator peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB`,
  );
  return out;
};

const cfg = parseConfigText(readFileSync('examples/lif-pair.yaml', 'utf8'), 'lif-pair.yaml') as Record<string, any>;
cfg.agents = Array.from({ length: agents }, (_, i) => ({
  ...cfg.agents[i % cfg.agents.length],
  id: `lif-${i}`,
  params: { neurons },
}));
cfg.deadlines = { startupMs: 600_000, stepMs: 3_600_000, captureMs: 3_600_000 };
const plan = resolveConfig(cfg, { baseDir: process.cwd() });
const runDir = mkdtempSync(join(base, 'detsim-big-state-'));
const logger = pino({ level: 'silent' });
console.log(`${agents} lif agents × ${neurons} neurons ≈ ${gib} GiB of state; run dir ${runDir}`);
const fleet = await launchFleet(plan, { logger, storeDir: storeDirOf(runDir) });
try {
  const lockstep = new Lockstep(plan, fleet, {
    dispatch: 'concurrent',
    epoch: 'e1',
    startedAt: process.hrtime.bigint(),
    logger,
  });
  await phase('initialize', () => lockstep.initialize());
  const ck = await openCheckpointing(runDir, { maxQueuedBytes: 1024 * 1024 * 1024 });
  const group = new CheckpointGroup({ plan, fleet, lockstep, logger, writer: ck.writer, ledger: ck.ledger });
  await phase('step', () => group.step());
  const rec = await phase('capture', () => captureGroup(group, { checkpointId: 'ckpt-e1-1' }));
  const outcome = await phase('commit (durable)', () => rec.ticket.wait());
  console.log(`outcome ${outcome.kind}; envelope ${(rec.byteLength / 2 ** 30).toFixed(2)} GiB`);
  await phase('verify', () => ck.store.verify());
  await phase('restore', () => restoreGroup(group, { store: ck.store }, { epoch: 'e2' }));
  // The limit in the same run, on the same (page-cached) file: restore ÷ raw read + one SHA-256.
  const rawS = await rawReadSha256(join(storeDirOf(runDir), ck.store.highWater()!.file));
  console.log(
    `raw read + SHA-256 ${rawS.toFixed(2)} s; restore ${(rawS / seconds.restore!).toFixed(2)}×, verify ${(rawS / seconds.verify!).toFixed(2)}× of it`,
  );
  group.resume();
  await phase('step after restore', () => group.step());
  await ck.writer.drain();
} catch (e) {
  console.log(`failed: ${(e as Error).message}`);
  process.exitCode = 1;
} finally {
  clearInterval(sampler);
  await fleet.shutdown('run-complete', 5000);
  rmSync(runDir, { recursive: true, force: true });
}
