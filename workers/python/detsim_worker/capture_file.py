# Held captures on the worker side (store-files-v1; workers/capture-file.ts, docs/spec/capture-file.md):
# a Capture with `hold: true` keeps its payload with the cached lifecycle reply and replies with its
# size only; with `holdFrom` beside it (capture-hold-from-v1) only a payload at least that many bytes
# long is held, a shorter one is replied and cached like any unheld capture. State.WritePayload then
# writes the held bytes into the coordinator's checkpoint temporary at the offset it assigns, hashing
# them as it goes, and replies with their digest. It refuses once the worker has served a
# state-changing call since the capture. Refusals word for word the TypeScript worker's.
# NOT the capture itself (the hosts encode the state) and NOT the file confinement (payload_file.py).
from __future__ import annotations

from dataclasses import replace

from .op_cache import LifecycleCache
from .payload_file import WRITE_REFUSALS, write_store_temp
from .protocol import ProtocolRefusal, Request, as_invalid
from .scalars import MISSING, InputError, read_object, read_request_id, read_u64, refuse_unknown_fields


def capture_hold_of(req: Request, store_dir: str | None) -> int | None:
    """The size from which this Capture holds its payload: None when it asks for no hold, 0 for plain
    `hold: true` (always), `holdFrom` when given (capture-hold-from-v1). `hold` must be exactly true
    when present, `holdFrom` a U64 beside it, and only a worker with a store directory (the one that
    offers store-files-v1) accepts them."""
    if 'hold' not in req.params:
        if 'holdFrom' in req.params:
            raise ProtocolRefusal('INVALID_ARGUMENT', 'params.holdFrom is allowed only with params.hold')
        return None
    if req.params['hold'] is not True:
        raise ProtocolRefusal('INVALID_ARGUMENT', 'params.hold must be true when present')
    if store_dir is None:
        raise ProtocolRefusal('UNSUPPORTED', WRITE_REFUSALS['no_store'])
    if 'holdFrom' not in req.params:
        return 0
    try:
        return int(read_u64(req.params['holdFrom'], 'params.holdFrom'))
    except InputError as e:
        raise as_invalid(e) from None


def without_hold(req: Request) -> Request:
    """The request the host sees: the same Capture without `hold` and `holdFrom`."""
    return replace(req, params={k: v for k, v in req.params.items() if k not in ('hold', 'holdFrom')})


def write_held_payload(req: Request, lifecycle: LifecycleCache, store_dir: str | None, state_changes: int) -> dict:
    """State.WritePayload: write the payload a held Capture keeps (until acknowledged) into the temp file."""
    capture_request_id, path, offset = _read_write_params(req.params)
    entry = lifecycle.get(capture_request_id)
    if entry is None or entry.get('held') is None:
        raise ProtocolRefusal(
            'INVALID_ARGUMENT', 'params.captureRequestId names no held capture awaiting acknowledgment on this worker'
        )
    held: bytes = entry['held']
    # The write hashes what it writes, so it must refuse a state that may have moved since the
    # capture (the coordinator never steps the group in between).
    if entry['state_changes'] != state_changes:
        raise ProtocolRefusal(
            'INVALID_PHASE',
            'params.captureRequestId: this worker has served a state-changing call since that capture; capture again',
        )
    digest = write_store_temp(store_dir, path, offset, held)
    return {'result': {'byteLength': str(len(held)), 'digest': digest}}


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
