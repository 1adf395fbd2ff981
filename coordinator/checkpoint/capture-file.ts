// Co-located capture (capture-file-v1, docs/spec/capture-file.md): participants whose worker
// offers the capability hold their payload at Capture and write it themselves into the envelope's
// temp file at the offset the layout assigns; the coordinator writes the head (header, manifest,
// table) and the payloads it holds, and hands the writer a job that seals the file in place
// (prefix digest + a check of every reported payload digest, then the footer) and commits it.
// The file is byte-identical to the streamed path's. NOT the capture order or reply checks
// (capture.ts), NOT the seal pass (store/file-seal.ts), NOT the commit (store.ts).
import { constants } from 'node:fs';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import {
  layoutEnvelopeHead,
  type EnvelopeHead,
  type EnvelopeManifest,
  type LayoutPayloadInput,
} from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Id, Scope } from '../../core/formats/scalars.js';
import { CAPABILITIES, METHODS } from '../../core/protocol/index.js';
import type { LaunchedWorker } from '../launcher.js';
import { type DeclaredRange, type FileSealOptions } from '../store/file-seal.js';
import { sealFileOffLoop } from '../store/seal-thread.js';
import { generationTemp } from '../store/store.js';
import type { DeferredEnvelope } from '../store/writer.js';
import { writeRange, type SpillOptions, type StreamedPayloads } from './capture-spill.js';
import type { CheckpointGroup } from './group.js';
import { CheckpointRefusal, type Participant } from './refusal.js';
import { firstRejection, settleSideBySide } from './side-by-side.js';

/** A payload a participant holds after a `hold: true` Capture, to be written by State.WritePayload. */
export interface HeldPayload {
  readonly agentId: Id | null;
  readonly participant: Participant;
  /** The Capture request whose held reply keeps the bytes (until acknowledged). */
  readonly captureRequestId: string;
}

/**
 * Whether this worker writes its payload into the envelope file: it offers capture-file-v1 (a TS
 * worker started with the run's --store-dir; the launcher spawned it on this machine) and the run
 * has a store. Remote workers and workers without the capability stream their payload.
 */
export function capturesToFile(group: CheckpointGroup, worker: LaunchedWorker): boolean {
  return group.writer !== undefined && worker.hello.capabilities.includes(CAPABILITIES.captureFile);
}

/** Test hooks of the file path: the seal's chunk size and probe, the streamed-payload spill budget and probe. */
export type CaptureFileHooks = FileSealOptions & SpillOptions;

/**
 * Lay out the envelope, write its head and in-memory payloads into `tmp-<id>.flysess`, copy the
 * streamed payloads that were spilled (capture-spill.ts), have every holder write its payload (side by side; the failure reported is the first in envelope order),
 * and return the writer's deferred job. On any failure the temp file is removed and the refusal
 * names the participant.
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
  const draft = layoutEnvelopeHead(manifest, payloads);
  const path = join(writer.store.dir, generationTemp(id));
  const discard = (): Promise<void> => unlink(path).catch(() => undefined);
  try {
    await writeHeadAndOwnPayloads(path, draft, payloads, streamed);
    await writeHeldPayloads(group, scope, path, draft, held);
  } catch (e) {
    await discard();
    throw e;
  }
  // Every payload a producer reported a digest for is checked at seal, as on the streamed path.
  const declared: DeclaredRange[] = draft.layout.entries.filter((_, i) => payloads[i]!.digest !== undefined);
  return {
    draft,
    envelope: {
      byteLength: draft.layout.totalBytes,
      memoryBytes: draft.head.byteLength,
      seal: () => sealFileOffLoop(path, draft.layout, declared, hooks),
      discard,
    },
  };
}

/**
 * Create the temp file at its final length (holes read as the zero padding) with the head, the
 * payloads in memory and the spilled streamed payloads.
 */
async function writeHeadAndOwnPayloads(
  path: string,
  draft: EnvelopeHead,
  payloads: readonly LayoutPayloadInput[],
  streamed: StreamedPayloads,
): Promise<void> {
  const fh: FileHandle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o644);
  try {
    await fh.truncate(draft.layout.footerOffset);
    await writeRange(fh, draft.head, 0);
    for (const [i, entry] of draft.layout.entries.entries()) {
      const p = payloads[i]!;
      if ('bytes' in p) await writeRange(fh, p.bytes, entry.offset);
    }
    await streamed.copyInto(fh, draft.layout.entries);
  } finally {
    await fh.close();
  }
}

/**
 * State.WritePayload to the holders side by side (bounded; distinct workers write in parallel); all are awaited,
 * and the refusal reported is the first in envelope order, whatever order they finished in.
 */
async function writeHeldPayloads(
  group: CheckpointGroup,
  scope: Scope,
  path: string,
  draft: EnvelopeHead,
  held: ReadonlyMap<string, HeldPayload>,
): Promise<void> {
  const writes = draft.layout.entries.flatMap((entry) => {
    const h = held.get(entry.name);
    return h ? [{ entry, h }] : [];
  });
  const settled = await settleSideBySide(writes, async ({ entry, h }) => {
    const rep = await group.call(h.agentId, h.participant, METHODS.writePayload, scope, {
      captureRequestId: h.captureRequestId,
      file: { path, offset: String(entry.offset) },
    });
    if (rep.result.byteLength !== String(entry.byteLength))
      throw new CheckpointRefusal(
        'BUFFER_INVALID',
        'audit_capture_buffer',
        `${h.participant}: State.WritePayload wrote ${JSON.stringify(rep.result.byteLength)} bytes, the capture reply said ${entry.byteLength}`,
        { participant: h.participant },
      );
  });
  const failed = firstRejection(settled);
  if (failed) throw failed.reason;
}
