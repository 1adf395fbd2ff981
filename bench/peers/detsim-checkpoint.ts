// The detsim side of the safetensors comparison: a durable CheckpointStore commit of a FLYSESS1
// envelope holding the given state (encode + the store's whole commit sequence), then the store's
// load (read + every check) + a check that the state payload digest is the one saved.
// NOT the checkpoint store's own bench (bench/suites/checkpoint*) and not a peer.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { encodeEnvelopeParts, type EnvelopePayloadInput } from '../../core/formats/envelope.js';
import { Xorshift32 } from '../../core/formats/xorshift.js';
import { CheckpointStore, generationIdentityOf } from '../../coordinator/store/store.js';
import { PEERS_DIR } from './python-env.js';

const FIXTURE = resolve(PEERS_DIR, '..', '..', 'fixtures', 'reference', 'checkpoint-envelope.json');
/** The payload of the fixture's one agent: the bench puts the big state there. */
const STATE_PAYLOAD = 'agent-fly-a';

export interface TimingSummary {
  samples: number[];
  medianSeconds: number;
  /** State bytes (not file bytes) per second, in 10^6 bytes: the same measure the peer reports. */
  mbPerSec: number;
}

export interface DetsimCheckpointFigures {
  method: string;
  stateBytes: number;
  fileBytes: number;
  stateSha256: string;
  save: TimingSummary;
  restoreVerify: TimingSummary;
}

export function median(samples: readonly number[]): number {
  const s = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function summarize(samples: number[], bytes: number): TimingSummary {
  const m = median(samples);
  return { samples, medianSeconds: m, mbPerSec: bytes / 1e6 / m };
}

/** Deterministic incompressible state bytes (Xorshift32 words), like the peer's seeded doubles. */
export function makeState(bytes: number, seed = 42): Uint8Array {
  if (bytes <= 0 || bytes % 8 !== 0) throw new Error(`state size ${bytes} must be a positive multiple of 8`);
  const words = new Uint32Array(bytes / 4);
  const rng = new Xorshift32(seed);
  for (let i = 0; i < words.length; i++) words[i] = rng.nextUint();
  return new Uint8Array(words.buffer);
}

interface FixturePayload {
  name: string;
  base64: string;
}

/** The reference fixture's manifest and small payloads, with the agent payload replaced by `state`. */
function groupOf(state: Uint8Array): { manifest: Record<string, unknown>; payloads: EnvelopePayloadInput[] } {
  const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as {
    manifest: Record<string, unknown>;
    payloads: FixturePayload[];
  };
  const { payloads: _listed, ...manifest } = fixture.manifest;
  const payloads = fixture.payloads.map((p) => ({
    name: p.name,
    bytes: p.name === STATE_PAYLOAD ? state : Buffer.from(p.base64, 'base64'),
  }));
  return { manifest, payloads };
}

/** One durable commit through the store: encoding (with its SHA-256 passes) is inside the timing. */
async function saveOnce(store: CheckpointStore, checkpointId: string, state: Uint8Array): Promise<number> {
  const group = groupOf(state);
  const start = performance.now();
  const encoded = encodeEnvelopeParts({ ...group.manifest, checkpointId }, group.payloads);
  await store.commit(generationIdentityOf(encoded.manifest), encoded);
  return (performance.now() - start) / 1000;
}

/** The store's load (read, seven checks, envelope digest, record identity) + the state digest check. */
async function restoreOnce(store: CheckpointStore, checkpointId: string, expected: string): Promise<number> {
  const start = performance.now();
  const loaded = await store.load(checkpointId);
  const state = loaded.envelope.payloads.find((p) => p.name === STATE_PAYLOAD);
  const seconds = (performance.now() - start) / 1000;
  if (!state || state.digest !== expected)
    throw new Error(`detsim restore: state payload digest ${state?.digest} != saved ${expected}`);
  return seconds;
}

export const CHECKPOINT_METHOD =
  'CheckpointStore.commit with the store defaults (coordinator/store: temp write, FileHandle.sync, rename, directory fsync, ' +
  'store manifest temp+fsync+rename+directory fsync, rotation keep=1) of encodeEnvelopeParts output, timed with the encoding; ' +
  'restore = CheckpointStore.load (readFile, decodeEnvelope seven checks, envelope digest, record identity) + state digest check';

export async function measureDetsimCheckpoint(opts: {
  stateBytes: number;
  dir: string;
  repeats: number;
}): Promise<DetsimCheckpointFigures> {
  const state = makeState(opts.stateBytes);
  const expected = createHash('sha256').update(state).digest('hex');
  const storeDir = join(opts.dir, 'detsim-store');
  const saves: number[] = [];
  const restores: number[] = [];
  let fileBytes = 0;
  try {
    const store = await CheckpointStore.open(storeDir, { create: true, keep: 1 });
    for (let i = 1; i <= opts.repeats; i++) {
      const id = `bench-${i}`;
      saves.push(await saveOnce(store, id, state));
      restores.push(await restoreOnce(store, id, expected));
      fileBytes = Number(store.lookup(id)!.byteLength);
    }
  } finally {
    await rm(storeDir, { recursive: true, force: true });
  }
  return {
    method: CHECKPOINT_METHOD,
    stateBytes: opts.stateBytes,
    fileBytes,
    stateSha256: expected,
    save: summarize(saves, opts.stateBytes),
    restoreVerify: summarize(restores, opts.stateBytes),
  };
}
