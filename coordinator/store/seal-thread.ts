// The writer's sealing thread: seals FLYSESS1 drafts, and envelopes co-located workers wrote into
// their temp file (the prefix digest and the check of every reported payload digest — all the
// SHA-256 work of a save) on a worker thread, so a large capture's hashing never runs on the event
// loop the step loop shares. NOT the envelope format
// (formats/envelope.ts seals; this only moves the call), NOT the store or the writer queue.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { ModuleThreadRpc, onModuleThread, serveModuleThread, type ThreadAnswer } from '../module-thread.js';
import {
  sealEnvelope,
  sealEnvelopeAsync,
  type EncodedEnvelopeParts,
  type EnvelopeDraft,
  type EnvelopeLayout,
} from '../../core/formats/envelope.js';
import { sealWrittenFile, sealWrittenFileSync, type DeclaredRange, type FileSealOptions } from './file-seal.js';
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

/** Marks the thread this module starts, so that importing it in any other worker thread does nothing. */
const SEAL_THREAD_MARK = { detsimSealThread: 1 } as const;
/** What the thread seals: a draft in memory, or an envelope already in its temp file (capture-file-v1). */
type SealRequest =
  { draft: EnvelopeDraft } | { file: { path: string; layout: EnvelopeLayout; declared: DeclaredRange[] } };
const sealThread = new ModuleThreadRpc<SealRequest, Sealed | WrittenEnvelope>(
  import.meta.url,
  SEAL_THREAD_MARK,
  'sealing',
);

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
 * Seal an envelope already in its temp file (file-seal.ts): on the sealing thread when it is large,
 * so its SHA-256 passes never hold the event loop the step loop shares; else on the loop, a turn
 * every 1 MiB (and always there under a test's allocation probe). Refusals are the same DetsimErrors.
 */
export async function sealFileOffLoop(
  path: string,
  layout: EnvelopeLayout,
  declared: readonly DeclaredRange[],
  options: FileSealOptions = {},
): Promise<WrittenEnvelope> {
  if (layout.footerOffset < THREAD_SEAL_MIN_BYTES || options.onAllocate)
    return sealWrittenFile(path, layout, declared, options);
  return (await sealThread.call({ file: { path, layout, declared: [...declared] } })) as WrittenEnvelope;
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
