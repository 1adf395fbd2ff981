// The writer's sealing threads: one seals FLYSESS1 drafts and envelopes co-located workers wrote
// into their temp file (the prefix digest and the check of every reported payload digest: all the
// SHA-256 work of a save), so a large capture's hashing never runs on the event loop the step loop
// shares; for a very large envelope the other checks the payload digests beside it, so the seal
// takes one pass of time, not two. NOT the envelope format
// (formats/envelope.ts seals; this only moves the call), NOT the store or the writer queue.
import { readlinkSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { setPriority } from 'node:os';
import { ModuleThreadRpc, onModuleThread, serveModuleThread, type ThreadAnswer } from '../module-thread.js';
import {
  sealEnvelope,
  sealEnvelopeAsync,
  type EncodedEnvelopeParts,
  type EnvelopeDraft,
  type EnvelopeLayout,
} from '../../core/formats/envelope.js';
import { isDetsimError } from '../../core/formats/errors.js';
import {
  checkRangesSync,
  sealWrittenFile,
  sealWrittenFileSync,
  type DeclaredRange,
  type FileSealOptions,
} from './file-seal.js';
import type { WrittenEnvelope } from './store.js';

/** Drafts with fewer payload bytes are sealed on the main thread, a slice per turn (a thread hop costs more). */
export const THREAD_SEAL_MIN_BYTES = 8 * 1024 * 1024;

/** What the thread sends back for a draft: the footer, the digest, and the body buffers it was lent. */
interface Sealed {
  footer: Uint8Array;
  envelopeDigest: string;
  body: Uint8Array[];
}

/** Buffers at least this large that own their whole ArrayBuffer are moved to the thread and back, not copied. */
const TRANSFER_MIN_BYTES = 1024 * 1024;

/**
 * The ArrayBuffers of the draft that can move to the thread without a copy: large, not shared with
 * other views (a pooled small Buffer shares its ArrayBuffer and must be copied instead).
 */
function movable(body: readonly Uint8Array[]): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>();
  for (const b of body) {
    if (
      b.byteLength >= TRANSFER_MIN_BYTES &&
      b.byteOffset === 0 &&
      b.buffer instanceof ArrayBuffer &&
      b.byteLength === b.buffer.byteLength
    )
      out.add(b.buffer);
  }
  return [...out];
}

/** Marks the threads this module starts, so that importing it in any other worker thread does nothing. */
const SEAL_THREAD_MARK = { detsimSealThread: 1 } as const;
const CHECK_THREAD_MARK = { detsimSealThread: 2 } as const;
/**
 * What the sealing thread seals: a draft in memory, or an envelope already in its temp file (its
 * declared payloads checked in the same pass; none when the checking thread checks them).
 */
type SealRequest =
  { draft: EnvelopeDraft } | { file: { path: string; layout: EnvelopeLayout; declared: DeclaredRange[] } };
const sealThread = new ModuleThreadRpc<SealRequest, Sealed | WrittenEnvelope>(
  import.meta.url,
  SEAL_THREAD_MARK,
  'sealing',
);
/** What the checking thread checks: the declared payload ranges of an envelope in its temp file. */
interface CheckRequest {
  path: string;
  declared: DeclaredRange[];
}
const checkThread = new ModuleThreadRpc<CheckRequest, null>(import.meta.url, CHECK_THREAD_MARK, 'payload checking');

/**
 * Seal a draft off the event loop: on the sealing thread when it is large, else a slice per
 * event-loop turn. Large payload buffers MOVE to the thread and come back with the seal (no copy,
 * no stall): until this resolves the caller's views of them are detached (byteLength 0), so it
 * must not read them. Refusals are the same DetsimErrors.
 */
export async function sealOffLoop(draft: EnvelopeDraft): Promise<EncodedEnvelopeParts> {
  const payloadBytes = draft.body.reduce((n, b) => n + b.byteLength, 0);
  if (payloadBytes < THREAD_SEAL_MIN_BYTES) return sealEnvelopeAsync(draft);
  const reply = (await sealThread.call({ draft }, movable(draft.body))) as Sealed;
  const parts = [...reply.body, reply.footer].map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  return {
    parts,
    byteLength: draft.byteLength,
    envelopeDigest: reply.envelopeDigest,
    manifest: draft.manifest,
    layout: draft.layout,
  };
}

/**
 * Files at least this large are sealed by two threads side by side (prefix, payload checks): on
 * two cores that takes the step loop's second core for a while (measured: the step rate beside a
 * writer sealing 24 MB captures fell from ~0.9× to ~0.8×), which only a large save's time to
 * durability is worth (bench/README.md, "Two hashing threads for a large seal").
 */
export const PARALLEL_CHECK_MIN_BYTES = 128 * 1024 * 1024;

/**
 * Seal an envelope already in its temp file (file-seal.ts) without holding the event loop the step
 * loop shares. A large file is sealed on the sealing thread in one pass; a very large one in two
 * passes side by side, so its hashing takes one pass of time: the sealing thread hashes the prefix
 * and writes the footer while the checking thread re-hashes every declared payload (and the file's
 * writeback starts meanwhile: flushEarly). A small file
 * (or under a test's allocation probe) is sealed on the loop, a turn every 1 MiB. Refusals are the
 * same DetsimErrors, in the same order: a short file, then the first payload (in file order) that
 * differs.
 */
export async function sealFileOffLoop(
  path: string,
  layout: EnvelopeLayout,
  declared: readonly DeclaredRange[],
  options: FileSealOptions = {},
): Promise<WrittenEnvelope> {
  if (layout.footerOffset < THREAD_SEAL_MIN_BYTES || options.onAllocate)
    return sealWrittenFile(path, layout, declared, options);
  const sealFile = (checked: readonly DeclaredRange[]): Promise<WrittenEnvelope> =>
    sealThread.call({ file: { path, layout, declared: [...checked] } }) as Promise<WrittenEnvelope>;
  if (layout.footerOffset < (options.parallelCheckMinBytes ?? PARALLEL_CHECK_MIN_BYTES) || declared.length === 0)
    return sealFile(declared);
  const [prefix, checks, flush] = await Promise.allSettled([
    sealFile([]),
    checkThread.call({ path, declared: [...declared] }),
    flushEarly(path),
  ]);
  if (prefix.status === 'rejected' && isDetsimError(prefix.reason) && prefix.reason.reason === 'audit_envelope_length')
    throw prefix.reason;
  if (checks.status === 'rejected') throw checks.reason;
  if (prefix.status === 'rejected') throw prefix.reason;
  if (flush.status === 'rejected') throw flush.reason;
  return prefix.value;
}

/**
 * fdatasync a very large temp file while the threads hash it: most of its writeback then overlaps
 * the hashing instead of following it in the store's fsync (bench/README.md, "Two hashing threads
 * for a large seal"). Not the durability step: the store still fsyncs after the footer. Its
 * failure fails the seal, because a writeback error this call reports would not be reported to the
 * store's fsync again.
 */
async function flushEarly(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.datasync();
  } finally {
    await fh.close().catch(() => undefined);
  }
}

// ---- the thread's side ----------------------------------------------------------------------
/**
 * Lowest CPU priority for this thread (Linux: a thread is a schedulable task with its own nice
 * value), so on a busy machine the step loop's processes come first and sealing takes idle time.
 * Elsewhere, or when refused, the thread keeps the default priority.
 */
function yieldCpuToStepping(): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, 19);
  } catch {
    // not Linux, or not allowed: default priority
  }
}

if (onModuleThread(SEAL_THREAD_MARK)) {
  yieldCpuToStepping();
  serveModuleThread((request: SealRequest): ThreadAnswer<Sealed | WrittenEnvelope> => {
    if ('file' in request) {
      const { path, layout, declared } = request.file;
      return { value: sealWrittenFileSync(path, layout, declared) };
    }
    const draft = request.draft;
    const sealed = sealEnvelope(draft);
    // The body goes back the way it came: moved buffers are moved back.
    return {
      value: {
        footer: sealed.parts[sealed.parts.length - 1]!,
        envelopeDigest: sealed.envelopeDigest,
        body: [...draft.body],
      },
      transfer: movable(draft.body),
    };
  });
}

if (onModuleThread(CHECK_THREAD_MARK)) {
  yieldCpuToStepping();
  serveModuleThread((request: CheckRequest): ThreadAnswer<null> => {
    checkRangesSync(request.path, request.declared);
    return { value: null };
  });
}
