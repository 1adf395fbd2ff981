# capture-file-v1 and v2 on the worker side (workers/capture-file.ts, docs/spec/capture-file.md): a
# Capture with `hold: true` keeps its payload with the cached lifecycle reply and replies with size
# and digest only (v2, with `hashAtWrite: true`: the size only); State.WritePayload then writes the
# held bytes into the coordinator's checkpoint temporary at the offset it assigns (v2: hashing them
# as it goes, and replying with the digest). Refusals word for word the TypeScript worker's.
# NOT the capture itself (the hosts encode the state) and NOT the file confinement (payload_file.py).
from __future__ import annotations

from dataclasses import replace

from .op_cache import LifecycleCache
from .payload_file import WRITE_REFUSALS, write_store_temp
from .protocol import ProtocolRefusal, Request, as_invalid
from .scalars import MISSING, InputError, read_object, read_request_id, read_u64, refuse_unknown_fields


def capture_hold_of(req: Request, store_dir: str | None) -> str:
    """How this Capture keeps its payload: sent as the attachment ('none'), held with its digest
    ('hashed', v1), or held with its digest left to State.WritePayload ('at-write', v2). `hold` must be
    exactly true when present, and only a worker with a store directory accepts it;
    `hashAtWrite` must be exactly true when present, and only beside `hold`."""
    at_write = 'hashAtWrite' in req.params
    if at_write and req.params['hashAtWrite'] is not True:
        raise ProtocolRefusal('INVALID_ARGUMENT', 'params.hashAtWrite must be true when present')
    if 'hold' not in req.params:
        if at_write:
            raise ProtocolRefusal('INVALID_ARGUMENT', 'params.hashAtWrite is only valid with params.hold')
        return 'none'
    if req.params['hold'] is not True:
        raise ProtocolRefusal('INVALID_ARGUMENT', 'params.hold must be true when present')
    if store_dir is None:
        raise ProtocolRefusal('UNSUPPORTED', WRITE_REFUSALS['no_store'])
    return 'at-write' if at_write else 'hashed'


def without_hold(req: Request) -> Request:
    """The request the host sees: the same Capture without `hold` and `hashAtWrite`."""
    return replace(req, params={k: v for k, v in req.params.items() if k not in ('hold', 'hashAtWrite')})


def write_held_payload(req: Request, lifecycle: LifecycleCache, store_dir: str | None, state_changes: int) -> dict:
    """State.WritePayload: write the payload a held Capture keeps (until acknowledged) into the temp file."""
    capture_request_id, path, offset = _read_write_params(req.params)
    entry = lifecycle.get(capture_request_id)
    if entry is None or entry.get('held') is None:
        raise ProtocolRefusal(
            'INVALID_ARGUMENT', 'params.captureRequestId names no held capture awaiting acknowledgment on this worker'
        )
    held: bytes = entry['held']
    seen_changes: int | None = entry.get('hash_at_write')
    # v1 reported the digest at Capture, so the seal sees a state that moved since; v2 hashes what it
    # writes, so it must refuse a state that may have moved (the coordinator never steps in between).
    if seen_changes is not None and seen_changes != state_changes:
        raise ProtocolRefusal(
            'INVALID_PHASE',
            'params.captureRequestId: this worker has served a state-changing call '
            'since that capture (held with hashAtWrite); capture again',
        )
    digest = write_store_temp(store_dir, path, offset, held, seen_changes is not None)
    result = {'byteLength': str(len(held))}
    return {'result': result if digest is None else {**result, 'digest': digest}}


def _read_write_params(params: dict) -> tuple[str, str, int]:
    try:
        refuse_unknown_fields(params, ['captureRequestId', 'file'], 'params')
        capture_request_id = read_request_id(params.get('captureRequestId', MISSING), 'params.captureRequestId')
        file = read_object(params.get('file', MISSING), 'params.file')
        refuse_unknown_fields(file, ['path', 'offset'], 'params.file')
        path = file.get('path', MISSING)
        if not isinstance(path, str) or len(path) == 0:
            raise ProtocolRefusal('INVALID_ARGUMENT', 'params.file.path must be a non-empty string')
        offset = int(read_u64(file.get('offset', MISSING), 'params.file.offset'))
    except InputError as e:
        raise as_invalid(e) from None
    return capture_request_id, path, offset
