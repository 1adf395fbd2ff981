// Capture (docs/spec/checkpoint-store.md): at a committed boundary Ready(k)/Paused(k) only; a writer slot is
// reserved before anyone is asked (full → BUSY, nothing changes); State.Capture to the environment
// first, then agents by id; every reply checked; the coordinator builds its own payloads and the
// FLYSESS1 layout and hands it to the writer, which hashes (checking every payload against the
// digest its participant reported), seals and writes off the step loop. Streamed payloads past an
// in-memory budget go to a spill file as they arrive (capture-spill.ts), so memory stays bounded.
// NOT the writer or store (store/), NOT restore, and it never decides when to capture.
import {
  layoutEnvelope,
  type EnvelopeDraft,
  type EnvelopeManifest,
  type EnvelopePayloadInput,
  type LayoutPayloadInput,
} from '../../core/formats/envelope.js';
import { isDetsimError } from '../../core/formats/errors.js';
import { readDigest, readU64, type Digest, type Id, type Scope, type U64 } from '../../core/formats/scalars.js';
import { CAPABILITIES, METHODS, type CaptureParams, type CaptureResult } from '../../core/protocol/index.js';
import type { LaunchedWorker } from '../launch/launcher.js';
import { sealOffLoop } from '../store/seal-thread.js';
import { generationIdentityOf } from '../store/store.js';
import { WriterBusyError, type DeferredEnvelope, type Reservation, type SaveTicket } from '../store/writer.js';
import {
  capturesToFile,
  DIGEST_AT_WRITE,
  writeEnvelopeFile,
  type CaptureFileHooks,
  type HeldPayload,
} from './capture-file.js';
import { StreamedPayloads } from './capture-spill.js';
import { liveAgentRows, liveEnvironment } from './compatibility.js';
import type { CheckpointGroup } from './group.js';
import { LifecycleSlots } from './lifecycle-slots.js';
import { buildCheckpoint, PAYLOAD_NAMES, type CapturedPayload } from './manifest.js';
import { CheckpointRefusal, participantOf, tooLargeToStream, type Participant } from './refusal.js';

export interface CaptureOptions {
  checkpointId: Id;
  /** Hot capture: a newer hot capture may supersede it while queued (default false: durable). */
  replaceable?: boolean;
  /** Test hooks of the file path: seal chunk size, allocation probe, spill budget and probe. */
  fileHooks?: CaptureFileHooks;
  /**
   * The run's trace being made durable up to this boundary while the participants are asked: the
   * capture awaits it before building the checkpoint (whose behaviour digest state needs the synced
   * trace) and keeps the digest it resolves to, the trace index's, in the ledger's captured event.
   */
  traceSynced?: Promise<string>;
}

export interface CaptureReceipt {
  checkpointId: Id;
  epoch: Id;
  boundary: U64;
  /** Envelope size (the SHA-256 is known once sealed: the Committed outcome carries it). */
  byteLength: number;
  /** The writer's ticket: only a Committed outcome means saved. */
  ticket: SaveTicket;
}

/** The id capture uses by default: unique per epoch and boundary, so a resumed run never reuses one. */
export function checkpointIdFor(epoch: Id, boundary: bigint | number): Id {
  return `ckpt-${epoch}-${boundary}`;
}

/**
 * Check one capture reply against what was asked and what the coordinator expects. The payload's
 * SHA-256 is not computed here (that would stall the step loop on a large state): the writer
 * hashes the bytes it seals and fails the save if they differ from the digest returned here.
 */
function checkReply(
  r: CaptureResult,
  attachment: Buffer | undefined,
  droppedAttachmentBytes: number | undefined,
  want: {
    checkpointId: Id;
    agentId: Id | null;
    boundary: U64;
    compatibilityDigest: Digest;
    held: boolean;
  },
): CapturedPayload & { digest: Digest } {
  const who = participantOf(want.agentId);
  if (r.checkpointId !== want.checkpointId || r.agentId !== want.agentId || r.boundary !== want.boundary) {
    throw new CheckpointRefusal(
      'IDENTITY_MISMATCH',
      'ident_capture_reply',
      `${who}: capture reply is for checkpoint ${JSON.stringify(r.checkpointId)}, participant ${JSON.stringify(r.agentId)}, boundary ${JSON.stringify(r.boundary)}; asked ${want.checkpointId}, ${JSON.stringify(want.agentId)}, ${want.boundary}`,
      { participant: who },
    );
  }
  if (r.compatibilityDigest !== want.compatibilityDigest) {
    throw new CheckpointRefusal(
      'INCOMPATIBLE_STATE',
      'audit_capture_compatibility',
      `${who}: compatibilityDigest ${r.compatibilityDigest} differs from the expected ${want.compatibilityDigest} (agent id, profile, dataset, versions and seed)`,
      { participant: who },
    );
  }
  let digest: Digest, byteLength: U64;
  try {
    // Held: no digest yet (the write reports it); DIGEST_AT_WRITE holds its place.
    if (want.held && r.payload !== null && typeof r.payload === 'object' && 'digest' in r.payload)
      throw new Error('payload.digest must be absent: this capture was held');
    digest = want.held ? DIGEST_AT_WRITE : readDigest(r.payload?.digest, 'payload.digest');
    byteLength = readU64(r.payload?.byteLength, 'payload.byteLength');
  } catch (e) {
    throw new CheckpointRefusal('BUFFER_INVALID', 'audit_capture_buffer', `${who}: ${(e as Error).message}`, {
      participant: who,
    });
  }
  if (want.held) {
    // store-files-v1: the bytes stay with the participant; they are checked once written (file-seal.ts).
    if (attachment)
      throw new CheckpointRefusal(
        'BUFFER_INVALID',
        'audit_capture_buffer',
        `${who}: a held capture reply carries a payload attachment`,
        { participant: who },
      );
    return { byteLength: byteLengthOf(byteLength, who), digest };
  }
  if (droppedAttachmentBytes !== undefined) throw tooLargeToStream(who, droppedAttachmentBytes);
  if (!attachment)
    throw new CheckpointRefusal(
      'BUFFER_INVALID',
      'audit_capture_buffer',
      `${who}: the capture reply carries no payload attachment`,
      { participant: who },
    );
  if (String(attachment.byteLength) !== byteLength) {
    throw new CheckpointRefusal(
      'BUFFER_INVALID',
      'audit_capture_buffer',
      `${who}: payload attachment is ${attachment.byteLength} bytes, the reply says ${byteLength}`,
      { participant: who },
    );
  }
  return { bytes: attachment, digest };
}

/** Whether a Capture reply's payload names a digest (an unheld capture's; a held one gives the size alone). */
function hasDigest(payload: unknown): boolean {
  return payload !== null && typeof payload === 'object' && 'digest' in payload;
}

/** A held payload's length as a number: a state this large cannot be laid out past 2^53 bytes. */
function byteLengthOf(byteLength: U64, who: string): number {
  const n = Number(byteLength);
  if (!Number.isSafeInteger(n))
    throw new CheckpointRefusal('BUFFER_INVALID', 'audit_capture_buffer', `${who}: payload.byteLength is too large`, {
      participant: who,
    });
  return n;
}

function reserve(group: CheckpointGroup): Reservation {
  if (!group.writer)
    throw new CheckpointRefusal('UNSUPPORTED', 'perm_invalid_phase', 'no checkpoint store is attached to this run');
  try {
    return group.writer.reserve();
  } catch (e) {
    if (e instanceof WriterBusyError)
      throw new CheckpointRefusal(
        'BUSY',
        e.reason,
        `capture refused: ${e.message} (nothing was asked, the run keeps stepping)`,
        { field: 'writer' },
      );
    throw e;
  }
}

/** The streamed path's job: every payload in memory, sealed by the writer (off the step loop). */
function inMemoryEnvelope(
  manifest: Omit<EnvelopeManifest, 'payloads'>,
  payloads: readonly LayoutPayloadInput[],
): { draft: EnvelopeDraft; envelope: DeferredEnvelope } {
  const draft = layoutEnvelope(manifest, payloads as EnvelopePayloadInput[]);
  return { draft, envelope: { byteLength: draft.byteLength, seal: () => sealOffLoop(draft) } };
}

/**
 * Capture the group at its committed boundary and submit the envelope to the writer. Resolves once
 * every participant replied and the job is queued (not when it is durable: wait on the ticket).
 */
export async function captureGroup(group: CheckpointGroup, opts: CaptureOptions): Promise<CaptureReceipt> {
  const phase = group.phase;
  if ((phase !== 'ready' && phase !== 'paused') || group.lockstep.state !== 'ready') {
    throw new CheckpointRefusal(
      'INVALID_PHASE',
      'perm_invalid_phase',
      `capture only at a committed boundary Ready(k)/Paused(k): the group is ${phase === 'ready' ? group.lockstep.state : phase}`,
    );
  }
  const live = group.live();
  const reservation = reserve(group);
  group.beginCapture();
  const k = group.boundary;
  const { checkpointId } = opts;
  const c: CaptureContext = {
    group,
    checkpointId,
    boundary: k.toString(),
    scope: group.scope(group.epoch, k),
    slots: new LifecycleSlots((byWorker) => group.acknowledge(byWorker)),
    held: new Map<string, HeldPayload>(),
    streamed: new StreamedPayloads(group.writer!.store.dir, checkpointId, opts.fileHooks),
  };
  try {
    // The environment first, then agents sorted by id; each agent's payload separately.
    const world = await captureOne(c, null, liveEnvironment(live).compatibilityDigest);
    const agents: ({ agentId: Id } & CapturedPayload)[] = [];
    for (const row of liveAgentRows(live))
      agents.push({ agentId: row.agentId, ...(await captureOne(c, row.agentId, row.compatibilityDigest)) });
    const traceIndex = await opts.traceSynced;
    const built = buildCheckpoint(live, checkpointId, group.coordinatorState(), { world, agents });
    return await submitCapture(c, reservation, built, opts, traceIndex);
  } catch (e) {
    reservation.release();
    await c.slots.releaseAll();
    if (e instanceof CheckpointRefusal) throw e;
    if (isDetsimError(e))
      throw new CheckpointRefusal(
        e.reason.startsWith('size_writer') ? 'BUSY' : 'FAILED',
        e.reason,
        `capture ${checkpointId}: ${e.message}`,
        { field: e.field },
      );
    throw e;
  } finally {
    await c.streamed.discard();
    group.endCapture();
  }
}

/** One capture in flight: where it is, and what its participants hold or streamed so far. */
interface CaptureContext {
  readonly group: CheckpointGroup;
  readonly checkpointId: Id;
  readonly boundary: U64;
  readonly scope: Scope;
  readonly slots: LifecycleSlots;
  readonly held: Map<string, HeldPayload>;
  readonly streamed: StreamedPayloads;
}

/**
 * Payloads smaller than this are sent in the Capture reply instead of held (store-files-v1): a
 * State.WritePayload call and a file open per participant cost more than the bytes (16 walkers:
 * ~7 ms a checkpoint for ~100-byte states). A worker offering capture-hold-from-v1 is told so and
 * decides by the payload's size; another is asked to hold unless the participant's payload was
 * smaller than this at its previous capture in the session.
 */
export const STREAM_BELOW_BYTES = 64 * 1024;

/** How to ask a participant on `worker`: hold (from a size, when it decides) or stream. */
function holdFor(c: CaptureContext, worker: LaunchedWorker, who: Participant): 'stream' | 'hold' | 'sized' {
  if (!capturesToFile(c.group, worker) || !c.slots.mayHold(worker)) return 'stream';
  if (worker.hello.capabilities.includes(CAPABILITIES.captureHoldFrom)) return 'sized';
  const last = c.group.lastPayloadBytes(who);
  return last !== undefined && last < STREAM_BELOW_BYTES ? 'stream' : 'hold';
}

/** The Capture params for that way of asking. */
function captureParams(checkpointId: Id, agentId: Id | null, ask: 'stream' | 'hold' | 'sized'): CaptureParams {
  if (ask === 'stream') return { checkpointId, agentId };
  if (ask === 'hold') return { checkpointId, agentId, hold: true };
  return { checkpointId, agentId, hold: true, holdFrom: String(STREAM_BELOW_BYTES) };
}

/** One participant's Capture: held (store-files-v1) or streamed, and its reply checked. */
async function captureOne(
  c: CaptureContext,
  agentId: Id | null,
  compatibilityDigest: Digest,
): Promise<CapturedPayload> {
  const { group, slots, checkpointId } = c;
  const who = participantOf(agentId);
  const worker = group.workerOf(agentId);
  const ask = holdFor(c, worker, who);
  await slots.reserve(worker);
  const rep = await group
    .call(agentId, who, METHODS.capture, c.scope, captureParams(checkpointId, agentId, ask))
    .catch((e: unknown) => {
      slots.cancel(worker);
      throw e;
    });
  // Asked from a size, the reply's shape says which it was: the size alone is a held payload.
  const hold = ask === 'hold' || (ask === 'sized' && !hasDigest(rep.result.payload));
  slots.fill(worker, rep.requestId, hold);
  const payload = checkReply(rep.result, rep.attachment, rep.droppedAttachmentBytes, {
    checkpointId,
    agentId,
    boundary: c.boundary,
    compatibilityDigest,
    held: hold,
  });
  group.recordPayloadBytes(who, 'bytes' in payload ? payload.bytes.byteLength : payload.byteLength);
  const name = agentId === null ? PAYLOAD_NAMES.world : PAYLOAD_NAMES.agent(agentId);
  if (hold) c.held.set(name, { agentId, participant: who, captureRequestId: rep.requestId });
  return 'bytes' in payload ? c.streamed.add(name, payload.bytes, payload.digest) : payload;
}

/**
 * Lay the envelope out (in its temp file when payloads are held or spilled; otherwise the writer
 * seals the bytes in memory), record `captured` in the ledger, and hand the job to the writer.
 */
async function submitCapture(
  c: CaptureContext,
  reservation: Reservation,
  { manifest, payloads }: ReturnType<typeof buildCheckpoint>,
  opts: CaptureOptions,
  traceIndex: string | undefined,
): Promise<CaptureReceipt> {
  const { group, checkpointId, boundary } = c;
  const { draft, envelope } =
    c.held.size > 0 || c.streamed.spills
      ? await writeEnvelopeFile(group, manifest, payloads, c.held, c.scope, c.streamed, opts.fileHooks)
      : inMemoryEnvelope(manifest, payloads);
  const byteLength = draft.layout.totalBytes;
  await group.ledger?.append({
    event: 'captured',
    checkpointId,
    boundary,
    epoch: group.epoch,
    sessionId: group.plan.sessionId,
    detail: {
      byteLength: String(byteLength),
      durable: !opts.replaceable,
      ...(traceIndex !== undefined ? { traceIndex } : {}),
    },
  });
  let ticket: SaveTicket;
  try {
    ticket = group.writer!.submit(reservation, {
      identity: generationIdentityOf(draft.manifest),
      envelope,
      replaceable: opts.replaceable ?? false,
    });
  } catch (e) {
    await envelope.discard?.();
    throw e;
  }
  // The writer owns the bytes now: release the workers' cached capture replies.
  await c.slots.releaseAll();
  return { checkpointId, epoch: group.epoch, boundary, byteLength, ticket };
}
