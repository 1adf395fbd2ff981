# Refusal checks shared by the agent and environment hosts (workers/checks.ts): scope, session,
# epoch and step rules, payload verification, restore tokens and compatibility digests. Each raises
# ProtocolRefusal with the protocol's code; none mutates anything.
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any

from .canonical_json import canonical_digest, js_stringify
from .fork_rebind import Rebind, read_rebind
from .payload_file import read_store_range
from .protocol import ProtocolRefusal, Request
from .restore_prefetch import PrefetchedPayloads
from .scalars import MISSING, InputError, read_digest, read_id, read_object, read_scope, read_u64, refuse_unknown_fields
from .state_codec import StateCodecError, decode_state, encode_state


def require_scope(req: Request) -> dict:
    if not req.scope:
        raise ProtocolRefusal('INVALID_ARGUMENT', f'{req.method} needs a scope')
    return req.scope


def check_session(scope: dict, session_id: str) -> None:
    if scope['sessionId'] != session_id:
        raise ProtocolRefusal(
            'IDENTITY_MISMATCH',
            f"scope.sessionId {js_stringify(scope['sessionId'])} is not this worker's session "
            f'{js_stringify(session_id)}',
        )


def check_epoch(scope: dict, current: str, who: str) -> None:
    if scope['epoch'] != current:
        raise ProtocolRefusal(
            'STALE_EPOCH',
            f'{who}: scope.epoch {js_stringify(scope["epoch"])} is not the current epoch {js_stringify(current)}',
        )


def check_step(scope: dict, boundary: int, who: str) -> int:
    step = int(scope['step'])
    if step < boundary:
        raise ProtocolRefusal('STALE_STEP', f'{who}: scope.step {step} is behind the boundary {boundary}')
    if step > boundary:
        raise ProtocolRefusal('FUTURE_STEP', f'{who}: scope.step {step} is ahead of the boundary {boundary}')
    return step


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode('utf-8') if isinstance(data, str) else data).hexdigest()


def _payload_name(agent_id: str | None) -> str:
    return 'world' if agent_id is None else f'agent-{agent_id}'


def _check_digest(data: bytes, digest: str, name: str) -> None:
    if sha256(data) != digest:
        raise ProtocolRefusal(
            'BUFFER_INVALID', f'params.payload.digest: the payload digest check failed for payload {name}'
        )


def restore_token(checkpoint_id: str, scope: dict, payload_digest: str, incarnation_id: str) -> str:
    fields = [checkpoint_id, scope['sessionId'], scope['epoch'], scope['step'], payload_digest, incarnation_id]
    text = 'detsim/restore-token-v1\n' + ''.join(f'{x}\n' for x in fields)
    return 'rt-' + sha256(text)[:32]


def agent_compatibility_digest(
    agent_id, profile_digest, dataset_digest, model_version, plasticity_version, seed
) -> str:
    return canonical_digest(
        {
            'agentId': agent_id,
            'profileDigest': profile_digest,
            'datasetDigest': dataset_digest,
            'modelVersion': model_version,
            'plasticityVersion': plasticity_version,
            'seed': seed,
        }
    )


def environment_compatibility_digest(environment_id, profile_digest, model_version, seed, ports) -> str:
    return canonical_digest(
        {
            'environmentId': environment_id,
            'profileDigest': profile_digest,
            'modelVersion': model_version,
            'seed': seed,
            'ports': [{'portId': p['portId'], 'agentId': p['agentId']} for p in ports],
        }
    )


def profile_digest(model: str, model_version: str, params: dict) -> str:
    return canonical_digest({'model': model, 'modelVersion': model_version, 'params': params})


def _shown(value: Any) -> str:
    return 'undefined' if value is MISSING else js_stringify(value)


def first_mismatch(recorded: dict, live: dict, order: list[str]) -> str | None:
    for f in order:
        r, here = recorded.get(f, MISSING), live.get(f, MISSING)
        if canonical_digest(None if r is MISSING else r) != canonical_digest(None if here is MISSING else here):
            return f'{f}: payload has {_shown(r)}, this worker has {_shown(here)}'
    return None


@dataclass
class StageParams:
    checkpoint_id: str
    agent_id: str | None
    source_scope: dict
    compatibility_digest: str
    digest: str
    byte_length: str
    file: tuple[str, int] | None
    rebind: Rebind | None = None  # a fork's new params (fork_rebind.py)


def read_stage_params(params: dict, scope: dict, host: str) -> StageParams:
    refuse_unknown_fields(
        params, ['checkpointId', 'agentId', 'sourceScope', 'compatibilityDigest', 'payload', 'rebind'], 'params'
    )
    checkpoint_id = read_id(params.get('checkpointId', MISSING), 'params.checkpointId')
    agent_raw = params.get('agentId', MISSING)
    if host == 'agent' and agent_raw is None:
        raise ProtocolRefusal(
            'INVALID_ARGUMENT', 'params.agentId is null but this worker hosts agents, not the environment'
        )
    if host == 'environment' and agent_raw is not None:
        raise ProtocolRefusal('INVALID_ARGUMENT', 'params.agentId must be null: this worker hosts the environment')
    agent_id = read_id(agent_raw, 'params.agentId') if host == 'agent' else None
    source_scope = read_scope(params.get('sourceScope', MISSING), 'params.sourceScope')
    compat = read_digest(params.get('compatibilityDigest', MISSING), 'params.compatibilityDigest')
    p = read_object(params.get('payload', MISSING), 'params.payload')
    refuse_unknown_fields(p, ['digest', 'byteLength', 'file'], 'params.payload')
    digest = read_digest(p.get('digest', MISSING), 'params.payload.digest')
    byte_length = read_u64(p.get('byteLength', MISSING), 'params.payload.byteLength')
    file = None if 'file' not in p else _read_payload_file(p['file'])
    if source_scope['sessionId'] != scope['sessionId']:
        raise ProtocolRefusal(
            'IDENTITY_MISMATCH',
            f'params.sourceScope.sessionId {source_scope["sessionId"]} is not this session {scope["sessionId"]}',
        )
    if source_scope['step'] != scope['step']:
        raise ProtocolRefusal(
            'INVALID_ARGUMENT', f'scope.step {scope["step"]} must equal params.sourceScope.step {source_scope["step"]}'
        )
    rebind = read_rebind(params.get('rebind', MISSING))
    return StageParams(checkpoint_id, agent_id, source_scope, compat, digest, byte_length, file, rebind)


def _read_payload_file(value: Any) -> tuple[str, int]:
    f = read_object(value, 'params.payload.file')
    refuse_unknown_fields(f, ['path', 'offset'], 'params.payload.file')
    path = f.get('path', MISSING)
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ProtocolRefusal(
            'INVALID_ARGUMENT',
            f'params.payload.file.path {js_stringify(None if path is MISSING else path)} is not an absolute path',
        )
    return path, int(read_u64(f.get('offset', MISSING), 'params.payload.file.offset'))


def staged_payload(
    attachment: bytes | None, staged: StageParams, store_dir: str | None, prefetched: PrefetchedPayloads | None = None
) -> bytes:
    name = _payload_name(staged.agent_id)
    # The restore prefetch (store-files-v1): bytes read and hashed against exactly this reference
    # while the coordinator verified.
    early = prefetched.take(staged.agent_id, staged.file, staged.byte_length, staged.digest) if prefetched else None
    if early is not None and attachment is None:
        return early
    if staged.file is None:
        if attachment is None:
            raise ProtocolRefusal('BUFFER_INVALID', 'StageRestore carries no payload attachment')
        if str(len(attachment)) != staged.byte_length:
            raise ProtocolRefusal(
                'BUFFER_INVALID',
                f'payload attachment is {len(attachment)} bytes; payload.byteLength says {staged.byte_length}',
            )
        _check_digest(attachment, staged.digest, name)
        return attachment
    if attachment is not None:
        raise ProtocolRefusal(
            'INVALID_ARGUMENT', 'StageRestore carries both an attachment and params.payload.file: send one'
        )
    path, offset = staged.file
    data = read_store_range(store_dir, path, offset, int(staged.byte_length))
    _check_digest(data, staged.digest, name)
    return data


def capture_reply(
    payload: dict,
    who: str,
    checkpoint_id: str,
    agent_id: str | None,
    boundary: int,
    compatibility_digest: str,
    hold_from: int | None = None,
) -> dict:
    """One participant's State.Capture reply (agent or environment alike): its payload encoded as the
    attachment, with the digest and length the coordinator checks when it seals the envelope. A capture
    asked to hold from a size (store-files-v1, capture_file.py) whose payload is at least `hold_from`
    bytes keeps the bytes as 'held' instead of sending them and does not hash them here:
    State.WritePayload hashes what it writes. A shorter payload is replied as an unheld one."""
    try:
        data = encode_state(payload)
    except StateCodecError as e:
        # Paths from the model's state (its payload's `state` field), as the TypeScript worker names them.
        message = re.sub(r'\$\.state\b', '$', str(e))
        raise ProtocolRefusal('BACKEND_FAILURE', f'{who}: capture state cannot be encoded: {message}', 'none') from None
    held = hold_from is not None and len(data) >= hold_from
    ref = {'byteLength': str(len(data))} if held else {'digest': sha256(data), 'byteLength': str(len(data))}
    result = {
        'checkpointId': checkpoint_id,
        'agentId': agent_id,
        'boundary': str(boundary),
        'compatibilityDigest': compatibility_digest,
        'payload': ref,
    }
    return {'result': result, 'held': data} if held else {'result': result, 'attachment': data}


# The version of the state payload both hosts write and read (payloadVersion).
PAYLOAD_VERSION = 1


def _same_canonical(a: Any, b: Any) -> bool:
    try:
        return canonical_digest(a) == canonical_digest(b)
    except ValueError:
        return False


def read_payload_header(
    data: bytes, who: str, kind: str, checkpoint_id: str, source_scope: dict, agent_id: str | None = None
) -> tuple[dict, Any]:
    """Decode a state payload and check the header both hosts share, in this order: payloadVersion,
    kind, the agent id (agents only), checkpointId, sourceScope, committedStep. Returns the payload
    and the field check (`expect`) for the host's own fields, so every refusal reads the same way."""
    try:
        payload = read_object(decode_state(data), 'payload')
    except (StateCodecError, InputError) as e:
        raise ProtocolRefusal('INCOMPATIBLE_STATE', f'{who}: payload is not a state payload: {e}') from None

    def expect(fld: str, ok: bool, what: str) -> None:
        if not ok:
            raise ProtocolRefusal('INCOMPATIBLE_STATE', f'{who}: payload {fld} {what}')

    def shown(k: str) -> str:
        return 'undefined' if k not in payload else js_stringify(payload[k])

    expect('payloadVersion', payload.get('payloadVersion') == PAYLOAD_VERSION, f'must be {PAYLOAD_VERSION}')
    expect('kind', payload.get('kind') == kind, f'must be "{kind}"')
    if agent_id is not None:
        expect('agentId', payload.get('agentId') == agent_id, f'is {shown("agentId")}, not {agent_id}')
    expect(
        'checkpointId', payload.get('checkpointId') == checkpoint_id, f'is {shown("checkpointId")}, not {checkpoint_id}'
    )
    expect('sourceScope', _same_canonical(payload.get('sourceScope'), source_scope), 'differs from params.sourceScope')
    expect(
        'committedStep',
        payload.get('committedStep') == source_scope['step'],
        f'is {shown("committedStep")}, not {source_scope["step"]}',
    )
    return payload, expect
