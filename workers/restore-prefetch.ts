// The restore prefetch of store-files-v1 on the worker side: State.PrefetchPayload reads a
// participant's payload range of a committed checkpoint file (in the run's store only) and hashes it
// in the same pass, while the coordinator verifies that file; bytes that hash to the referenced digest are kept, one set per
// participant, for the StageRestore naming the very same range, which then neither reads nor hashes
// again. Nothing is staged here and nothing changes state: a prefetch that is never used is dropped
// by the next one, by a StageRestore, or by a prefetch with `payload: null`.
// NOT staging (the hosts), NOT the file confinement (payload-file.ts).
import { stat } from 'node:fs/promises';
import { readDigest, readId, readObject, readU64, refuseUnknownFields } from '../core/formats/scalars.js';
import type { PrefetchPayloadResult } from '../core/protocol/bodies.js';
import { ProtocolRefusal, type Request } from '../core/protocol/envelope.js';
import { predecode, readStorePayload, type StageParams } from './checks.js';
import type { HostReply } from './host-context.js';

/** What a prefetch read: the exact reference it was checked against, the file's version, and the bytes. */
interface Prefetched {
  readonly key: string;
  readonly version: string | null;
  readonly bytes: Uint8Array;
}

/**
 * The file's identity and last change (inode, size, mtime, ctime in ns), taken before reading: a
 * StageRestore uses prefetched bytes only if the file is still that version, so a file changed
 * after the prefetch is read (and refused) by the stage exactly as without a prefetch.
 */
async function fileVersion(path: string): Promise<string | null> {
  const s = await stat(path, { bigint: true }).catch(() => null);
  return s && [s.dev, s.ino, s.size, s.mtimeNs, s.ctimeNs].join(':');
}

/** The participant a prefetch or stage is for: an agent id, or the environment. */
const participantKey = (agentId: string | null): string => (agentId === null ? '' : `agent:${agentId}`);

const referenceKey = (path: string, offset: bigint, byteLength: string, digest: string): string =>
  JSON.stringify([path, offset.toString(), byteLength, digest]);

/**
 * A host's early start on a prefetched payload (e.g. its model's restore into new state), given the
 * decoded value the StageRestore will get: it must change nothing a stage or step sees.
 */
export type WarmPrefetched = (agentId: string | null, decoded: unknown) => void;

/** The payloads this worker prefetched, at most one per participant. */
export class PrefetchedPayloads {
  private readonly held = new Map<string, Prefetched>();

  constructor(private readonly warm?: WarmPrefetched) {}

  /** State.PrefetchPayload: read and hash the range; keep the bytes when they match. */
  async prefetch(req: Request, storeDir: string | undefined): Promise<HostReply<PrefetchPayloadResult>> {
    const { agentId, ref } = readPrefetchParams(req.params);
    this.held.delete(participantKey(agentId));
    if (ref === null) return { result: { matched: false } };
    const version = await fileVersion(ref.file.path);
    const { bytes, digest } = await readStorePayload(storeDir, ref.file, BigInt(ref.byteLength));
    if (digest !== ref.digest || version === null) return { result: { matched: false } };
    // Hash and decode before the stage: the stage then only checks fields (checks.ts decodeStaged).
    const decoded = predecode(bytes);
    if (decoded !== undefined) this.warm?.(agentId, decoded);
    this.held.set(participantKey(agentId), {
      key: referenceKey(ref.file.path, ref.file.offset, ref.byteLength, ref.digest),
      version,
      bytes,
    });
    return { result: { matched: true } };
  }

  /**
   * The prefetched bytes of exactly the range and digest this StageRestore names, or undefined (the
   * stage reads the file itself). Either way this participant's prefetch is used up.
   */
  async take(staged: StageParams): Promise<Uint8Array | undefined> {
    const held = this.held.get(participantKey(staged.agentId));
    this.held.delete(participantKey(staged.agentId));
    if (!held || !staged.file) return undefined;
    const key = referenceKey(staged.file.path, staged.file.offset, staged.ref.byteLength, staged.ref.digest);
    if (held.key !== key) return undefined;
    return (await fileVersion(staged.file.path)) === held.version ? held.bytes : undefined;
  }
}

function readPrefetchParams(params: Record<string, unknown>): {
  agentId: string | null;
  ref: { digest: string; byteLength: string; file: { path: string; offset: bigint } } | null;
} {
  try {
    refuseUnknownFields(params, ['agentId', 'payload'], 'params');
    const agentId = params.agentId === null ? null : readId(params.agentId, 'params.agentId');
    if (params.payload === null) return { agentId, ref: null };
    const p = readObject(params.payload, 'params.payload');
    refuseUnknownFields(p, ['digest', 'byteLength', 'file'], 'params.payload');
    const f = readObject(p.file, 'params.payload.file');
    refuseUnknownFields(f, ['path', 'offset'], 'params.payload.file');
    if (typeof f.path !== 'string' || f.path.length === 0)
      throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.payload.file.path must be a non-empty string');
    return {
      agentId,
      ref: {
        digest: readDigest(p.digest, 'params.payload.digest'),
        byteLength: readU64(p.byteLength, 'params.payload.byteLength'),
        file: { path: f.path, offset: BigInt(readU64(f.offset, 'params.payload.file.offset')) },
      },
    };
  } catch (e) {
    if (e instanceof ProtocolRefusal) throw e;
    throw new ProtocolRefusal('INVALID_ARGUMENT', (e as Error).message);
  }
}
