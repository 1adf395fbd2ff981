// The asynchronous checkpoint writer (docs/spec/checkpoint-store.md): a bounded queue of save jobs in front of
// one CheckpointStore, with slot reservation before capture, hot-capture supersession and honest
// outcomes. It is NOT capture or restore orchestration, and it never decides when to checkpoint.
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import type { Digest, Id, U64 } from '../../core/formats/scalars.js';
import {
  CheckpointStore,
  StoreCommitError,
  type CommitFailureReason,
  type EnvelopeBytes,
  type GenerationIdentity,
  type WrittenEnvelope,
} from './store.js';

export const DEFAULT_WRITER_CAPACITY = 2;
export const DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024;

/** What a save job became, as the caller learns it. Only Committed is a durable acknowledgment. */
export type SaveOutcome =
  | {
      readonly kind: 'Committed';
      readonly checkpointId: Id;
      readonly boundary: U64;
      readonly file: string;
      readonly envelopeDigest: Digest;
    }
  | { readonly kind: 'Failed'; readonly checkpointId: Id; readonly reason: FailureReason; readonly message: string }
  | { readonly kind: 'Superseded'; readonly checkpointId: Id; readonly by: Id }
  /** The writer finished but the reply never reached the caller: ask `resolveDurable`, never re-save. */
  | { readonly kind: 'ReplyLost'; readonly checkpointId: Id }
  /** The caller stopped waiting; the save may still commit. */
  | { readonly kind: 'DeadlineExpired'; readonly checkpointId: Id; readonly budgetMs: number };

/** `seal_failed`: a deferred envelope could not be sealed (e.g. a payload's bytes do not hash to the digest its producer reported). */
export type FailureReason = CommitFailureReason | 'seal_failed' | 'invalid_job' | 'store_error';

/** Events the writer publishes (docs/spec/checkpoint-store.md); caller-side outcomes are never published. */
export interface WriterEvent {
  readonly event: 'queued' | 'committed' | 'failed' | 'superseded';
  readonly checkpointId: Id;
  readonly sessionId: Id;
  readonly epoch: Id;
  readonly episodeId: Id;
  readonly boundary: U64;
  readonly byteLength: number;
  readonly durable: boolean;
  readonly generation?: string;
  /** SHA-256 of the committed file (committed events). */
  readonly envelopeDigest?: Digest;
  readonly reason?: FailureReason;
  readonly supersededBy?: Id;
}

/** Counters of a writer's life: queued, committed, failed, superseded, rejected, peaks. */
export interface WriterStats {
  /** Submissions accepted into the queue. */
  readonly queued: number;
  readonly committed: number;
  readonly failed: number;
  readonly superseded: number;
  /** Reservations or submissions refused with BUSY. */
  readonly rejected: number;
  readonly events_dropped: number;
  /** Most outstanding slots at once (reserved + queued + being written). */
  readonly peak_queue: number;
  /** Most queued, not-yet-started bytes at once. */
  readonly peak_bytes: number;
  readonly outstanding: number;
  readonly queued_bytes: number;
}

/** Options of a {@link CheckpointWriter}: capacity, byte bound, event listener. */
export interface WriterConfig {
  /** Outstanding slots: reserved + queued + being written (default 2). */
  readonly capacity?: number;
  /** Budget for queued, not-yet-started bytes (default 64 MiB). */
  readonly maxQueuedBytes?: number;
  /** Event sink; a throw or rejection is counted in events_dropped, never retried. */
  readonly onEvent?: (event: WriterEvent) => void | Promise<void>;
}

/** BUSY: the writer cannot take this capture now. Nothing changed (mutation none); keep stepping. */
export class WriterBusyError extends DetsimError {
  readonly status = 'BUSY';
  readonly mutation = 'none';
  constructor(reason: ReasonCode & ('size_writer_queue_full' | 'size_writer_bytes_full'), message: string) {
    super(reason, message, 'writer');
    this.name = 'WriterBusyError';
  }
}

/** A slot held before any participant is asked to capture; submit it or release it. */
export class Reservation {
  private state: 'held' | 'used' | 'released' = 'held';
  constructor(private readonly onRelease: () => void) {}
  get held(): boolean {
    return this.state === 'held';
  }
  /** Give the slot back (capture abandoned). Idempotent. */
  release(): void {
    if (this.state !== 'held') return;
    this.state = 'released';
    this.onRelease();
  }
  /** @internal the writer takes the slot over at submit. */
  consume(): void {
    if (this.state !== 'held') throw new Error(`reservation already ${this.state}`);
    this.state = 'used';
  }
}

/**
 * An envelope the writer seals itself when the job starts: hashing and encoding then run in the
 * writer, off the step loop. `byteLength` (known from the layout) counts against the byte budget.
 */
export interface DeferredEnvelope {
  readonly byteLength: number;
  /**
   * Bytes this job holds in memory while queued, when not `byteLength` (store-files-v1: the
   * payloads are already in the temp file, only the head is in memory). Counts against the budget.
   */
  readonly memoryBytes?: number;
  seal(): Promise<EnvelopeBytes | WrittenEnvelope>;
  /** Called once when the job ends without a commit attempt (superseded, seal failed): drop its temp file. */
  discard?(): Promise<void>;
}

/** One save submitted to the writer: the generation identity, its envelope, hot or durable. */
export interface SaveJob {
  readonly identity: GenerationIdentity;
  readonly envelope: EnvelopeBytes | DeferredEnvelope;
  /** Hot capture: a newer replaceable submission may supersede it while it is still queued. */
  readonly replaceable: boolean;
}

/** A submitted save: its id and a way to wait (bounded) for its outcome. */
export interface SaveTicket {
  readonly checkpointId: Id;
  /** The reply, waiting at most `budgetMs` (DeadlineExpired after that; wait again later if you like). */
  wait(budgetMs?: number): Promise<SaveOutcome>;
}

/** The newest generation known durable (only a Committed outcome moves it). */
export interface DurableMark {
  readonly checkpointId: Id;
  readonly boundary: U64;
}

interface Job {
  readonly id: Id;
  readonly identity: GenerationIdentity;
  envelope: EnvelopeBytes | DeferredEnvelope | null;
  /** Bytes held in memory while queued (the budget); `fileBytes` is the envelope's size. */
  readonly bytes: number;
  readonly fileBytes: number;
  readonly replaceable: boolean;
  readonly reply: Promise<SaveOutcome>;
  deliver(outcome: SaveOutcome): void;
}

/**
 * The asynchronous checkpoint writer: a bounded queue of save jobs in front of one {@link CheckpointStore},
 * with a slot reserved before capture, hot-capture supersession and an honest outcome per job.
 */
export class CheckpointWriter {
  readonly capacity: number;
  readonly maxQueuedBytes: number;
  private readonly onEvent: WriterConfig['onEvent'];
  private readonly queue: Job[] = [];
  private active: Job | null = null;
  private reserved = 0;
  private queuedBytes = 0;
  private closed = false;
  private counts = {
    queued: 0,
    committed: 0,
    failed: 0,
    superseded: 0,
    rejected: 0,
    events_dropped: 0,
    peak_queue: 0,
    peak_bytes: 0,
  };
  private commitSeq = new Map<Id, number>();
  private nextSeq = 0;
  private mark: (DurableMark & { seq: number }) | null = null;
  private idleWaiters: (() => void)[] = [];
  // Test hooks (docs/spec/checkpoint-store.md, fault cases 3, 4, 5, 7, 8).
  private stallGate: Promise<void> | null = null;
  private readonly dropReplies = new Set<Id>();
  private readonly stopBeforeManifest = new Set<Id>();

  constructor(
    readonly store: CheckpointStore,
    config: WriterConfig = {},
  ) {
    this.capacity = config.capacity ?? DEFAULT_WRITER_CAPACITY;
    this.maxQueuedBytes = config.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES;
    if (!Number.isInteger(this.capacity) || this.capacity < 1)
      throw new DetsimError(
        'struct_invalid_field',
        `writer capacity must be a positive integer, got ${this.capacity}`,
        'capacity',
      );
    if (!Number.isSafeInteger(this.maxQueuedBytes) || this.maxQueuedBytes < 0) {
      throw new DetsimError(
        'struct_invalid_field',
        `writer maxQueuedBytes must be a non-negative integer, got ${this.maxQueuedBytes}`,
        'maxQueuedBytes',
      );
    }
    this.onEvent = config.onEvent;
  }

  private outstanding(): number {
    return this.reserved + this.queue.length + (this.active ? 1 : 0);
  }

  private notePeaks(): void {
    this.counts.peak_queue = Math.max(this.counts.peak_queue, this.outstanding());
    this.counts.peak_bytes = Math.max(this.counts.peak_bytes, this.queuedBytes);
  }

  /** Take a slot before capture begins. Full → WriterBusyError (BUSY, mutation none). */
  reserve(): Reservation {
    if (this.closed) throw new DetsimError('size_writer_queue_full', 'the checkpoint writer is closed', 'writer');
    if (this.outstanding() >= this.capacity) {
      this.counts.rejected += 1;
      throw new WriterBusyError(
        'size_writer_queue_full',
        `checkpoint writer is full: ${this.outstanding()} of ${this.capacity} slots outstanding (queued + being written)`,
      );
    }
    this.reserved += 1;
    this.notePeaks();
    return new Reservation(() => {
      this.reserved -= 1;
      this.notifyIdle();
    });
  }

  /**
   * Hand a captured envelope to the writer on a held reservation. Refusals throw (BUSY for the byte
   * budget, ident_checkpoint_exists for a reused id) and release the slot; nothing is queued then.
   */
  submit(reservation: Reservation, job: SaveJob): SaveTicket {
    reservation.consume();
    this.reserved -= 1;
    try {
      return this.enqueue(job);
    } catch (e) {
      this.notifyIdle();
      throw e;
    }
  }

  /** Whether `id` is committed, queued or being written (its temp file is then not a capture's to write). */
  claims(id: Id): boolean {
    return this.store.lookup(id) !== null || this.active?.id === id || this.queue.some((j) => j.id === id);
  }

  private enqueue(job: SaveJob): SaveTicket {
    const id = job.identity.checkpointId;
    if (this.claims(id)) {
      throw new DetsimError(
        'ident_checkpoint_exists',
        `checkpoint ${id} is already committed or being written; checkpoint ids are never reused`,
        'checkpointId',
      );
    }
    // What the job holds in memory while queued (budgetBytesOf): added here, taken off by pump or
    // supersede — the same figure both ways, or the budget leaks a little every checkpoint.
    const entry = makeJob(job);
    const bytes = entry.bytes;
    const victim = job.replaceable ? this.queue.find((j) => j.replaceable) : undefined;
    // A job the idle writer takes at once is never queued, so it does not count against the budget.
    const startsNow = this.active === null && this.queue.length === 0;
    const queuedAfter = this.queuedBytes - (victim?.bytes ?? 0) + (startsNow ? 0 : bytes);
    if (queuedAfter > this.maxQueuedBytes) {
      this.counts.rejected += 1;
      throw new WriterBusyError(
        'size_writer_bytes_full',
        `checkpoint ${id} (${bytes} bytes) would bring queued bytes to ${queuedAfter}, over the budget of ${this.maxQueuedBytes}`,
      );
    }
    if (victim) this.supersede(victim, id);
    this.queue.push(entry);
    this.queuedBytes += bytes;
    this.counts.queued += 1;
    this.publish(entry, 'queued', {});
    this.pump(); // an idle writer takes it at once, so its bytes never count as queued
    this.notePeaks();
    return this.ticketFor(entry);
  }

  private supersede(victim: Job, by: Id): void {
    this.queue.splice(this.queue.indexOf(victim), 1);
    this.queuedBytes -= victim.bytes;
    this.counts.superseded += 1;
    this.publish(victim, 'superseded', { supersededBy: by });
    discardEnvelope(victim.envelope);
    victim.envelope = null; // release the payload handles now
    this.reply(victim, { kind: 'Superseded', checkpointId: victim.id, by });
  }

  private ticketFor(job: Job): SaveTicket {
    return {
      checkpointId: job.id,
      wait: async (budgetMs?: number) => {
        const outcome = budgetMs === undefined ? await job.reply : await withDeadline(job.reply, budgetMs, job.id);
        if (outcome.kind === 'Committed') this.moveMark(outcome.checkpointId, outcome.boundary);
        return outcome;
      },
    };
  }

  private pump(): void {
    if (this.active !== null) return;
    const job = this.queue.shift();
    if (!job) return this.notifyIdle();
    this.active = job;
    this.queuedBytes -= job.bytes;
    void this.write(job).finally(() => {
      this.active = null;
      this.pump();
    });
  }

  private async write(job: Job): Promise<void> {
    if (this.stallGate) await this.stallGate;
    let outcome: SaveOutcome;
    try {
      const envelope = await sealed(job.envelope!);
      const result = await this.store.commit(job.identity, envelope, {
        stopBeforeManifestCommit: this.stopBeforeManifest.has(job.id),
      });
      this.commitSeq.set(job.id, this.nextSeq++);
      this.counts.committed += 1;
      const { boundary, file, envelopeDigest } = result.record;
      outcome = { kind: 'Committed', checkpointId: job.id, boundary, file, envelopeDigest };
      this.publish(job, 'committed', { generation: file, envelopeDigest });
    } catch (e) {
      const reason: FailureReason =
        e instanceof StoreCommitError
          ? e.reason
          : e instanceof SealError
            ? 'seal_failed'
            : isDetsimError(e)
              ? 'invalid_job'
              : 'store_error';
      this.counts.failed += 1;
      outcome = { kind: 'Failed', checkpointId: job.id, reason, message: e instanceof Error ? e.message : String(e) };
      this.publish(job, 'failed', { reason });
    }
    job.envelope = null;
    this.reply(job, outcome);
  }

  /** Deliver a reply unless a test dropped the reply channel for this id. */
  private reply(job: Job, outcome: SaveOutcome): void {
    job.deliver(this.dropReplies.has(job.id) ? { kind: 'ReplyLost', checkpointId: job.id } : outcome);
  }

  private publish(job: Job, event: WriterEvent['event'], extra: Partial<WriterEvent>): void {
    if (!this.onEvent) return;
    const e: WriterEvent = {
      event,
      checkpointId: job.id,
      sessionId: job.identity.sessionId,
      epoch: job.identity.epoch,
      episodeId: job.identity.episodeId,
      boundary: job.identity.boundary,
      byteLength: job.fileBytes,
      durable: !job.replaceable,
      ...extra,
    };
    try {
      const r = this.onEvent(e);
      if (r instanceof Promise) r.catch(() => (this.counts.events_dropped += 1));
    } catch {
      this.counts.events_dropped += 1;
    }
  }

  private moveMark(checkpointId: Id, boundary: U64): void {
    const seq = this.commitSeq.get(checkpointId) ?? -1;
    if (this.mark === null || seq > this.mark.seq) this.mark = { checkpointId, boundary, seq };
  }

  /** The newest generation the caller has seen acknowledged as durable. Only Committed moves it. */
  durableMark(): DurableMark | null {
    return this.mark ? { checkpointId: this.mark.checkpointId, boundary: this.mark.boundary } : null;
  }

  /** Ask the store manifest about the same id (after ReplyLost/DeadlineExpired); never re-saves. */
  resolveDurable(checkpointId: Id): SaveOutcome | null {
    const record = this.store.lookup(checkpointId);
    if (!record) return null;
    this.moveMark(record.checkpointId, record.boundary);
    return {
      kind: 'Committed',
      checkpointId: record.checkpointId,
      boundary: record.boundary,
      file: record.file,
      envelopeDigest: record.envelopeDigest,
    };
  }

  stats(): WriterStats {
    return { ...this.counts, outstanding: this.outstanding(), queued_bytes: this.queuedBytes };
  }

  /** Resolves when nothing is queued, being written or reserved. */
  drain(): Promise<void> {
    if (this.outstanding() === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Refuse new reservations and wait for the queue to empty. */
  async close(): Promise<void> {
    this.closed = true;
    await this.drain();
  }

  private notifyIdle(): void {
    if (this.outstanding() !== 0) return;
    const waiters = this.idleWaiters.splice(0);
    for (const w of waiters) w();
  }

  /** Test hooks: stall the writer, drop a reply, stop a job before its manifest commit. */
  readonly testHooks = {
    /** Jobs taken while stalled wait before touching any file; call the returned function to release. */
    stall: (): (() => void) => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      this.stallGate = gate;
      return () => {
        if (this.stallGate === gate) this.stallGate = null;
        release();
      };
    },
    dropReplyFor: (checkpointId: Id): void => void this.dropReplies.add(checkpointId),
    stopBeforeManifestCommitFor: (checkpointId: Id): void => void this.stopBeforeManifest.add(checkpointId),
  };
}

function makeJob(job: SaveJob): Job {
  let deliver!: (o: SaveOutcome) => void;
  const reply = new Promise<SaveOutcome>((r) => (deliver = r));
  return {
    id: job.identity.checkpointId,
    identity: job.identity,
    envelope: job.envelope,
    bytes: budgetBytesOf(job.envelope),
    fileBytes: job.envelope.byteLength,
    replaceable: job.replaceable,
    reply,
    deliver,
  };
}

function withDeadline(reply: Promise<SaveOutcome>, budgetMs: number, checkpointId: Id): Promise<SaveOutcome> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ kind: 'DeadlineExpired', checkpointId, budgetMs }), budgetMs);
    void reply.then((o) => {
      clearTimeout(timer);
      resolve(o);
    });
  });
}

/** What a job holds in memory while queued: the writer's byte budget counts this. */
function budgetBytesOf(envelope: EnvelopeBytes | DeferredEnvelope): number {
  return 'seal' in envelope ? (envelope.memoryBytes ?? envelope.byteLength) : envelope.byteLength;
}

/** Let a deferred envelope drop what it wrote (best effort: a leftover temp is an orphan gc removes). */
function discardEnvelope(envelope: EnvelopeBytes | DeferredEnvelope | null): void {
  if (envelope && 'seal' in envelope) void envelope.discard?.().catch(() => undefined);
}

/** A deferred envelope's seal failed: nothing was written for it. */
class SealError extends Error {}

async function sealed(envelope: EnvelopeBytes | DeferredEnvelope): Promise<EnvelopeBytes | WrittenEnvelope> {
  if (!('seal' in envelope)) return envelope;
  try {
    return await envelope.seal();
  } catch (e) {
    await envelope.discard?.().catch(() => undefined);
    throw new SealError(`sealing the envelope failed, nothing written: ${e instanceof Error ? e.message : String(e)}`);
  }
}
