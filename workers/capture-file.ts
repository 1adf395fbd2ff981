// capture-file-v1 and v2 on the worker side (docs/spec/capture-file.md): a Capture with `hold: true`
// keeps its payload in the lifecycle cache and replies with size and digest only (v2, with
// `hashAtWrite: true`: the size only); State.WritePayload then writes the held bytes into the
// coordinator's checkpoint temporary at the offset it assigns (v2: hashing them as it goes, and
// replying with the digest).
// A held payload is pieces (capture-encode.ts): its large bins are the model's own arrays, written
// before the group steps again; if they changed meanwhile, the file seal's digest check refuses it.
// NOT the capture itself (the hosts encode the state) and NOT the file confinement (payload-file.ts).
import { readObject, readRequestId, readU64, refuseUnknownFields } from '../core/formats/scalars.js';
import { ProtocolRefusal, type Request, type WritePayloadResult } from '../core/protocol/index.js';
import type { CaptureHold } from './capture-encode.js';
import type { HostReply } from './host-context.js';
import type { LifecycleCache } from './op-cache.js';
import { CAPTURE_FILE_REFUSALS, writeStoreTemp } from './payload-file.js';

/**
 * How this Capture asks to keep its payload. `hold` must be exactly `true` when present, and only a
 * worker with a store directory (the one that offers capture-file-v1 and v2) accepts it;
 * `hashAtWrite` (v2) must be exactly `true` when present, and only beside `hold`.
 */
export function captureHoldOf(req: Request, storeDir: string | undefined): CaptureHold {
  const atWrite = Object.hasOwn(req.params, 'hashAtWrite');
  if (atWrite && req.params.hashAtWrite !== true)
    throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.hashAtWrite must be true when present');
  if (!Object.hasOwn(req.params, 'hold')) {
    if (atWrite) throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.hashAtWrite is only valid with params.hold');
    return 'none';
  }
  if (req.params.hold !== true) throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.hold must be true when present');
  if (storeDir === undefined) throw new ProtocolRefusal('UNSUPPORTED', CAPTURE_FILE_REFUSALS.noStore);
  return atWrite ? 'at-write' : 'hashed';
}

/** The request the host sees: the same Capture without `hold` and `hashAtWrite` (its own field checks stay as they are). */
export function withoutHold(req: Request): Request {
  const { hold: _hold, hashAtWrite: _atWrite, ...params } = req.params;
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
  const entry = lifecycle.get(captureRequestId);
  const held = entry?.held;
  if (!held)
    throw new ProtocolRefusal(
      'INVALID_ARGUMENT',
      'params.captureRequestId names no held capture awaiting acknowledgment on this worker',
    );
  // v1 reported the digest at Capture, so the seal sees a state that moved since; v2 hashes what it
  // writes, so it must refuse a state that may have moved (the coordinator never steps in between).
  if (entry.hashAtWrite && entry.hashAtWrite.stateChanges !== stateChanges)
    throw new ProtocolRefusal(
      'INVALID_PHASE',
      'params.captureRequestId: this worker has served a state-changing call since that capture (held with hashAtWrite); capture again',
    );
  const digest = await writeStoreTemp(storeDir, path, offset, held, { hash: entry.hashAtWrite !== undefined });
  const byteLength = String(held.reduce((n, p) => n + p.byteLength, 0));
  return { result: digest === null ? { byteLength } : { byteLength, digest } };
}
