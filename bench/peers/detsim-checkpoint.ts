// The detsim side of the safetensors comparison: a durable commit of a FLYSESS1 envelope holding
// the given state (encode + write + fsync + rename + directory fsync), then read + decodeEnvelope
// (all seven checks, every digest) + a check that the state payload digest is the one saved.
// NOT the checkpoint store's own bench (bench/suites/checkpoint*) and not a peer.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { open, readFile, rename, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { decodeEnvelope, encodeEnvelopeParts, type EnvelopePayloadInput } from '../../coordinator/formats/envelope.js';
import { Xorshift32 } from '../../coordinator/formats/xorshift.js';
import { PEERS_DIR } from './python-env.js';

const FIXTURE = resolve(PEERS_DIR, '..', '..', 'fixtures', 'reference', 'checkpoint-envelope.json');
/** The payload of the fixture's one agent: the bench puts the big state there. */
const STATE_PAYLOAD = 'agent-fly-a';
const SLICE = 4 * 1024 * 1024;

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

interface FixturePayload { name: string; base64: string }

/** The reference fixture's manifest and small payloads, with the agent payload replaced by `state`. */
function groupOf(state: Uint8Array): { manifest: Record<string, unknown>; payloads: EnvelopePayloadInput[] } {
  const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { manifest: Record<string, unknown>; payloads: FixturePayload[] };
  const { payloads: _listed, ...manifest } = fixture.manifest;
  const payloads = fixture.payloads.map((p) => ({ name: p.name, bytes: p.name === STATE_PAYLOAD ? state : Buffer.from(p.base64, 'base64') }));
  return { manifest, payloads };
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** temp file → every part in slices → FileHandle.sync() → rename → directory fsync. */
async function writeDurably(dir: string, name: string, parts: readonly Uint8Array[]): Promise<void> {
  const tmp = join(dir, `tmp-${name}`);
  const fh = await open(tmp, 'w', 0o644);
  try {
    let position = 0;
    for (const part of parts) {
      for (let at = 0; at < part.byteLength; ) {
        const { bytesWritten } = await fh.write(part, at, Math.min(SLICE, part.byteLength - at), position);
        at += bytesWritten;
        position += bytesWritten;
      }
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, join(dir, name));
  await fsyncDir(dir);
}

/** One durable commit: encoding (with its SHA-256 passes) is inside the timing, as in the store. */
async function saveOnce(dir: string, name: string, state: Uint8Array): Promise<number> {
  const group = groupOf(state);
  const start = performance.now();
  const { parts } = encodeEnvelopeParts(group.manifest, group.payloads);
  await writeDurably(dir, name, parts);
  return (performance.now() - start) / 1000;
}

/** Read the file, run every reader check, and compare the state payload's digest with the saved one. */
async function restoreOnce(path: string, expected: string): Promise<number> {
  const start = performance.now();
  const decoded = decodeEnvelope(await readFile(path));
  const state = decoded.payloads.find((p) => p.name === STATE_PAYLOAD);
  const seconds = (performance.now() - start) / 1000;
  if (!state || state.digest !== expected) throw new Error(`detsim restore: state payload digest ${state?.digest} != saved ${expected}`);
  return seconds;
}

export const CHECKPOINT_METHOD =
  'encodeEnvelopeParts (coordinator/formats/envelope.ts) + temp write + FileHandle.sync + rename + directory fsync, ' +
  'then readFile + decodeEnvelope (seven checks, prefix and payload SHA-256) — the store\'s manifest commit is not included';

export async function measureDetsimCheckpoint(opts: { stateBytes: number; dir: string; repeats: number }): Promise<DetsimCheckpointFigures> {
  const state = makeState(opts.stateBytes);
  const expected = createHash('sha256').update(state).digest('hex');
  const name = 'ckpt-1.flysess';
  const saves: number[] = [];
  const restores: number[] = [];
  let fileBytes = 0;
  try {
    for (let i = 0; i < opts.repeats; i++) {
      saves.push(await saveOnce(opts.dir, name, state));
      restores.push(await restoreOnce(join(opts.dir, name), expected));
    }
    fileBytes = (await stat(join(opts.dir, name))).size;
  } finally {
    await rm(join(opts.dir, name), { force: true });
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
