// Test helpers for the store tests: small real FLYSESS1 envelopes (built with the real encoder) and
// throwaway store directories. Not a fake store: everything here writes real files.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  encodeEnvelopeParts,
  layoutEnvelope,
  sealEnvelopeAsync,
  type EncodedEnvelopeParts,
  type EnvelopePayloadInput,
} from '../../core/formats/envelope.js';
import { sha256Hex } from '../../core/formats/canonical-json.js';
import { generationIdentityOf, type GenerationIdentity } from '../../coordinator/store/store.js';
import type { SaveJob } from '../../coordinator/store/writer.js';

const D = (s: string): string => sha256Hex(s);

export interface TestCheckpoint {
  readonly identity: GenerationIdentity;
  readonly encoded: EncodedEnvelopeParts;
  /** What it was encoded from (a deferred job lays it out again). */
  readonly manifest: object;
  readonly payloads: readonly EnvelopePayloadInput[];
}

/** A complete, valid checkpoint manifest for a one-agent session; `payloadBytes` sizes the agent payload. */
export function makeCheckpoint(
  checkpointId: string,
  step: number,
  opts: { epoch?: string; payloadBytes?: number; fill?: number } = {},
): TestCheckpoint {
  const agentBytes = Buffer.alloc(opts.payloadBytes ?? 64, opts.fill ?? step & 0xff);
  const manifest = {
    envelopeVersion: 1,
    checkpointId,
    sourceScope: { sessionId: 'demo', epoch: opts.epoch ?? 'e1', step: String(step) },
    episodeId: 'episode-1',
    worldTime: { numerator: String(step * 1000), denominator: '1' },
    schedulerId: 'lockstep-v1',
    compositionDigest: D('composition'),
    portMap: [{ portId: 'port-0', agentId: 'fly-a' }],
    compatibility: {
      backendDigest: D('backend'),
      contentDigest: D('content'),
      patchDigest: D('patch'),
      controllerDigest: D('controller'),
      parserDigest: D('parser'),
      stateFormatId: 'flysess-1',
    },
    agents: [
      { agentId: 'fly-a', profileDigest: D('profile'), seed: 7, brainTicks: String(step), payload: 'agent-fly-a' },
    ],
    coordinator: { taskLedger: 'task-ledger' },
    environment: { workerId: 'env', payload: 'world' },
    helperState: [],
  };
  const payloads = [
    { name: 'world', bytes: Buffer.from(`world at ${step}`) },
    { name: 'agent-fly-a', bytes: agentBytes },
    { name: 'task-ledger', bytes: Buffer.from('{"rank":1}') },
  ];
  const encoded = encodeEnvelopeParts(manifest, payloads);
  return { identity: generationIdentityOf(encoded.manifest), encoded, manifest, payloads };
}

export function jobOf(c: TestCheckpoint, replaceable = false): SaveJob {
  return { identity: c.identity, envelope: c.encoded, replaceable };
}

/**
 * The same checkpoint as a deferred job, the way capture submits one: laid out with the digests
 * its producers reported (`reported` overrides one, e.g. a lie), sealed by the writer.
 */
export function deferredJobOf(c: TestCheckpoint, reported: Record<string, string> = {}): SaveJob {
  const draft = layoutEnvelope(
    c.manifest,
    c.payloads.map((p) => ({ ...p, digest: reported[p.name] ?? sha256Hex(p.bytes) })),
  );
  return {
    identity: c.identity,
    envelope: { byteLength: draft.byteLength, seal: () => sealEnvelopeAsync(draft) },
    replaceable: false,
  };
}

export async function tempDir(label: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `detsim-${label}-`));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** Resolve after the event loop has turned `n` times (lets queued async work progress). */
export async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}
