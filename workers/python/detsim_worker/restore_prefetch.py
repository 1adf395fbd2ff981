# The restore prefetch of store-files-v1 on the worker side (workers/restore-prefetch.ts):
# State.PrefetchPayload reads a participant's payload range of a committed checkpoint file (in the
# run's store only) and hashes it in the same pass, while the coordinator verifies that file; bytes
# that hash to the referenced digest are kept, one set per participant, for the StageRestore naming
# the very same range, which then neither reads nor hashes again. Nothing is staged here and nothing
# changes state: a prefetch that is never used is dropped by the next one, by a StageRestore, or by
# a prefetch with `payload: null`. Replies and refusals word for word the TypeScript worker's.
# NOT staging (the hosts, checks.py staged_payload), NOT the file confinement (payload_file.py).
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from .payload_file import read_store_range
from .protocol import ProtocolRefusal, as_invalid
from .scalars import MISSING, InputError, read_digest, read_id, read_object, read_u64, refuse_unknown_fields


@dataclass(frozen=True)
class _Reference:
    digest: str
    byte_length: str
    path: str
    offset: int

    def key(self) -> str:
        return json.dumps([self.path, str(self.offset), self.byte_length, self.digest])


@dataclass(frozen=True)
class _Prefetched:
    key: str
    version: tuple[int, ...] | None
    data: bytes


def _file_version(path: str) -> tuple[int, ...] | None:
    """The file's identity and last change, taken before reading: a StageRestore uses prefetched bytes
    only if the file is still that version, so a file changed after the prefetch is read (and
    refused) by the stage exactly as without a prefetch."""
    try:
        s = os.stat(path)
    except (OSError, ValueError):
        return None
    return (s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns)


def _participant(agent_id: str | None) -> str:
    return '' if agent_id is None else f'agent:{agent_id}'


class PrefetchedPayloads:
    """The payloads this worker prefetched, at most one per participant."""

    def __init__(self) -> None:
        self._held: dict[str, _Prefetched] = {}

    def prefetch(self, params: dict, store_dir: str | None) -> dict:
        """State.PrefetchPayload: read and hash the range; keep the bytes when they match."""
        agent_id, ref = _read_params(params)
        self._held.pop(_participant(agent_id), None)
        if ref is None:
            return {'result': {'matched': False}}
        version = _file_version(ref.path)
        data = read_store_range(store_dir, ref.path, ref.offset, int(ref.byte_length))
        if hashlib.sha256(data).hexdigest() != ref.digest or version is None:
            return {'result': {'matched': False}}
        self._held[_participant(agent_id)] = _Prefetched(ref.key(), version, data)
        return {'result': {'matched': True}}

    def take(self, agent_id: str | None, file: tuple[str, int] | None, byte_length: str, digest: str) -> bytes | None:
        """The prefetched bytes of exactly the range and digest this StageRestore names, or None (the
        stage reads the file itself). Either way this participant's prefetch is used up."""
        held = self._held.pop(_participant(agent_id), None)
        if held is None or file is None:
            return None
        path, offset = file
        if held.key != _Reference(digest, byte_length, path, offset).key():
            return None
        return held.data if _file_version(path) == held.version else None


def _read_params(params: dict) -> tuple[str | None, _Reference | None]:
    try:
        refuse_unknown_fields(params, ['agentId', 'payload'], 'params')
        raw: Any = params.get('agentId', MISSING)
        agent_id = None if raw is None else read_id(raw, 'params.agentId')
        if params.get('payload', MISSING) is None:
            return agent_id, None
        p = read_object(params.get('payload', MISSING), 'params.payload')
        refuse_unknown_fields(p, ['digest', 'byteLength', 'file'], 'params.payload')
        f = read_object(p.get('file', MISSING), 'params.payload.file')
        refuse_unknown_fields(f, ['path', 'offset'], 'params.payload.file')
        path = f.get('path', MISSING)
        if not isinstance(path, str) or len(path) == 0:
            raise ProtocolRefusal('INVALID_ARGUMENT', 'params.payload.file.path must be a non-empty string')
        digest = read_digest(p.get('digest', MISSING), 'params.payload.digest')
        byte_length = read_u64(p.get('byteLength', MISSING), 'params.payload.byteLength')
        offset = int(read_u64(f.get('offset', MISSING), 'params.payload.file.offset'))
    except InputError as e:
        raise as_invalid(e) from None
    return agent_id, _Reference(digest, byte_length, path, offset)
