// Held captures on the worker side (store-files-v1, docs/spec/capture-file.md): a Capture with
// `hold: true` (and at least `holdFrom` bytes, when it names that) keeps its payload in the
// lifecycle cache and replies with its size only;
// State.WritePayload then writes the held bytes into the coordinator's checkpoint temporary at the
// offset it assigns, hashing them as it goes, and replies with their digest. It refuses once the
// worker has served a state-changing call since the capture (the digest would be of a moved state).
// A held payload is pieces (capture-encode.ts): its large bins are the model's own arrays.
// NOT the capture itself (the hosts encode the state) and NOT the file confinement (payload-file.ts).
import { readObject, readRequestId, readU64, refuseUnknownFields } from '../core/formats/scalars.js';
import type { WritePayloadResult } from '../core/protocol/bodies.js';
import { ProtocolRefusal, type Request } from '../core/protocol/envelope.js';
import type { HostReply } from './host-context.js';
import type { LifecycleCache } from './op-cache.js';
import { CAPTURE_FILE_REFUSALS, writeStoreTemp } from './payload-file.js';

/**
 * Whether this Capture asks to hold its payload, and from what size: undefined when it does not,
 * else the size from which it is held (0 for `hold: true` alone; `holdFrom` names another,
 * capture-hold-from-v1). `hold` must be exactly `true` when present, `holdFrom` only beside it, and
 * only a worker with a store directory (the one that offers store-files-v1) accepts them.
 */
export function captureHoldOf(req: Request, storeDir: string | undefined): number | undefined {
  if (!Object.hasOwn(req.params, 'hold')) {
    if (Object.hasOwn(req.params, 'holdFrom'))
      throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.holdFrom is allowed only with params.hold');
    return undefined;
  }
  if (req.params.hold !== true) throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.hold must be true when present');
  if (storeDir === undefined) throw new ProtocolRefusal('UNSUPPORTED', CAPTURE_FILE_REFUSALS.noStore);
  if (!Object.hasOwn(req.params, 'holdFrom')) return 0;
  try {
    // A size past 2^53 holds nothing a worker can encode, which Number's rounding keeps true.
    return Number(readU64(req.params.holdFrom, 'params.holdFrom'));
  } catch (e) {
    throw new ProtocolRefusal('INVALID_ARGUMENT', (e as Error).message);
  }
}

/** The request the host sees: the same Capture without `hold` and `holdFrom` (its own field checks stay as they are). */
export function withoutHold(req: Request): Request {
  const { hold: _hold, holdFrom: _holdFrom, ...params } = req.params;
  return { ...req, params };
}

/** State.WritePayload: write the payload a held Capture keeps (until acknowledged) into the temp file. */
export async function writeHeldPayload(
  req: Request,
  lifecycle: LifecycleCache,
  storeDir: string | undefined,
  stateChanges: number,
): Promise<HostReply<WritePayloadResult>> {
  let captureRequestId: string, path: string, offset: bigint;
  try {
    refuseUnknownFields(req.params, ['captureRequestId', 'file'], 'params');
    captureRequestId = readRequestId(req.params.captureRequestId, 'params.captureRequestId');
    const file = readObject(req.params.file, 'params.file');
    refuseUnknownFields(file, ['path', 'offset'], 'params.file');
    if (typeof file.path !== 'string' || file.path.length === 0)
      throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.file.path must be a non-empty string');
    path = file.path;
    offset = BigInt(readU64(file.offset, 'params.file.offset'));
  } catch (e) {
    if (e instanceof ProtocolRefusal) throw e;
    throw new ProtocolRefusal('INVALID_ARGUMENT', (e as Error).message);
  }
  const held = lifecycle.get(captureRequestId)?.held;
  if (!held)
    throw new ProtocolRefusal(
      'INVALID_ARGUMENT',
      'params.captureRequestId names no held capture awaiting acknowledgment on this worker',
    );
  // The write hashes what it writes, so it must refuse a state that may have moved since the
  // capture (the coordinator never steps the group in between).
  if (held.stateChanges !== stateChanges)
    throw new ProtocolRefusal(
      'INVALID_PHASE',
      'params.captureRequestId: this worker has served a state-changing call since that capture; capture again',
    );
  const digest = await writeStoreTemp(storeDir, path, offset, held.pieces);
  const byteLength = String(held.pieces.reduce((n, p) => n + p.byteLength, 0));
  return { result: { byteLength, digest } };
}
