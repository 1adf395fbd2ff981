// The writer's sealing thread: seals FLYSESS1 drafts (the prefix digest and the check of every
// reported payload digest — all the SHA-256 work of a save) on a worker thread, so a large
// capture's hashing never runs on the event loop the step loop shares. NOT the envelope format
// (formats/envelope.ts seals; this only moves the call), NOT the store or the writer queue.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, type Worker, workerData } from 'node:worker_threads';
import { startModuleThread } from '../module-thread.js';
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import {
  sealEnvelope,
  sealEnvelopeAsync,
  type EncodedEnvelopeParts,
  type EnvelopeDraft,
} from '../../core/formats/envelope.js';

/** Drafts with fewer payload bytes are sealed on the main thread, a slice per turn (a thread hop costs more). */
export const THREAD_SEAL_MIN_BYTES = 8 * 1024 * 1024;

type Reply =
  | { id: number; ok: true; footer: Uint8Array; envelopeDigest: string; body: Uint8Array[] }
  | { id: number; ok: false; reason: ReasonCode | null; message: string; field: string | undefined };

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
let thread: Worker | null = null;
let nextId = 0;
const waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();

function sealThread(): Worker {
  if (thread) return thread;
  const w = startModuleThread(import.meta.url, SEAL_THREAD_MARK);
  w.on('message', (r: Reply) => {
    const p = waiting.get(r.id);
    waiting.delete(r.id);
    if (waiting.size === 0) w.unref();
    p?.resolve(r);
  });
  const fail = (e: Error): void => {
    thread = null;
    for (const p of waiting.values()) p.reject(e);
    waiting.clear();
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`the sealing thread exited (code ${code})`)));
  thread = w;
  return w;
}

/**
 * Seal a draft off the event loop: on the sealing thread when it is large, else a slice per
 * event-loop turn. Large payload buffers MOVE to the thread and come back with the seal (no copy,
 * no stall): until this resolves the caller's views of them are detached (byteLength 0), so it
 * must not read them. Refusals are the same DetsimErrors.
 */
export async function sealOffLoop(draft: EnvelopeDraft): Promise<EncodedEnvelopeParts> {
  const payloadBytes = draft.body.reduce((n, b) => n + b.byteLength, 0);
  if (payloadBytes < THREAD_SEAL_MIN_BYTES) return sealEnvelopeAsync(draft);
  const w = sealThread();
  const id = nextId++;
  const reply = await new Promise<Reply>((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    w.ref();
    w.postMessage({ id, draft }, movable(draft.body));
  });
  if (!reply.ok)
    throw reply.reason ? new DetsimError(reply.reason, reply.message, reply.field) : new Error(reply.message);
  const parts = [...reply.body, reply.footer].map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  return {
    parts,
    byteLength: draft.byteLength,
    envelopeDigest: reply.envelopeDigest,
    manifest: draft.manifest,
    layout: draft.layout,
  };
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

if (parentPort && (workerData as Partial<typeof SEAL_THREAD_MARK> | null)?.detsimSealThread === 1) {
  const port = parentPort;
  yieldCpuToStepping();
  port.on('message', ({ id, draft }: { id: number; draft: EnvelopeDraft }) => {
    try {
      const sealed = sealEnvelope(draft);
      // The body goes back the way it came: moved buffers are moved back.
      port.postMessage(
        {
          id,
          ok: true,
          footer: sealed.parts[sealed.parts.length - 1]!,
          envelopeDigest: sealed.envelopeDigest,
          body: [...draft.body],
        } satisfies Reply,
        movable(draft.body),
      );
    } catch (e) {
      const reason = isDetsimError(e) ? e.reason : null;
      port.postMessage({
        id,
        ok: false,
        reason,
        message: e instanceof Error ? e.message : String(e),
        field: isDetsimError(e) ? e.field : undefined,
      } satisfies Reply);
    }
  });
}
