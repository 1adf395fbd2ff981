// Co-located capture (store-files-v1, docs/spec/capture-file.md): participants whose worker offers
// the capability hold their payload at Capture and write it themselves into the envelope's temp
// file at the offset the layout assigns, hashing it as they write and replying with the digest;
// the coordinator writes the payloads it holds and then the head (header, manifest, table, with
// the digests the writes reported), and hands the writer a job that seals the file in place
// (prefix digest + a check of every reported payload digest, then the footer) and commits it.
// The file is byte-identical to the streamed path's. NOT the capture order or reply checks
// (capture.ts), NOT the seal pass (store/file-seal.ts), NOT the commit (store.ts).
import { type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import {
  layoutEnvelopeHead,
  type EnvelopeHead,
  type EnvelopeManifest,
  type LayoutPayloadInput,
} from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import { readDigest, type Digest, type Id, type Scope } from '../../core/formats/scalars.js';
import { CAPABILITIES, METHODS } from '../../core/protocol/index.js';
import type { LaunchedWorker } from '../launch/launcher.js';
import { type DeclaredRange, type FileSealOptions } from '../store/file-seal.js';
import { sealFileOffLoop } from '../store/seal-thread.js';
import { generationTemp, type WrittenEnvelope } from '../store/store.js';
import type { DeferredEnvelope } from '../store/writer.js';
import { asWriteFailure } from '../write-failure.js';
import { CaptureTemp } from './capture-temp.js';
import { writeRange, type SpillOptions, type StreamedPayloads } from './capture-spill.js';
import type { CheckpointGroup } from './group.js';
import { CheckpointRefusal, type Participant } from './refusal.js';
import { firstRejection, settleSideBySide } from './side-by-side.js';

/** A payload a participant holds after a `hold: true` Capture, to be written by State.WritePayload. */
export interface HeldPayload {
  readonly agentId: Id | null;
  readonly participant: Participant;
  /** The Capture request whose held reply keeps the bytes (until acknowledged); the digest comes with the write. */
  readonly captureRequestId: string;
}

/**
 * Stands for the digest of a held payload until its write reports it: lays the envelope out (a
 * digest's text has one length), never written (writeEnvelopeFile replaces it).
 */
export const DIGEST_AT_WRITE = '0'.repeat(64);

/**
 * Whether this worker writes its payload into the envelope file: it offers store-files-v1 (a worker
 * started with the run's --store-dir whose --store-id matched: it shares this store) and the run
 * has a store. Remote workers and workers without the capability stream their payload.
 */
export function capturesToFile(group: CheckpointGroup, worker: LaunchedWorker): boolean {
  return group.writer !== undefined && worker.hello.capabilities.includes(CAPABILITIES.storeFiles);
}

/** Test hooks of the file path: the seal's chunk size and probe, the streamed-payload spill budget and probe. */
export type CaptureFileHooks = FileSealOptions & SpillOptions;

/**
 * Lay out the envelope; write its in-memory payloads and the streamed payloads that were spilled
 * (capture-spill.ts) into `tmp-<id>.flysess`; have every holder write its payload (side by side;
 * the failure reported is the first in envelope order); then write the head, with the digests
 * holders gave at write. Returns the writer's deferred job. On any failure the temp file is
 * removed and the refusal names the participant.
 */
export async function writeEnvelopeFile(
  group: CheckpointGroup,
  manifest: Omit<EnvelopeManifest, 'payloads'>,
  payloads: readonly LayoutPayloadInput[],
  held: ReadonlyMap<string, HeldPayload>,
  scope: Scope,
  streamed: StreamedPayloads,
  hooks: CaptureFileHooks = {},
): Promise<{ draft: EnvelopeHead; envelope: DeferredEnvelope }> {
  const writer = group.writer!;
  const id = manifest.checkpointId;
  if (writer.claims(id))
    throw new DetsimError(
      'ident_checkpoint_exists',
      `checkpoint ${id} is already committed or being written; checkpoint ids are never reused`,
      'checkpointId',
    );
  const planned = layoutEnvelopeHead(manifest, payloads);
  const path = join(writer.store.dir, generationTemp(id));
  // A failed write (a full disk) is named by its file: capture.ts refuses the capture with it.
  const temp = await CaptureTemp.create(path, id).catch((e: unknown) => {
    throw asWriteFailure(e, path);
  });
  let draft: EnvelopeHead;
  let laidOut: readonly LayoutPayloadInput[];
  try {
    await writeOwnPayloads(temp.handle, planned, payloads, streamed);
    const atWrite = await writeHeldPayloads(group, scope, temp.path, planned, held);
    laidOut = payloads.map((p) => (atWrite.has(p.name) ? { ...p, digest: atWrite.get(p.name)! } : p));
    draft = atWrite.size > 0 ? relaidOut(planned, manifest, laidOut) : planned;
    await writeRange(temp.handle, draft.head, 0);
    await temp.stillThere();
  } catch (e) {
    const why = await temp.explain(e);
    await temp.discard();
    throw asWriteFailure(why, path);
  }
  // Every payload a producer reported a digest for is checked at seal, as on the streamed path.
  const declared: DeclaredRange[] = draft.layout.entries.filter((_, i) => laidOut[i]!.digest !== undefined);
  const seal = async (): Promise<WrittenEnvelope> => {
    try {
      const sealed = await sealFileOffLoop(temp.path, draft.layout, declared, hooks);
      await temp.stillThere();
      return sealed;
    } catch (e) {
      throw await temp.explain(e);
    } finally {
      await temp.close();
    }
  };
  return {
    draft,
    envelope: {
      byteLength: draft.layout.totalBytes,
      memoryBytes: draft.head.byteLength,
      seal,
      discard: () => temp.discard(),
    },
  };
}

/**
 * The layout again with the digests holders gave at write: the same offsets and head length as
 * the one the payloads were written by (a digest's text has one length), or an internal error.
 */
function relaidOut(
  planned: EnvelopeHead,
  manifest: Omit<EnvelopeManifest, 'payloads'>,
  payloads: readonly LayoutPayloadInput[],
): EnvelopeHead {
  const final = layoutEnvelopeHead(manifest, payloads);
  const offsets = (h: EnvelopeHead): string => JSON.stringify(h.layout.entries.map((e) => [e.offset, e.byteLength]));
  if (final.head.byteLength !== planned.head.byteLength || offsets(final) !== offsets(planned))
    throw new Error('the envelope layout moved when the digests reported at write were filled in');
  return final;
}

/**
 * Give the temp file its final length (holes read as the zero padding) and write the payloads in
 * memory and the spilled streamed payloads; the head comes last, once every digest is known.
 */
async function writeOwnPayloads(
  fh: FileHandle,
  draft: EnvelopeHead,
  payloads: readonly LayoutPayloadInput[],
  streamed: StreamedPayloads,
): Promise<void> {
  await fh.truncate(draft.layout.footerOffset);
  for (const [i, entry] of draft.layout.entries.entries()) {
    const p = payloads[i]!;
    if ('bytes' in p) await writeRange(fh, p.bytes, entry.offset);
  }
  await streamed.copyInto(fh, draft.layout.entries);
}

/**
 * State.WritePayload to the holders side by side (bounded; distinct workers write in parallel); all
 * are awaited, and the refusal reported is the first in envelope order, whatever order they
 * finished in. Returns the digests the holders reported, by payload name.
 */
async function writeHeldPayloads(
  group: CheckpointGroup,
  scope: Scope,
  path: string,
  draft: EnvelopeHead,
  held: ReadonlyMap<string, HeldPayload>,
): Promise<Map<string, Digest>> {
  const writes = draft.layout.entries.flatMap((entry) => {
    const h = held.get(entry.name);
    return h ? [{ entry, h }] : [];
  });
  const atWrite = new Map<string, Digest>();
  const settled = await settleSideBySide(writes, async ({ entry, h }) => {
    const rep = await group.call(h.agentId, h.participant, METHODS.writePayload, scope, {
      captureRequestId: h.captureRequestId,
      file: { path, offset: String(entry.offset) },
    });
    const refuse = (why: string): CheckpointRefusal =>
      new CheckpointRefusal('BUFFER_INVALID', 'audit_capture_buffer', `${h.participant}: State.WritePayload ${why}`, {
        participant: h.participant,
      });
    if (rep.result.byteLength !== String(entry.byteLength))
      throw refuse(`wrote ${JSON.stringify(rep.result.byteLength)} bytes, the capture reply said ${entry.byteLength}`);
    try {
      atWrite.set(entry.name, readDigest(rep.result.digest, 'digest'));
    } catch (e) {
      throw refuse(`gave no digest of what it wrote: ${(e as Error).message}`);
    }
  });
  const failed = firstRejection(settled);
  if (failed) throw failed.reason;
  return atWrite;
}
