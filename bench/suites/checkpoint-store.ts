// Suite `checkpoint-store`: the STATE-01 durable commit of a 256 MiB FLYSESS1 envelope beside raw
// write+fsync of the same bytes, and restore (read + all checks) beside raw read + one SHA-256,
// interleaved in the same run. NOT a correctness test (test/store/ is): only rates and gaps.
import { createHash } from 'node:crypto';
import { open, readFile, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { encodeEnvelopeParts } from '../../core/formats/envelope.js';
import { sha256Hex } from '../../core/formats/canonical-json.js';
import { Xorshift32 } from '../../core/formats/xorshift.js';
import { WRITE_SLICE } from '../../coordinator/store/durable-fs.js';
import { CheckpointStore, generationIdentityOf } from '../../coordinator/store/store.js';
import { withLimit, type BenchSuite, type Figure } from '../lib/suite.js';

const MiB = 1024 * 1024;
const MB = 1e6;

/** Deterministic incompressible-looking bytes: one Xorshift32 MiB, tiled with a varying first word. */
function filler(bytes: number, seed: number): Buffer {
  const rng = new Xorshift32(seed);
  const block = Buffer.alloc(MiB);
  for (let i = 0; i < MiB; i += 4) block.writeUInt32LE(rng.nextUint(), i);
  const out = Buffer.allocUnsafe(bytes);
  for (let at = 0; at < bytes; at += MiB) {
    block.copy(out, at, 0, Math.min(MiB, bytes - at));
    if (at + 4 <= bytes) out.writeUInt32LE(rng.nextUint(), at);
  }
  return out;
}

function checkpoint(checkpointId: string, payloads: Buffer[]) {
  const D = (s: string): string => sha256Hex(s);
  const agents = payloads.map((_, i) => ({
    agentId: `fly-${i}`,
    profileDigest: D(`profile-${i}`),
    seed: i + 1,
    brainTicks: '1000',
    payload: `agent-fly-${i}`,
  }));
  const manifest = {
    envelopeVersion: 1,
    checkpointId,
    sourceScope: { sessionId: 'bench', epoch: 'e1', step: '1000' },
    episodeId: 'episode-1',
    worldTime: { numerator: '1000000000', denominator: '1' },
    schedulerId: 'lockstep-v1',
    compositionDigest: D('composition'),
    portMap: agents.map((a, i) => ({ portId: `port-${i}`, agentId: a.agentId })),
    compatibility: {
      backendDigest: D('b'),
      contentDigest: D('c'),
      patchDigest: D('p'),
      controllerDigest: D('ctl'),
      parserDigest: D('parser'),
      stateFormatId: 'flysess-1',
    },
    agents,
    coordinator: {},
    environment: { workerId: 'env', payload: 'world' },
    helperState: [],
  };
  const encoded = encodeEnvelopeParts(manifest, [
    { name: 'world', bytes: Buffer.from('world') },
    ...payloads.map((bytes, i) => ({ name: `agent-fly-${i}`, bytes })),
  ]);
  return { identity: generationIdentityOf(encoded.manifest), encoded };
}

/**
 * The floor for a durable commit: write the same bytes to a fresh file, FileHandle.sync(), close.
 * Written in the store's slice size, so the figure isolates the commit protocol (temp, rename,
 * directory fsyncs, manifest) from the choice of write size.
 */
async function rawWriteSync(path: string, parts: readonly Uint8Array[]): Promise<void> {
  const fh = await open(path, 'w');
  try {
    let pos = 0;
    for (const p of parts) {
      for (let at = 0; at < p.byteLength;) {
        const { bytesWritten } = await fh.write(p, at, Math.min(WRITE_SLICE, p.byteLength - at), pos);
        at += bytesWritten;
        pos += bytesWritten;
      }
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * The longest event-loop delay while `work` runs: what a step loop would wait at most. Sampled by
 * monitorEventLoopDelay (a libuv timer), not by a spinning setImmediate loop, which would steal the
 * CPU the writes need and slow down what it measures.
 */
async function longestGapMs<T>(work: () => Promise<T>): Promise<{ result: T; gapMs: number; p99Ms: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  try {
    const result = await work();
    return { result, gapMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6 };
  } finally {
    h.disable();
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

export const checkpointStore: BenchSuite = {
  name: 'checkpoint-store',
  description:
    'STATE-01 durable commit of a 256 MiB envelope vs raw write+fsync of the same bytes (also with rehash); restore (read + FLYSESS1 checks + record) vs raw read + SHA-256',
  async run(ctx) {
    const totalMiB = ctx.quick ? 32 : 256;
    const reps = ctx.quick ? 2 : 5;
    const agentCount = 4;
    ctx.log(`checkpoint-store: building a ${totalMiB} MiB envelope (${agentCount} agent payloads)`);
    const payloads = Array.from({ length: agentCount }, (_, i) => filler((totalMiB * MiB) / agentCount, 0x1000 + i));
    const c = checkpoint('ckpt-1', payloads);
    const bytes = c.encoded.byteLength;
    const rawPath = join(ctx.tmpDir, 'raw-write.bin');
    const commitS: number[] = [];
    const rehashS: number[] = [];
    const rawS: number[] = [];
    const gaps: number[] = [];
    const rawGaps: number[] = [];
    // One encoding, a fresh store directory per commit (same checkpoint id), removed untimed afterwards,
    // as the raw baseline's file is: every timed commit starts from the same state.
    const p99s: Record<string, number[]> = { raw: [], commit: [], rehash: [] };
    const commitInto = async (name: string, rehash: boolean): Promise<{ seconds: number; gapMs: number }> => {
      const store = await CheckpointStore.open(join(ctx.tmpDir, name), { create: true, rehash });
      const t = performance.now();
      const { gapMs, p99Ms } = await longestGapMs(() => store.commit(c.identity, c.encoded));
      p99s[rehash ? 'rehash' : 'commit']!.push(Math.round(p99Ms * 10) / 10);
      return { seconds: (performance.now() - t) / 1000, gapMs };
    };
    for (let r = 0; r < reps; r++) {
      // Interleave the floor and the store so drift on a shared machine hits both alike.
      ctx.log(`checkpoint-store: rep ${r + 1}/${reps}: raw write+fsync, durable commit, durable commit re-hashing`);
      const t = performance.now();
      const rawRun = await longestGapMs(() => rawWriteSync(rawPath, c.encoded.parts));
      rawS.push((performance.now() - t) / 1000);
      rawGaps.push(rawRun.gapMs);
      p99s.raw!.push(Math.round(rawRun.p99Ms * 10) / 10);
      await unlink(rawPath);
      const plain = await commitInto(`store-${r}`, false);
      commitS.push(plain.seconds);
      gaps.push(plain.gapMs);
      const rehashed = await commitInto(`store-rehash-${r}`, true);
      rehashS.push(rehashed.seconds);
      gaps.push(rehashed.gapMs);
      await rm(join(ctx.tmpDir, `store-rehash-${r}`), { recursive: true, force: true });
      if (r < reps - 1) await rm(join(ctx.tmpDir, `store-${r}`), { recursive: true, force: true });
    }
    const dir = join(ctx.tmpDir, `store-${reps - 1}`);
    const store = await CheckpointStore.open(dir);
    const lastId = c.identity.checkpointId;

    const loadS: number[] = [];
    const rawReadS: number[] = [];
    const genPath = join(dir, `${lastId}.flysess`);
    for (let r = 0; r < reps; r++) {
      ctx.log(`checkpoint-store: rep ${r + 1}/${reps}: raw read + SHA-256, then restore read + verify`);
      let t = performance.now();
      const raw = await readFile(genPath);
      createHash('sha256').update(raw).digest('hex');
      rawReadS.push((performance.now() - t) / 1000);
      t = performance.now();
      const loaded = await store.load(lastId);
      loadS.push((performance.now() - t) / 1000);
      if (loaded.envelope.payloads.length !== agentCount + 1) throw new Error('restore read back the wrong envelope');
    }

    const mb = bytes / MB;
    const figures: Figure[] = [
      withLimit(
        {
          id: 'commit.durable',
          name: `durable commit of a ${totalMiB} MiB envelope (temp write, fsync, rename, dir fsync, manifest temp+fsync+rename+dir fsync; digest from the encoder)`,
          value: mb / median(commitS),
          unit: 'MB/s',
          higherIsBetter: true,
          samples: reps,
          note: 'target ≥ 0.85 of the limit',
        },
        { name: 'raw write (4 MiB writes) + fsync of the same bytes', value: mb / median(rawS) },
      ),
      withLimit(
        {
          id: 'commit.durable-rehash',
          name: `the same commit with rehash: true (SHA-256 of the bytes while writing, beside the encoder's digest)`,
          value: mb / median(rehashS),
          unit: 'MB/s',
          higherIsBetter: true,
          samples: reps,
        },
        { name: 'raw write (4 MiB writes) + fsync of the same bytes', value: mb / median(rawS) },
      ),
      withLimit(
        {
          id: 'restore.verify',
          name: `restore read of the ${totalMiB} MiB generation (readFile, seven FLYSESS1 checks, envelope digest, record)`,
          value: mb / median(loadS),
          unit: 'MB/s',
          higherIsBetter: true,
          samples: reps,
          note: 'target ≥ 0.70 of the limit',
        },
        { name: 'raw readFile + one SHA-256 of the same bytes', value: mb / median(rawReadS) },
      ),
      withLimit(
        {
          id: 'commit.loop-gap',
          name: 'longest event-loop delay during a durable commit (what a step loop waits at most)',
          value: Math.max(...gaps),
          unit: 'ms',
          higherIsBetter: false,
          samples: reps * 2,
        },
        // The same probe while the main thread does nothing but await a raw write: scheduling noise of a shared machine.
        { name: 'the same probe during raw write + fsync', value: Math.max(...rawGaps) },
      ),
    ];
    // Reps are interleaved, so the per-rep ratios pair runs that saw the same machine load.
    const paired = (num: number[], den: number[]): number[] => num.map((x, i) => Math.round((den[i]! / x) * 100) / 100);
    return {
      figures,
      details: {
        envelopeBytes: bytes,
        reps,
        loopDelayP99Ms: p99s,
        pairedCommitRatios: paired(commitS, rawS),
        pairedRehashRatios: paired(rehashS, rawS),
        pairedRestoreRatios: paired(loadS, rawReadS),
        commitSeconds: commitS,
        rehashCommitSeconds: rehashS,
        rawWriteSeconds: rawS,
        loadSeconds: loadS,
        rawReadSeconds: rawReadS,
      },
    };
  },
};
