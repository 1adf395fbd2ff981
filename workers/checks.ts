// Refusal checks shared by the agent and environment hosts: scope/session/epoch/step rules,
// attachment verification, restore tokens and compatibility digests. Each throws a
// ProtocolRefusal with the protocol's code; none of them mutates anything.
import { createHash } from 'node:crypto';
import { isAbsolute } from 'node:path';
import { canonicalDigest } from '../core/formats/canonical-json.js';
import {
  type Scope,
  readDigest,
  readId,
  readObject,
  readScope,
  readU64,
  refuseUnknownFields,
} from '../core/formats/scalars.js';
import type { PayloadRef } from '../core/protocol/bodies.js';
import { ProtocolRefusal, type Request } from '../core/protocol/envelope.js';
import { readRebind, type Rebind } from './fork-rebind.js';
import type { PayloadFile } from './payload-file.js';
import { readStorePayloadOnce } from './payload-scatter.js';
import type { PrefetchedPayloads } from './restore-prefetch.js';
import type { JsonObject } from './sdk.js';
import { decodeState } from './state-codec.js';

export function requireScope(req: Request): Scope {
  if (!req.scope) throw new ProtocolRefusal('INVALID_ARGUMENT', `${req.method} needs a scope`);
  return req.scope;
}

/** The request's session must be the one this worker was bound to at Hello. */
export function checkSession(scope: Scope, sessionId: string): void {
  if (scope.sessionId !== sessionId) {
    throw new ProtocolRefusal(
      'IDENTITY_MISMATCH',
      `scope.sessionId ${JSON.stringify(scope.sessionId)} is not this worker's session ${JSON.stringify(sessionId)}`,
    );
  }
}

/** Any epoch other than the participant's current one is stale. */
export function checkEpoch(scope: Scope, current: string, who: string): void {
  if (scope.epoch !== current) {
    throw new ProtocolRefusal(
      'STALE_EPOCH',
      `${who}: scope.epoch ${JSON.stringify(scope.epoch)} is not the current epoch ${JSON.stringify(current)}`,
    );
  }
}

/** A step behind the boundary is STALE_STEP, ahead of it FUTURE_STEP. */
export function checkStep(scope: Scope, boundary: bigint, who: string): bigint {
  const step = BigInt(scope.step);
  if (step < boundary)
    throw new ProtocolRefusal('STALE_STEP', `${who}: scope.step ${step} is behind the boundary ${boundary}`);
  if (step > boundary)
    throw new ProtocolRefusal('FUTURE_STEP', `${who}: scope.step ${step} is ahead of the boundary ${boundary}`);
  return step;
}

/**
 * One Hash.update takes at most 2^31 - 1 bytes (Node refuses more: "data is too long"), and a
 * state payload may be larger (up to a Buffer's 4 GiB): feed it a slice at a time.
 */
export const HASH_UPDATE_MAX_BYTES = 1024 * 1024 * 1024;

export function sha256(bytes: Uint8Array | string): string {
  const hash = createHash('sha256');
  if (typeof bytes === 'string') return hash.update(bytes).digest('hex');
  for (let at = 0; at < bytes.byteLength; at += HASH_UPDATE_MAX_BYTES)
    hash.update(bytes.subarray(at, Math.min(bytes.byteLength, at + HASH_UPDATE_MAX_BYTES)));
  return hash.digest('hex');
}

/** The staged payload must be exactly the referenced bytes: length first, then digest. */
export function checkAttachment(attachment: Uint8Array | undefined, ref: PayloadRef, payloadName: string): void {
  if (!attachment) throw new ProtocolRefusal('BUFFER_INVALID', 'StageRestore carries no payload attachment');
  if (String(attachment.byteLength) !== ref.byteLength) {
    throw new ProtocolRefusal(
      'BUFFER_INVALID',
      `payload attachment is ${attachment.byteLength} bytes; payload.byteLength says ${ref.byteLength}`,
    );
  }
  checkDigest(attachment, ref, payloadName);
}

/** Never echo the digest of what was read: with store-files-v1 that would be an oracle on a file's bytes. */
function checkDigest(bytes: Uint8Array, ref: PayloadRef, payloadName: string, digest = sha256(bytes)): void {
  if (digest !== ref.digest)
    throw new ProtocolRefusal(
      'BUFFER_INVALID',
      `params.payload.digest: the payload digest check failed for payload ${payloadName}`,
    );
}

/** The envelope's name for a participant's payload (checkpoint/manifest.ts PAYLOAD_NAMES). */
function payloadNameOf(agentId: string | null): string {
  return agentId === null ? 'world' : `agent-${agentId}`;
}

/** `rt-` + 32 hex: bound to checkpoint, scope, payload bytes and this worker incarnation. */
export function restoreToken(checkpointId: string, scope: Scope, payloadDigest: string, incarnationId: string): string {
  const text = `detsim/restore-token-v1\n${checkpointId}\n${scope.sessionId}\n${scope.epoch}\n${scope.step}\n${payloadDigest}\n${incarnationId}\n`;
  return `rt-${sha256(text).slice(0, 32)}`;
}

export interface AgentCompatibility {
  agentId: string;
  profileDigest: string;
  datasetDigest: string;
  modelVersion: string;
  plasticityVersion: string;
  seed: number;
}

/** Agent compatibility digest: canonicalDigest({agentId, profileDigest, datasetDigest, modelVersion, plasticityVersion, seed}). */
export function agentCompatibilityDigest(c: AgentCompatibility): string {
  return canonicalDigest({
    agentId: c.agentId,
    profileDigest: c.profileDigest,
    datasetDigest: c.datasetDigest,
    modelVersion: c.modelVersion,
    plasticityVersion: c.plasticityVersion,
    seed: c.seed,
  });
}

export interface EnvironmentCompatibility {
  environmentId: string;
  profileDigest: string;
  modelVersion: string;
  seed: number;
  ports: { portId: string; agentId: string }[];
}

/** Environment compatibility digest: canonicalDigest({environmentId, modelVersion, ports, profileDigest, seed}). */
export function environmentCompatibilityDigest(c: EnvironmentCompatibility): string {
  return canonicalDigest({
    environmentId: c.environmentId,
    profileDigest: c.profileDigest,
    modelVersion: c.modelVersion,
    seed: c.seed,
    ports: c.ports.map((p) => ({ portId: p.portId, agentId: p.agentId })),
  });
}

/** Profile digest: canonicalDigest({model, modelVersion, params}) with params as the model resolved them. */
export function profileDigest(model: string, modelVersion: string, params: Record<string, unknown>): string {
  return canonicalDigest({ model, modelVersion, params });
}

/** Name the first recorded identity field that differs from the live/recomputed one. */
export function firstMismatch(
  recorded: Record<string, unknown>,
  live: Record<string, unknown>,
  order: readonly string[],
): string | undefined {
  for (const f of order) {
    if (canonicalDigest(recorded[f] ?? null) !== canonicalDigest(live[f] ?? null))
      return `${f}: payload has ${JSON.stringify(recorded[f])}, this worker has ${JSON.stringify(live[f])}`;
  }
  return undefined;
}

export interface StageParams {
  checkpointId: string;
  /** The agent being staged, or null for the environment. */
  agentId: string | null;
  sourceScope: Scope;
  compatibilityDigest: string;
  ref: PayloadRef;
  /** Capability store-files-v1: read the payload from this range of a local file, not an attachment. */
  file: PayloadFile | null;
  /** A fork's new params for this participant (fork-rebind.ts), or null. */
  rebind: Rebind | null;
}

/**
 * Read State.StageRestore params (DetsimError on a malformed field) and check them against the
 * request scope. `host` says who this worker hosts: agents need an agentId, the environment null.
 */
export function readStageParams(
  params: Record<string, unknown>,
  scope: Scope,
  host: 'agent' | 'environment',
): StageParams {
  refuseUnknownFields(
    params,
    ['checkpointId', 'agentId', 'sourceScope', 'compatibilityDigest', 'payload', 'rebind'],
    'params',
  );
  const checkpointId = readId(params.checkpointId, 'params.checkpointId');
  if (host === 'agent' && params.agentId === null)
    throw new ProtocolRefusal(
      'INVALID_ARGUMENT',
      'params.agentId is null but this worker hosts agents, not the environment',
    );
  if (host === 'environment' && params.agentId !== null)
    throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.agentId must be null: this worker hosts the environment');
  const agentId = host === 'agent' ? readId(params.agentId, 'params.agentId') : null;
  const sourceScope = readScope(params.sourceScope, 'params.sourceScope');
  const compatibilityDigest = readDigest(params.compatibilityDigest, 'params.compatibilityDigest');
  const p = readObject(params.payload, 'params.payload');
  refuseUnknownFields(p, ['digest', 'byteLength', 'file'], 'params.payload');
  const ref = {
    digest: readDigest(p.digest, 'params.payload.digest'),
    byteLength: readU64(p.byteLength, 'params.payload.byteLength'),
  };
  const file = p.file === undefined ? null : readPayloadFile(p.file);
  if (sourceScope.sessionId !== scope.sessionId)
    throw new ProtocolRefusal(
      'IDENTITY_MISMATCH',
      `params.sourceScope.sessionId ${sourceScope.sessionId} is not this session ${scope.sessionId}`,
    );
  if (sourceScope.step !== scope.step)
    throw new ProtocolRefusal(
      'INVALID_ARGUMENT',
      `scope.step ${scope.step} must equal params.sourceScope.step ${sourceScope.step}`,
    );
  return { checkpointId, agentId, sourceScope, compatibilityDigest, ref, file, rebind: readRebind(params.rebind) };
}

function readPayloadFile(value: unknown): PayloadFile {
  const f = readObject(value, 'params.payload.file');
  refuseUnknownFields(f, ['path', 'offset'], 'params.payload.file');
  if (typeof f.path !== 'string' || !isAbsolute(f.path))
    throw new ProtocolRefusal(
      'INVALID_ARGUMENT',
      `params.payload.file.path ${JSON.stringify(f.path ?? null)} is not an absolute path`,
    );
  return { path: f.path, offset: BigInt(readU64(f.offset, 'params.payload.file.offset')) };
}

/**
 * The bytes to stage, exactly the referenced ones (length, then digest): the request's attachment,
 * or with store-files-v1 a range of a checkpoint file in the run's store (`storeDir`, given at
 * launch; without it every payload file is refused). The worker hashes what it read, so a file
 * changed since the coordinator verified it is refused, never staged.
 */
export async function stagedPayload(
  attachment: Uint8Array | undefined,
  staged: StageParams,
  storeDir: string | undefined,
  prefetched?: PrefetchedPayloads,
): Promise<Uint8Array> {
  const name = payloadNameOf(staged.agentId);
  // The restore prefetch (store-files-v1): bytes read and hashed against exactly this reference
  // while the coordinator verified.
  const early = await prefetched?.take(staged);
  if (early && !attachment) return early;
  if (!staged.file) {
    checkAttachment(attachment, staged.ref, name);
    return attachment!;
  }
  if (attachment)
    throw new ProtocolRefusal(
      'INVALID_ARGUMENT',
      'StageRestore carries both an attachment and params.payload.file: send one',
    );
  const { bytes, digest } = await readStorePayload(storeDir, staged.file, BigInt(staged.ref.byteLength));
  checkDigest(bytes, staged.ref, name, digest);
  return bytes;
}

/**
 * A payload range of a checkpoint file in the run's store, read and hashed once: with its large
 * fields in memory of their own when its layout allows (payload-scatter.ts; `bytes` is then a
 * stand-in that decodes, once, to the value read), else read whole.
 */
export async function readStorePayload(
  storeDir: string | undefined,
  file: PayloadFile,
  byteLength: bigint,
): Promise<{ bytes: Uint8Array; digest: string }> {
  const read = await readStorePayloadOnce(storeDir, file, byteLength);
  if ('bytes' in read) return read;
  const standIn = new Uint8Array(0);
  predecoded.set(standIn, read.decoded);
  return { bytes: standIn, digest: read.digest };
}

/** Payloads decoded ahead of their stage (the restore prefetch, store-files-v1), by the bytes they were decoded from. */
const predecoded = new WeakMap<Uint8Array, unknown>();

/**
 * Decode a prefetched payload now, while the coordinator still verifies its file, so that its
 * StageRestore only checks fields. Bytes that do not decode are left for the stage to refuse.
 * Returns the decoded value (undefined when they do not decode); the stage gets this very object.
 */
export function predecode(bytes: Uint8Array): unknown {
  if (predecoded.has(bytes)) return predecoded.get(bytes);
  try {
    const value = decodeState(bytes);
    predecoded.set(bytes, value);
    return value;
  } catch {
    // The stage decodes again and refuses with its usual message.
    return undefined;
  }
}

/** decodeState, or the value predecode already got from these very bytes (used once). */
function decodeStaged(bytes: Uint8Array): unknown {
  if (!predecoded.has(bytes)) return decodeState(bytes);
  const value = predecoded.get(bytes);
  predecoded.delete(bytes);
  return value;
}

/** The version of the state payload both hosts write and read (payloadVersion). */
export const PAYLOAD_VERSION = 1;

/** Throws INCOMPATIBLE_STATE `<who>: payload <field> <what>` unless `ok`: one payload field check. */
export type PayloadFieldCheck = (field: string, ok: boolean, what: string) => void;

/**
 * Decode a state payload and check the header both hosts share, in this order: payloadVersion,
 * kind, the agent id (agents only), checkpointId, sourceScope, committedStep. Returns the payload
 * and the field check for the host's own fields, so every refusal reads the same way.
 */
export function readPayloadHeader(
  bytes: Uint8Array,
  who: string,
  expected: { kind: 'agent' | 'environment'; agentId?: string; checkpointId: string; sourceScope: Scope },
): { payload: JsonObject; expect: PayloadFieldCheck } {
  let payload: JsonObject;
  try {
    payload = readObject(decodeStaged(bytes), 'payload');
  } catch (e) {
    throw new ProtocolRefusal('INCOMPATIBLE_STATE', `${who}: payload is not a state payload: ${(e as Error).message}`);
  }
  const expect: PayloadFieldCheck = (field, ok, what) => {
    if (!ok) throw new ProtocolRefusal('INCOMPATIBLE_STATE', `${who}: payload ${field} ${what}`);
  };
  const { kind, agentId, checkpointId, sourceScope } = expected;
  expect('payloadVersion', payload.payloadVersion === PAYLOAD_VERSION, `must be ${PAYLOAD_VERSION}`);
  expect('kind', payload.kind === kind, `must be "${kind}"`);
  if (agentId !== undefined)
    expect('agentId', payload.agentId === agentId, `is ${JSON.stringify(payload.agentId)}, not ${agentId}`);
  expect(
    'checkpointId',
    payload.checkpointId === checkpointId,
    `is ${JSON.stringify(payload.checkpointId)}, not ${checkpointId}`,
  );
  expect(
    'sourceScope',
    canonicalDigest(payload.sourceScope ?? null) === canonicalDigest(sourceScope),
    'differs from params.sourceScope',
  );
  expect(
    'committedStep',
    payload.committedStep === sourceScope.step,
    `is ${JSON.stringify(payload.committedStep)}, not ${sourceScope.step}`,
  );
  return { payload, expect };
}
